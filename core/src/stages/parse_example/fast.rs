//! A protobuf wire-format scanner for `tf.train.Example` records, in the manner of
//! TensorFlow's "fast example parsing": no `Example` message is built. The scanner walks
//! `Example` → `Features` → map entries → `Feature` → value lists over the record's bytes and
//! appends the values of requested features straight to their batch columns (byte strings
//! as zero-copy slices of the record).
//!
//! It accepts exactly the records prost accepts, with prost's merge semantics:
//!
//! - `Example.features` (field 1) may repeat: the maps are merged.
//! - A map entry's key is field 1, its `Feature` field 2; a repeated key field keeps the
//!   last, a repeated value field merges (the encodings concatenate). An entry without a
//!   key has the key `""`. When a key has several entries, the last one wins.
//! - In a `Feature` the last kind present wins (`bytes_list` 1, `float_list` 2,
//!   `int64_list` 3); the same kind twice merges (values concatenate).
//! - `FloatList` values are packed (LEN of fixed32) or not (wire type 5); `Int64List` values
//!   packed (LEN of varints) or not (wire type 0); both forms may mix.
//! - Unknown fields of every wire type are skipped, groups included (matching end tag,
//!   nesting limited as prost limits recursion).
//! - Everything else is an error: truncated or over-long varints, lengths past the end of
//!   the enclosing message, wrong wire types for known fields, field number 0, wire types 6
//!   and 7, a stray end-group tag, keys that are not UTF-8 (checked for every key, requested
//!   or not, as prost does).
//! - Except one leniency of prost's, kept so that both accept the same records: a map entry
//!   (`Features` field 1) is read as length-delimited whatever wire type its key gives
//!   (TensorFlow's own parser would reject a wrong one).
//!
//! Features that are not requested are checked as thoroughly but not stored.

use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use smallvec::SmallVec;

use super::FeatureType;
use super::columns::Column;

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

// prost's recursion budget (its `DecodeContext`) for the fields of each message: decoding
// starts at 100 and each nested message takes one. Only unknown groups nest deep enough to
// exhaust it; matching it keeps the scanner's verdict equal to prost's.
const EXAMPLE_DEPTH: u32 = 100;
const FEATURES_DEPTH: u32 = 99;
const ENTRY_DEPTH: u32 = 98;
const FEATURE_DEPTH: u32 = 97;
const LIST_DEPTH: u32 = 96;

/// Why a record is not a valid `tf.train.Example`, in the scanner's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WireError {
    what: &'static str,
    at: usize,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

type Result<T> = std::result::Result<T, WireError>;

/// What one record held of one requested feature.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Seen {
    /// The key is in the record's feature map.
    pub(super) present: bool,
    /// The kind of its `Feature`, or `None` when no kind is set.
    pub(super) kind: Option<FeatureType>,
}

/// Scans one serialized Example. `keys` are the requested feature names, sorted; for each
/// requested feature `j` present in the record with the kind of `columns[j]`, its values
/// are appended to `columns[j]` (which held `starts[j]` values before) and `seen[j]` says
/// what the record held. On error the columns may hold a partial row.
pub(super) fn scan(
    record: &Bytes,
    keys: &[&[u8]],
    columns: &mut [Column],
    starts: &[usize],
    seen: &mut [Seen],
) -> Result<()> {
    seen.fill(Seen::default());
    let mut scan = Scan {
        record,
        keys,
        columns,
        starts,
        seen,
    };
    let mut example = Reader::new(record, 0..record.len());
    while !example.done() {
        let (tag, wire) = example.key()?;
        if tag == 1 {
            let features = example.message(wire)?;
            scan.features(features)?;
        } else {
            example.skip(tag, wire, EXAMPLE_DEPTH)?;
        }
    }
    Ok(())
}

/// The state of one record's scan.
struct Scan<'a> {
    record: &'a Bytes,
    keys: &'a [&'a [u8]],
    columns: &'a mut [Column],
    starts: &'a [usize],
    seen: &'a mut [Seen],
}

impl Scan<'_> {
    /// `Features`: map entries (field 1).
    fn features(&mut self, range: Range<usize>) -> Result<()> {
        let mut r = Reader::new(self.record, range);
        while !r.done() {
            let (tag, wire) = r.key()?;
            if tag == 1 {
                // prost reads a map entry as length-delimited whatever its wire type says.
                let entry = r.len_delimited()?;
                self.entry(entry)?;
            } else {
                r.skip(tag, wire, FEATURES_DEPTH)?;
            }
        }
        Ok(())
    }

    /// A map entry: key (field 1, the last one counts) and `Feature` (field 2, merged).
    fn entry(&mut self, range: Range<usize>) -> Result<()> {
        let mut r = Reader::new(self.record, range);
        let mut key = 0..0;
        let mut values: SmallVec<[Range<usize>; 2]> = SmallVec::new();
        while !r.done() {
            let (tag, wire) = r.key()?;
            match tag {
                1 => {
                    let at = r.pos;
                    key = r.message(wire)?;
                    if std::str::from_utf8(&self.record[key.clone()]).is_err() {
                        return Err(WireError {
                            what: "feature name is not UTF-8",
                            at,
                        });
                    }
                }
                2 => values.push(r.message(wire)?),
                _ => r.skip(tag, wire, ENTRY_DEPTH)?,
            }
        }
        let name = &self.record[key];
        let target = self.keys.binary_search(&name).ok();
        if let Some(j) = target {
            // A later entry for the same key replaces the earlier one.
            self.seen[j] = Seen {
                present: true,
                kind: None,
            };
            self.columns[j].truncate(self.starts[j]);
        }
        for value in values {
            self.feature(value, target)?;
        }
        Ok(())
    }

    /// `Feature`: one of three lists; values go to column `target` if it has their kind.
    fn feature(&mut self, range: Range<usize>, target: Option<usize>) -> Result<()> {
        let mut r = Reader::new(self.record, range);
        while !r.done() {
            let (tag, wire) = r.key()?;
            let kind = match tag {
                1 => FeatureType::String,
                2 => FeatureType::Float,
                3 => FeatureType::Int64,
                _ => {
                    r.skip(tag, wire, FEATURE_DEPTH)?;
                    continue;
                }
            };
            let list = r.message(wire)?;
            let column = match target {
                Some(j) => {
                    if self.seen[j].kind != Some(kind) {
                        // Another kind replaces the values so far; the same kind merges.
                        self.seen[j].kind = Some(kind);
                        self.columns[j].truncate(self.starts[j]);
                    }
                    Some(&mut self.columns[j])
                }
                None => None,
            };
            let list = Reader::new(self.record, list);
            match kind {
                FeatureType::String => list.bytes_list(match column {
                    Some(Column::Bytes(v)) => Some(v),
                    _ => None,
                })?,
                FeatureType::Float => list.float_list(match column {
                    Some(Column::Float(v)) => Some(v),
                    _ => None,
                })?,
                FeatureType::Int64 => list.int64_list(match column {
                    Some(Column::Int64(v)) => Some(v),
                    _ => None,
                })?,
            }
        }
        Ok(())
    }
}

/// A cursor over the bytes `pos..end` of a record (one message's encoding).
struct Reader<'a> {
    record: &'a Bytes,
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Reader<'a> {
    fn new(record: &'a Bytes, range: Range<usize>) -> Self {
        Reader {
            record,
            buf: record,
            pos: range.start,
            end: range.end,
        }
    }

    fn done(&self) -> bool {
        self.pos >= self.end
    }

    fn error(&self, what: &'static str) -> WireError {
        WireError { what, at: self.pos }
    }

    #[inline]
    fn varint(&mut self) -> Result<u64> {
        if self.pos < self.end {
            let b = self.buf[self.pos];
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        self.varint_slow()
    }

    /// A varint of up to 10 bytes whose last byte leaves no bits beyond 64 (prost's rule).
    fn varint_slow(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for i in 0..10 {
            if self.pos + i >= self.end {
                return Err(self.error("truncated varint"));
            }
            let b = self.buf[self.pos + i];
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                if i == 9 && b > 1 {
                    return Err(self.error("varint overflows 64 bits"));
                }
                self.pos += i + 1;
                return Ok(value);
            }
        }
        Err(self.error("varint longer than 10 bytes"))
    }

    /// A field key: (field number, wire type).
    #[inline]
    fn key(&mut self) -> Result<(u32, u8)> {
        let at = self.pos;
        let key = self.varint()?;
        let bad = |what| Err(WireError { what, at });
        if key > u64::from(u32::MAX) {
            return bad("field key beyond 32 bits");
        }
        let wire = (key & 7) as u8;
        if wire > FIXED32 {
            return bad("invalid wire type");
        }
        let tag = (key >> 3) as u32;
        if tag == 0 {
            return bad("field number 0");
        }
        Ok((tag, wire))
    }

    fn advance(&mut self, n: u64) -> Result<()> {
        if n > (self.end - self.pos) as u64 {
            return Err(self.error("field runs past the end of its message"));
        }
        self.pos += n as usize;
        Ok(())
    }

    /// The byte range of a length-delimited field whose key had wire type `wire`.
    #[inline]
    fn message(&mut self, wire: u8) -> Result<Range<usize>> {
        if wire != LEN {
            return Err(self.error("wrong wire type for a known field"));
        }
        self.len_delimited()
    }

    #[inline]
    fn len_delimited(&mut self) -> Result<Range<usize>> {
        let n = self.varint()?;
        let start = self.pos;
        self.advance(n)?;
        Ok(start..self.pos)
    }

    fn fixed32(&mut self) -> Result<[u8; 4]> {
        let start = self.pos;
        self.advance(4)?;
        Ok(self.buf[start..self.pos]
            .try_into()
            .expect("four bytes were read"))
    }

    /// Skips an unknown field as prost does, with `budget` left of its recursion limit.
    fn skip(&mut self, tag: u32, wire: u8, budget: u32) -> Result<()> {
        if budget == 0 {
            return Err(self.error("groups nested too deeply"));
        }
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.advance(8),
            LEN => self.len_delimited().map(drop),
            FIXED32 => self.advance(4),
            START_GROUP => loop {
                let at = self.pos;
                let (inner, inner_wire) = self.key()?;
                if inner_wire == END_GROUP {
                    if inner != tag {
                        return Err(WireError {
                            what: "end-group tag does not match its group",
                            at,
                        });
                    }
                    return Ok(());
                }
                self.skip(inner, inner_wire, budget - 1)?;
            },
            _ => Err(self.error("end-group tag outside a group")),
        }
    }

    /// `BytesList`: field 1, repeated, each a slice of the record.
    fn bytes_list(mut self, mut out: Option<&mut Vec<Bytes>>) -> Result<()> {
        while !self.done() {
            let (tag, wire) = self.key()?;
            if tag == 1 {
                let value = self.message(wire)?;
                if let Some(out) = out.as_deref_mut() {
                    out.push(self.record.slice(value));
                }
            } else {
                self.skip(tag, wire, LIST_DEPTH)?;
            }
        }
        Ok(())
    }

    /// `FloatList`: field 1, packed (LEN of little-endian fixed32) or one value per field.
    fn float_list(mut self, mut out: Option<&mut Vec<f32>>) -> Result<()> {
        while !self.done() {
            let (tag, wire) = self.key()?;
            match (tag, wire) {
                (1, LEN) => {
                    let at = self.pos;
                    let packed = self.len_delimited()?;
                    if packed.len() % 4 != 0 {
                        return Err(WireError {
                            what: "packed floats are not a multiple of 4 bytes",
                            at,
                        });
                    }
                    if let Some(out) = out.as_deref_mut() {
                        out.extend(self.buf[packed].chunks_exact(4).map(|c| {
                            f32::from_le_bytes(c.try_into().expect("chunks of four bytes"))
                        }));
                    }
                }
                (1, FIXED32) => {
                    let value = f32::from_le_bytes(self.fixed32()?);
                    if let Some(out) = out.as_deref_mut() {
                        out.push(value);
                    }
                }
                (1, _) => return Err(self.error("wrong wire type for float values")),
                _ => self.skip(tag, wire, LIST_DEPTH)?,
            }
        }
        Ok(())
    }

    /// `Int64List`: field 1, packed (LEN of varints) or one varint per field.
    fn int64_list(mut self, mut out: Option<&mut Vec<i64>>) -> Result<()> {
        while !self.done() {
            let (tag, wire) = self.key()?;
            match (tag, wire) {
                (1, LEN) => {
                    let packed = self.len_delimited()?;
                    let mut values = Reader::new(self.record, packed);
                    while !values.done() {
                        // Two's complement: negative int64 values are 10-byte varints.
                        let value = values.varint()? as i64;
                        if let Some(out) = out.as_deref_mut() {
                            out.push(value);
                        }
                    }
                }
                (1, VARINT) => {
                    let value = self.varint()? as i64;
                    if let Some(out) = out.as_deref_mut() {
                        out.push(value);
                    }
                }
                (1, _) => return Err(self.error("wrong wire type for int64 values")),
                _ => self.skip(tag, wire, LIST_DEPTH)?,
            }
        }
        Ok(())
    }
}
