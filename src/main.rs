//! The `kube-apf-proxy` binary: command-line parsing and exit codes only.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use kube_apf_proxy::cli;

/// The proxy allocates and frees many small buffers per request (headers, attributes, bodies);
/// mimalloc's thread-local free lists are measurably cheaper at that than glibc's malloc
/// (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use kube_apf_proxy::server::ServeOptions;

/// Kubernetes API Priority and Fairness, enforced by a reverse proxy in front of kube-apiserver.
///
/// Without a subcommand it serves, taking the `serve` flags directly.
#[derive(Debug, Parser)]
#[command(
    name = "kube-apf-proxy",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeOptions,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the proxy (the default command).
    Serve(Box<ServeOptions>),
    /// Load and validate a configuration directory: exit 0 when valid, 1 with one line per problem.
    Check {
        /// The configuration directory (.yaml, .yml, .json files).
        #[arg(long)]
        config_dir: PathBuf,
    },
    /// Print how requests are classified, as JSON.
    Classify(ClassifyArgs),
    /// Report configuration errors (as `check`), then configurations that load but do harm:
    /// shadowed FlowSchemas, precedence ties, broad subjects on privileged levels, unused or
    /// missing levels, tiny or undrainable levels, weak shuffle sharding, contradictory
    /// lending/borrowing and removed API versions. Exit 0 clean, 1 errors, 3 warnings only.
    Lint(LintArgs),
    /// The validating admission webhook: `POST /validate` takes an admission.k8s.io/v1
    /// AdmissionReview of a FlowSchema, a PriorityLevelConfiguration or the proxy's configuration
    /// ConfigMap; errors deny (422 Invalid), lint findings warn. Also `/healthz`, `/readyz`,
    /// `/metrics`.
    Webhook(Box<kube_apf_proxy::admission::WebhookOptions>),
    /// Configuration commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration (defaults applied, mandatory objects added) as YAML.
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
    /// Explain the classification: every FlowSchema in the order tried, with the rule field
    /// that failed, then the verdict (one request only).
    #[arg(long, conflicts_with = "requests")]
    explain: bool,
    /// With --explain: `text` or `json`.
    #[arg(long, value_enum, default_value = "text", requires = "explain")]
    output: cli::lint::Output,
}

#[derive(Debug, Args)]
struct LintArgs {
    /// The configuration directory; the embedded default configuration without it.
    #[arg(long)]
    config_dir: Option<PathBuf>,
    /// The server's `--max-requests-inflight`: the level checks run at this server limit.
    #[arg(long, default_value_t = 400)]
    max_requests_inflight: u32,
    /// The server's `--max-mutating-requests-inflight`.
    #[arg(long, default_value_t = 200)]
    max_mutating_requests_inflight: u32,
    /// The server's `--request-timeout`: requests wait in queues for a quarter of it at most.
    #[arg(long, default_value = "60s", value_parser = kube_apf_proxy::server::parse_duration)]
    request_timeout: std::time::Duration,
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

impl LintArgs {
    fn options(&self) -> kube_apf_proxy::lint::LintOptions {
        kube_apf_proxy::lint::LintOptions {
            max_requests_inflight: self.max_requests_inflight,
            max_mutating_requests_inflight: self.max_mutating_requests_inflight,
            request_timeout: self.request_timeout,
            request_duration: self.assumed_request_duration,
            elephant_flows: self.elephant_flows,
            ..Default::default()
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command.unwrap_or(Command::Serve(Box::new(cli.serve))) {
        Command::Serve(opts) => cli::serve(*opts),
        Command::Check { config_dir } => cli::check(&config_dir),
        Command::Config {
            command: ConfigCommand::Dump { config_dir },
        } => cli::config_dump(config_dir.as_deref()),
        Command::Webhook(opts) => cli::webhook(*opts),
        Command::Lint(args) => {
            cli::lint::run(args.config_dir.as_deref(), &args.options(), args.output)
        }
        Command::Classify(args) => {
            let (explain, output) = (args.explain, args.output);
            let source = match (args.requests, args.method, args.url) {
                (Some(file), _, _) => cli::ClassifySource::Lines(file),
                (None, Some(method), Some(url)) => cli::ClassifySource::One(cli::ClassifyInput {
                    method,
                    url,
                    user: args.user,
                    groups: args.groups,
                    uid: args.uid,
                    extra: Default::default(),
                }),
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
            eprintln!("error: {err:#}");
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
