//! [`compare`]: two runs side by side: which is faster and by how much, and the figures
//! that differ (throughput, wall time, each stage's busy share and times per element, the
//! bottleneck).

use crate::format::{maybe_seconds, number, percent, seconds};
use crate::run::{Run, Stage, StageExt};

/// One line of the differences table.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffRow {
    /// What is compared (`elements/s`, `map#2 busy`).
    pub what: String,
    /// Run A's figure, as text.
    pub a: String,
    /// Run B's.
    pub b: String,
    /// B relative to A (`+35%`, `−12%`), empty when not a number or not comparable.
    pub change: String,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Throughput of B over A (elements/s); `None` when A's is zero.
    pub ratio: Option<f64>,
    /// The verdict in words: `B is 1.35× as fast as A (+35% elements/s)`.
    pub verdict: String,
    /// The differences table.
    pub rows: Vec<DiffRow>,
}

/// `b` relative to `a` as a signed percentage.
fn change(a: f64, b: f64) -> String {
    if a == 0.0 || !a.is_finite() || !b.is_finite() {
        return String::new();
    }
    let c = (b - a) / a * 100.0;
    if c.abs() < 0.05 {
        "±0%".into()
    } else if c > 0.0 {
        format!("+{c:.1}%")
    } else {
        format!("−{:.1}%", -c)
    }
}

/// Stages of `b` matched to those of `a`: the k-th stage of a kind in one with the k-th of
/// that kind in the other (numbers may shift when a stage is added).
fn matched<'a>(a: &'a Run, b: &'a Run) -> Vec<(&'a Stage, Option<&'a Stage>)> {
    a.stages
        .iter()
        .map(|s| {
            let k = a
                .stages
                .iter()
                .take_while(|x| x.index != s.index)
                .filter(|x| x.name == s.name)
                .count();
            (s, b.stages.iter().filter(|x| x.name == s.name).nth(k))
        })
        .collect()
}

/// `a` and `b` compared: the verdict and the differences table.
pub fn compare(a: &Run, b: &Run) -> Comparison {
    let ratio = (a.elements_per_s > 0.0).then(|| b.elements_per_s / a.elements_per_s);
    let verdict = match ratio {
        None => "A produced nothing per second: no speed to compare.".to_string(),
        Some(r) if (r - 1.0).abs() < 0.02 => format!(
            "A and B are about as fast ({} and {} elements/s, {}).",
            number(a.elements_per_s),
            number(b.elements_per_s),
            change(a.elements_per_s, b.elements_per_s)
        ),
        Some(r) if r > 1.0 => format!(
            "B is faster: {}× A's throughput ({} vs {} elements/s, {}).",
            number(r),
            number(b.elements_per_s),
            number(a.elements_per_s),
            change(a.elements_per_s, b.elements_per_s)
        ),
        Some(r) => format!(
            "A is faster: {}× B's throughput ({} vs {} elements/s; B {}).",
            if r > 0.0 {
                number(1.0 / r)
            } else {
                "∞".into()
            },
            number(a.elements_per_s),
            number(b.elements_per_s),
            change(a.elements_per_s, b.elements_per_s)
        ),
    };
    let mut rows = vec![
        DiffRow {
            what: "elements/s".into(),
            a: number(a.elements_per_s),
            b: number(b.elements_per_s),
            change: change(a.elements_per_s, b.elements_per_s),
        },
        DiffRow {
            what: "wall time".into(),
            a: seconds(a.seconds),
            b: seconds(b.seconds),
            change: change(a.seconds, b.seconds),
        },
        DiffRow {
            what: "elements".into(),
            a: a.elements.to_string(),
            b: b.elements.to_string(),
            change: change(a.elements as f64, b.elements as f64),
        },
        DiffRow {
            what: "bottleneck".into(),
            a: a.bottleneck_stage()
                .map_or_else(|| "none".into(), Stage::id),
            b: b.bottleneck_stage()
                .map_or_else(|| "none".into(), Stage::id),
            change: String::new(),
        },
    ];
    for (sa, sb) in matched(a, b) {
        let id = sa.id();
        let Some(sb) = sb else {
            rows.push(DiffRow {
                what: id.clone(),
                a: "ran".into(),
                b: "not in B".into(),
                change: String::new(),
            });
            continue;
        };
        rows.push(DiffRow {
            what: format!("{id} busy"),
            a: format!("{} of {}", percent(sa.busy_fraction), sa.thread_count()),
            b: format!("{} of {}", percent(sb.busy_fraction), sb.thread_count()),
            change: change(sa.busy_fraction, sb.busy_fraction),
        });
        for (name, pa, pb) in [
            ("p50", sa.element_p50_seconds, sb.element_p50_seconds),
            ("p99", sa.element_p99_seconds, sb.element_p99_seconds),
        ] {
            if pa.is_none() && pb.is_none() {
                continue;
            }
            rows.push(DiffRow {
                what: format!("{id} {name}"),
                a: maybe_seconds(pa),
                b: maybe_seconds(pb),
                change: match (pa, pb) {
                    (Some(x), Some(y)) => change(x, y),
                    _ => String::new(),
                },
            });
        }
    }
    Comparison {
        ratio,
        verdict,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(eps: f64, secs: f64, busy: f64, p50: f64) -> Run {
        Run {
            elements_per_s: eps,
            seconds: secs,
            elements: (eps * secs) as u64,
            stages: vec![
                Stage {
                    index: 0,
                    name: "range".into(),
                    ..Stage::default()
                },
                Stage {
                    index: 1,
                    name: "map".into(),
                    workers: 2,
                    busy_fraction: busy,
                    caused_wait_seconds: 1.0,
                    element_p50_seconds: Some(p50),
                    element_p99_seconds: Some(p50 * 2.0),
                    ..Stage::default()
                },
            ],
            ..Run::default()
        }
    }

    #[test]
    fn says_which_is_faster_and_by_how_much() {
        let c = compare(&run(100.0, 10.0, 0.9, 0.02), &run(135.0, 7.4, 0.6, 0.01));
        assert!((c.ratio.unwrap() - 1.35).abs() < 1e-9);
        assert!(c.verdict.starts_with("B is faster: 1.35×"), "{}", c.verdict);
        assert_eq!(c.rows[0].change, "+35.0%");
        assert_eq!(c.rows[1].change, "−26.0%");
        let busy = c.rows.iter().find(|r| r.what == "map#1 busy").unwrap();
        assert_eq!((busy.a.as_str(), busy.b.as_str()), ("90% of 2", "60% of 2"));
        let p50 = c.rows.iter().find(|r| r.what == "map#1 p50").unwrap();
        assert_eq!(
            (p50.a.as_str(), p50.b.as_str(), p50.change.as_str()),
            ("20 ms", "10 ms", "−50.0%")
        );
        let bn = c.rows.iter().find(|r| r.what == "bottleneck").unwrap();
        assert_eq!(bn.a, "map#1");
        let c = compare(&run(100.0, 10.0, 0.9, 0.02), &run(50.0, 20.0, 0.9, 0.02));
        assert!(c.verdict.starts_with("A is faster: 2×"), "{}", c.verdict);
        let c = compare(&run(100.0, 10.0, 0.9, 0.02), &run(101.0, 10.0, 0.9, 0.02));
        assert!(c.verdict.contains("about as fast"), "{}", c.verdict);
    }

    #[test]
    fn stages_missing_from_b_are_named() {
        let a = run(10.0, 1.0, 0.5, 0.1);
        let mut b = a.clone();
        b.stages.truncate(1);
        let c = compare(&a, &b);
        assert!(
            c.rows
                .iter()
                .any(|r| r.what == "map#1" && r.b == "not in B")
        );
    }
}
