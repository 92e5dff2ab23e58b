//! Real clients the tests drive where the machine has them (kubectl, curl): whether one is
//! installed, and running one off the runtime's threads within a deadline.

use std::process::{Command, Output};
use std::time::Duration;

/// Whether `program args` runs and exits 0 (`kubectl version --client`, `curl --version`).
pub fn installed(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `command` on the blocking pool and returns its output; panics, with `what` and the
/// command's stderr, unless it exits 0 within 20 s.
pub async fn run_ok(mut command: Command, what: &str) -> Output {
    let run = tokio::task::spawn_blocking(move || command.output());
    let out = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .unwrap_or_else(|_| panic!("{what} finishes"))
        .expect("join")
        .unwrap_or_else(|e| panic!("{what} runs: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
