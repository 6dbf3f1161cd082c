//! [`Progress`]: what one host has done in an epoch, lane by lane, updated as elements are
//! delivered or dropped, and its [`ProgressSnapshot`] (what a checkpoint keeps).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use crate::sync::LockExt;

use super::lane::{Lane, LaneSnapshot};
use super::unit::{Unit, Units};

/// What the records of a space are counted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpaceKind {
    /// Records of files, by file and index in the file (file-level sharding, or a file
    /// source read whole).
    Files,
    /// Positions in a stream (a record-level `shard`'s input, a source's output).
    Positions,
    /// Positions in a global shuffle's permutation.
    Permutation,
}

impl SpaceKind {
    pub(crate) fn code(self) -> u8 {
        match self {
            SpaceKind::Files => 0,
            SpaceKind::Positions => 1,
            SpaceKind::Permutation => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<SpaceKind> {
        Some(match code {
            0 => SpaceKind::Files,
            1 => SpaceKind::Positions,
            2 => SpaceKind::Permutation,
            _ => return None,
        })
    }

    /// The word messages use.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            SpaceKind::Files => "records of files",
            SpaceKind::Positions => "positions of a stream",
            SpaceKind::Permutation => "positions of a global shuffle",
        }
    }
}

/// A lane's key in its space: (file or 0, residue).
pub(crate) type LaneKey = (u64, u64);

/// A map keyed by lanes, hashed cheaply (lane keys are small integers, looked up for every
/// record delivered).
pub(crate) type LaneMap<V> = HashMap<LaneKey, V, BuildHasherDefault<LaneHasher>>;

/// The FxHash mix: a multiply and a rotate per word.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LaneHasher(u64);

impl Hasher for LaneHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// What a checkpoint keeps of one space: how it is counted and this host's lanes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpaceSnapshot {
    pub(crate) kind: SpaceKind,
    /// Lanes take records `residue + j × modulus`.
    pub(crate) modulus: u64,
    /// Files in the resolved list (a space of files), else 0.
    pub(crate) files: u64,
    /// What is counted (the kind and the pipeline up to the unit point, without `shard`
    /// stages): checkpoints of a space must agree on it.
    pub(crate) signature: String,
    /// This host's lanes.
    pub(crate) lanes: BTreeMap<LaneKey, LaneSnapshot>,
}

/// What a checkpoint keeps of a host's progress in an epoch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProgressSnapshot {
    pub(crate) spaces: Vec<SpaceSnapshot>,
    /// Records split into parts (`unbatch` of a record's rows) some of whose parts were
    /// delivered: the record, its number of parts and the parts done.
    pub(crate) parts: BTreeMap<Unit, (u16, Vec<u16>)>,
}

/// One space being tracked.
#[derive(Debug)]
pub(crate) struct SpaceProgress {
    pub(crate) kind: SpaceKind,
    pub(crate) modulus: u64,
    pub(crate) files: u64,
    pub(crate) signature: String,
    lanes: LaneMap<Lane>,
    /// For a space of files: the residues owned of each file (to set lanes' ends).
    residues: HashMap<u64, Vec<u64>>,
}

impl SpaceProgress {
    /// A space with no lanes yet.
    pub(crate) fn new(kind: SpaceKind, modulus: u64, files: u64, signature: String) -> Self {
        SpaceProgress {
            kind,
            modulus: modulus.max(1),
            files,
            signature,
            lanes: LaneMap::default(),
            residues: HashMap::new(),
        }
    }

    /// Adds a lane of this host (a lane it has already is kept as it is: an exact resume
    /// starts from the checkpoint's lanes, and lists its files again).
    pub(crate) fn add_lane(&mut self, key: LaneKey, lane: Lane) {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.lanes.entry(key) {
            slot.insert(lane);
            self.residues.entry(key.0).or_default().push(key.1);
        }
    }
}

/// A host's progress in an epoch (see the [module docs](self)); shared by the run's
/// threads.
pub(crate) struct Progress {
    inner: std::sync::Mutex<Inner>,
}

/// What became of a record that is done (see [`crate::RecordAccount`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Yielded by the pipeline (in an element, or a row of a batch).
    Delivered,
    /// Failed under the skip error policy.
    Skipped,
    /// Left out by a predicate or function (`filter`, a filter plugin, a function that
    /// returns nothing, `rejection_resample`'s rejections).
    Filtered,
    /// Left out by a stage's own rule (a batch remainder with `drop_remainder`, an
    /// incomplete window or group).
    Dropped,
}

/// Counts of this run's records by fate, and of those read.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counts {
    /// Records read: marked with their unit at a unit point, or skipped (failed under the
    /// skip policy) below one, before being marked.
    pub(crate) read: u64,
    /// By [`Fate`]: delivered, skipped, filtered, dropped.
    pub(crate) fates: [u64; 4],
}

struct Inner {
    spaces: Vec<SpaceProgress>,
    parts: HashMap<Unit, PartsDone>,
    /// Records read and done in this run, each counted once (when it becomes done).
    counts: Counts,
    /// Why this epoch's progress cannot be checkpointed, once it cannot.
    broken: Option<String>,
}

struct PartsDone {
    parts: u16,
    done: Vec<bool>,
    count: u16,
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Progress").finish_non_exhaustive()
    }
}

impl Progress {
    /// Progress over these spaces (numbered by their index), with the parts of records
    /// already delivered (a resumed epoch).
    pub(crate) fn new(spaces: Vec<SpaceProgress>, parts: &BTreeMap<Unit, (u16, Vec<u16>)>) -> Self {
        let parts = parts
            .iter()
            .map(|(unit, (n, done))| {
                let mut d = vec![false; *n as usize];
                for p in done {
                    if let Some(slot) = d.get_mut(*p as usize) {
                        *slot = true;
                    }
                }
                let count = d.iter().filter(|x| **x).count() as u16;
                (
                    *unit,
                    PartsDone {
                        parts: *n,
                        done: d,
                        count,
                    },
                )
            })
            .collect();
        Progress {
            inner: std::sync::Mutex::new(Inner {
                spaces,
                parts,
                counts: Counts::default(),
                broken: None,
            }),
        }
    }

    /// Registers lanes of a space of files: the files this host reads (`residue` 0, modulus
    /// 1: a new epoch).
    pub(crate) fn add_files(&self, space: u16, files: impl IntoIterator<Item = u64>) {
        let mut inner = self.inner.locked();
        if let Some(s) = inner.spaces.get_mut(space as usize) {
            for f in files {
                s.add_lane((f, 0), Lane::new());
            }
        }
    }

    /// An element was delivered (yielded by the pipeline): its records are done. A record
    /// delivered twice breaks the progress (it would be a bug, or a source read twice).
    pub(crate) fn delivered(&self, units: &Units) {
        self.mark_all(units, true, Fate::Delivered);
    }

    /// Elements were dropped (by a filter, a batch remainder, the error policy): their
    /// records are done. Reporting a drop twice is harmless (a resumed run drops again what
    /// it replays).
    pub(crate) fn dropped(&self, units: &Units) {
        self.mark_all(units, false, Fate::Dropped);
    }

    /// [`Progress::dropped`], saying why (skipped, filtered or dropped).
    pub(crate) fn dropped_as(&self, units: &Units, fate: Fate) {
        self.mark_all(units, false, fate);
    }

    /// `n` records were read (marked with their units at a unit point).
    pub(crate) fn read(&self, n: u64) {
        self.inner.locked().counts.read += n;
    }

    /// `n` records were read and skipped at or below a unit point, before being marked
    /// (a corrupt record a reader skipped).
    pub(crate) fn read_and_skipped(&self, n: u64) {
        let mut inner = self.inner.locked();
        inner.counts.read += n;
        inner.counts.fates[Fate::Skipped as usize] += n;
    }

    /// This run's records: read, and done by fate; `None` once the records could not be
    /// followed (an element whose records were lost, a record delivered twice).
    pub(crate) fn counts(&self) -> Option<Counts> {
        let inner = self.inner.locked();
        inner.broken.is_none().then_some(inner.counts)
    }

    fn mark_all(&self, units: &Units, strict: bool, fate: Fate) {
        if units.is_empty() {
            return;
        }
        let mut inner = self.inner.locked();
        if let Some(why) = units.lost_reason() {
            if inner.broken.is_none() {
                inner.broken = Some(why.to_string());
            }
            return;
        }
        for unit in units.as_slice() {
            if inner.mark(unit, strict) {
                inner.counts.fates[fate as usize] += 1;
            }
        }
    }

    /// Where record `record` of file `file` (a space of files) lies: `offset` (kept for a
    /// few records, which become places a resumed reader can start at once done).
    pub(crate) fn note_start(&self, space: u16, file: u64, record: u64, offset: u64) {
        let mut inner = self.inner.locked();
        let Some(s) = inner.spaces.get_mut(space as usize) else {
            return;
        };
        let m = s.modulus;
        if let Some(lane) = s.lanes.get_mut(&(file, record % m)) {
            lane.note_start(record / m, record, offset);
        }
    }

    /// The end of file `file` of a space of files was reached after `count` records.
    pub(crate) fn end_of_file(&self, space: u16, file: u64, count: u64) {
        let mut inner = self.inner.locked();
        let Some(s) = inner.spaces.get_mut(space as usize) else {
            return;
        };
        let m = s.modulus;
        let residues = s.residues.get(&file).cloned().unwrap_or_default();
        for r in residues {
            if let Some(lane) = s.lanes.get_mut(&(file, r)) {
                lane.set_end(lane_count(count, m, r));
            }
        }
    }

    /// The stream of a space of positions ended after `count` positions.
    pub(crate) fn end_of_stream(&self, space: u16, count: u64) {
        let mut inner = self.inner.locked();
        let Some(s) = inner.spaces.get_mut(space as usize) else {
            return;
        };
        let m = s.modulus;
        for ((_, r), lane) in s.lanes.iter_mut() {
            lane.set_end(lane_count(count, m, *r));
        }
    }

    /// What a checkpoint keeps, or why there is none.
    pub(crate) fn snapshot(&self) -> std::result::Result<ProgressSnapshot, String> {
        let inner = self.inner.locked();
        if let Some(why) = &inner.broken {
            return Err(why.clone());
        }
        let spaces = inner
            .spaces
            .iter()
            .map(|s| SpaceSnapshot {
                kind: s.kind,
                modulus: s.modulus,
                files: s.files,
                signature: s.signature.clone(),
                lanes: s.lanes.iter().map(|(k, l)| (*k, l.snapshot())).collect(),
            })
            .collect();
        let parts = inner
            .parts
            .iter()
            .filter(|(_, p)| p.count > 0)
            .map(|(u, p)| {
                let done = (0..p.parts).filter(|i| p.done[*i as usize]).collect();
                (*u, (p.parts, done))
            })
            .collect();
        Ok(ProgressSnapshot { spaces, parts })
    }
}

impl Inner {
    /// Marks `unit` done; true when that made its record done (its last part, or the
    /// whole record, not done before).
    fn mark(&mut self, unit: &Unit, strict: bool) -> bool {
        if unit.parts > 0 {
            let record = unit.record();
            if !strict && !self.parts.contains_key(&record) && self.is_done(&record) {
                // A drop reported again for a record whose parts are all done.
                return false;
            }
            let entry = self.parts.entry(record).or_insert_with(|| PartsDone {
                parts: unit.parts,
                done: vec![false; unit.parts as usize],
                count: 0,
            });
            let i = unit.part as usize;
            if entry.parts == unit.parts && i < entry.done.len() && entry.done[i] && !strict {
                return false;
            }
            if entry.parts != unit.parts || i >= entry.done.len() || entry.done[i] {
                let why = format!(
                    "part {} of {} of record {}:{} was delivered twice or its parts changed",
                    unit.part, unit.parts, unit.major, unit.minor
                );
                self.broken.get_or_insert(why);
                return false;
            }
            entry.done[i] = true;
            entry.count += 1;
            if entry.count < entry.parts {
                return false;
            }
            self.parts.remove(&record);
        }
        let Some(space) = self.spaces.get_mut(unit.space as usize) else {
            self.broken.get_or_insert(format!(
                "an element names unit space {} the pipeline does not have",
                unit.space
            ));
            return false;
        };
        let m = space.modulus;
        let key = (unit.major, unit.minor % m);
        let newly = space
            .lanes
            .get_mut(&key)
            .is_some_and(|lane| lane.mark(unit.minor / m));
        let ok = newly || (!strict && space.lanes.contains_key(&key));
        if !ok {
            let why = format!(
                "record {}:{} of unit space {} was delivered twice, or is not this host's",
                unit.major, unit.minor, unit.space
            );
            self.broken.get_or_insert(why);
        }
        newly
    }
}

impl Inner {
    /// Whether a whole record is done.
    fn is_done(&self, unit: &Unit) -> bool {
        self.spaces.get(unit.space as usize).is_some_and(|s| {
            let m = s.modulus;
            s.lanes
                .get(&(unit.major, unit.minor % m))
                .is_some_and(|lane| lane.is_done(unit.minor / m))
        })
    }
}

/// The number of records of lane `residue` (modulus `m`) among `count` records.
pub(crate) fn lane_count(count: u64, m: u64, residue: u64) -> u64 {
    if count > residue {
        (count - residue).div_ceil(m)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> SpaceProgress {
        let mut s = SpaceProgress::new(SpaceKind::Positions, 2, 0, "sig".into());
        s.add_lane((0, 1), Lane::new());
        s
    }

    #[test]
    fn delivered_records_and_parts_are_done_and_a_second_delivery_breaks_it() {
        let p = Progress::new(vec![space()], &BTreeMap::new());
        p.delivered(&Units::one(Unit::whole(0, 0, 1)));
        p.delivered(&Units::one(Unit::whole(0, 0, 5)));
        let parts = Units::one(Unit::whole(0, 0, 3)).split(2, "unbatch");
        p.delivered(&parts[0]);
        let snap = p.snapshot().unwrap();
        let lane = &snap.spaces[0].lanes[&(0, 1)];
        assert_eq!(lane.frontier, 3); // positions 1 and 5 are lane indexes 0 and 2
        assert_eq!(lane.holes, vec![1]);
        assert_eq!(snap.parts[&Unit::whole(0, 0, 3)], (2, vec![0]));
        p.delivered(&parts[1]);
        let snap = p.snapshot().unwrap();
        assert!(snap.parts.is_empty());
        assert!(snap.spaces[0].lanes[&(0, 1)].holes.is_empty());
        p.end_of_stream(0, 7); // positions 1, 3, 5
        assert!(p.snapshot().unwrap().spaces[0].lanes[&(0, 1)].finished());
        p.delivered(&Units::one(Unit::whole(0, 0, 1)));
        assert!(p.snapshot().unwrap_err().contains("twice"));
    }

    #[test]
    fn lane_counts() {
        assert_eq!(lane_count(7, 2, 1), 3);
        assert_eq!(lane_count(7, 2, 0), 4);
        assert_eq!(lane_count(1, 3, 2), 0);
        assert_eq!(lane_count(10, 1, 0), 10);
    }
}
