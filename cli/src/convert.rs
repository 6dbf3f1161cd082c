//! `sluice convert`: a folder of class sub-folders of images (the ImageFolder convention)
//! into TFRecord shards of labelled `tf.train.Example`s.

use std::fs;
use std::io::{self, Cursor, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use image::{ImageFormat, ImageReader};
use rayon::prelude::*;

use sluice_storage::Location;

use crate::image_records::{ImageRecord, MAX_SHARDS, Shards, plural, write_labels};

/// Files read and decoded in parallel at a time, then written in order.
const CHUNK: usize = 64;

/// Convert a folder of class sub-folders of images into TFRecord shards of Examples.
#[derive(Debug, Args)]
#[command(
    long_about = "\
Convert a folder of class sub-folders of images (the ImageFolder convention, \
IMAGE_DIR/<class>/<image>.jpg|jpeg|png) into TFRecord shards of tf.train.Examples.

Classes are the sub-folders of IMAGE_DIR, sorted by name; label i (counting from 0) is the \
i-th, and labels.txt in --out lists them, one name per line. The images of a class are the \
files anywhere below its folder, sorted by path. Names starting with `.` are ignored.

Each image is stored as it is in its file (not re-encoded); its format is recognised from \
its content, its height and width are read from its header, and it must decode completely \
to be included. A file that cannot be read, is not a .jpg/.jpeg/.png file, is not a JPEG or \
PNG image, or does not decode (truncated or corrupt), and a file directly in IMAGE_DIR, is \
reported on stderr with its path and the reason and skipped, and the number skipped is \
reported at the end; the exit status stays 0 unless --strict is given. With --strict any \
such file makes the exit status 1 after all of them have been reported, and the shards are \
removed (nothing is written).

Records go round-robin, in order (classes sorted, then files sorted), to --shards files \
named {name}.tfrecord-00000-of-0000N (5-digit indices, as TensorFlow names shards) in --out, \
which is created if needed. The files are uncompressed TFRecords. A one-line summary (files, \
records, bytes) is printed on stdout.

An IMAGE_DIR that does not exist, has no class folders, or has no readable image is an \
error (exit status 1).",
    after_help = "\
Examples:
  sluice convert photos/train --out data
  sluice convert photos/val --out data --name val --shards 2 --strict

Each record is a tf.train.Example with these features (one value each):
  image/encoded      bytes   the image file's bytes, unchanged
  image/class/label  int64   0-based class index: the class's line in labels.txt
  image/class/text   bytes   the class name (its folder's name)
  image/height       int64   height in pixels
  image/width        int64   width in pixels
  image/format       bytes   `jpeg` or `png` (from the content, not the file name)
  image/filename     bytes   the path relative to IMAGE_DIR, `/`-separated (cat/001.jpg)
These are the features `sluice gen` writes."
)]
pub(crate) struct ConvertArgs {
    /// The image folder: IMAGE_DIR/<class>/<image>.jpg|jpeg|png.
    #[arg(value_name = "IMAGE_DIR")]
    image_dir: PathBuf,

    /// Output folder (created if needed) or object-store prefix (s3://bucket/data/, gs://,
    /// az://, file://). Each file appears whole under its name when it is finished, or not
    /// at all.
    #[arg(long, value_name = "DIR|URL")]
    out: String,

    /// Number of TFRecord files.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_SHARDS)))]
    shards: u32,

    /// Start of the shard file names: {name}.tfrecord-00000-of-0000N.
    #[arg(long, value_name = "NAME", default_value = "train")]
    name: String,

    /// Fail (exit status 1, nothing written) if any file is skipped.
    #[arg(long)]
    strict: bool,
}

/// A file found in the image folder, in output order.
enum Entry {
    /// An image of class `label`.
    Image {
        label: usize,
        path: PathBuf,
        /// The path relative to the image folder, `/`-separated.
        relative: String,
    },
    /// Something that is skipped whatever its content.
    Skip { path: PathBuf, reason: String },
}

/// An image ready to be written.
struct Loaded {
    data: Vec<u8>,
    format: &'static str,
    height: u32,
    width: u32,
}

/// Runs `sluice convert`.
pub(crate) fn run(args: &ConvertArgs) -> Result<ExitCode> {
    crate::image_records::check_name(&args.name)?;
    let out = Location::parse(&args.out)?;
    let (classes, entries) = list(&args.image_dir)?;

    let mut shards: Option<Shards> = None;
    let mut per_class = vec![0u64; classes.len()];
    let mut skipped = 0u64;
    for chunk in entries.chunks(CHUNK) {
        let loaded: Vec<Result<Loaded, String>> = chunk
            .par_iter()
            .map(|entry| match entry {
                Entry::Image { path, .. } => load(path),
                Entry::Skip { reason, .. } => Err(reason.clone()),
            })
            .collect();
        for (entry, loaded) in chunk.iter().zip(loaded) {
            let (label, relative, image) = match (entry, loaded) {
                (
                    Entry::Image {
                        label, relative, ..
                    },
                    Ok(image),
                ) => (*label, relative, image),
                (Entry::Image { path, .. } | Entry::Skip { path, .. }, Err(reason)) => {
                    skipped += 1;
                    report(format_args!(
                        "sluice convert: skipped {}: {}",
                        path.display(),
                        one_line(&reason)
                    ));
                    continue;
                }
                (Entry::Skip { .. }, Ok(_)) => unreachable!("skipped entries are never loaded"),
            };
            let record = ImageRecord {
                encoded: image.data,
                format: image.format,
                height: image.height,
                width: image.width,
                label,
                class: &classes[label],
                filename: relative.clone(),
            }
            .into_example_bytes();
            let shards = match &mut shards {
                Some(shards) => shards,
                None => shards.insert(Shards::create(&out, &args.name, args.shards)?),
            };
            shards.write(&record)?;
            per_class[label] += 1;
        }
    }

    if skipped > 0 {
        report(format_args!(
            "sluice convert: skipped {skipped} unreadable image{}",
            plural(skipped)
        ));
    }
    let Some(shards) = shards else {
        bail!(
            "{}: no readable images (expected {}/<class>/<image>.jpg|jpeg|png)",
            args.image_dir.display(),
            args.image_dir.display()
        );
    };
    if args.strict && skipped > 0 {
        // Unfinished shards are never committed: nothing appears under their names.
        drop(shards);
        bail!(
            "--strict: {skipped} file{} skipped (listed above); nothing written",
            plural(skipped)
        );
    }
    for (class, count) in classes.iter().zip(&per_class) {
        if *count == 0 {
            report(format_args!(
                "sluice convert: warning: class {class:?} has no images (its label is kept)"
            ));
        }
    }
    let written = shards.finish()?;
    write_labels(&out, &classes)?;
    println!(
        "sluice convert: wrote {written}; {} class{}",
        classes.len(),
        if classes.len() == 1 { "" } else { "es" }
    );
    Ok(ExitCode::SUCCESS)
}

/// The classes (sorted) and every file to convert or skip, in output order: files directly
/// in the folder first (all skipped), then each class's files sorted by path.
fn list(dir: &Path) -> Result<(Vec<String>, Vec<Entry>)> {
    let mut classes = Vec::new();
    let mut entries = Vec::new();
    for (name, path) in visible_entries(dir)
        .with_context(|| format!("cannot read the image folder {}", dir.display()))?
    {
        let meta =
            fs::metadata(&path).with_context(|| format!("cannot read {}", path.display()))?;
        if meta.is_dir() {
            let Some(class) = name.to_str() else {
                bail!(
                    "{}: class folder names must be UTF-8 (they become class/text)",
                    path.display()
                );
            };
            classes.push((class.to_string(), path));
        } else {
            entries.push(Entry::Skip {
                path,
                reason: "not in a class folder (expected IMAGE_DIR/<class>/<image>)".to_string(),
            });
        }
    }
    if classes.is_empty() {
        bail!(
            "{}: no class folders (expected {}/<class>/<image>.jpg|jpeg|png)",
            dir.display(),
            dir.display()
        );
    }
    classes.sort();
    for (label, (class, class_dir)) in classes.iter().enumerate() {
        let mut files = Vec::new();
        walk(class_dir, &mut files, &mut entries);
        files.sort();
        for path in files {
            let below = path
                .strip_prefix(class_dir)
                .expect("walked from the class folder");
            let mut relative = class.clone();
            for part in below.components() {
                relative.push('/');
                relative.push_str(&part.as_os_str().to_string_lossy());
            }
            if has_image_extension(&path) {
                entries.push(Entry::Image {
                    label,
                    path,
                    relative,
                });
            } else {
                entries.push(Entry::Skip {
                    path,
                    reason: "not a .jpg, .jpeg or .png file".to_string(),
                });
            }
        }
    }
    Ok((
        classes.into_iter().map(|(class, _)| class).collect(),
        entries,
    ))
}

/// The entries of `dir` whose names do not start with `.`, sorted by name.
fn visible_entries(dir: &Path) -> io::Result<Vec<(std::ffi::OsString, PathBuf)>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if !name.as_encoded_bytes().starts_with(b".") {
            found.push((name, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Collects the files below `dir` (following links to files, not to folders); what cannot
/// be listed is recorded as a skip.
fn walk(dir: &Path, files: &mut Vec<PathBuf>, skips: &mut Vec<Entry>) {
    let found = match visible_entries(dir) {
        Ok(found) => found,
        Err(err) => {
            skips.push(Entry::Skip {
                path: dir.to_path_buf(),
                reason: format!("cannot list the folder: {err}"),
            });
            return;
        }
    };
    for (_, path) in found {
        let is_link = fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        match fs::metadata(&path) {
            Ok(meta) if meta.is_dir() && is_link => skips.push(Entry::Skip {
                path,
                reason: "a link to a folder (not followed)".to_string(),
            }),
            Ok(meta) if meta.is_dir() => walk(&path, files, skips),
            Ok(_) => files.push(path),
            Err(err) => skips.push(Entry::Skip {
                path,
                reason: format!("cannot read: {err}"),
            }),
        }
    }
}

fn has_image_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|ext| ext.to_str())
        .is_some_and(|ext| ["jpg", "jpeg", "png"].contains(&ext.to_ascii_lowercase().as_str()))
}

/// Reads an image file, its format and size from its header, and checks that it decodes
/// completely (with Sluice's own decoder, the one pipelines use). `Err` is the reason to skip.
fn load(path: &Path) -> Result<Loaded, String> {
    let data = fs::read(path).map_err(|err| format!("cannot read: {err}"))?;
    let reader = ImageReader::new(Cursor::new(&data[..]))
        .with_guessed_format()
        .map_err(|err| format!("cannot read: {err}"))?;
    let format = match reader.format() {
        Some(ImageFormat::Jpeg) => "jpeg",
        Some(ImageFormat::Png) => "png",
        Some(other) => {
            return Err(format!(
                "a {} image, not JPEG or PNG",
                other.extensions_str().first().unwrap_or(&"other")
            ));
        }
        None if data.is_empty() => return Err("empty file, not an image".to_string()),
        None => return Err("not a JPEG or PNG image".to_string()),
    };
    let (width, height) = reader
        .into_dimensions()
        .map_err(|err| format!("cannot read the image header: {err}"))?;
    let pixels = sluice_core::image::decode_image(&data, None)
        .map_err(|err| format!("does not decode: {err}"))?;
    let (h, w) = (pixels.shape()[0], pixels.shape()[1]);
    if (h, w) != (height as usize, width as usize) {
        return Err(format!(
            "its header says {width}x{height} but it decodes to {w}x{h}"
        ));
    }
    Ok(Loaded {
        data,
        format,
        height,
        width,
    })
}

/// `message` on one line: decoders' messages may hold line breaks.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Writes a line to stderr; a failure to do so is ignored (there is nowhere left to say it).
fn report(message: impl std::fmt::Display) {
    let _ = writeln!(io::stderr().lock(), "{message}");
}
