//! What the checks found: one [`Outcome`] per check, in a [`Report`], and its text.

use serde::Serialize;
use sluice_sdk::{Kind, PluginInfo};

/// How one check ended.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Passed.
    Pass,
    /// Failed: why, and the minimal failing case as Rust code when there is one.
    Fail {
        /// What went wrong.
        message: String,
        /// The shrunk failing case, as Rust code to paste into a test.
        minimal_case: Option<String>,
    },
    /// Not applicable.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// The check's name (see the [crate docs](crate)).
    pub check: &'static str,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// All checks of one plugin.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The plugin file.
    pub plugin: String,
    /// Its metadata.
    pub info: PluginInfo,
    /// The results, in order.
    pub checks: Vec<CheckResult>,
}

impl Report {
    /// True when no check failed.
    pub fn passed(&self) -> bool {
        !self
            .checks
            .iter()
            .any(|c| matches!(c.outcome, Outcome::Fail { .. }))
    }
}

/// A kind as pipeline files and the WIT worlds spell it (`map`, `flat_map`).
fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Map => "map",
        Kind::Filter => "filter",
        Kind::FlatMap => "flat_map",
        Kind::Batch => "batch",
    }
}

/// The report as text: one line per check, then the totals.
pub fn render(report: &Report) -> String {
    let mut s = format!(
        "sluice plugin check: {} {} ({}) from {}\n",
        report.info.name,
        report.info.version,
        kind_name(report.info.kind),
        report.plugin
    );
    let (mut pass, mut fail, mut skip) = (0, 0, 0);
    for c in &report.checks {
        match &c.outcome {
            Outcome::Pass => {
                pass += 1;
                s.push_str(&format!("  pass     {}\n", c.check));
            }
            Outcome::Skipped { reason } => {
                skip += 1;
                s.push_str(&format!("  skipped  {} ({reason})\n", c.check));
            }
            Outcome::Fail {
                message,
                minimal_case,
            } => {
                fail += 1;
                s.push_str(&format!("  FAIL     {}: {message}\n", c.check));
                if let Some(code) = minimal_case {
                    s.push_str("           minimal failing case:\n");
                    for line in code.lines() {
                        s.push_str(&format!("           {line}\n"));
                    }
                }
            }
        }
    }
    s.push_str(&format!(
        "totals: pass {pass}, FAIL {fail}, skipped {skip}\n"
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_names_the_plugin_once() {
        let report = Report {
            plugin: "my-plug/build/my-plug.wasm".to_string(),
            info: PluginInfo::new("my-plug", "0.1.0", Kind::FlatMap),
            checks: vec![CheckResult {
                check: "deterministic",
                outcome: Outcome::Pass,
            }],
        };
        let text = render(&report);
        assert_eq!(
            text.lines().next(),
            Some("sluice plugin check: my-plug 0.1.0 (flat_map) from my-plug/build/my-plug.wasm"),
            "{text}"
        );
    }
}
