//! Arrow IPC files and streams read with the sizes they claim checked first.
//!
//! `arrow-ipc` trusts two kinds of length read from the file: a message's body length
//! (bounded by what is left of the file only after allocating it) and a compressed
//! buffer's uncompressed length (the first 8 bytes of each LZ4/zstd buffer), which it
//! allocates before decompressing. A few hostile bytes can then ask for exabytes: an
//! allocation failure aborts the process, which no `catch_unwind` turns into the file's
//! error (fuzz finding `columnar-alloc-size-too-big`, RELIABILITY.md). These readers frame
//! the messages themselves, check every claimed length against the bytes there are (and an
//! uncompressed length against the most its codec can expand those bytes to), and only then
//! hand the message to `arrow-ipc`'s decoders.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::reader::{FileDecoder, read_dictionary, read_footer_length, read_record_batch};
use arrow_ipc::{Block, CompressionType, MessageHeader};
use arrow_schema::{ArrowError, SchemaRef};

/// The IPC continuation marker, before a message's metadata length.
const CONTINUATION: [u8; 4] = [0xff; 4];
/// The file format's magic, at both ends of the file.
const MAGIC_LEN: u64 = 6;

/// Twice the most an LZ4 frame expands its bytes (a sequence's length bytes add at most
/// 255 bytes of output each): the margin costs nothing, the bound only stops absurd claims.
const LZ4_MAX_RATIO: u64 = 2 * 255;
/// Twice the most a zstd frame expands its bytes (an RLE block of 4 bytes gives a block of
/// up to 128 KiB).
const ZSTD_MAX_RATIO: u64 = 2 * 32 * 1024;
/// Slack for the frames' headers.
const CODEC_SLACK: u64 = 1024;

fn invalid(message: String) -> ArrowError {
    ArrowError::IpcError(message)
}

/// A message's metadata (a flatbuffer), verified.
fn message(meta: &[u8]) -> Result<arrow_ipc::Message<'_>, ArrowError> {
    arrow_ipc::root_as_message(meta)
        .map_err(|e| invalid(format!("a message's metadata is malformed: {e}")))
}

/// Checks `message` against its `body`: every buffer of a record or dictionary batch lies
/// inside the body, and a compressed buffer's uncompressed length is one its codec can
/// give from the bytes it has.
fn check_message(message: &arrow_ipc::Message<'_>, body: &[u8]) -> Result<(), ArrowError> {
    let batch = match message.header_type() {
        MessageHeader::RecordBatch => message.header_as_record_batch(),
        MessageHeader::DictionaryBatch => message
            .header_as_dictionary_batch()
            .and_then(|dictionary| dictionary.data()),
        _ => None,
    };
    let Some(batch) = batch else { return Ok(()) };
    let ratio = match batch.compression().map(|c| c.codec()) {
        None => None,
        Some(CompressionType::LZ4_FRAME) => Some(LZ4_MAX_RATIO),
        Some(CompressionType::ZSTD) => Some(ZSTD_MAX_RATIO),
        Some(other) => return Err(invalid(format!("unknown compression codec {other:?}"))),
    };
    for (i, b) in batch.buffers().into_iter().flatten().enumerate() {
        let (offset, length) = (b.offset(), b.length());
        let end = offset.checked_add(length);
        if offset < 0 || length < 0 || end.is_none_or(|end| end as u64 > body.len() as u64) {
            return Err(invalid(format!(
                "buffer {i} (offset {offset}, length {length}) is not inside the message's \
                 body of {} bytes",
                body.len()
            )));
        }
        let Some(ratio) = ratio else { continue };
        if length == 0 {
            continue;
        }
        let bytes = &body[offset as usize..(offset + length) as usize];
        let Some(prefix) = bytes.first_chunk::<8>() else {
            return Err(invalid(format!(
                "compressed buffer {i} has {length} bytes, fewer than its 8-byte length"
            )));
        };
        let claimed = i64::from_le_bytes(*prefix);
        // -1: stored uncompressed; 0: empty.
        if claimed <= 0 {
            if claimed < -1 {
                return Err(invalid(format!(
                    "compressed buffer {i} claims an uncompressed length of {claimed}"
                )));
            }
            continue;
        }
        let most = (length as u64 - 8) * ratio + CODEC_SLACK;
        if claimed as u64 > most {
            return Err(invalid(format!(
                "compressed buffer {i} claims {claimed} bytes uncompressed, more than its \
                 {} compressed bytes can give ({most})",
                length - 8
            )));
        }
    }
    Ok(())
}

/// The most a claimed length reserves before its bytes arrive (as arrow-ipc's stream
/// reader): reserving is not touching, so a false claim costs no resident memory, and a
/// real body up to this size is read without growing the buffer.
const MAX_PREALLOC: u64 = 64 << 20;

/// Reads `len` bytes (a length from the file) from `reader`, growing the buffer as the
/// bytes arrive past [`MAX_PREALLOC`] rather than allocating `len` first.
fn read_claimed(reader: &mut impl Read, len: u64, what: &str) -> Result<Vec<u8>, ArrowError> {
    let mut v = Vec::with_capacity(len.min(MAX_PREALLOC) as usize);
    reader.take(len).read_to_end(&mut v)?;
    if (v.len() as u64) < len {
        return Err(invalid(format!(
            "{what} of {len} bytes ends after {} bytes (the file is truncated)",
            v.len()
        )));
    }
    Ok(v)
}

/// The record batches of an IPC file (`ARROW1 ... ARROW1`), read block by block.
pub(crate) struct IpcFile<R> {
    reader: R,
    /// Where the footer starts: blocks end before it.
    footer_start: u64,
    decoder: FileDecoder,
    blocks: Vec<Block>,
    next: usize,
}

impl<R: Read + Seek> IpcFile<R> {
    /// Reads the footer (schema, dictionaries, where the batches are) of the file `reader`.
    pub(crate) fn open(mut reader: R) -> Result<IpcFile<R>, ArrowError> {
        let len = reader.seek(SeekFrom::End(0))?;
        if len < 2 * MAGIC_LEN + 4 {
            return Err(invalid(format!("a file of {len} bytes is too short")));
        }
        let mut tail = [0; 10];
        reader.seek(SeekFrom::End(-10))?;
        reader.read_exact(&mut tail)?;
        let footer_len = read_footer_length(tail)? as u64;
        if footer_len > len - 10 - MAGIC_LEN {
            return Err(invalid(format!(
                "the footer's length {footer_len} is more than the file's {len} bytes"
            )));
        }
        let footer_start = len - 10 - footer_len;
        reader.seek(SeekFrom::Start(footer_start))?;
        let footer = read_claimed(&mut reader, footer_len, "the footer")?;
        let footer = arrow_ipc::root_as_footer(&footer)
            .map_err(|e| invalid(format!("the footer is malformed: {e}")))?;
        let schema = footer
            .schema()
            .ok_or_else(|| invalid("the footer has no schema".to_string()))?;
        if !schema.endianness().equals_to_target_endianness() {
            return Err(invalid(
                "the file's endianness is not this machine's".to_string(),
            ));
        }
        let schema = Arc::new(arrow_ipc::convert::try_fb_to_schema(schema)?);
        let mut decoder = FileDecoder::new(schema, footer.version());
        let blocks: Vec<Block> = footer
            .recordBatches()
            .map(|b| b.iter().copied().collect())
            .unwrap_or_default();
        let dictionaries: Vec<Block> = footer
            .dictionaries()
            .map(|b| b.iter().copied().collect())
            .unwrap_or_default();
        for block in &dictionaries {
            let buf = read_block(&mut reader, footer_start, block)?;
            decoder.read_dictionary(block, &buf)?;
        }
        Ok(IpcFile {
            reader,
            footer_start,
            decoder,
            blocks,
            next: 0,
        })
    }
}

/// The bytes of `block` of a file whose footer starts at `footer_start`, once its lengths
/// are checked against the file and its message against its body.
fn read_block(
    reader: &mut (impl Read + Seek),
    footer_start: u64,
    block: &Block,
) -> Result<Buffer, ArrowError> {
    let (offset, meta, body) = (block.offset(), block.metaDataLength(), block.bodyLength());
    let total = (meta as i64).checked_add(body);
    let fits = offset >= 0
        && meta >= 8
        && body >= 0
        && total
            .and_then(|t| t.checked_add(offset))
            .is_some_and(|end| end as u64 <= footer_start);
    if !fits {
        return Err(invalid(format!(
            "a block (offset {offset}, metadata {meta}, body {body} bytes) is not inside the \
             file's {footer_start} bytes before its footer"
        )));
    }
    reader.seek(SeekFrom::Start(offset as u64))?;
    let mut buf = vec![0; (meta as i64 + body) as usize];
    reader.read_exact(&mut buf)?;
    let (meta, body) = buf.split_at(meta as usize);
    // The metadata: after the continuation marker and its length, or (before Arrow 0.15)
    // its length alone.
    let meta = if meta[..4] == CONTINUATION {
        &meta[8..]
    } else {
        &meta[4..]
    };
    check_message(&message(meta)?, body)?;
    Ok(Buffer::from_vec(buf))
}

impl<R: Read + Seek> Iterator for IpcFile<R> {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let block = *self.blocks.get(self.next)?;
        self.next += 1;
        let batch = read_block(&mut self.reader, self.footer_start, &block)
            .and_then(|buf| self.decoder.read_record_batch(&block, &buf));
        match batch {
            Ok(Some(batch)) => Some(Ok(batch)),
            Ok(None) => None,
            Err(e) => {
                self.next = self.blocks.len();
                Some(Err(e))
            }
        }
    }
}

/// The record batches of an IPC stream, read message by message.
pub(crate) struct IpcStream<R> {
    reader: R,
    schema: SchemaRef,
    dictionaries: HashMap<i64, ArrayRef>,
    done: bool,
}

impl<R: Read> IpcStream<R> {
    /// Reads the stream's schema, its first message.
    pub(crate) fn open(mut reader: R) -> Result<IpcStream<R>, ArrowError> {
        let (meta, _) =
            next_message(&mut reader)?.ok_or_else(|| invalid("the stream is empty".into()))?;
        let schema = message(&meta)?
            .header_as_schema()
            .ok_or_else(|| invalid("the stream does not start with its schema".into()))?;
        if !schema.endianness().equals_to_target_endianness() {
            return Err(invalid(
                "the stream's endianness is not this machine's".to_string(),
            ));
        }
        let schema = Arc::new(arrow_ipc::convert::try_fb_to_schema(schema)?);
        Ok(IpcStream {
            reader,
            schema,
            dictionaries: HashMap::new(),
            done: false,
        })
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        while let Some((meta, body)) = next_message(&mut self.reader)? {
            let message = message(&meta)?;
            let body = Buffer::from_vec(body);
            let version = message.version();
            match message.header_type() {
                MessageHeader::RecordBatch => {
                    let batch = message.header_as_record_batch().expect("a record batch");
                    return read_record_batch(
                        &body,
                        batch,
                        self.schema.clone(),
                        &self.dictionaries,
                        None,
                        &version,
                    )
                    .map(Some);
                }
                MessageHeader::DictionaryBatch => {
                    let dictionary = message.header_as_dictionary_batch().expect("a dictionary");
                    read_dictionary(
                        &body,
                        dictionary,
                        &self.schema,
                        &mut self.dictionaries,
                        &version,
                    )?;
                }
                MessageHeader::NONE => {}
                other => {
                    return Err(invalid(format!(
                        "a message of type {other:?} inside the stream"
                    )));
                }
            }
        }
        Ok(None)
    }
}

/// A message of a stream: its metadata (without the length prefix) and its body.
type RawMessage = (Vec<u8>, Vec<u8>);

/// The next message of a stream, checked; `None` at the end of the stream (no more bytes,
/// or a zero metadata length).
fn next_message(reader: &mut impl Read) -> Result<Option<RawMessage>, ArrowError> {
    let mut word = [0; 4];
    let mut got = 0;
    while got < 4 {
        match reader.read(&mut word[got..])? {
            0 if got == 0 => return Ok(None),
            0 => return Err(invalid("the stream ends inside a message's length".into())),
            n => got += n,
        }
    }
    if word == CONTINUATION {
        reader.read_exact(&mut word)?;
    }
    let meta_len = i32::from_le_bytes(word);
    if meta_len == 0 {
        return Ok(None);
    }
    if meta_len < 0 {
        return Err(invalid(format!(
            "a message's metadata length is {meta_len}"
        )));
    }
    let meta = read_claimed(reader, meta_len as u64, "a message's metadata")?;
    let body_len = message(&meta)?.bodyLength();
    if body_len < 0 {
        return Err(invalid(format!("a message's body length is {body_len}")));
    }
    let body = read_claimed(reader, body_len as u64, "a message's body")?;
    check_message(&message(&meta)?, &body)?;
    Ok(Some((meta, body)))
}

impl<R: Read> Iterator for IpcStream<R> {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_batch().transpose();
        if !matches!(next, Some(Ok(_))) {
            self.done = true;
        }
        next
    }
}
