//! Merging the checkpoints of every host of a run, and dealing what remains of the epoch to
//! a new number of hosts.
//!
//! Every host of a run owns lanes; the lanes of all its hosts' checkpoints must cover each
//! space exactly (every file's residues, or every residue of a stream, once). What remains
//! is every lane not finished, each with its records not done. For `hosts` new hosts, each
//! space's lanes are dealt round-robin in a fixed order (the lanes with records left first,
//! then the finished ones, which a later resume needs to see covered), after splitting every
//! lane into `s` (records `residue + modulus × t`, `t < s`, of the lane become lanes of
//! modulus `modulus × s`) when there are too few to balance:
//!
//! - positions (a stream, a global shuffle): split so that the lanes left divide evenly
//!   among the hosts (every host reads the whole stream, or reads by position, so more
//!   lanes cost nothing);
//! - files: split only when there are too few files left for each host to get one and no
//!   host more than 1.25× another's count (the rule a new epoch uses), since hosts sharing a
//!   file each read all of it.
//!
//! Every host computes the same dealing from the same checkpoints, so no host talks to
//! another.

use std::collections::BTreeMap;

use crate::optimize::enough_files;

use super::lane::LaneSnapshot;
use super::progress::{LaneKey, ProgressSnapshot, SpaceKind, SpaceSnapshot};
use super::unit::Unit;

/// Lanes at most in a space of positions after a split for an even dealing; beyond, the
/// split stops at a balance within 1.25×.
const MOST_LANES: u64 = 1 << 16;

/// The spaces of all hosts of a run, merged.
#[derive(Debug, Clone)]
pub(crate) struct Merged {
    pub(crate) spaces: Vec<SpaceSnapshot>,
    pub(crate) parts: BTreeMap<Unit, (u16, Vec<u16>)>,
}

/// Merges the progress of every host of a run (`names` say which checkpoint each came from,
/// for errors), checking that together they cover every space exactly.
pub(crate) fn merge(hosts: &[(String, ProgressSnapshot)]) -> Result<Merged, String> {
    let Some((_, first)) = hosts.first() else {
        return Err("no checkpoints".into());
    };
    let n_spaces = first.spaces.len();
    let mut spaces: Vec<SpaceSnapshot> = first
        .spaces
        .iter()
        .map(|s| SpaceSnapshot {
            lanes: BTreeMap::new(),
            ..s.clone()
        })
        .collect();
    let mut owner: Vec<BTreeMap<LaneKey, &str>> = vec![BTreeMap::new(); n_spaces];
    let mut parts = BTreeMap::new();
    for (name, p) in hosts {
        if p.spaces.len() != n_spaces {
            return Err(format!(
                "{name} has {} unit spaces, {} has {n_spaces}: checkpoints of different pipelines",
                p.spaces.len(),
                hosts[0].0
            ));
        }
        for (i, s) in p.spaces.iter().enumerate() {
            let m = &mut spaces[i];
            if s.kind != m.kind || s.signature != m.signature || s.files != m.files {
                return Err(format!(
                    "{name} counts unit space {i} as {} ({}), {} as {} ({}): checkpoints of different pipelines",
                    s.kind.describe(),
                    s.signature,
                    hosts[0].0,
                    m.kind.describe(),
                    m.signature
                ));
            }
            if s.modulus != m.modulus {
                return Err(format!(
                    "{name} splits unit space {i} {} ways, {} {} ways: checkpoints of different runs",
                    s.modulus, hosts[0].0, m.modulus
                ));
            }
            for (key, lane) in &s.lanes {
                if let Some(other) = owner[i].insert(*key, name) {
                    return Err(format!(
                        "{name} and {other} both hold {} of unit space {i}: checkpoints of different runs, or one host's twice",
                        describe_lane(m.kind, *key)
                    ));
                }
                m.lanes.insert(*key, lane.clone());
            }
        }
        for (unit, done) in &p.parts {
            parts.insert(*unit, done.clone());
        }
    }
    for (i, s) in spaces.iter().enumerate() {
        let majors = match s.kind {
            SpaceKind::Files => s.files,
            _ => 1,
        };
        let expected = majors.saturating_mul(s.modulus);
        let bad = s
            .lanes
            .keys()
            .find(|(major, residue)| *major >= majors || *residue >= s.modulus);
        if let Some(key) = bad {
            return Err(format!(
                "unit space {i} has no {}",
                describe_lane(s.kind, *key)
            ));
        }
        if (s.lanes.len() as u64) < expected {
            let missing = (0..majors)
                .flat_map(|f| (0..s.modulus).map(move |r| (f, r)))
                .find(|k| !s.lanes.contains_key(k))
                .expect("fewer lanes than expected");
            return Err(format!(
                "no checkpoint holds {} of unit space {i} ({} of {expected} lanes are held): give the checkpoints of every host of the run",
                describe_lane(s.kind, missing),
                s.lanes.len()
            ));
        }
    }
    Ok(Merged { spaces, parts })
}

/// A lane as messages name it.
pub(crate) fn describe_lane(kind: SpaceKind, (major, residue): LaneKey) -> String {
    match kind {
        SpaceKind::Files => format!("file {major} (lane {residue})"),
        _ => format!("lane {residue}"),
    }
}

/// Host `host`'s share of `space` among `hosts`: the modulus after any split, and its lanes.
pub(crate) fn deal(space: &SpaceSnapshot, hosts: u64, host: u64) -> SpaceSnapshot {
    let hosts = hosts.max(1);
    let left = space.lanes.values().filter(|l| !l.finished()).count() as u64;
    let s = split_factor(space.kind, space.modulus, left, hosts);
    let m = space.modulus * s;
    let mut open: Vec<(LaneKey, LaneSnapshot)> = Vec::new();
    let mut finished: Vec<(LaneKey, LaneSnapshot)> = Vec::new();
    for ((major, residue), lane) in &space.lanes {
        for t in 0..s {
            let child = if s == 1 {
                lane.clone()
            } else {
                lane.split(s, t)
            };
            let key = (*major, residue + space.modulus * t);
            if child.finished() {
                finished.push((key, child));
            } else {
                open.push((key, child));
            }
        }
    }
    // Canonical order: by file, then by residue.
    open.sort_by_key(|(k, _)| *k);
    finished.sort_by_key(|(k, _)| *k);
    let lanes = open
        .into_iter()
        .enumerate()
        .chain(finished.into_iter().enumerate())
        .filter(|(i, _)| *i as u64 % hosts == host)
        .map(|(_, kl)| kl)
        .collect();
    SpaceSnapshot {
        kind: space.kind,
        modulus: m,
        files: space.files,
        signature: space.signature.clone(),
        lanes,
    }
}

/// How many ways to split every lane so that `left` lanes with records left deal well to
/// `hosts` hosts (see the [module docs](self)).
fn split_factor(kind: SpaceKind, modulus: u64, left: u64, hosts: u64) -> u64 {
    if left == 0 {
        return 1;
    }
    match kind {
        SpaceKind::Files => {
            if enough_files(left, hosts) {
                return 1;
            }
            (2..=hosts.max(2) * 4)
                .find(|s| enough_files(left * s, hosts))
                .unwrap_or(hosts)
        }
        SpaceKind::Positions | SpaceKind::Permutation => {
            let even = hosts / gcd(left, hosts);
            if modulus.saturating_mul(even) <= MOST_LANES {
                return even;
            }
            (1..=hosts * 4)
                .find(|s| enough_files(left * s, hosts))
                .unwrap_or(1)
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn space(
        kind: SpaceKind,
        files: u64,
        modulus: u64,
        lanes: Vec<(LaneKey, LaneSnapshot)>,
    ) -> SpaceSnapshot {
        SpaceSnapshot {
            kind,
            modulus,
            files,
            signature: "s".into(),
            lanes: lanes.into_iter().collect(),
        }
    }

    fn snap(spaces: Vec<SpaceSnapshot>) -> ProgressSnapshot {
        ProgressSnapshot {
            spaces,
            parts: BTreeMap::new(),
        }
    }

    #[test]
    fn merging_checks_that_every_lane_is_held_once() {
        let lane = LaneSnapshot::default();
        let a = snap(vec![space(
            SpaceKind::Positions,
            0,
            2,
            vec![((0, 0), lane.clone())],
        )]);
        let b = snap(vec![space(
            SpaceKind::Positions,
            0,
            2,
            vec![((0, 1), lane.clone())],
        )]);
        assert!(merge(&[("a".into(), a.clone()), ("b".into(), b)]).is_ok());
        let err = merge(&[("a".into(), a.clone())]).unwrap_err();
        assert!(err.contains("no checkpoint holds lane 1"), "{err}");
        let err = merge(&[("a".into(), a.clone()), ("a2".into(), a)]).unwrap_err();
        assert!(err.contains("a2 and a both hold lane 0"), "{err}");
    }

    proptest! {
        /// Dealt to any number of hosts, every lane's records left are held by exactly one
        /// host, and the shares of lanes left differ by at most one.
        #[test]
        fn dealing_covers_every_record_once(
            kind_files in any::<bool>(),
            files in 1u64..12,
            modulus in 1u64..5,
            hosts in 1u64..10,
            frontiers in proptest::collection::vec(0u64..30, 60),
        ) {
            let kind = if kind_files { SpaceKind::Files } else { SpaceKind::Positions };
            let majors = if kind_files { files } else { 1 };
            let mut lanes = Vec::new();
            let mut k = 0;
            for f in 0..majors {
                for r in 0..modulus {
                    let fr = frontiers[k % frontiers.len()];
                    k += 1;
                    let lane = LaneSnapshot {
                        frontier: fr,
                        end: (fr % 3 == 0).then_some(fr),
                        holes: (0..fr).filter(|j| j % 7 == 3).collect(),
                        seek: None,
                    };
                    lanes.push(((f, r), lane));
                }
            }
            let whole = space(kind, if kind_files { files } else { 0 }, modulus, lanes);
            let shares: Vec<SpaceSnapshot> = (0..hosts).map(|h| deal(&whole, hosts, h)).collect();
            // The shares merge back into a partition of the split space.
            let merged = merge(
                &shares
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (format!("host {i}"), snap(vec![s.clone()])))
                    .collect::<Vec<_>>(),
            )
            .unwrap();
            let m2 = merged.spaces[0].modulus;
            // Every record (below 40 per lane) is done in the split space exactly when it
            // was before.
            for ((f, r), lane) in &whole.lanes {
                for j in 0..40u64 {
                    let record = r + j * modulus;
                    let key = (*f, record % m2);
                    let child = &merged.spaces[0].lanes[&key];
                    prop_assert_eq!(child.is_done(record / m2), lane.is_done(j));
                }
            }
            let open: Vec<usize> = shares
                .iter()
                .map(|s| s.lanes.values().filter(|l| !l.finished()).count())
                .collect();
            let (lo, hi) = (open.iter().min().unwrap(), open.iter().max().unwrap());
            prop_assert!(hi - lo <= 1, "{:?}", open);
        }
    }
}
