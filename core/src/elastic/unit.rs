//! [`Unit`] and [`Units`]: which records an element was made of.

use std::sync::Arc;

use smallvec::SmallVec;

/// One record as elastic checkpoints count it: its place in the **space** of the unit point
/// it came from (see the [module docs](super)).
///
/// - In a space of files, `major` is the file's position in the resolved file list (before
///   any sharding or shuffling) and `minor` the record's index in the file.
/// - In a space of positions, `major` is 0 and `minor` the position in the stream being
///   counted (a source's output, the input of a record-level `shard`, or the permutation
///   of a global shuffle).
///
/// An element split from one record (a row of `unbatch` of the record's own rows, an output
/// of a flat map) is a **part** of it: `parts > 0` and `part < parts`; the record is done
/// when all its parts were delivered or dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Unit {
    /// Which unit point of the pipeline (numbered from the output down, inputs in order).
    pub space: u16,
    /// The file (files) or 0 (positions).
    pub major: u64,
    /// The record in the file, or the position.
    pub minor: u64,
    /// Which part (when `parts > 0`).
    pub part: u16,
    /// 0: the whole record; otherwise the number of parts it was split into.
    pub parts: u16,
}

impl Unit {
    /// A whole record.
    pub fn whole(space: u16, major: u64, minor: u64) -> Unit {
        Unit {
            space,
            major,
            minor,
            part: 0,
            parts: 0,
        }
    }

    /// The record this unit is (a part of), as a whole.
    pub fn record(&self) -> Unit {
        Unit::whole(self.space, self.major, self.minor)
    }
}

/// The records an element was made of: one for a record, a batch's rows' in order for a
/// batch, none for elements of stages below the unit points (they are not counted). An
/// element whose records could not be followed (an `unbatch` of a batch into a number of
/// rows that matches neither its records nor one record) carries why instead, and elastic
/// checkpoints of that epoch are refused with it.
#[derive(Debug, Clone, Default)]
pub struct Units {
    list: SmallVec<[Unit; 1]>,
    lost: Option<Arc<str>>,
}

/// Records one element may be split into (parts are counted in 16 bits).
const MAX_PARTS: usize = u16::MAX as usize;

impl Units {
    /// No records.
    pub fn none() -> Units {
        Units::default()
    }

    /// One record.
    pub fn one(unit: Unit) -> Units {
        let mut list = SmallVec::new();
        list.push(unit);
        Units { list, lost: None }
    }

    /// These records, in order (a batch read straight from a file: its rows').
    pub fn many(units: impl IntoIterator<Item = Unit>) -> Units {
        Units {
            list: units.into_iter().collect(),
            lost: None,
        }
    }

    /// Records that cannot be followed, and why.
    pub fn lost(why: impl Into<Arc<str>>) -> Units {
        Units {
            list: SmallVec::new(),
            lost: Some(why.into()),
        }
    }

    /// The records, in order.
    pub fn as_slice(&self) -> &[Unit] {
        &self.list
    }

    /// True when the element carries no record (and nothing was lost).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty() && self.lost.is_none()
    }

    /// Why the records could not be followed, if they could not.
    pub fn lost_reason(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    /// The records of several elements combined into one (a batch, a zip), in order.
    pub fn concat<'a>(parts: impl IntoIterator<Item = &'a Units>) -> Units {
        let mut out = Units::default();
        for u in parts {
            if out.lost.is_none() {
                out.lost = u.lost.clone();
            }
            out.list.extend_from_slice(&u.list);
        }
        out
    }

    /// The records of the `rows` rows an element is split into (`unbatch`, a flat map):
    /// one each when the element holds one record per row; parts of its record when it
    /// holds one (a record's own rows); nothing when it holds none.
    pub fn split(&self, rows: usize, by: &str) -> Vec<Units> {
        if let Some(lost) = &self.lost {
            return vec![Units::lost(Arc::clone(lost)); rows];
        }
        let n = self.list.len();
        if n == 0 {
            return vec![Units::default(); rows];
        }
        if n == rows {
            return self.list.iter().map(|u| Units::one(*u)).collect();
        }
        if n == 1 {
            let unit = self.list[0];
            if unit.parts > 0 {
                return vec![
                    Units::lost(format!(
                        "{by} split a part of record {}:{} again",
                        unit.major, unit.minor
                    ));
                    rows
                ];
            }
            if rows > MAX_PARTS {
                return vec![
                    Units::lost(format!(
                        "{by} split record {}:{} into {rows} elements (at most {MAX_PARTS} are followed)",
                        unit.major, unit.minor
                    ));
                    rows
                ];
            }
            return (0..rows)
                .map(|i| {
                    Units::one(Unit {
                        part: i as u16,
                        parts: rows as u16,
                        ..unit
                    })
                })
                .collect();
        }
        vec![
            Units::lost(format!(
                "{by} split an element of {n} records into {rows} elements, so which record each comes from is unknown"
            ));
            rows
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_concat_and_split_back_one_record_per_row() {
        let a = Units::one(Unit::whole(0, 1, 2));
        let b = Units::one(Unit::whole(0, 1, 3));
        let batch = Units::concat([&a, &b]);
        assert_eq!(batch.as_slice().len(), 2);
        let rows = batch.split(2, "unbatch#3");
        assert_eq!(rows[0].as_slice(), a.as_slice());
        assert_eq!(rows[1].as_slice(), b.as_slice());
    }

    #[test]
    fn one_record_split_into_rows_gives_parts_and_other_splits_are_lost() {
        let a = Units::one(Unit::whole(1, 0, 9));
        let rows = a.split(3, "unbatch#3");
        assert_eq!(rows[2].as_slice()[0].part, 2);
        assert_eq!(rows[2].as_slice()[0].parts, 3);
        assert_eq!(rows[2].as_slice()[0].record(), Unit::whole(1, 0, 9));
        let again = rows[0].split(2, "unbatch#4");
        assert!(again[0].lost_reason().unwrap().contains("again"));
        let two = Units::concat([&a, &a]);
        let odd = two.split(3, "unbatch#5");
        assert!(odd[1].lost_reason().unwrap().contains("unbatch#5"));
        assert!(Units::none().split(2, "x")[1].is_empty());
    }
}
