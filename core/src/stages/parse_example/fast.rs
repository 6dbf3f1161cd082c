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

use bytes::Bytes;

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
pub(super) enum Malformed {
    TruncatedVarint,
    VarintOverflow,
    KeyBeyond32Bits,
    InvalidWireType,
    FieldNumberZero,
    PastTheEnd,
    WrongWireType,
    KeyNotUtf8,
    PackedFloatsLength,
    GroupsTooDeep,
    EndGroupMismatch,
    StrayEndGroup,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Malformed::TruncatedVarint => "truncated varint",
            Malformed::VarintOverflow => "varint longer than 64 bits",
            Malformed::KeyBeyond32Bits => "field key beyond 32 bits",
            Malformed::InvalidWireType => "invalid wire type",
            Malformed::FieldNumberZero => "field number 0",
            Malformed::PastTheEnd => "field runs past the end of its message",
            Malformed::WrongWireType => "wrong wire type for a known field",
            Malformed::KeyNotUtf8 => "feature name is not UTF-8",
            Malformed::PackedFloatsLength => "packed floats are not a multiple of 4 bytes",
            Malformed::GroupsTooDeep => "groups nested too deeply",
            Malformed::EndGroupMismatch => "end-group tag does not match its group",
            Malformed::StrayEndGroup => "end-group tag outside a group",
        })
    }
}

type Result<T> = std::result::Result<T, Malformed>;

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
    let mut example = Reader { buf: record };
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

impl<'a> Scan<'a> {
    /// `Features`: map entries (field 1).
    fn features(&mut self, mut r: Reader<'a>) -> Result<()> {
        while !r.done() {
            let (tag, wire) = r.key()?;
            if tag == 1 {
                // prost reads a map entry as length-delimited whatever its wire type says.
                let entry = Reader {
                    buf: r.len_delimited()?,
                };
                self.entry(entry)?;
            } else {
                r.skip(tag, wire, FEATURES_DEPTH)?;
            }
        }
        Ok(())
    }

    /// A map entry: key (field 1, the last one counts) and `Feature` (field 2, merged).
    fn entry(&mut self, entry: Reader<'a>) -> Result<()> {
        let mut r = entry;
        let mut key: &[u8] = b"";
        let mut value = None;
        let mut values = 0usize;
        while !r.done() {
            let (tag, wire) = r.key()?;
            match tag {
                1 => {
                    key = r.message(wire)?.buf;
                    if !key.is_ascii() && std::str::from_utf8(key).is_err() {
                        return Err(Malformed::KeyNotUtf8);
                    }
                }
                2 => {
                    let v = r.message(wire)?;
                    value = value.or(Some(v));
                    values += 1;
                }
                _ => r.skip(tag, wire, ENTRY_DEPTH)?,
            }
        }
        let target = self.lookup(key);
        if let Some(j) = target {
            // A later entry for the same key replaces the earlier one.
            self.seen[j] = Seen {
                present: true,
                kind: None,
            };
            self.columns[j].truncate(self.starts[j]);
        }
        if values > 1 {
            // Rare: the Feature is split over several fields, which merge. Walk them again.
            let mut r = entry;
            while !r.done() {
                let (tag, wire) = r.key()?;
                match tag {
                    1 => drop(r.message(wire)?),
                    2 => self.feature(r.message(wire)?, target)?,
                    _ => r.skip(tag, wire, ENTRY_DEPTH)?,
                }
            }
        } else if let Some(value) = value {
            self.feature(value, target)?;
        }
        Ok(())
    }

    /// The position of `name` among the requested keys.
    fn lookup(&self, name: &[u8]) -> Option<usize> {
        if self.keys.len() <= 8 {
            // Lengths and first bytes settle most comparisons without a `memcmp`.
            self.keys
                .iter()
                .position(|k| k.len() == name.len() && k.first() == name.first() && *k == name)
        } else {
            self.keys.binary_search(&name).ok()
        }
    }

    /// `Feature`: one of three lists; values go to column `target` if it has their kind.
    fn feature(&mut self, mut r: Reader<'a>, target: Option<usize>) -> Result<()> {
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
            match kind {
                FeatureType::String => list.bytes_list(
                    self.record,
                    match column {
                        Some(Column::Bytes(v)) => Some(v),
                        _ => None,
                    },
                )?,
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

/// A cursor over the unread bytes of one message's encoding.
#[derive(Clone, Copy)]
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.buf.is_empty()
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<u64> {
        match self.buf.first() {
            Some(&b) if b < 0x80 => {
                self.buf = &self.buf[1..];
                Ok(u64::from(b))
            }
            _ => self.long_varint(),
        }
    }

    /// A varint of more than one byte (or none): at most 10 bytes, the last leaving no bits
    /// beyond 64 (prost's rule).
    #[inline(never)]
    fn long_varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for (i, &b) in self.buf.iter().take(10).enumerate() {
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                if i == 9 && b > 1 {
                    return Err(Malformed::VarintOverflow);
                }
                self.buf = &self.buf[i + 1..];
                return Ok(value);
            }
        }
        Err(if self.buf.len() >= 10 {
            Malformed::VarintOverflow
        } else {
            Malformed::TruncatedVarint
        })
    }

    /// A field key: (field number, wire type).
    #[inline(always)]
    fn key(&mut self) -> Result<(u32, u8)> {
        let key = self.varint()?;
        if key > u64::from(u32::MAX) {
            return Err(Malformed::KeyBeyond32Bits);
        }
        let wire = (key & 7) as u8;
        if wire > FIXED32 {
            return Err(Malformed::InvalidWireType);
        }
        let tag = (key >> 3) as u32;
        if tag == 0 {
            return Err(Malformed::FieldNumberZero);
        }
        Ok((tag, wire))
    }

    /// The next `n` bytes.
    #[inline(always)]
    fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        if n > self.buf.len() as u64 {
            return Err(Malformed::PastTheEnd);
        }
        let (head, rest) = self.buf.split_at(n as usize);
        self.buf = rest;
        Ok(head)
    }

    /// The contents of a length-delimited field (its key already read).
    #[inline(always)]
    fn len_delimited(&mut self) -> Result<&'a [u8]> {
        let n = self.varint()?;
        self.take(n)
    }

    /// A length-delimited field whose key had wire type `wire`, as a reader of its contents.
    #[inline(always)]
    fn message(&mut self, wire: u8) -> Result<Reader<'a>> {
        if wire != LEN {
            return Err(Malformed::WrongWireType);
        }
        Ok(Reader {
            buf: self.len_delimited()?,
        })
    }

    /// Skips an unknown field as prost does, with `budget` left of its recursion limit.
    fn skip(&mut self, tag: u32, wire: u8, budget: u32) -> Result<()> {
        if budget == 0 {
            return Err(Malformed::GroupsTooDeep);
        }
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.take(8).map(drop),
            LEN => self.len_delimited().map(drop),
            FIXED32 => self.take(4).map(drop),
            START_GROUP => loop {
                let (inner, inner_wire) = self.key()?;
                if inner_wire == END_GROUP {
                    if inner != tag {
                        return Err(Malformed::EndGroupMismatch);
                    }
                    return Ok(());
                }
                self.skip(inner, inner_wire, budget - 1)?;
            },
            _ => Err(Malformed::StrayEndGroup),
        }
    }

    /// `BytesList`: field 1, repeated, each a slice of `record` (which holds this list).
    fn bytes_list(mut self, record: &Bytes, mut out: Option<&mut Vec<Bytes>>) -> Result<()> {
        while !self.done() {
            let (tag, wire) = self.key()?;
            if tag == 1 {
                let value = self.message(wire)?.buf;
                if let Some(out) = out.as_deref_mut() {
                    out.push(record.slice_ref(value));
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
                    let packed = self.len_delimited()?;
                    if packed.len() % 4 != 0 {
                        return Err(Malformed::PackedFloatsLength);
                    }
                    if let Some(out) = out.as_deref_mut() {
                        out.extend(packed.chunks_exact(4).map(|c| {
                            f32::from_le_bytes(c.try_into().expect("chunks of four bytes"))
                        }));
                    }
                }
                (1, FIXED32) => {
                    let value = self.take(4)?;
                    if let Some(out) = out.as_deref_mut() {
                        out.push(f32::from_le_bytes(
                            value.try_into().expect("four bytes were read"),
                        ));
                    }
                }
                (1, _) => return Err(Malformed::WrongWireType),
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
                    let mut packed = Reader {
                        buf: self.len_delimited()?,
                    };
                    while !packed.done() {
                        // Two's complement: negative int64 values are 10-byte varints.
                        let value = packed.varint()? as i64;
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
                (1, _) => return Err(Malformed::WrongWireType),
                _ => self.skip(tag, wire, LIST_DEPTH)?,
            }
        }
        Ok(())
    }
}
