//! The compact form of a [`ProgressSnapshot`] in a checkpoint: varint-coded, deflated,
//! base64 (standard alphabet).
//!
//! ```text
//! snapshot := u8 version (1), varint n_spaces, space*, varint n_parts, part*
//! space    := u8 kind, varint modulus, varint files, varint len, signature bytes,
//!             varint n_lanes, lane*                        (lanes by (file, residue))
//! lane     := varint file − previous file, varint residue, varint frontier,
//!             varint end + 1 (0: unknown), varint n_holes, varint hole − previous (+1)*,
//!             varint seek record + 1 (0: none), [varint seek offset]
//! part     := varint space, varint major, varint minor, varint parts, varint n_done,
//!             varint done*
//! ```
//!
//! Lanes nobody touched, or finished, are the same few bytes each, which deflate folds: a
//! host's checkpoint grows with the records in flight (holes), not with the files or
//! records it has read.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use base64::Engine;

use super::lane::LaneSnapshot;
use super::progress::{ProgressSnapshot, SpaceKind, SpaceSnapshot};
use super::unit::Unit;

const VERSION: u8 = 1;

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl Reader<'_> {
    fn u8(&mut self) -> Result<u8, String> {
        let (&b, rest) = self.buf.split_first().ok_or("truncated")?;
        self.buf = rest;
        Ok(b)
    }

    fn var(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a number is too long".into())
    }

    fn len(&mut self, most: usize) -> Result<usize, String> {
        let n = self.var()?;
        if n > most as u64 {
            return Err(format!("a count of {n} is out of range"));
        }
        Ok(n as usize)
    }

    fn u16(&mut self) -> Result<u16, String> {
        u16::try_from(self.var()?).map_err(|_| "a 16-bit number is out of range".to_string())
    }
}

/// The snapshot's compact text.
pub(crate) fn encode(snapshot: &ProgressSnapshot) -> String {
    let mut out = vec![VERSION];
    put(&mut out, snapshot.spaces.len() as u64);
    for s in &snapshot.spaces {
        out.push(s.kind.code());
        put(&mut out, s.modulus);
        put(&mut out, s.files);
        put(&mut out, s.signature.len() as u64);
        out.extend_from_slice(s.signature.as_bytes());
        put(&mut out, s.lanes.len() as u64);
        let mut previous = 0;
        for ((file, residue), lane) in &s.lanes {
            put(&mut out, file - previous);
            previous = *file;
            put(&mut out, *residue);
            put(&mut out, lane.frontier);
            put(&mut out, lane.end.map_or(0, |e| e + 1));
            put(&mut out, lane.holes.len() as u64);
            let mut last = 0;
            for (i, h) in lane.holes.iter().enumerate() {
                put(&mut out, if i == 0 { *h } else { h - last - 1 });
                last = *h;
            }
            match lane.seek {
                None => put(&mut out, 0),
                Some((record, offset)) => {
                    put(&mut out, record + 1);
                    put(&mut out, offset);
                }
            }
        }
    }
    put(&mut out, snapshot.parts.len() as u64);
    for (unit, (parts, done)) in &snapshot.parts {
        put(&mut out, u64::from(unit.space));
        put(&mut out, unit.major);
        put(&mut out, unit.minor);
        put(&mut out, u64::from(*parts));
        put(&mut out, done.len() as u64);
        for d in done {
            put(&mut out, u64::from(*d));
        }
    }
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&out).expect("writing to memory");
    let deflated = z.finish().expect("writing to memory");
    base64::engine::general_purpose::STANDARD.encode(deflated)
}

/// The snapshot of a compact text; `Err` says what is wrong with it.
pub(crate) fn decode(text: &str) -> Result<ProgressSnapshot, String> {
    let deflated = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    let mut raw = Vec::new();
    flate2::read::DeflateDecoder::new(&deflated[..])
        // At most 1 GiB: a malformed input cannot make us allocate without bound.
        .take(1 << 30)
        .read_to_end(&mut raw)
        .map_err(|e| format!("not deflated: {e}"))?;
    let mut r = Reader { buf: &raw };
    let version = r.u8()?;
    if version != VERSION {
        return Err(format!(
            "progress format {version} (this Sluice reads {VERSION})"
        ));
    }
    let limit = raw.len();
    let n_spaces = r.len(u16::MAX as usize)?;
    let mut spaces = Vec::with_capacity(n_spaces);
    for _ in 0..n_spaces {
        let kind = SpaceKind::from_code(r.u8()?).ok_or("an unknown space kind")?;
        let modulus = r.var()?.max(1);
        let files = r.var()?;
        let sig_len = r.len(limit)?;
        if r.buf.len() < sig_len {
            return Err("truncated".into());
        }
        let (sig, rest) = r.buf.split_at(sig_len);
        let signature = String::from_utf8(sig.to_vec()).map_err(|_| "a signature is not text")?;
        r.buf = rest;
        let n_lanes = r.len(limit)?;
        let mut lanes = BTreeMap::new();
        let mut file = 0u64;
        for _ in 0..n_lanes {
            file = file
                .checked_add(r.var()?)
                .ok_or("a file number overflows")?;
            let residue = r.var()?;
            let frontier = r.var()?;
            let end = match r.var()? {
                0 => None,
                e => Some(e - 1),
            };
            let n_holes = r.len(limit)?;
            let mut holes = Vec::with_capacity(n_holes);
            let mut last = 0u64;
            for i in 0..n_holes {
                let d = r.var()?;
                let h = if i == 0 {
                    d
                } else {
                    last.checked_add(d + 1).ok_or("a hole overflows")?
                };
                if h >= frontier {
                    return Err("a hole lies beyond its lane's frontier".into());
                }
                holes.push(h);
                last = h;
            }
            let seek = match r.var()? {
                0 => None,
                record => Some((record - 1, r.var()?)),
            };
            if lanes
                .insert(
                    (file, residue),
                    LaneSnapshot {
                        frontier,
                        end,
                        holes,
                        seek,
                    },
                )
                .is_some()
            {
                return Err(format!("lane {file}/{residue} appears twice"));
            }
        }
        spaces.push(SpaceSnapshot {
            kind,
            modulus,
            files,
            signature,
            lanes,
        });
    }
    let n_parts = r.len(limit)?;
    let mut parts = BTreeMap::new();
    for _ in 0..n_parts {
        let space = r.u16()?;
        let major = r.var()?;
        let minor = r.var()?;
        let n = r.u16()?;
        let count = r.len(n as usize)?;
        let mut done = Vec::with_capacity(count);
        for _ in 0..count {
            done.push(r.u16()?);
        }
        parts.insert(Unit::whole(space, major, minor), (n, done));
    }
    if !r.buf.is_empty() {
        return Err("unexpected bytes after the progress".into());
    }
    Ok(ProgressSnapshot { spaces, parts })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(lanes: u64) -> ProgressSnapshot {
        let mut l = BTreeMap::new();
        for f in 0..lanes {
            l.insert(
                (f, 0),
                LaneSnapshot {
                    frontier: if f < 3 { 100 } else { 0 },
                    end: if f < 2 { Some(100) } else { None },
                    holes: if f == 2 { vec![5, 6, 90] } else { vec![] },
                    seek: (f == 2).then_some((3, 4096)),
                },
            );
        }
        let mut parts = BTreeMap::new();
        parts.insert(Unit::whole(0, 2, 95), (4, vec![0, 3]));
        ProgressSnapshot {
            spaces: vec![SpaceSnapshot {
                kind: SpaceKind::Files,
                modulus: 1,
                files: lanes,
                signature: "files:abc".into(),
                lanes: l,
            }],
            parts,
        }
    }

    #[test]
    fn round_trips_and_idle_lanes_cost_little() {
        let s = sample(10);
        assert_eq!(decode(&encode(&s)).unwrap(), s);
        let big = encode(&sample(100_000));
        assert!(big.len() < 2_000, "{} bytes for 100,000 files", big.len());
        assert_eq!(decode(&big).unwrap(), sample(100_000));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode("!!!").is_err());
        let good = encode(&sample(3));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&good)
            .unwrap();
        for cut in 0..bytes.len() {
            let text = base64::engine::general_purpose::STANDARD.encode(&bytes[..cut]);
            let _ = decode(&text);
        }
    }
}
