//! `sluice cat`: print the records of TFRecord files, one JSON object per line.

use std::fmt::Display;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};
use sha2::{Digest, Sha256};
use sluice_proto::tfrecord::{CorruptionPolicy, HEADER_LEN, ReaderOptions, Record, TfRecordReader};
use sluice_proto::{Error, Example, SequenceExample, TfMessage};

use crate::common::CompressionArg;

/// Print the records of TFRecord files as JSON, one object per line.
#[derive(Debug, Args)]
#[command(
    long_about = "\
Print the records of TFRecord files as JSON, one object per line, on stdout.

Files are read in order; each may be uncompressed, GZIP- or ZLIB-compressed (detected unless \
--compression says otherwise). Both checksums of every record are verified.

Errors go to stderr, naming the file and giving TensorFlow's message, for example \
`train.tfrecord: corrupted record at 268`, after the good records before them.

--on-error fail (the default): the first error ends the output; the exit status is 1. A \
record that does not decode as the requested message (--as example or sequence-example) is \
an error too.

--on-error skip: a record whose data checksum is wrong is skipped (its length checksum is \
good, so the next record is found exactly), and so is a record that does not decode as the \
requested message; each skipped record is reported on stderr (file, record index, offset of \
its header, reason) and a count follows at the end. These alone leave the exit status 0. \
Errors after which the rest of a file cannot be trusted (a bad length checksum, a truncated \
record, a damaged compressed stream, an unreadable file) are reported on stderr, reading goes \
on with the next file, and the exit status is 1 at the end.",
    after_help = "\
Examples:
  sluice cat train.tfrecord | head -3
  sluice cat --as sequence-example clips.tfrecord.gz
  sluice cat --as raw --limit 10 data-*.tfrecord
  sluice cat --on-error skip damaged.tfrecord > good.jsonl
  sluice cat --format csv -o header=true -o 'record_defaults=[0, 0.0, \"\"]' prices.csv
  sluice cat --format text_lines -o compression_type=gzip 'corpus-*.txt.gz'
  sluice cat --format fixed_length -o record_bytes=3073 data_batch_1.bin --limit 2
  sluice cat --format tfds -o name=mnist:3.*.* -o 'split=test[:5]' -o data_dir=~/tensorflow_datasets
  sluice cat --format numpy features.npz
  sluice cat --format parquet -o 'columns=[\"label\", \"text\"]' train-00000.parquet
  sluice cat --format arrow --limit 5 hf_dataset/train/data-00000-of-00001.arrow
  sluice cat --format image_folder -o image_size=[64,64] -o seed=1337 photos/
  sluice cat --format sql -o 'query=\"SELECT id, price FROM items\"' shop.db"
)]
pub(crate) struct CatArgs {
    /// Files (or glob patterns, or URLs), printed in the order given; for `--format
    /// image_folder`, the one folder of class folders; for `--format sql`, the one
    /// database (a SQLite file or a postgresql:// URL); none with `--format tfds`, which
    /// names its data with `-o name=... -o split=...`.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,

    /// What the files hold: TFRecord (the default), or another source format, whose
    /// elements are printed as JSON objects (feature -> value), one per line.
    #[arg(long = "format", value_name = "FORMAT", default_value = "tfrecord")]
    source_format: String,

    /// An option of --format, KEY=VALUE with the [source] key of a pipeline file and a TOML
    /// value (a bare word is a string), e.g. `-o header=true -o 'record_defaults=[0, ""]'`.
    /// Repeatable.
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    options: Vec<String>,

    /// How to print each record.
    #[arg(long = "as", value_enum, value_name = "FORMAT", default_value_t = Format::Example)]
    format: Format,

    /// How the files are compressed.
    #[arg(long, value_enum, value_name = "COMPRESSION", default_value_t)]
    compression: CompressionArg,

    /// Stop after N records in total, across all files.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,

    /// What an error does: stop at the first, or skip bad records and go on (details in --help).
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = OnError::Fail)]
    on_error: OnError,
}

/// `--as`: what the records are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// tf.train.Example, printed as its canonical protobuf JSON.
    Example,
    /// tf.train.SequenceExample, printed as its canonical protobuf JSON.
    SequenceExample,
    /// Any bytes: {"index","offset","length","sha256"} of each record (offset of its header).
    Raw,
}

/// `--on-error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnError {
    /// Stop at the first error.
    Fail,
    /// Skip bad records and go on; report them on stderr.
    Skip,
}

/// Runs `sluice cat`.
pub(crate) fn run(args: &CatArgs) -> Result<ExitCode> {
    if args.files.is_empty() && args.source_format != "tfds" {
        use clap::CommandFactory;
        let mut cli = crate::Cli::command();
        let cat = cli.find_subcommand_mut("cat").expect("the cat subcommand");
        cat.set_bin_name("sluice cat");
        cat.error(
            clap::error::ErrorKind::MissingRequiredArgument,
            "sluice cat: give at least one FILE (only --format tfds reads none)",
        )
        .exit();
    }
    if args.source_format != "tfrecord" || !args.options.is_empty() {
        return crate::cat_source::run(
            &args.files,
            &args.source_format,
            &args.options,
            args.limit,
            args.on_error == OnError::Skip,
        );
    }
    let policy = match args.on_error {
        OnError::Fail => CorruptionPolicy::Fail,
        OnError::Skip => CorruptionPolicy::SkipBadData,
    };
    let mut cat = Cat {
        args,
        options: ReaderOptions::default()
            .with_compression(args.compression.into())
            .with_corruption_policy(policy),
        out: BufWriter::with_capacity(64 << 10, io::stdout().lock()),
        remaining: args.limit.unwrap_or(u64::MAX),
        skipped: 0,
        failed_files: 0,
    };
    for path in &args.files {
        if cat.remaining == 0 {
            break;
        }
        if !cat.file(path)? {
            cat.failed_files += 1;
            if args.on_error == OnError::Fail {
                break;
            }
        }
    }
    cat.out.flush()?;
    if args.on_error == OnError::Skip && (cat.skipped > 0 || cat.failed_files > 0) {
        report(format_args!(
            "sluice cat: skipped {} record{}; {} file{} with errors that cannot be skipped",
            cat.skipped,
            plural(cat.skipped),
            cat.failed_files,
            plural(cat.failed_files),
        ));
    }
    Ok(if cat.failed_files > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The state of one `sluice cat`.
struct Cat<'a> {
    args: &'a CatArgs,
    options: ReaderOptions,
    out: BufWriter<io::StdoutLock<'static>>,
    /// Records still to print (`--limit`).
    remaining: u64,
    /// Records skipped under `--on-error skip`.
    skipped: u64,
    /// Files whose reading ended with an error.
    failed_files: u64,
}

impl Cat<'_> {
    /// Prints the records of one file. `Ok(false)` if reading it ended with an error (which
    /// has been reported); `Err` only if writing to stdout failed.
    fn file(&mut self, path: &Path) -> io::Result<bool> {
        let name = path.display().to_string();
        if crate::input::is_url(&name) {
            // An object, or a URL pattern naming several.
            let names = match crate::input::expand_url(&name) {
                Ok(names) => names,
                Err(err) => {
                    self.report(format_args!("{err}"))?;
                    return Ok(false);
                }
            };
            let mut ok = true;
            for object in names {
                if self.remaining == 0 {
                    break;
                }
                ok &= self.one(&object)?;
                if !ok && self.args.on_error == OnError::Fail {
                    break;
                }
            }
            return Ok(ok);
        }
        self.one(&name)
    }

    /// Prints the records of the file or object `name`.
    fn one(&mut self, name: &str) -> io::Result<bool> {
        let name = name.to_string();
        let file = match crate::input::open(&name) {
            Ok((file, _)) => file,
            Err(err) => {
                self.report(format_args!("{name}: {err}"))?;
                return Ok(false);
            }
        };
        let mut reader = TfRecordReader::new(file, name.as_str(), self.options);
        let mut skips_reported = 0;
        let mut ok = true;
        while self.remaining > 0 {
            let next = reader.read_record();
            // Records skipped for a bad data checksum on the way to this one.
            for skip in &reader.skipped_records()[skips_reported..] {
                let tf_offset = skip.offset + HEADER_LEN as u64;
                self.skip(
                    &name,
                    skip.index,
                    skip.offset,
                    format_args!("corrupted record at {tf_offset}"),
                )?;
            }
            skips_reported = reader.skipped_records().len();
            let record = match next {
                Ok(Some(record)) => record,
                Ok(None) => break,
                Err(err) => {
                    self.report(&err)?;
                    ok = false;
                    break;
                }
            };
            match self.print(&name, &record) {
                Ok(()) => self.remaining -= 1,
                Err(PrintError::Output(err)) => return Err(err),
                Err(PrintError::Decode(err)) if self.args.on_error == OnError::Skip => {
                    let reason = match &err {
                        Error::Decode { message, error, .. } => {
                            format!("not a valid {message}: {error}")
                        }
                        other => other.to_string(),
                    };
                    self.skip(&name, record.index, record.offset, reason)?;
                }
                Err(PrintError::Decode(err)) => {
                    self.report(&err)?;
                    ok = false;
                    break;
                }
            }
        }
        // Skipped records beyond what the reader lists individually.
        let unlisted = reader.skipped() - skips_reported as u64;
        if unlisted > 0 {
            self.skipped += unlisted;
            self.report(format_args!(
                "{name}: skipped {unlisted} more record{} with a bad data checksum (not listed)",
                plural(unlisted)
            ))?;
        }
        Ok(ok)
    }

    /// Prints one record as `--as` says.
    fn print(&mut self, name: &str, record: &Record) -> Result<(), PrintError> {
        let json = match self.args.format {
            Format::Example => Example::from_record(name, record)?.to_json(),
            Format::SequenceExample => SequenceExample::from_record(name, record)?.to_json(),
            Format::Raw => {
                return Ok(writeln!(
                    self.out,
                    r#"{{"index":{},"offset":{},"length":{},"sha256":"{:x}"}}"#,
                    record.index,
                    record.offset,
                    record.data.len(),
                    Sha256::digest(&record.data),
                )?);
            }
        };
        Ok(writeln!(self.out, "{json}")?)
    }

    /// Counts and reports a skipped record.
    fn skip(
        &mut self,
        name: &str,
        index: u64,
        offset: u64,
        reason: impl Display,
    ) -> io::Result<()> {
        self.skipped += 1;
        self.report(format_args!(
            "{name}: skipped record {index} at offset {offset}: {reason}"
        ))
    }

    /// Reports a problem on stderr, after the records printed so far.
    fn report(&mut self, message: impl Display) -> io::Result<()> {
        self.out.flush()?;
        report(message);
        Ok(())
    }
}

/// Why a record could not be printed.
enum PrintError {
    /// Writing to stdout failed.
    Output(io::Error),
    /// The record is not the requested message.
    Decode(Error),
}

impl From<io::Error> for PrintError {
    fn from(err: io::Error) -> Self {
        PrintError::Output(err)
    }
}

impl From<Error> for PrintError {
    fn from(err: Error) -> Self {
        PrintError::Decode(err)
    }
}

/// Writes a line to stderr; a failure to do so is ignored (there is nowhere left to say it).
fn report(message: impl Display) {
    let _ = writeln!(io::stderr().lock(), "{message}");
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}
