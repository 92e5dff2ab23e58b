//! `kube-apf-proxy queueset-run` (hidden): the Rust side of the queue-set differential
//! (`scripts/queueset-differential.sh`, `simulate::queueset_scenario`).
//!
//! - `queueset-run SCENARIO` runs a scenario file (`-`: standard input) through our queue set and
//!   prints the outcomes as the Go oracle does (one JSON object);
//! - `queueset-run --generate SEED` prints the scenario of a seed;
//! - `queueset-run --seeds A..B --oracle PATH` generates the scenario of each seed, runs it
//!   through the oracle and through ours, and prints per seed `identical` or the first
//!   difference, then `identical N/M`. Exit 0 only when every seed is identical and there was one.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use anyhow::Context;

use crate::simulate::queueset_scenario::{
    compare, generate, run as run_scenario, Behaviour, Outcome, Outcomes, Scenario,
};

/// The hidden `queueset-run` command's flags.
#[derive(Debug, clap::Args)]
pub struct QueuesetRunArgs {
    /// A scenario file to run through our queue set (`-` for standard input).
    #[arg(conflicts_with_all = ["generate", "seeds"])]
    pub scenario: Option<String>,
    /// Print the scenario generated from this seed.
    #[arg(long, conflicts_with = "seeds")]
    pub generate: Option<u64>,
    /// Compare ours with the oracle on the scenarios of these seeds (`A..B`, both included, or
    /// one seed).
    #[arg(long, value_parser = parse_seeds)]
    pub seeds: Option<(u64, u64)>,
    /// The Go oracle's binary (tests/queueset-oracle, built by the script).
    #[arg(long)]
    pub oracle: Option<PathBuf>,
    /// Run our queue set as shipped, where it chooses to differ from the apiserver's
    /// (docs/apf-differences.md); by default it behaves as the apiserver's there.
    #[arg(long)]
    pub as_shipped: bool,
    /// Write the scenario of every seed that differs into this directory (`seed-N.json`).
    #[arg(long)]
    pub keep_differing: Option<PathBuf>,
    /// With --seeds and no oracle: what our choices to differ change, ours as shipped against
    /// ours behaving as the apiserver (docs/apf-differences.md).
    #[arg(long, conflicts_with_all = ["oracle", "as_shipped"])]
    pub effect: bool,
}

fn parse_seeds(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("{text:?}: expected A..B (both included) or one seed");
    let (a, b) = match text.split_once("..") {
        Some((a, b)) => (a, b),
        None => (text, text),
    };
    let a: u64 = a.trim().parse().map_err(|_| bad())?;
    let b: u64 = b.trim().parse().map_err(|_| bad())?;
    Ok((a, b))
}

/// Runs the command.
pub fn run(args: QueuesetRunArgs) -> anyhow::Result<ExitCode> {
    let behaviour = if args.as_shipped {
        Behaviour::AsShipped
    } else {
        Behaviour::Apiserver
    };
    let mut out = std::io::stdout().lock();
    if let Some(seed) = args.generate {
        writeln!(out, "{}", generate(seed).to_json())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let (Some((first, last)), Some(oracle)) = (args.seeds, &args.oracle) {
        return differential(
            first,
            last,
            oracle,
            behaviour,
            args.keep_differing,
            &mut out,
        );
    }
    if let (Some((first, last)), true) = (args.seeds, args.effect) {
        return effect(first, last, &mut out);
    }
    let Some(path) = args.scenario else {
        anyhow::bail!(
            "queueset-run: give SCENARIO, --generate SEED, --seeds A..B --oracle PATH or --seeds A..B --effect"
        );
    };
    let text = if path == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        text
    } else {
        std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?
    };
    let scenario = match Scenario::parse(&text) {
        Ok(scenario) => scenario,
        Err(e) => {
            eprintln!("error: scenario: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let requests = run_scenario(&scenario, behaviour).map_err(anyhow::Error::msg)?;
    serde_json::to_writer(&mut out, &Outcomes { requests })?;
    writeln!(out)?;
    Ok(ExitCode::SUCCESS)
}

fn differential(
    first: u64,
    last: u64,
    oracle: &PathBuf,
    behaviour: Behaviour,
    keep: Option<PathBuf>,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let (mut identical, mut compared) = (0u64, 0u64);
    for seed in first..=last {
        let scenario = generate(seed);
        let json = scenario.to_json();
        let theirs = run_oracle(oracle, &json).with_context(|| format!("seed {seed}"))?;
        let ours = run_scenario(&scenario, behaviour)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("seed {seed}: ours"))?;
        compared += 1;
        match compare(&ours, &theirs.requests) {
            None => {
                identical += 1;
                writeln!(out, "seed {seed}: identical")?;
            }
            Some(difference) => {
                writeln!(out, "seed {seed}: {difference}")?;
                if let Some(dir) = &keep {
                    std::fs::create_dir_all(dir)?;
                    std::fs::write(dir.join(format!("seed-{seed}.json")), &json)?;
                }
            }
        }
        out.flush()?;
    }
    writeln!(out, "identical {identical}/{compared}")?;
    Ok(if compared > 0 && identical == compared {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Totals of one behaviour over many scenarios.
#[derive(Default)]
struct Totals {
    dispatched: u64,
    timed_out: u64,
    cancelled: u64,
    waits_ns: Vec<u64>,
    /// Σ over scenarios of Jain's index of the flows' served fractions.
    jain: f64,
}

impl Totals {
    fn add(&mut self, scenario: &Scenario, outcomes: &[Outcome]) {
        // Per flow: seat-nanoseconds asked for and served.
        let mut flows: std::collections::BTreeMap<u64, (f64, f64)> = Default::default();
        for (r, o) in scenario.requests.iter().zip(outcomes) {
            let work = f64::from(r.initial_seats) * r.execution_ns as f64;
            let flow = flows.entry(r.flow_hash).or_default();
            flow.0 += work;
            match (o.dispatched_at_ns, o.reason.as_deref()) {
                (Some(at), _) => {
                    self.dispatched += 1;
                    self.waits_ns.push(at - r.arrival_ns);
                    flow.1 += work;
                }
                (None, Some("time-out")) => self.timed_out += 1,
                (None, Some("cancelled")) => self.cancelled += 1,
                _ => {}
            }
        }
        let x: Vec<f64> = flows
            .values()
            .map(|(asked, served)| served / asked)
            .collect();
        let (sum, squares) = (x.iter().sum::<f64>(), x.iter().map(|v| v * v).sum::<f64>());
        self.jain += if squares > 0.0 {
            sum * sum / (x.len() as f64 * squares)
        } else {
            1.0
        };
    }

    fn line(&mut self, name: &str, scenarios: u64) -> String {
        self.waits_ns.sort_unstable();
        let n = self.waits_ns.len().max(1);
        let mean = self.waits_ns.iter().sum::<u64>() as f64 / n as f64;
        let p99 = self.waits_ns.get(n * 99 / 100).copied().unwrap_or(0);
        format!(
            "{name}: dispatched {} timed out {} cancelled {}; wait mean {:.3} ms p99 {:.3} ms; \
             Jain's index of the flows' served fractions {:.4}",
            self.dispatched,
            self.timed_out,
            self.cancelled,
            mean / 1e6,
            p99 as f64 / 1e6,
            self.jain / scenarios.max(1) as f64
        )
    }
}

/// Ours as shipped against ours as the apiserver, on the seeds' scenarios: the seeds that
/// differ, then the totals of each over the scenarios that differ.
fn effect(first: u64, last: u64, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let (mut apiserver, mut shipped) = (Totals::default(), Totals::default());
    let (mut differing, mut compared) = (0u64, 0u64);
    for seed in first..=last {
        let scenario = generate(seed);
        let like = run_scenario(&scenario, Behaviour::Apiserver).map_err(anyhow::Error::msg)?;
        let ours = run_scenario(&scenario, Behaviour::AsShipped).map_err(anyhow::Error::msg)?;
        compared += 1;
        if let Some(difference) = compare(&ours, &like) {
            differing += 1;
            writeln!(out, "seed {seed}: {difference}")?;
            apiserver.add(&scenario, &like);
            shipped.add(&scenario, &ours);
        }
    }
    writeln!(out, "differing {differing}/{compared}")?;
    writeln!(out, "{}", apiserver.line("as the apiserver", differing))?;
    writeln!(out, "{}", shipped.line("as shipped", differing))?;
    Ok(ExitCode::SUCCESS)
}

/// The oracle's outcomes for a scenario given on its standard input.
fn run_oracle(oracle: &PathBuf, scenario: &str) -> anyhow::Result<Outcomes> {
    let mut child = Command::new(oracle)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting the oracle {}", oracle.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(scenario.as_bytes())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        anyhow::bail!(
            "the oracle failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    serde_json::from_slice(&output.stdout).context("reading the oracle's outcomes")
}
