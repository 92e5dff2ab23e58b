//! The JSON of standard output: one object per run, or `{"baseline":..,"candidate":..}` when
//! comparing.

use std::io::{self, Write};

use serde::Serialize;

use super::SimReport;

#[derive(Serialize)]
struct Comparison<'a> {
    baseline: &'a SimReport,
    candidate: &'a SimReport,
}

/// Writes the runs, each object on a line of its own.
pub(super) fn write(runs: &[(&str, &SimReport)], out: &mut impl Write) -> io::Result<()> {
    match runs {
        [(_, baseline), (_, candidate)] => {
            serde_json::to_writer(
                &mut *out,
                &Comparison {
                    baseline,
                    candidate,
                },
            )?;
            writeln!(out)?;
        }
        runs => {
            for (_, report) in runs {
                serde_json::to_writer(&mut *out, report)?;
                writeln!(out)?;
            }
        }
    }
    Ok(())
}
