//! [`render`]: the report page of one run, or of two compared (A and B): one HTML file
//! with inline CSS and inline SVG, no script, no network.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::compare::compare;
use crate::explain::explain;
use crate::format::{bytes, escape, maybe_seconds, number, percent, seconds};
use crate::rate::{rates, window};
use crate::run::{Run, StageExt};
use crate::svg::{Bar, Bars, LineChart, Series, Strip, StripRow, color};

const CSS: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;background:#fafafa;color:#1b1b1b;line-height:1.45}
main{max-width:1040px;margin:0 auto;padding:18px 24px 40px}
h1{font-size:1.5em;margin:.2em 0 .1em}h2{font-size:1.15em;margin:1.6em 0 .4em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.sub{color:#555;margin:0 0 .8em}
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(190px,1fr));gap:6px 14px;background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:10px 14px;margin:.5em 0}
.facts div.wide{grid-column:span 2}
.facts div span{display:block;color:#666;font-size:.8em}.facts div b{font-weight:600;overflow-wrap:anywhere}
.explain{background:#fff8e6;border:1px solid #f0d48a;border-radius:6px;padding:10px 16px;margin:.5em 0}
.explain p{margin:.35em 0}.explain .do{font-weight:600}
.note{background:#eef4fb;border:1px solid #bcd3ee;border-radius:6px;padding:8px 14px;margin:.5em 0}
.verdict{font-size:1.1em;font-weight:600}
svg.plot{display:block;width:100%;height:auto;background:#fff;border:1px solid #e3e3e3;border-radius:6px;margin:.5em 0}
table{border-collapse:collapse;background:#fff;font-size:.88em;margin:.5em 0;width:100%}
th,td{border:1px solid #e3e3e3;padding:3px 7px;text-align:right}th{background:#f2f2f2}
td:first-child,th:first-child,td.l{text-align:left}
.tag{display:inline-block;font-weight:700;border-radius:3px;padding:0 6px;color:#fff;margin-right:4px}
footer{color:#777;font-size:.8em;margin-top:2em}
"#;

/// The page for `runs`: one run, or two compared (the first is A, the second B). More than
/// two: the first two.
pub fn render(runs: &[Run]) -> String {
    let runs = &runs[..runs.len().min(2)];
    let mut p = Page::default();
    let title = match runs {
        [] => "Sluice report".to_string(),
        [a] => format!("Sluice run: {}", name(a)),
        [a, b, ..] if name(a) == name(b) => format!("Sluice runs compared: {}", name(a)),
        [a, b, ..] => format!("Sluice runs compared: {} and {}", name(a), name(b)),
    };
    let _ = write!(
        p.s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{t}</title><style>{CSS}</style></head><body><main><h1>{t}</h1>",
        t = escape(&title)
    );
    if runs.is_empty() {
        p.s.push_str("<p class=\"note\">No run to report.</p>");
    }
    let two = runs.len() == 2;
    p.s.push_str("<p class=\"sub\">What limited the pipeline, where its time went and how it changed over the run. Hover over a line or bar for its name and value.</p>");
    for (i, r) in runs.iter().enumerate() {
        header(&mut p, r, two.then_some(i));
    }
    if two {
        comparison(&mut p, &runs[0], &runs[1]);
    }
    p.h2("bottleneck", "The bottleneck");
    for (i, r) in runs.iter().enumerate() {
        bottleneck(&mut p, r, two.then_some(i));
    }
    missing_timelines(&mut p, runs);
    throughput(&mut p, runs);
    busy(&mut p, runs);
    queues(&mut p, runs);
    bottleneck_strip(&mut p, runs);
    autotune(&mut p, runs);
    p.h2("stages", "Per stage");
    for (i, r) in runs.iter().enumerate() {
        stage_table(&mut p, r, two.then_some(i));
    }
    events(&mut p, runs);
    p.s.push_str("<footer>Made by <code>sluice report</code> from the JSON of <code>sluice run --json</code>. Busy: time at work, summed over a stage's threads; starved: waiting on its input; blocked: waiting on a full output buffer; waited on: the time its consumer waited on it.</footer></main></body></html>\n");
    p.s
}

#[derive(Default)]
struct Page {
    s: String,
}

impl Page {
    fn h2(&mut self, id: &str, title: &str) {
        let _ = write!(self.s, "<h2 id=\"{id}\">{}</h2>", escape(title));
    }
    fn note(&mut self, text: &str) {
        let _ = write!(self.s, "<p class=\"note\">{}</p>", escape(text));
    }
}

fn name(r: &Run) -> String {
    r.pipeline.clone().unwrap_or_else(|| {
        if r.file.is_empty() {
            r.label.clone()
        } else {
            r.file.clone()
        }
    })
}

/// `A` or `B`.
fn letter(i: usize) -> &'static str {
    if i == 0 { "A" } else { "B" }
}

/// The run's tag before a heading: a coloured `A` / `B` (nothing for a single run).
fn tag(which: Option<usize>) -> String {
    which.map_or_else(String::new, |i| {
        format!(
            "<span class=\"tag\" style=\"background:{}\">{}</span>",
            run_color(i),
            letter(i)
        )
    })
}

fn run_color(i: usize) -> &'static str {
    color(i)
}

/// A series name: `X`, or `A: X` when comparing.
fn prefixed(which: Option<usize>, x: &str) -> String {
    which.map_or_else(|| x.to_string(), |i| format!("{}: {x}", letter(i)))
}

fn fact(p: &mut Page, label: &str, value: &str) {
    let _ = write!(
        p.s,
        "<div><span>{}</span><b>{}</b></div>",
        escape(label),
        escape(value)
    );
}

/// A fact two columns wide (a path, the record account).
fn wide_fact(p: &mut Page, label: &str, value: &str) {
    let _ = write!(
        p.s,
        "<div class=\"wide\"><span>{}</span><b>{}</b></div>",
        escape(label),
        escape(value)
    );
}

fn header(p: &mut Page, r: &Run, which: Option<usize>) {
    let _ = write!(
        p.s,
        "<h2 id=\"run{}\">{}{}</h2>",
        which.unwrap_or(0),
        tag(which),
        escape(&format!("Run {}", r.label))
    );
    p.s.push_str("<div class=\"facts\">");
    fact(p, "pipeline", r.pipeline.as_deref().unwrap_or("(unnamed)"));
    wide_fact(p, "file", if r.file.is_empty() { "–" } else { &r.file });
    fact(
        p,
        "started (UTC)",
        &r.started_unix.map_or_else(|| "–".into(), utc),
    );
    fact(p, "Sluice", r.sluice_version.as_deref().unwrap_or("–"));
    fact(
        p,
        "CPUs",
        &r.cpus.map_or_else(|| "–".into(), |c| c.to_string()),
    );
    fact(
        p,
        "elements (batches)",
        &format!("{} ({})", r.elements, r.batches),
    );
    fact(p, "epochs", &r.epochs.to_string());
    fact(p, "wall time", &seconds(r.seconds));
    fact(p, "elements/s", &number(r.elements_per_s));
    let records = r.records.as_ref().map_or_else(
        || "not followed".to_string(),
        |a| {
            format!(
                "{} read = {} delivered + {} skipped + {} filtered + {} dropped + {} unfinished",
                a.read, a.delivered, a.skipped, a.filtered, a.dropped, a.unfinished
            )
        },
    );
    wide_fact(p, "records", &records);
    if let Some(n) = r.interrupted {
        fact(p, "interrupted", &format!("by Ctrl-C after {n} elements"));
    }
    p.s.push_str("</div>");
}

/// Seconds since the Unix epoch as `YYYY-MM-DD hh:mm:ss` UTC.
fn utc(t: f64) -> String {
    let secs = t.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn bottleneck(p: &mut Page, r: &Run, which: Option<usize>) {
    let e = explain(r);
    p.s.push_str("<div class=\"explain\">");
    let head = match &e.stage {
        Some(s) => format!("The bottleneck is {s}."),
        None => "No bottleneck.".into(),
    };
    let _ = write!(p.s, "<p>{}<b>{}</b></p>", tag(which), escape(&head));
    for f in &e.facts {
        let _ = write!(p.s, "<p>{}</p>", escape(f));
    }
    let _ = write!(p.s, "<p class=\"do\">{}</p></div>", escape(&e.suggestion));
}

fn comparison(p: &mut Page, a: &Run, b: &Run) {
    let c = compare(a, b);
    p.h2("compare", "A and B compared");
    let _ = write!(p.s, "<p class=\"verdict\">{}</p>", escape(&c.verdict));
    p.s.push_str(
        "<table class=\"diff\"><tr><th>figure</th><th>A</th><th>B</th><th>B vs A</th></tr>",
    );
    for row in &c.rows {
        let _ = write!(
            p.s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&row.what),
            escape(&row.a),
            escape(&row.b),
            escape(&row.change)
        );
    }
    p.s.push_str("</table>");
}

fn missing_timelines(p: &mut Page, runs: &[Run]) {
    for (i, r) in runs.iter().enumerate() {
        let who = if runs.len() == 2 {
            format!("Run {} ({})", letter(i), r.label)
        } else {
            format!("Run {}", r.label)
        };
        match &r.timeline {
            None => p.note(&format!(
                "{who} has no timeline (JSON from a Sluice before timelines, or a run stopped before its first sample): the plots over time below show nothing for it; the totals above and the tables are complete."
            )),
            Some(t) if t.samples.is_empty() => p.note(&format!(
                "{who}'s timeline has no samples (the run ended before the first one, {} in): the plots over time show nothing for it.",
                seconds(t.interval_seconds)
            )),
            Some(_) => {}
        }
    }
}

/// Epoch starts after the first, as markers: from the `epoch` events, else from the
/// samples' epoch numbers.
fn epoch_markers(r: &Run, which: Option<usize>) -> Vec<(f64, String)> {
    let Some(t) = &r.timeline else {
        return Vec::new();
    };
    let from_events: Vec<(f64, String)> = t
        .events
        .iter()
        .filter(|e| e.kind == "epoch" && e.t > 0.05)
        .map(|e| (e.t, prefixed(which, &e.text.replace(" started", ""))))
        .collect();
    if !from_events.is_empty() {
        return from_events;
    }
    t.samples
        .windows(2)
        .filter(|w| w[1].epoch != w[0].epoch)
        .map(|w| (w[1].t, prefixed(which, &format!("epoch {}", w[1].epoch))))
        .collect()
}

/// Whether the samples count records delivered (through the batch dimension): every one
/// has `records` (runs that follow their records, from a Sluice that counts them).
fn counts_records(r: &Run) -> bool {
    !r.samples().is_empty() && r.samples().iter().all(|s| s.records.is_some())
}

/// What the timeline counts as the pipeline's output: `records` when the samples count
/// them (rows through the batch dimension), `batches` when it ends in a batch (its samples
/// count the batches, the run's totals their rows), else `elements`.
fn output_unit(r: &Run) -> &'static str {
    if counts_records(r) {
        return "records";
    }
    let last = r.samples().last().map_or(0, |s| s.elements);
    if r.batches > 0 && last == r.batches && r.elements > r.batches {
        "batches"
    } else {
        "elements"
    }
}

fn throughput(p: &mut Page, runs: &[Run]) {
    p.h2("throughput", "Throughput over time");
    p.s.push_str("<p>The pipeline's output per second (records, counted through the batch dimension, when the run follows its records; else batches per second when it ends in a batch), averaged over a moving window (three of the run's output steps at least: a pipeline ending in a batch hands out its elements in bursts); dotted lines mark epochs.</p>");
    let two = runs.len() == 2;
    let mut chart = LineChart {
        title: "Pipeline output".into(),
        x_label: "seconds since the run started".into(),
        y_label: "per second".into(),
        ..LineChart::default()
    };
    for (i, r) in runs.iter().enumerate() {
        let which = two.then_some(i);
        chart.series.push(Series {
            name: prefixed(
                which,
                &format!(
                    "{} {}/s ({} average)",
                    r.label,
                    output_unit(r),
                    seconds(window(r))
                ),
            ),
            color: run_color(i).into(),
            points: if counts_records(r) {
                rates(r.samples(), window(r), |s| s.records.map(|n| n as f64))
            } else {
                rates(r.samples(), window(r), |s| Some(s.elements as f64))
            },
            step: false,
            dashed: i == 1,
        });
        chart.markers.extend(epoch_markers(r, which));
    }
    p.s.push_str(&chart.render());
    // Per stage: the elements each hands downstream per second.
    let mut chart = LineChart {
        title: "Elements out per stage".into(),
        x_label: "seconds since the run started".into(),
        y_label: "elements/s".into(),
        ..LineChart::default()
    };
    for (i, r) in runs.iter().enumerate() {
        for st in &r.stages {
            let points = rates(r.samples(), window(r), |s| {
                s.stages
                    .iter()
                    .find(|x| x.index == st.index)
                    .map(|x| x.elements_out as f64)
            });
            chart.series.push(Series {
                name: prefixed(two.then_some(i), &st.id()),
                color: color(st.index).into(),
                points,
                step: false,
                dashed: i == 1,
            });
        }
    }
    p.s.push_str(&chart.render());
}

fn busy(p: &mut Page, runs: &[Run]) {
    p.h2("busy", "Where each stage's time went");
    p.s.push_str("<p>Per stage, its threads' time summed: at work (busy), waiting on its input (starved, idle) and waiting on a full output buffer (blocked). A stage that is busy all the time limits the run; one that is starved waits on a slower stage above it.</p>");
    let two = runs.len() == 2;
    let mut bars = Vec::new();
    if two {
        // Interleaved: A's and B's bar of each stage together.
        let (a, b) = (&runs[0], &runs[1]);
        let n = a.stages.len().max(b.stages.len());
        for k in 0..n {
            for (i, r) in [a, b].into_iter().enumerate() {
                if let Some(s) = r.stages.get(k) {
                    bars.push(stage_bar(s, Some(i)));
                }
            }
        }
    } else if let Some(r) = runs.first() {
        bars.extend(r.stages.iter().map(|s| stage_bar(s, None)));
    }
    let chart = Bars {
        title: "Busy, starved and blocked time per stage".into(),
        x_label: "seconds (summed over the stage's threads)".into(),
        parts: vec![
            ("busy".into(), "#d62728".into()),
            ("starved (waiting upstream)".into(), "#9ecae1".into()),
            ("blocked (waiting downstream)".into(), "#fdae6b".into()),
        ],
        bars,
        unit: seconds,
    };
    p.s.push_str(&chart.render());
}

fn stage_bar(s: &crate::run::Stage, which: Option<usize>) -> Bar {
    Bar {
        label: prefixed(which, &s.id()),
        values: vec![
            s.busy_seconds,
            s.wait_upstream_seconds,
            s.wait_downstream_seconds,
        ],
    }
}

fn queues(p: &mut Page, runs: &[Run]) {
    p.h2("queues", "Queue occupancy over time");
    p.s.push_str("<p>How full each stage's output buffer was (elements held over its capacity): a buffer near empty means its producer is slower than its consumer; near full, the consumer is slower. Below, the bytes all buffers held (the byte ledger).</p>");
    let two = runs.len() == 2;
    let mut chart = LineChart {
        title: "Buffer occupancy (share of capacity)".into(),
        x_label: "seconds since the run started".into(),
        y_label: "occupancy".into(),
        y_max: Some(1.0),
        ..LineChart::default()
    };
    let mut bytes_chart = LineChart {
        title: "Bytes buffered".into(),
        x_label: "seconds since the run started".into(),
        y_label: "MiB".into(),
        ..LineChart::default()
    };
    for (i, r) in runs.iter().enumerate() {
        let which = two.then_some(i);
        // The stages that had a buffer at some sample.
        let mut buffered: BTreeMap<usize, Vec<(f64, f64)>> = BTreeMap::new();
        for s in r.samples() {
            for st in &s.stages {
                if st.buffer_capacity > 0 {
                    buffered
                        .entry(st.index)
                        .or_default()
                        .push((s.t, st.buffer_len as f64 / st.buffer_capacity as f64));
                }
            }
        }
        for (index, points) in buffered {
            chart.series.push(Series {
                name: prefixed(which, &format!("{}#{index}", r.stage_name(index))),
                color: color(index).into(),
                points,
                step: true,
                dashed: i == 1,
            });
        }
        bytes_chart.series.push(Series {
            name: prefixed(which, &format!("{} buffered", r.label)),
            color: run_color(i).into(),
            points: r
                .samples()
                .iter()
                .map(|s| (s.t, s.buffered_bytes as f64 / (1024.0 * 1024.0)))
                .collect(),
            step: true,
            dashed: i == 1,
        });
    }
    if chart.series.is_empty() && runs.iter().any(|r| !r.samples().is_empty()) {
        p.note("No stage has an output buffer (no prefetch, no parallel stage with a buffer).");
    }
    p.s.push_str(&chart.render());
    p.s.push_str(&bytes_chart.render());
    let peak = runs
        .iter()
        .flat_map(|r| r.samples().iter().map(|s| s.buffered_bytes))
        .max();
    if let Some(peak) = peak {
        let _ = write!(
            p.s,
            "<p>At most {} buffered at a sample.</p>",
            escape(&bytes(peak as f64))
        );
    }
}

fn bottleneck_strip(p: &mut Page, runs: &[Run]) {
    p.h2("bottleneck-time", "The bottleneck over time");
    p.s.push_str("<p>Each interval between samples coloured by the stage the pipeline waited on most in it (grey: nothing waited).</p>");
    let two = runs.len() == 2;
    let mut categories: BTreeMap<usize, String> = BTreeMap::new();
    let mut rows = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let mut spans = Vec::new();
        let mut t0 = 0.0;
        for s in r.samples() {
            if let Some(k) = s.bottleneck {
                categories
                    .entry(k)
                    .or_insert_with(|| format!("{}#{k}", r.stage_name(k)));
            }
            if s.t > t0 {
                spans.push((t0, s.t, s.bottleneck));
            }
            t0 = s.t;
        }
        let label = if two {
            letter(i).to_string()
        } else {
            "bottleneck".into()
        };
        rows.push(StripRow { label, spans });
    }
    let strip = Strip {
        title: "Bottleneck stage per interval".into(),
        rows,
        categories: categories.into_iter().collect(),
        x_label: "seconds since the run started".into(),
    };
    p.s.push_str(&strip.render());
}

fn autotune(p: &mut Page, runs: &[Run]) {
    p.h2("autotune", "Autotune");
    p.s.push_str("<p>The values autotune set over time (threads of parallel stages, prefetch buffer sizes), and each decision with its reason.</p>");
    let two = runs.len() == 2;
    let mut chart = LineChart {
        title: "Knob values".into(),
        x_label: "seconds since the run started".into(),
        y_label: "value".into(),
        ..LineChart::default()
    };
    for (i, r) in runs.iter().enumerate() {
        let mut knobs: BTreeMap<(String, String), Vec<(f64, f64)>> = BTreeMap::new();
        for s in r.samples() {
            for k in &s.knobs {
                knobs
                    .entry((k.stage.clone(), k.knob.clone()))
                    .or_default()
                    .push((s.t, k.value as f64));
            }
        }
        for (n, ((stage, knob), points)) in knobs.into_iter().enumerate() {
            chart.series.push(Series {
                name: prefixed(two.then_some(i), &format!("{stage} {knob}")),
                color: color(n + 2).into(),
                points,
                step: true,
                dashed: i == 1,
            });
        }
    }
    p.s.push_str(&chart.render());
    for (i, r) in runs.iter().enumerate() {
        let which = two.then_some(i);
        if r.autotune.is_empty() {
            let _ = write!(
                p.s,
                "<p>{}Autotune made no decisions in this run.</p>",
                tag(which)
            );
            continue;
        }
        let _ = write!(
            p.s,
            "<p>{}{} decisions:</p><table class=\"decisions\"><tr><th>time</th><th>stage</th><th>knob</th><th>from → to</th><th>reason</th></tr>",
            tag(which),
            r.autotune.len()
        );
        for d in &r.autotune {
            let _ = write!(
                p.s,
                "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{} → {}</td><td class=\"l\">{}</td></tr>",
                escape(&seconds(d.at_seconds)),
                escape(&d.stage),
                escape(&d.knob),
                d.from,
                d.to,
                escape(&d.reason)
            );
        }
        p.s.push_str("</table>");
    }
}

fn stage_table(p: &mut Page, r: &Run, which: Option<usize>) {
    if which.is_some() {
        let _ = write!(p.s, "<p>{}{}</p>", tag(which), escape(&r.label));
    }
    p.s.push_str("<table class=\"stages\"><tr><th>stage</th><th>in</th><th>out</th><th>threads</th><th>busy</th><th>p50</th><th>p99</th><th>starved</th><th>blocked</th><th>waited on</th><th>caused</th><th>buffer (mean / cap)</th></tr>");
    let bottleneck = r.bottleneck_stage().map(|s| s.index);
    for s in &r.stages {
        let star = if Some(s.index) == bottleneck {
            " ◀ bottleneck"
        } else {
            ""
        };
        let buffer = if s.buffer_capacity > 0 {
            format!("{} / {}", number(s.buffer_mean), s.buffer_capacity)
        } else {
            "–".into()
        };
        let _ = write!(
            p.s,
            "<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&s.id()),
            star,
            s.elements_in,
            s.elements_out,
            s.thread_count(),
            percent(s.busy_fraction),
            escape(&maybe_seconds(s.element_p50_seconds)),
            escape(&maybe_seconds(s.element_p99_seconds)),
            escape(&seconds(s.wait_upstream_seconds)),
            escape(&seconds(s.wait_downstream_seconds)),
            escape(&seconds(s.consumer_wait_seconds)),
            escape(&seconds(s.caused_wait_seconds)),
            escape(&buffer)
        );
    }
    p.s.push_str("</table>");
}

fn events(p: &mut Page, runs: &[Run]) {
    const SHOWN: usize = 40;
    let any = runs
        .iter()
        .any(|r| r.timeline.as_ref().is_some_and(|t| !t.events.is_empty()));
    if !any {
        return;
    }
    p.h2("events", "Events");
    for (i, r) in runs.iter().enumerate() {
        let Some(t) = &r.timeline else { continue };
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for e in &t.events {
            *counts.entry(e.kind.as_str()).or_default() += 1;
        }
        let summary: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = write!(
            p.s,
            "<p>{}{}{}</p><table class=\"events\"><tr><th>time</th><th>kind</th><th>what</th></tr>",
            tag((runs.len() == 2).then_some(i)),
            escape(&summary.join(", ")),
            if t.events_dropped > 0 {
                format!(" (and {} not kept)", t.events_dropped)
            } else {
                String::new()
            }
        );
        for e in t.events.iter().take(SHOWN) {
            let _ = write!(
                p.s,
                "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                escape(&seconds(e.t)),
                escape(&e.kind),
                escape(&e.text)
            );
        }
        p.s.push_str("</table>");
        if t.events.len() > SHOWN {
            let _ = write!(p.s, "<p>… {} more.</p>", t.events.len() - SHOWN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_run() -> Run {
        Run::from_json(include_str!("../tests/data/sample-run.json"))
            .unwrap()
            .with_label("sample.json")
    }

    #[test]
    fn one_run_has_every_section_and_plot() {
        let html = render(&[sample_run()]);
        for id in [
            "bottleneck",
            "throughput",
            "busy",
            "queues",
            "bottleneck-time",
            "autotune",
            "stages",
        ] {
            assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
        }
        assert!(html.contains("The bottleneck is image_ops#3."));
        assert!(html.contains("CPUs are the limit"));
        // Every plot drew something: series, bars or spans.
        assert_eq!(html.matches("<svg").count(), 7);
        assert!(!html.contains("nothing was recorded"));
        assert!(html.matches("class=\"series\"").count() >= 8);
        assert!(html.contains("epoch 1"));
        assert!(!html.contains("<script"));
        assert!(
            !html.contains("http://")
                || html.matches("http://").count()
                    == html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
        );
        assert!(html.contains("2026-11-26"));
    }

    #[test]
    fn two_runs_are_labelled_and_compared() {
        let a = sample_run().with_label("a.json");
        let mut b = sample_run().with_label("b.json");
        b.elements_per_s *= 2.0;
        let html = render(&[a, b]);
        assert!(html.contains("A and B compared"));
        assert!(html.contains("B is faster: 2×"));
        assert!(html.contains("A: a.json batches/s (") && html.contains("B: b.json batches/s ("));
        assert!(html.contains("A: image_ops#3") && html.contains("B: image_ops#3"));
        assert!(html.contains("stroke-dasharray=\"6,4\""));
    }

    #[test]
    fn names_are_escaped() {
        let mut r = sample_run();
        r.stages[3].name = "plugin:<evil & co>".into();
        r.pipeline = Some("<script>alert(1)</script>".into());
        let html = render(&[r]);
        assert!(!html.contains("<evil") && !html.contains("<script>alert"));
        assert!(html.contains("plugin:&lt;evil &amp; co&gt;#3"));
    }

    #[test]
    fn a_run_without_timeline_or_samples_renders_what_it_has() {
        let mut r = sample_run();
        r.timeline = None;
        let html = render(&[r.clone()]);
        assert!(html.contains("has no timeline"));
        assert!(html.contains("The bottleneck is image_ops#3."));
        assert!(html.contains("nothing was recorded"));
        r.timeline = Some(Default::default());
        let html = render(&[r]);
        assert!(html.contains("has no samples"));
    }

    #[test]
    fn a_single_stage_run_renders() {
        let r = Run::from_json(
            r#"{"elements": 5, "seconds": 0.5, "elements_per_s": 10, "stages": [{"index": 0, "name": "range", "caused_wait_seconds": 0.1, "busy_fraction": 0.5, "element_p50_seconds": 0.001, "element_p99_seconds": 0.002}]}"#,
        )
        .unwrap();
        let html = render(&[r]);
        assert!(html.contains("range#0"));
        assert!(html.ends_with("</html>\n"));
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_700_000_000.0), "2023-11-14 22:13:20");
    }
}
