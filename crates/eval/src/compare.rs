//! `eval compare`: one table over run reports from any number of report folders — per subject
//! (the run's `--label`, else its model) and scenario: runs, pass rate, failure codes with their
//! counts, false completion claims, model calls, tokens, host overhead and oracle time — so
//! models can be ranked on the same tasks. Reports are read as JSON and only the fields used
//! here are needed, so folders written by older harness versions compare too.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Files in a report folder that are not run reports.
const NOT_REPORTS: [&str; 3] = ["summary.json", "comparison.json", "comparison.md"];

/// What the table needs of one run report.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub subject: String,
    pub scenario: String,
    pub passed: bool,
    pub failure_codes: Vec<String>,
    /// The answer said `completed` but the oracle failed the run.
    pub false_completion: bool,
    pub model_calls: u64,
    /// Input and output tokens; `None` when the run had none (replay).
    pub tokens: Option<(u64, u64)>,
    pub host_overhead_ms: Option<f64>,
    pub oracle_ms: Option<f64>,
}

impl RunSummary {
    /// From a report's JSON; `None` when it is not a run report.
    pub fn from_report(v: &Value) -> Option<RunSummary> {
        let scenario = v.get("scenario")?.as_str()?.to_string();
        let passed = v.get("passed")?.as_bool()?;
        v.get("evidence_kind")?.as_str()?;
        let label = v.get("label").and_then(Value::as_str);
        let model = v.get("model").and_then(Value::as_str).unwrap_or("unknown");
        let failure_codes = v
            .get("failure_codes")
            .and_then(Value::as_array)
            .map(|c| {
                c.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let status = v.pointer("/answer/status").and_then(Value::as_str);
        let tokens = v
            .get("tokens")
            .and_then(|t| Some((t.get("input")?.as_u64()?, t.get("output")?.as_u64()?)));
        Some(RunSummary {
            subject: label.unwrap_or(model).to_string(),
            scenario,
            passed,
            failure_codes,
            false_completion: status == Some("completed") && !passed,
            model_calls: v.get("model_calls").and_then(Value::as_u64).unwrap_or(0),
            tokens,
            host_overhead_ms: v.get("host_overhead_ms").and_then(Value::as_f64),
            oracle_ms: v.get("oracle_ms").and_then(Value::as_f64),
        })
    }
}

/// One row: a subject on one scenario (`scenario` is `all` for the subject's totals).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub subject: String,
    pub scenario: String,
    pub runs: u32,
    pub passed: u32,
    pub pass_rate: f64,
    pub false_completions: u32,
    /// Code → runs it appeared in.
    pub failure_codes: BTreeMap<String, u32>,
    pub mean_model_calls: f64,
    /// Mean input / output tokens per run; `null` when no run had usage (replay).
    pub mean_input_tokens: Option<f64>,
    pub mean_output_tokens: Option<f64>,
    /// Median per-run host overhead (ms), the model's time excluded.
    pub median_host_overhead_ms: Option<f64>,
    /// Largest per-run oracle time (ms).
    pub max_oracle_ms: Option<f64>,
}

/// The comparison table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub harness_version: String,
    /// The report folders read.
    pub sources: Vec<String>,
    pub subjects: Vec<String>,
    pub scenarios: Vec<String>,
    pub rows: Vec<Row>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn row(subject: &str, scenario: &str, runs: &[&RunSummary]) -> Row {
    let mut codes = BTreeMap::new();
    for r in runs {
        for c in &r.failure_codes {
            *codes.entry(c.clone()).or_insert(0u32) += 1;
        }
    }
    let passed = count(runs.iter().filter(|r| r.passed).count());
    let tokens: Vec<(u64, u64)> = runs.iter().filter_map(|r| r.tokens).collect();
    let as_f = |n: u64| n as f64;
    Row {
        subject: subject.to_string(),
        scenario: scenario.to_string(),
        runs: count(runs.len()),
        passed,
        pass_rate: if runs.is_empty() {
            0.0
        } else {
            f64::from(passed) / runs.len() as f64
        },
        false_completions: count(runs.iter().filter(|r| r.false_completion).count()),
        failure_codes: codes,
        mean_model_calls: mean(&runs.iter().map(|r| as_f(r.model_calls)).collect::<Vec<_>>())
            .unwrap_or(0.0),
        mean_input_tokens: mean(&tokens.iter().map(|t| as_f(t.0)).collect::<Vec<_>>()),
        mean_output_tokens: mean(&tokens.iter().map(|t| as_f(t.1)).collect::<Vec<_>>()),
        median_host_overhead_ms: median(runs.iter().filter_map(|r| r.host_overhead_ms).collect()),
        max_oracle_ms: runs
            .iter()
            .filter_map(|r| r.oracle_ms)
            .max_by(f64::total_cmp),
    }
}

/// Builds the table: a row per subject and scenario, then the subject's `all` row.
pub fn compare(sources: &[String], runs: &[RunSummary]) -> Comparison {
    let subjects: BTreeSet<&str> = runs.iter().map(|r| r.subject.as_str()).collect();
    let scenarios: BTreeSet<&str> = runs.iter().map(|r| r.scenario.as_str()).collect();
    let mut rows = Vec::new();
    for subject in &subjects {
        let mine: Vec<&RunSummary> = runs.iter().filter(|r| r.subject == *subject).collect();
        for scenario in &scenarios {
            let these: Vec<&RunSummary> = mine
                .iter()
                .copied()
                .filter(|r| r.scenario == *scenario)
                .collect();
            if !these.is_empty() {
                rows.push(row(subject, scenario, &these));
            }
        }
        rows.push(row(subject, "all", &mine));
    }
    Comparison {
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        sources: sources.to_vec(),
        subjects: subjects.into_iter().map(str::to_string).collect(),
        scenarios: scenarios.into_iter().map(str::to_string).collect(),
        rows,
    }
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for e in entries {
        let p = e
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .path();
        if p.is_dir() {
            json_files(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "json")
            && !p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| NOT_REPORTS.contains(&n))
        {
            out.push(p);
        }
    }
    Ok(())
}

/// Every run report under the given folders (searched recursively). `Err` names a folder that
/// cannot be read, a report that is not JSON, or a folder without any report.
pub fn load(dirs: &[PathBuf]) -> Result<Vec<RunSummary>, String> {
    let mut runs = Vec::new();
    for dir in dirs {
        let mut files = Vec::new();
        json_files(dir, &mut files)?;
        files.sort();
        let before = runs.len();
        for f in files {
            let text = std::fs::read_to_string(&f)
                .map_err(|e| format!("cannot read {}: {e}", f.display()))?;
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| format!("{}: not a JSON report: {e}", f.display()))?;
            runs.extend(RunSummary::from_report(&v));
        }
        if runs.len() == before {
            return Err(format!("{}: no run reports in it", dir.display()));
        }
    }
    Ok(runs)
}

fn ms(v: Option<f64>) -> String {
    v.map_or("–".to_string(), |v| format!("{v:.1}"))
}

fn tokens(v: Option<f64>) -> String {
    v.map_or("–".to_string(), |v| format!("{v:.0}"))
}

/// The table as Markdown.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::from(
        "| subject | scenario | runs | pass rate | false completions | model calls (mean) | \
         input tokens (mean) | output tokens (mean) | host overhead ms (median) | oracle ms (max) | \
         failure codes (runs) |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for r in &c.rows {
        let codes = if r.failure_codes.is_empty() {
            "–".to_string()
        } else {
            r.failure_codes
                .iter()
                .map(|(c, n)| format!("`{c}` ×{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let scenario = if r.scenario == "all" {
            "**all**".to_string()
        } else {
            format!("`{}`", r.scenario)
        };
        out.push_str(&format!(
            "| {} | {scenario} | {} | {}/{} ({:.0} %) | {} | {:.1} | {} | {} | {} | {} | {codes} |\n",
            r.subject,
            r.runs,
            r.passed,
            r.runs,
            r.pass_rate * 100.0,
            r.false_completions,
            r.mean_model_calls,
            tokens(r.mean_input_tokens),
            tokens(r.mean_output_tokens),
            ms(r.median_host_overhead_ms),
            ms(r.max_oracle_ms),
        ));
    }
    out
}
