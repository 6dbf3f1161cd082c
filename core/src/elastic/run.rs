//! [`ElasticRun`]: the elastic side of one running epoch: its unit points, what each reads,
//! and the [`Progress`] checkpoints take.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::element::Element;
use crate::error::Result;
use crate::plan::PlanNode;
use crate::stream::{BoxStream, ElementStream, IterStream};

use super::lane::{Lane, LaneSnapshot};
use super::progress::{LaneMap, Progress, ProgressSnapshot, SpaceKind, SpaceProgress};
use super::space::{PointAt, UnitPoint, unsharded};
use super::unit::{Unit, Units};

/// Where an epoch stands among the runs that read it: what an elastic checkpoint says
/// besides the progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The pipeline's fingerprint without its `shard` stages.
    pub(crate) fingerprint: String,
    /// `num_shards` of each `shard` stage in the run that started the epoch.
    pub(crate) shards: Vec<u64>,
    /// 0 for the run that started the epoch, +1 at each elastic resume.
    pub(crate) generation: u64,
    /// This run's hosts and this host's rank.
    pub(crate) hosts: u64,
    pub(crate) host: u64,
}

/// The elastic side of a run: records followed, or why they cannot be.
#[derive(Debug)]
pub(crate) enum ElasticRun {
    /// The plan has a stage above its unit points that does not keep records' identities.
    Blocked {
        layout: Layout,
        why: String,
    },
    Tracking(Box<Tracking>),
}

/// A run whose records are followed.
#[derive(Debug)]
pub(crate) struct Tracking {
    pub(crate) layout: Layout,
    pub(crate) progress: Progress,
    /// Unit points by node key.
    points: HashMap<usize, Arc<PointRun>>,
    /// Spaces of files by the stage number of their reader (file ends reported by the
    /// reader's context, also from inside an `interleave`).
    readers: HashMap<usize, u16>,
    /// Spaces of files by the key of their reader's input (the file list).
    lists: HashMap<usize, u16>,
    /// Parts of records delivered before this run (an elastic resume): a splitting stage
    /// leaves them out.
    parts_before: BTreeMap<Unit, (u16, Vec<u16>)>,
    /// Numbers of the stages at or below the unit points: what they skip under the skip
    /// policy was read but never marked (see [`Progress::read_and_skipped`]).
    below: std::collections::HashSet<usize>,
}

/// One unit point as this run reads it.
#[derive(Debug)]
pub(crate) struct PointRun {
    pub(crate) space: u16,
    pub(crate) kind: SpaceKind,
    pub(crate) at: PointAt,
    /// Lanes take records `residue + j × modulus`.
    pub(crate) modulus: u64,
    /// A new epoch: this host's records are `residue`, `residue + modulus`, ... (positions)
    /// or all of its files' (files).
    residue: u64,
    /// A resumed epoch: the lanes this host reads and what of them was done before.
    owned: Option<Owned>,
}

#[derive(Debug)]
struct Owned {
    lanes: LaneMap<LaneSnapshot>,
    /// Files with records left (a space of files).
    files: BTreeSet<u64>,
    /// Where to start reading each file (record index, byte offset): the earliest seek
    /// point of its lanes, when every one of them has one.
    seeks: HashMap<u64, (u64, u64)>,
    /// The lowest position with a record left (a space of positions).
    first: u64,
}

impl PointRun {
    /// Whether this host reads record `minor` of file `major` (0 for positions).
    pub(crate) fn keeps(&self, major: u64, minor: u64) -> bool {
        match &self.owned {
            None => match self.kind {
                SpaceKind::Files => true,
                _ => minor % self.modulus == self.residue,
            },
            Some(owned) => owned
                .lanes
                .get(&(major, minor % self.modulus))
                .is_some_and(|lane| !lane.is_done(minor / self.modulus)),
        }
    }

    /// Record `minor` of file `major`, starting at byte `offset`, as a file reader at this
    /// point reads it: its unit when this host reads it (`None`: another host's, or done
    /// before this run). Every 64th record of a lane notes where it starts, for a resume
    /// to seek to.
    pub(crate) fn stamp(
        &self,
        tracking: Option<&Tracking>,
        major: u64,
        minor: u64,
        offset: Option<u64>,
    ) -> Option<Unit> {
        if !self.keeps(major, minor) {
            return None;
        }
        if (minor / self.modulus).is_multiple_of(64)
            && let (Some(offset), Some(t)) = (offset, tracking)
        {
            t.progress.note_start(self.space, major, minor, offset);
        }
        if let Some(t) = tracking {
            t.progress.read(1);
        }
        Some(Unit::whole(self.space, major, minor))
    }

    /// A resumed epoch: the first position worth reading (nothing before it is this
    /// host's to read).
    pub(crate) fn first_position(&self) -> u64 {
        self.owned.as_ref().map_or(0, |o| o.first)
    }

    /// A resumed epoch: where a reader may start reading file `file` (record index, byte
    /// offset), every record of this host's before it being done.
    pub(crate) fn seek(&self, file: u64) -> Option<(u64, u64)> {
        self.owned.as_ref()?.seeks.get(&file).copied()
    }

    /// Whether this run resumes an epoch (it reads lanes it was dealt).
    pub(crate) fn resumed(&self) -> bool {
        self.owned.is_some()
    }

    /// A resumed epoch: the positions of a permutation of `total` this host reads, in
    /// order.
    pub(crate) fn positions(&self, total: u64) -> Vec<u64> {
        let Some(owned) = &self.owned else {
            return Vec::new();
        };
        let m = self.modulus;
        let mut out = Vec::new();
        for ((_, residue), lane) in &owned.lanes {
            let n = super::progress::lane_count(total, m, *residue);
            let mut j = lane.first_open();
            while j < n {
                if !lane.is_done(j) {
                    out.push(residue + j * m);
                }
                j += 1;
            }
        }
        out.sort_unstable();
        out
    }
}

impl Tracking {
    fn new(
        layout: Layout,
        points: &[UnitPoint],
        numbers: &HashMap<usize, usize>,
        dealt: Option<&[super::progress::SpaceSnapshot]>,
        before: Option<&ProgressSnapshot>,
        parts_before: BTreeMap<Unit, (u16, Vec<u16>)>,
    ) -> Tracking {
        let mut spaces = Vec::with_capacity(points.len());
        let mut runs = HashMap::new();
        let mut readers = HashMap::new();
        let mut lists = HashMap::new();
        let mut below = std::collections::HashSet::new();
        for p in points {
            let mut nodes = vec![Arc::clone(&p.node)];
            while let Some(n) = nodes.pop() {
                if let Some(number) = numbers.get(&n.key()) {
                    below.insert(*number);
                }
                nodes.extend(n.inputs().iter().cloned());
            }
            let files = match &p.at {
                PointAt::Files { files, .. } => *files,
                _ => 0,
            };
            let dealt_space = dealt.and_then(|d| d.get(p.space as usize));
            let modulus = dealt_space.map_or(p.modulus, |d| d.modulus);
            let mut space = SpaceProgress::new(p.kind, modulus, files, p.signature.clone());
            // The lanes this host starts with: dealt ones, the ones of the checkpoint an
            // exact resume continues, or a new epoch's (files: added when listed).
            let start = dealt_space.or_else(|| before.and_then(|b| b.spaces.get(p.space as usize)));
            match start {
                Some(s) => {
                    for (key, lane) in &s.lanes {
                        space.add_lane(*key, Lane::from_snapshot(lane));
                    }
                }
                None if p.kind != SpaceKind::Files => {
                    space.add_lane((0, p.residue), Lane::new());
                }
                None => {}
            }
            spaces.push(space);
            let owned = dealt_space.map(|d| {
                let files = d
                    .lanes
                    .iter()
                    .filter(|(_, l)| !l.finished())
                    .map(|((f, _), _)| *f)
                    .collect();
                let first = d
                    .lanes
                    .iter()
                    .filter(|(_, l)| !l.finished())
                    .map(|((_, r), l)| r + l.first_open() * d.modulus)
                    .min()
                    .unwrap_or(u64::MAX);
                let mut seeks: HashMap<u64, Option<(u64, u64)>> = HashMap::new();
                for ((f, _), lane) in d.lanes.iter().filter(|(_, l)| !l.finished()) {
                    let slot = seeks.entry(*f).or_insert(lane.seek);
                    *slot = match (*slot, lane.seek) {
                        (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
                        _ => None,
                    };
                }
                Owned {
                    lanes: d.lanes.iter().map(|(k, l)| (*k, l.clone())).collect(),
                    files,
                    first,
                    seeks: seeks
                        .into_iter()
                        .filter_map(|(f, s)| s.map(|s| (f, s)))
                        .collect(),
                }
            });
            if let PointAt::Files { list, .. } = &p.at {
                lists.insert(list.key(), p.space);
                if let Some(n) = numbers.get(&p.node.key()) {
                    readers.insert(*n, p.space);
                }
            }
            runs.insert(
                p.node.key(),
                Arc::new(PointRun {
                    space: p.space,
                    kind: p.kind,
                    at: p.at.clone(),
                    modulus,
                    residue: p.residue,
                    owned,
                }),
            );
        }
        // The parts already delivered: an exact resume continues the stream that delivered
        // them (its splits make them again, to be skipped with the position); an elastic
        // resume's splitting stages leave them out.
        let progress = match before {
            Some(b) => Progress::new(spaces, &b.parts),
            None => Progress::new(spaces, &parts_before),
        };
        Tracking {
            layout,
            progress,
            points: runs,
            readers,
            lists,
            parts_before,
            below,
        }
    }

    /// Whether stage number `stage` is at or below a unit point (its records are not
    /// marked yet).
    pub(crate) fn below_points(&self, stage: usize) -> bool {
        self.below.contains(&stage)
    }

    /// The unit point at node `key`, if it is one.
    pub(crate) fn point(&self, key: usize) -> Option<&Arc<PointRun>> {
        self.points.get(&key)
    }

    /// The space of files whose list is node `key`, if it is one.
    pub(crate) fn list_space(&self, key: usize) -> Option<u16> {
        self.lists.get(&key).copied()
    }

    /// The point of a space.
    fn point_of(&self, space: u16) -> Option<&Arc<PointRun>> {
        self.points.values().find(|p| p.space == space)
    }

    /// A reader (stage number `stage`) reached the end of file `file` after `count`
    /// records.
    pub(crate) fn file_ended(&self, stage: usize, file: u64, count: u64) {
        if let Some(space) = self.readers.get(&stage) {
            self.progress.end_of_file(*space, file, count);
        }
    }

    /// A resumed epoch: where the reader (stage number `stage`) may start reading file
    /// `file`: (record index, byte offset).
    pub(crate) fn seek(&self, stage: usize, file: u64) -> Option<(u64, u64)> {
        let space = self.readers.get(&stage)?;
        self.point_of(*space)?.seek(file)
    }

    /// Whether part `unit` was delivered before this run (a resumed epoch).
    pub(crate) fn delivered_before(&self, unit: &Unit) -> bool {
        unit.parts > 0
            && self
                .parts_before
                .get(&unit.record())
                .is_some_and(|(_, done)| done.contains(&unit.part))
    }

    /// The file list of a space of files, read whole: a new epoch's lanes are its files; a
    /// resumed epoch reads the files it holds records of, from the whole list (`shard`s
    /// left out), in the list's order.
    pub(crate) fn read_list(
        &self,
        space: u16,
        list: &Arc<PlanNode>,
        open: impl FnOnce(&Arc<PlanNode>) -> Result<BoxStream>,
    ) -> Result<BoxStream> {
        let point = self.point_of(space);
        let owned = point.and_then(|p| p.owned.as_ref());
        let node = match owned {
            Some(_) => unsharded(list),
            None => Arc::clone(list),
        };
        let mut stream = open(&node)?;
        let mut files: Vec<Result<Element>> = Vec::new();
        while let Some(item) = stream.next() {
            let failed = item.is_err();
            files.push(item);
            if failed {
                break;
            }
        }
        match owned {
            None => {
                let keys = files
                    .iter()
                    .filter_map(|f| f.as_ref().ok())
                    .map(|e| e.id().source);
                self.progress.add_files(space, keys);
            }
            Some(owned) => files.retain(|f| match f {
                Ok(e) => owned.files.contains(&e.id().source),
                Err(_) => true,
            }),
        }
        Ok(Box::new(IterStream(files.into_iter())))
    }
}

impl ElasticRun {
    /// A new epoch, or one resumed exactly from this host's checkpoint (`before`, its
    /// progress then): records followed when the plan allows.
    pub(crate) fn start(
        layout: Layout,
        points: std::result::Result<Vec<UnitPoint>, String>,
        numbers: &HashMap<usize, usize>,
        before: Option<&ProgressSnapshot>,
    ) -> ElasticRun {
        match points {
            Err(why) => ElasticRun::Blocked { layout, why },
            Ok(points) => ElasticRun::Tracking(Box::new(Tracking::new(
                layout,
                &points,
                numbers,
                None,
                before,
                BTreeMap::new(),
            ))),
        }
    }

    /// An epoch resumed elastically: this host reads the lanes it was dealt.
    pub(crate) fn resumed(
        layout: Layout,
        points: &[UnitPoint],
        numbers: &HashMap<usize, usize>,
        dealt: &[super::progress::SpaceSnapshot],
        parts_before: BTreeMap<Unit, (u16, Vec<u16>)>,
    ) -> ElasticRun {
        ElasticRun::Tracking(Box::new(Tracking::new(
            layout,
            points,
            numbers,
            Some(dealt),
            None,
            parts_before,
        )))
    }

    /// The tracking, when records are followed.
    pub(crate) fn tracking(&self) -> Option<&Tracking> {
        match self {
            ElasticRun::Tracking(t) => Some(t),
            ElasticRun::Blocked { .. } => None,
        }
    }

    /// The epoch's layout.
    pub(crate) fn layout(&self) -> &Layout {
        match self {
            ElasticRun::Tracking(t) => &t.layout,
            ElasticRun::Blocked { layout, .. } => layout,
        }
    }
}

/// Counts the positions of a stream and keeps this host's records, each marked with its
/// [`Unit`]; at the end, the stream's length sets the lanes' ends.
pub(crate) struct PositionUnits {
    pub(crate) upstream: BoxStream,
    /// The position of the next element.
    pub(crate) next: u64,
    pub(crate) point: Arc<PointRun>,
    pub(crate) run: Arc<ElasticRun>,
    pub(crate) ended: bool,
}

impl ElementStream for PositionUnits {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let Some(item) = self.upstream.next() else {
                if !self.ended {
                    self.ended = true;
                    if let Some(t) = self.run.tracking() {
                        t.progress.end_of_stream(self.point.space, self.next);
                    }
                }
                return None;
            };
            let mut e = match item {
                Ok(e) => e,
                Err(e) => return Some(Err(e)),
            };
            let p = self.next;
            self.next += 1;
            if self.point.keeps(0, p) {
                if let Some(t) = self.run.tracking() {
                    t.progress.read(1);
                }
                e.set_units(Units::one(Unit::whole(self.point.space, 0, p)));
                return Some(Ok(e));
            }
        }
    }
}

/// Marks each record a file reader gives with its [`Unit`] (file, index), keeping only this
/// host's in a resumed epoch; notes where some records lie, for seek points.
pub(crate) struct FileUnits {
    pub(crate) upstream: BoxStream,
    pub(crate) point: Arc<PointRun>,
    pub(crate) run: Arc<ElasticRun>,
}

impl ElementStream for FileUnits {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let mut e = match self.upstream.next()? {
                Ok(e) => e,
                Err(e) => return Some(Err(e)),
            };
            if !e.units().is_empty() {
                // Stamped by the reader itself (a fused read-and-batch: a batch's records).
                return Some(Ok(e));
            }
            let id = e.id();
            let offset = e.provenance().map(|p| p.offset);
            if let Some(unit) = self
                .point
                .stamp(self.run.tracking(), id.source, id.index, offset)
            {
                e.set_units(Units::one(unit));
                return Some(Ok(e));
            }
        }
    }
}

/// What stages report of the records they read and leave out (see [`crate::RecordAccount`]).
impl crate::run::BuildContext {
    /// Reports the records of an element a predicate or function left out (`filter`, a
    /// filter plugin, a function that returned nothing): done, counted as filtered.
    pub fn filtered(&self, units: &Units) {
        self.dropped_as(units, super::progress::Fate::Filtered);
    }

    /// Reports the records of an element that failed under the skip error policy: done,
    /// counted as skipped (the error itself is counted by [`Self::on_error`]).
    pub fn skipped(&self, units: &Units) {
        self.dropped_as(units, super::progress::Fate::Skipped);
    }

    fn dropped_as(&self, units: &Units, fate: super::progress::Fate) {
        if let Some(t) = self.shared.elastic.as_ref().and_then(|e| e.tracking()) {
            t.progress.dropped_as(units, fate);
        }
    }

    /// `n` records read by this stage (a global shuffle marking its own).
    pub(crate) fn records_read(&self, n: u64) {
        if let Some(t) = self.shared.elastic.as_ref().and_then(|e| e.tracking()) {
            t.progress.read(n);
        }
    }

    /// `n` elements failed under the skip policy in this stage: when it is at or below a
    /// unit point, they are records read and skipped before being marked.
    pub(crate) fn skipped_below_points(&self, n: u64) {
        if let Some(t) = self.shared.elastic.as_ref().and_then(|e| e.tracking())
            && t.below_points(self.index)
        {
            t.progress.read_and_skipped(n);
        }
    }
}
