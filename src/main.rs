//! The `kube-apf-proxy` binary: command-line parsing and exit codes only.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use kube_apf_proxy::cli;

/// The proxy allocates and frees many small buffers per request (headers, attributes, bodies);
/// mimalloc's thread-local free lists are measurably cheaper at that than glibc's malloc
/// (BENCHMARKS.md). The `system-allocator` feature leaves it out, for heap profilers that only
/// see the system's malloc (heaptrack; BENCHMARKS.md, memory per queued request).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use kube_apf_proxy::cli::ServeOptions;

/// What the top-level help says in place of the `serve` flags it leaves out.
macro_rules! serve_hint {
    () => {
        "Without a command, kube-apf-proxy serves: `kube-apf-proxy --upstream URL` is \
`kube-apf-proxy serve --upstream URL`.\nThe serve flags: `kube-apf-proxy serve --help`. \
classify, lint, simulate, check and config need no cluster."
    };
}

/// The one table of exit codes, the same for every command: the end of each command's help
/// (and of the top level's), and the README's.
macro_rules! exit_codes {
    () => {
        "Exit codes (the same for every command):
  0  done (lint: nothing found; serve, webhook: stopped by SIGTERM or Ctrl-C)
  1  an input was read and is wrong: an invalid configuration (one line per problem), lint
     errors, a request classify cannot read, a trace simulate cannot replay (a malformed line
     with --strict, no usable line, --from past its end), a wrong workload file
  2  something could not be read or started: a missing file or directory, a wrong flag, a
     port in use
  3  lint only: warnings and no errors"
    };
}

/// Kubernetes API Priority and Fairness, enforced by a reverse proxy in front of kube-apiserver.
///
/// Without a subcommand it serves, taking the `serve` flags directly.
#[derive(Debug, Parser)]
#[command(
    name = "kube-apf-proxy",
    version,
    about,
    args_conflicts_with_subcommands = true,
    override_usage = "kube-apf-proxy [serve] [SERVE FLAGS]\n       kube-apf-proxy <COMMAND> [FLAGS]",
    after_help = concat!(serve_hint!(), "\n\n", exit_codes!()),
    after_long_help = concat!(serve_hint!(), "\n\n", exit_codes!())
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeOptions,
}

/// The command line, with the `serve` flags that the top level also takes left out of its help
/// (they are `serve --help`'s; listing them there buried the commands under 200 lines).
fn command_line() -> clap::Command {
    use clap::CommandFactory;
    Cli::command().mut_args(|arg| {
        let own = matches!(arg.get_id().as_str(), "help" | "version");
        if own {
            arg
        } else {
            arg.hide(true)
        }
    })
}

fn parse() -> Cli {
    use clap::FromArgMatches;
    let matches = command_line().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the proxy (the default command).
    #[command(after_help = exit_codes!())]
    Serve(Box<ServeOptions>),
    /// Load and validate a configuration directory: exit 0 when valid, 1 with one line per
    /// problem, 2 when the directory or a file in it cannot be read.
    #[command(after_help = exit_codes!())]
    Check {
        /// The configuration directory (.yaml, .yml, .json files).
        #[arg(long)]
        config_dir: PathBuf,
    },
    /// Print how requests are classified (FlowSchema, priority level, flow), as JSON; no cluster
    /// needed.
    #[command(after_help = exit_codes!())]
    Classify(ClassifyArgs),
    /// Report configuration errors (as `check`), then configurations that load but do harm.
    /// Exit 0 clean, 1 errors, 2 when the configuration cannot be read, 3 warnings only.
    ///
    /// The findings: shadowed FlowSchemas, precedence ties, broad subjects on privileged levels,
    /// unused or missing levels, tiny or undrainable levels, weak shuffle sharding,
    /// contradictory lending/borrowing and removed API versions.
    #[command(after_help = exit_codes!())]
    Lint(LintArgs),
    /// The validating admission webhook for FlowSchemas, PriorityLevelConfigurations and the
    /// proxy's ConfigMap (without --tls-cert-file it generates a self-signed certificate).
    ///
    /// `POST /validate` takes an admission.k8s.io/v1 AdmissionReview of a FlowSchema, a PriorityLevelConfiguration or the proxy's configuration
    /// ConfigMap; errors deny (422 Invalid), lint findings warn. Also `/healthz`, `/readyz`,
    /// `/metrics`.
    #[command(after_help = exit_codes!())]
    Webhook(Box<cli::WebhookOptions>),
    /// Replay a recorded workload, or run synthetic clients, through flow control in virtual
    /// time; no cluster needed.
    ///
    /// The workload: Kubernetes audit events, the proxy's JSON access log, or trace lines; or
    /// closed-loop clients (--workload). A recorded request executes for its recorded time less
    /// the queue wait the recording server recorded, if any (--keep-recorded-waits: as written).
    /// The report says per priority level, FlowSchema (and client) what would have been
    /// dispatched, queued and rejected.
    #[command(after_help = exit_codes!())]
    Simulate(Box<SimulateArgs>),
    /// Configuration commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// The queue-set differential's driver (scripts/queueset-differential.sh).
    #[command(hide = true)]
    QueuesetRun(cli::queueset_run::QueuesetRunArgs),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration (defaults applied, mandatory objects added) as YAML.
    #[command(after_help = exit_codes!())]
    Dump {
        /// The configuration directory; the embedded default configuration without it.
        #[arg(long)]
        config_dir: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
struct ClassifyArgs {
    /// The configuration directory; the embedded default configuration without it.
    #[arg(long)]
    config_dir: Option<PathBuf>,
    /// JSON lines of requests (`-` for standard input); one JSON line out per request.
    #[arg(long, conflicts_with_all = ["method", "url"])]
    requests: Option<String>,
    /// The HTTP method of the one request to classify.
    #[arg(long, required_unless_present = "requests")]
    method: Option<String>,
    /// The request URL (path and query) of the one request to classify.
    #[arg(long, required_unless_present = "requests")]
    url: Option<String>,
    /// The user name; anonymous when absent.
    #[arg(long)]
    user: Option<String>,
    /// A group of the user (repeatable).
    #[arg(long = "group")]
    groups: Vec<String>,
    /// The user's UID.
    #[arg(long, default_value = "")]
    uid: String,
    /// The user the caller impersonates (`Impersonate-User`, kubectl's --as): the request is
    /// classified as the identity the apiserver runs it as, the caller (--user, --group, --uid)
    /// being the impersonator. Whether the caller may impersonate is not checked here.
    #[arg(long = "as", value_name = "USER", conflicts_with = "requests")]
    as_user: Option<String>,
    /// A group to impersonate (`Impersonate-Group`, kubectl's --as-group; repeatable).
    #[arg(long = "as-group", value_name = "GROUP", requires = "as_user")]
    as_groups: Vec<String>,
    /// The UID to impersonate (`Impersonate-Uid`, kubectl's --as-uid).
    #[arg(long = "as-uid", value_name = "UID", requires = "as_user")]
    as_uid: Option<String>,
    /// Explain the classification: every FlowSchema in the order tried, with the rule field
    /// that failed, then the verdict (one request only).
    #[arg(long, conflicts_with = "requests")]
    explain: bool,
    /// With --explain: `text` (each FlowSchema tried, one line each, then the verdict) or
    /// `json` (the same as one object).
    #[arg(
        long,
        value_enum,
        default_value = "text",
        requires = "explain",
        hide_possible_values = true
    )]
    output: cli::lint::Output,
}

#[derive(Debug, Args)]
struct LintArgs {
    /// The configuration directory; the embedded default configuration without it.
    #[arg(long)]
    config_dir: Option<PathBuf>,
    /// The server's limits: the checks run at them.
    #[command(flatten)]
    limits: cli::ServerLimits,
    /// How long a request is assumed to hold its seat, for the queue drain check.
    #[arg(long, default_value = "100ms", value_parser = kube_apf_proxy::server::parse_duration)]
    assumed_request_duration: std::time::Duration,
    /// How many elephant flows the shuffle-sharding check assumes share a level with a mouse.
    #[arg(long, default_value_t = 4)]
    elephant_flows: u32,
    /// `text` (one line per finding) or `json`.
    #[arg(long, value_enum, default_value = "text")]
    output: cli::lint::Output,
}

#[derive(Debug, Args)]
struct SimulateArgs {
    /// The configuration directory; the embedded default configuration without it.
    #[arg(long)]
    config_dir: Option<PathBuf>,
    /// The recorded workload (`-` for standard input): audit.k8s.io/v1 Event lines as
    /// kube-apiserver writes them with --audit-log-path, the proxy's JSON access log, or trace
    /// lines (`classify --requests` lines plus `at` seconds and `durationMs`).
    #[arg(
        long,
        required_unless_present = "workload",
        conflicts_with = "workload"
    )]
    trace: Option<String>,
    /// A synthetic workload instead of a recording: a YAML file of closed-loop clients
    /// (`duration`, `clients: [{name, user, groups, method, url, threads, calls, execution,
    /// think, start, seats, finalSeats, finalDuration}]`).
    #[arg(long)]
    workload: Option<PathBuf>,
    /// A second configuration directory replayed over the same trace, side by side.
    #[arg(long)]
    compare_config_dir: Option<PathBuf>,
    /// The server's limits: the checks run at them.
    #[command(flatten)]
    limits: cli::ServerLimits,
    /// A YAML or JSON map from resource (`pods`, `deployments.apps`) to stored object count, or
    /// to `{count, averageObjectSizeBytes}`, for the cost of lists; without it every list costs
    /// what an unknown resource costs.
    #[arg(long)]
    object_counts: Option<PathBuf>,
    /// Replay only requests that arrived at least this long after the trace's first one.
    #[arg(long, value_parser = kube_apf_proxy::server::parse_duration, conflicts_with = "workload")]
    from: Option<std::time::Duration>,
    /// ... and at most this long after it.
    #[arg(long, value_parser = kube_apf_proxy::server::parse_duration, conflicts_with = "workload")]
    until: Option<std::time::Duration>,
    /// How far out of arrival order trace lines may be (logs are written at completion);
    /// default: the request timeout plus 5 s.
    #[arg(long, value_parser = kube_apf_proxy::server::parse_duration, conflicts_with = "workload")]
    reorder_window: Option<std::time::Duration>,
    /// Stop (exit 1) at the first malformed line instead of reporting and skipping it.
    #[arg(long, conflicts_with = "workload")]
    strict: bool,
    /// Replay each request for its recorded time as written. Without it, the queue wait the
    /// recording server recorded (audit annotation apiserver.latency.k8s.io/apf-queue-wait, the
    /// access log's queue_wait_ms) is taken out of the request's execution.
    #[arg(long, conflicts_with = "workload")]
    keep_recorded_waits: bool,
    /// `text` (tables) or `json` (one object; `{"baseline":..,"candidate":..}` when comparing).
    #[arg(long, value_enum, default_value = "text")]
    output: cli::lint::Output,
    /// Also write a self-contained HTML page with charts over time per priority level.
    #[arg(long)]
    report: Option<PathBuf>,
}

impl SimulateArgs {
    fn into_args(self) -> anyhow::Result<cli::simulate::SimulateArgs> {
        let object_counts = match &self.object_counts {
            Some(path) => cli::simulate::read_object_counts(path)?,
            None => Vec::new(),
        };
        Ok(cli::simulate::SimulateArgs {
            config_dir: self.config_dir,
            input: match (self.workload, self.trace) {
                (Some(file), _) => cli::simulate::SimInput::Workload(file),
                (None, Some(trace)) => cli::simulate::SimInput::Trace(trace),
                (None, None) => anyhow::bail!("simulate: give --trace or --workload"),
            },
            compare_config_dir: self.compare_config_dir,
            options: kube_apf_proxy::simulate::SimOptions {
                server_concurrency_limit: self.limits.server_concurrency_limit(),
                request_timeout: self.limits.request_timeout,
                object_counts,
                timeline_interval: None,
            },
            from: self.from,
            until: self.until,
            reorder_window: self.reorder_window,
            strict: self.strict,
            keep_recorded_waits: self.keep_recorded_waits,
            output: self.output,
            report: self.report,
        })
    }
}

impl LintArgs {
    fn options(&self) -> kube_apf_proxy::lint::LintOptions {
        kube_apf_proxy::lint::LintOptions {
            max_requests_inflight: self.limits.max_requests_inflight,
            max_mutating_requests_inflight: self.limits.max_mutating_requests_inflight,
            request_timeout: self.limits.request_timeout,
            request_duration: self.assumed_request_duration,
            elephant_flows: self.elephant_flows,
            ..Default::default()
        }
    }
}

fn main() -> ExitCode {
    let cli = parse();
    let result = match cli.command.unwrap_or(Command::Serve(Box::new(cli.serve))) {
        Command::Serve(opts) => cli::serve(*opts),
        Command::Check { config_dir } => cli::check(&config_dir),
        Command::Config {
            command: ConfigCommand::Dump { config_dir },
        } => cli::config_dump(config_dir.as_deref()),
        Command::Webhook(opts) => cli::webhook(*opts),
        Command::QueuesetRun(args) => cli::queueset_run::run(args),
        Command::Simulate(args) => args.into_args().and_then(|args| cli::simulate::run(&args)),
        Command::Lint(args) => {
            cli::lint::run(args.config_dir.as_deref(), &args.options(), args.output)
        }
        Command::Classify(args) => {
            let (explain, output) = (args.explain, args.output);
            let source = match (args.requests, args.method, args.url) {
                (Some(file), _, _) => cli::ClassifySource::Lines(file),
                (None, Some(method), Some(url)) => {
                    cli::ClassifySource::One(kube_apf_proxy::classify::ClassifyInput {
                        method,
                        url,
                        user: args.user,
                        groups: args.groups,
                        uid: args.uid,
                        extra: Default::default(),
                        impersonate: args.as_user.map(|user| {
                            Box::new(kube_apf_proxy::classify::Impersonate {
                                user,
                                groups: args.as_groups,
                                uid: args.as_uid.unwrap_or_default(),
                                extra: Default::default(),
                            })
                        }),
                    })
                }
                _ => unreachable!("clap requires --method and --url without --requests"),
            };
            match source {
                cli::ClassifySource::One(input) if explain => {
                    cli::explain::run(args.config_dir.as_deref(), &input, output)
                }
                source => cli::classify(args.config_dir.as_deref(), source),
            }
        }
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", kube_apf_proxy::causes::render_anyhow(&err));
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command};

    fn serve_port(args: &[&str]) -> u16 {
        let cli = Cli::try_parse_from(args).expect("parses");
        match cli.command.unwrap_or(Command::Serve(Box::new(cli.serve))) {
            Command::Serve(opts) => opts.secure_port,
            other => panic!("expected serve, got {other:?}"),
        }
    }

    #[test]
    fn serve_flags_work_with_and_without_the_subcommand() {
        let cases: &[(&[&str], u16)] = &[
            (&["kube-apf-proxy"], 8443),
            (&["kube-apf-proxy", "--secure-port", "9443"], 9443),
            (&["kube-apf-proxy", "serve"], 8443),
            (&["kube-apf-proxy", "serve", "--secure-port=9444"], 9444),
        ];
        for (args, port) in cases {
            assert_eq!(serve_port(args), *port, "{args:?}");
        }
    }

    #[test]
    fn other_subcommands_still_parse_and_refuse_serve_flags() {
        let cli =
            Cli::try_parse_from(["kube-apf-proxy", "check", "--config-dir", "d"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Check { .. })));
        let mixed = [
            "kube-apf-proxy",
            "--secure-port",
            "1",
            "check",
            "--config-dir",
            "d",
        ];
        assert!(Cli::try_parse_from(mixed).is_err());
    }
}
