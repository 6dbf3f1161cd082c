//! [`Lane`]: which of one lane's records are done, in memory proportional to the records in
//! flight, not to the records read.
//!
//! A lane is the records `residue`, `residue + modulus`, ... of one file (a space of files) or
//! of the stream (a space of positions); record `residue + j × modulus` is the lane's `j`-th.
//! One host reads a lane in order, so its done records are almost a prefix: the lane keeps
//! the **frontier** (one past the highest done index), a bitmap of the recent window below
//! it, and, below the window, the explicit list of **holes** (indexes not done: records still
//! in a shuffle buffer, or records that will never be delivered, such as ones skipped by
//! the error policy). A record is done when it was delivered or dropped (a filter, a batch
//! remainder): it is not to be read again.

use std::collections::VecDeque;

/// Bits of window kept before its oldest word is turned into explicit holes: 1 Mi bits
/// (128 KiB) a lane, far more than any shuffle buffer keeps in flight.
const MAX_WINDOW_WORDS: usize = 1 << 14;

/// The done records of one lane (see the [module docs](self)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lane {
    /// Indexes below `base` that are not done, ascending.
    holes: Vec<u64>,
    /// The first index the window covers (a multiple of 64 above the holes' start).
    base: u64,
    /// Bit `k` of word `w`: index `base + 64 w + k` is done.
    window: VecDeque<u64>,
    /// One past the highest done index (0: none done).
    frontier: u64,
    /// The lane's number of records, once its end was seen.
    end: Option<u64>,
    /// Where records at the start of a window word (index a multiple of 64) lie in their
    /// file (record index, byte offset), as the reader gave them (a space of files).
    starts: std::collections::BTreeMap<u64, (u64, u64)>,
    /// A done record below which every record is done, and where it lies (record index,
    /// byte offset): a resumed reader may start reading its file there.
    seek: Option<(u64, u64)>,
}

/// What a checkpoint keeps of a lane: the frontier, the end if known, the indexes below the
/// frontier that are not done, and (files) where a resumed reader may start reading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LaneSnapshot {
    pub(crate) frontier: u64,
    pub(crate) end: Option<u64>,
    pub(crate) holes: Vec<u64>,
    /// A record (index in its file, byte offset) such that every record of the lane before
    /// it is done.
    pub(crate) seek: Option<(u64, u64)>,
}

impl Lane {
    /// A lane where nothing is done.
    pub(crate) fn new() -> Lane {
        Lane::default()
    }

    /// The lane a snapshot describes.
    pub(crate) fn from_snapshot(s: &LaneSnapshot) -> Lane {
        Lane {
            holes: s.holes.clone(),
            base: s.frontier,
            window: VecDeque::new(),
            frontier: s.frontier,
            end: s.end,
            starts: Default::default(),
            seek: s.seek,
        }
    }

    /// Notes where lane index `j`, record `record` of its file, lies (`offset`): kept for
    /// the indexes that start a window word, which become seek points once done.
    pub(crate) fn note_start(&mut self, j: u64, record: u64, offset: u64) {
        if j.is_multiple_of(64) && j >= self.base {
            self.starts.insert(j, (record, offset));
        }
    }

    /// Marks index `j` done; false if it already was (a record delivered twice).
    pub(crate) fn mark(&mut self, j: u64) -> bool {
        if j < self.base {
            return match self.holes.binary_search(&j) {
                Ok(i) => {
                    self.holes.remove(i);
                    true
                }
                Err(_) => false,
            };
        }
        let offset = j - self.base;
        let word = (offset / 64) as usize;
        let bit = 1u64 << (offset % 64);
        if word >= self.window.len() {
            self.window.resize(word + 1, 0);
        }
        if self.window[word] & bit != 0 {
            return false;
        }
        self.window[word] |= bit;
        self.frontier = self.frontier.max(j + 1);
        self.settle();
        true
    }

    /// Drops full words from the window's start, and turns the oldest word into holes when
    /// the window grows beyond [`MAX_WINDOW_WORDS`].
    fn settle(&mut self) {
        loop {
            let Some(&first) = self.window.front() else {
                // An empty window starts at the frontier.
                if self.base < self.frontier {
                    self.base = self.frontier;
                }
                return;
            };
            let full = first == u64::MAX;
            if !full && self.window.len() <= MAX_WINDOW_WORDS {
                return;
            }
            if !full {
                for k in 0..64 {
                    let j = self.base + k;
                    if first & (1 << k) == 0 && j < self.frontier {
                        self.holes.push(j);
                    }
                }
            }
            // A full word's first record is done with every record before it (unless holes
            // were left below): a place to start reading again.
            let start = self.starts.remove(&self.base);
            if full
                && self.holes.is_empty()
                && let Some(start) = start
            {
                self.seek = Some(start);
            }
            self.window.pop_front();
            self.base += 64;
            while let Some((&j, _)) = self.starts.first_key_value() {
                if j >= self.base {
                    break;
                }
                self.starts.pop_first();
            }
        }
    }

    /// Whether index `j` is done.
    pub(crate) fn is_done(&self, j: u64) -> bool {
        if j < self.base {
            return self.holes.binary_search(&j).is_err();
        }
        let offset = j - self.base;
        let word = (offset / 64) as usize;
        word < self.window.len() && self.window[word] & (1 << (offset % 64)) != 0
    }

    /// The lowest index not done.
    #[cfg(test)]
    pub(crate) fn first_open(&self) -> u64 {
        if let Some(&h) = self.holes.first() {
            return h;
        }
        for (w, word) in self.window.iter().enumerate() {
            if *word != u64::MAX {
                return self.base + 64 * w as u64 + word.trailing_ones() as u64;
            }
        }
        self.base.max(self.frontier)
    }

    /// Sets the lane's number of records (its end was seen).
    pub(crate) fn set_end(&mut self, end: u64) {
        self.end = Some(end);
    }

    /// What a checkpoint keeps of the lane.
    pub(crate) fn snapshot(&self) -> LaneSnapshot {
        let mut holes = self.holes.clone();
        for (w, word) in self.window.iter().enumerate() {
            if *word == u64::MAX {
                continue;
            }
            for k in 0..64 {
                let j = self.base + 64 * w as u64 + k;
                if j >= self.frontier {
                    break;
                }
                if word & (1 << k) == 0 {
                    holes.push(j);
                }
            }
        }
        // The window's first record, when done with every record before it, is a later
        // place to start than the last full word's.
        let seek = match (self.window.front(), self.starts.get(&self.base)) {
            (Some(word), Some(start)) if word & 1 != 0 && self.holes.is_empty() => Some(*start),
            _ => self.seek,
        };
        LaneSnapshot {
            frontier: self.frontier,
            end: self.end,
            holes,
            seek,
        }
    }
}

impl LaneSnapshot {
    /// Whether index `j` is done.
    pub(crate) fn is_done(&self, j: u64) -> bool {
        j < self.frontier && self.holes.binary_search(&j).is_err()
    }

    /// The lowest index not done.
    pub(crate) fn first_open(&self) -> u64 {
        self.holes.first().copied().unwrap_or(self.frontier)
    }

    /// Whether every record of the lane is done.
    pub(crate) fn finished(&self) -> bool {
        self.end.is_some_and(|end| self.first_open() >= end)
    }

    /// Child `t` of this lane split `s` ways: the child's index `c` is this lane's index
    /// `c × s + t`.
    pub(crate) fn split(&self, s: u64, t: u64) -> LaneSnapshot {
        let child = |j: u64| (j.saturating_sub(t)).div_ceil(s);
        LaneSnapshot {
            frontier: if self.frontier > t {
                child(self.frontier)
            } else {
                0
            },
            end: self.end.map(|e| if e > t { child(e) } else { 0 }),
            holes: self
                .holes
                .iter()
                .filter(|h| *h % s == t)
                .map(|h| (h - t) / s)
                .collect(),
            // Every record of the lane before the seek record is done: so is every record
            // of each child before it.
            seek: self.seek,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_prefix_keeps_no_window_and_no_holes() {
        let mut lane = Lane::new();
        for j in 0..1000 {
            assert!(lane.mark(j));
        }
        assert_eq!(lane.first_open(), 1000);
        assert!(lane.window.len() <= 1);
        assert!(lane.snapshot().holes.is_empty());
        assert!(!lane.mark(5), "a second delivery is noticed");
        lane.set_end(1000);
        assert!(lane.snapshot().finished());
    }

    #[test]
    fn a_done_word_start_becomes_the_seek_point() {
        let mut lane = Lane::new();
        for j in 0..200 {
            lane.note_start(j, j, 1000 + j * 10);
        }
        for j in 0..150 {
            lane.mark(j);
        }
        // Words 0 and 1 are full (0..128) and record 128 is done with all before it.
        assert_eq!(lane.snapshot().seek, Some((128, 2280)));
        let mut lane = Lane::new();
        for j in 0..200 {
            lane.note_start(j, j, 1000 + j * 10);
        }
        for j in (0..150).filter(|j| *j != 128) {
            lane.mark(j);
        }
        assert_eq!(
            lane.snapshot().seek,
            Some((64, 1640)),
            "record 128 is not done"
        );
        let mut holed = Lane::new();
        for j in 0..200 {
            holed.note_start(j, j, j);
        }
        for j in 1..200 {
            holed.mark(j);
        }
        assert_eq!(holed.snapshot().seek, None, "record 0 is not done");
    }

    #[test]
    fn a_hole_that_stays_becomes_explicit_and_the_window_stays_bounded() {
        let mut lane = Lane::new();
        let n = (MAX_WINDOW_WORDS as u64 + 10) * 64;
        for j in 1..n {
            lane.mark(j);
        }
        assert!(lane.window.len() <= MAX_WINDOW_WORDS + 1);
        assert_eq!(lane.holes, vec![0]);
        assert_eq!(lane.first_open(), 0);
        assert_eq!(lane.snapshot().holes, vec![0]);
        lane.mark(0);
        assert_eq!(lane.first_open(), n);
    }

    #[test]
    fn a_split_lane_keeps_its_records_done() {
        let s = LaneSnapshot {
            frontier: 10,
            end: Some(11),
            holes: vec![2, 7],
            seek: None,
        };
        let children: Vec<_> = (0..3).map(|t| s.split(3, t)).collect();
        for j in 0..12 {
            let c = &children[(j % 3) as usize];
            assert_eq!(c.is_done(j / 3), s.is_done(j), "index {j}");
        }
        assert_eq!(children[0].end, Some(4)); // 0 3 6 9
        assert_eq!(children[2].end, Some(3)); // 2 5 8
    }

    proptest! {
        /// Whatever order records are marked in, the lane and its snapshot say exactly
        /// which are done.
        #[test]
        fn marks_in_any_order(order in proptest::collection::vec(0u64..3000, 0..2000)) {
            let mut lane = Lane::new();
            let mut done = std::collections::BTreeSet::new();
            for j in &order {
                prop_assert_eq!(lane.mark(*j), done.insert(*j));
            }
            let snap = lane.snapshot();
            let restored = Lane::from_snapshot(&snap);
            for j in 0..3100 {
                prop_assert_eq!(lane.is_done(j), done.contains(&j));
                prop_assert_eq!(snap.is_done(j), done.contains(&j));
                prop_assert_eq!(restored.is_done(j), done.contains(&j));
            }
            let first = (0..).find(|j| !done.contains(j)).unwrap();
            prop_assert_eq!(lane.first_open(), first);
            prop_assert_eq!(snap.first_open(), first);
        }
    }
}
