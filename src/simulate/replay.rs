//! A recorded trace replayed whole: the engine's reports, completed with what reading the trace
//! found (the lines skipped, by kind; the recorded queue waits taken out; when the replay started
//! on the wall clock).

use std::io::BufRead;

use super::engine::{simulate, SimError, SimOptions};
use super::report::{SimReport, SkipReason, WaitsTakenOut};
use super::trace::{TraceInput, TraceLineError, TraceRun};
use crate::config::Config;

/// A trace replayed through each configuration.
#[derive(Debug)]
pub struct Replayed {
    /// One report per configuration, in their order.
    pub reports: Vec<SimReport>,
    /// What reading the trace found.
    pub trace: TraceRun,
}

/// Why a trace could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The simulation could not run.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The trace could not be read.
    #[error(transparent)]
    Read(std::io::Error),
}

/// Replays `trace` through each of `configs` (see [`simulate`]).
pub fn replay_trace<R, F>(
    mut trace: TraceInput<R, F>,
    configs: &[&Config],
    options: &SimOptions,
) -> Result<Replayed, ReplayError>
where
    R: BufRead + Send,
    F: FnMut(&TraceLineError) + Send,
{
    let mut reports = simulate(&mut trace, configs, options)?;
    let trace = trace.finish().map_err(ReplayError::Read)?;
    for report in &mut reports {
        report.start_unix_seconds = trace.wall_clock_start.map(|d| d.as_secs_f64());
        report.skipped = trace.skipped.lines;
        let taken_out = trace.waits_taken_out();
        report.recorded_waits_taken_out = WaitsTakenOut {
            requests: taken_out.requests,
            seconds: taken_out.total.as_secs_f64(),
        };
        report.skip_reasons = trace
            .skipped
            .kinds
            .iter()
            .map(|kind| SkipReason {
                example: kind.example.to_string(),
                lines: kind.lines,
            })
            .collect();
    }
    Ok(Replayed { reports, trace })
}
