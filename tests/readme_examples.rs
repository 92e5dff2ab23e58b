//! The README's examples (and those of the `docs/` pages it links to), run: every
//! `$ kube-apf-proxy ...` line of a `sh` or `console` block is run from the repository's root (where `examples/` holds the inputs), and what it prints must be
//! what the README shows under it, so that the README cannot drift from the binary.
//!
//! Matching: whitespace is ignored (the README wraps long JSON lines and aligns tables), and `...`
//! in the README stands for any text (a line of `...` for lines left out). A `$ echo $?` line
//! after a command gives its exit code; without one the command must exit 0. The webhook's
//! example (a `curl` of `examples/webhook/review.json`) is answered by the webhook and compared
//! as JSON.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A child process killed (and reaped) when dropped, so that a failing assertion leaves no
/// proxy or curl behind.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md")
}

/// README.md and the `docs/*.md` pages, each with its path.
fn documents() -> Vec<(String, String)> {
    let mut out = vec![("README.md".to_owned(), readme())];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    pages.sort();
    for page in pages
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
    {
        let name = page
            .strip_prefix(root())
            .expect("under the root")
            .display()
            .to_string();
        out.push((name, std::fs::read_to_string(&page).expect("a docs page")));
    }
    out
}

/// A fenced block: its language and its lines, with the line number of its opening fence.
struct Block {
    lang: String,
    line: usize,
    lines: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (number, line) in text.lines().enumerate() {
        match (line.strip_prefix("```"), open.take()) {
            (Some(_), Some(block)) => out.push(block),
            (Some(lang), None) => {
                open = Some(Block {
                    lang: lang.trim().to_owned(),
                    line: number + 1,
                    lines: Vec::new(),
                })
            }
            (None, Some(mut block)) => {
                block.lines.push(line.to_owned());
                open = Some(block);
            }
            (None, None) => {}
        }
    }
    out
}

/// One example: the command, the output shown under it, the exit code shown by `echo $?`.
#[derive(Debug)]
struct Example {
    line: usize,
    command: String,
    output: Vec<String>,
    exit: i32,
}

fn examples(text: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    for block in blocks(text) {
        if !matches!(block.lang.as_str(), "sh" | "console") {
            continue;
        }
        let mut lines = block.lines.iter().enumerate().peekable();
        while let Some((offset, line)) = lines.next() {
            let Some(command) = line.strip_prefix("$ ") else {
                if let Some(last) = out.last_mut().filter(|e| e.line > block.line) {
                    last.output.push(line.clone());
                }
                continue;
            };
            if command == "echo $?" {
                let (_, code) = lines.next().expect("a code after echo $?");
                let last = out.last_mut().expect("a command before echo $?");
                last.exit = code.trim().parse().expect("an exit code");
                continue;
            }
            if !command.starts_with("kube-apf-proxy ") {
                continue;
            }
            out.push(Example {
                line: block.line + offset + 1,
                command: command.to_owned(),
                output: Vec::new(),
                exit: 0,
            });
        }
    }
    out
}

/// `shown` (with `...` for any text) matches `actual`, whitespace aside.
fn matches(shown: &str, actual: &str) -> bool {
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    let (shown, actual) = (squash(shown), squash(actual));
    let pieces: Vec<&str> = shown.split("...").collect();
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if pieces.len() == 1 {
        return shown == actual;
    }
    if !actual.starts_with(first) || !actual[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

fn binary_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .parent()
        .expect("the binary's directory")
        .to_owned()
}

#[test]
fn every_readme_command_prints_what_the_readme_shows() {
    let examples: Vec<(String, Example)> = documents()
        .into_iter()
        .flat_map(|(name, text)| {
            examples(&text)
                .into_iter()
                .map(move |example| (name.clone(), example))
        })
        .collect();
    let path = format!(
        "{}:{}",
        binary_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (doc, example) in &examples {
        let out = Command::new("sh")
            .arg("-c")
            .arg(&example.command)
            .current_dir(root())
            .env("PATH", &path)
            .env_remove("RUST_LOG")
            .output()
            .expect("sh runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(example.exit),
            "{doc}:{}: `{}` exit code\n{stderr}",
            example.line,
            example.command
        );
        let shown = example.output.join("\n");
        assert!(
            matches(&shown, &stdout),
            "{doc}:{}: `{}` printed\n{stdout}\nbut {doc} shows\n{shown}",
            example.line,
            example.command
        );
    }
    // The examples the README is known to have are all found (a parser that finds nothing
    // would pass vacuously).
    for wanted in [
        "kube-apf-proxy classify --method GET --url '/api/v1/namespaces/ns/pods?watch=true'",
        "kube-apf-proxy lint --config-dir examples/team",
        "--explain",
        "kube-apf-proxy simulate --trace examples/audit/kube-apiserver-audit.log",
        "kube-apf-proxy simulate --trace examples/burst.jsonl --compare-config-dir examples/narrow/",
    ] {
        assert!(
            examples.iter().any(|(_, e)| e.command.contains(wanted)),
            "an example with {wanted}: {examples:#?}"
        );
    }
}

#[test]
fn every_examples_path_the_readme_names_exists() {
    let text: String = documents().into_iter().map(|(_, text)| text).collect();
    let mut named = 0;
    for (at, _) in text.match_indices("examples/") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            continue;
        }
        let path: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
            .collect();
        let path = path.trim_end_matches('.');
        assert!(root().join(path).exists(), "README names {path}");
        named += 1;
    }
    assert!(named >= 4, "the README names its examples' inputs");
}

#[tokio::test]
async fn the_webhook_example_answers_what_the_readme_shows() {
    let text: String = documents().into_iter().map(|(_, text)| text).collect();
    let curl = "curl -sk https://127.0.0.1:8444/validate -d @";
    let at = text.find(curl).expect("the webhook example's curl");
    let file: String = text[at + curl.len()..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '`')
        .collect();
    let shown = text[at..]
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a json block after the curl");
    let shown: serde_json::Value = serde_json::from_str(shown).expect("the README's JSON");

    let webhook =
        kube_apf_proxy::admission::Webhook::bind(kube_apf_proxy::admission::WebhookConfig {
            bind_address: "127.0.0.1".parse().expect("ip"),
            secure_port: 0,
            tls_cert_file: None,
            tls_private_key_file: None,
            config_dir: None,
            configmap_label: ("kube-apf-proxy.io/flowcontrol-config".into(), "true".into()),
            lint: Default::default(),
        })
        .await
        .expect("the webhook binds");
    let body = std::fs::read(root().join(&file)).expect("the review file");
    let (status, answer) = kube_apf_proxy::admission::review_bytes(webhook.state(), &body);
    assert_eq!(status, http::StatusCode::OK);
    let answer: serde_json::Value = serde_json::from_slice(&answer).expect("JSON");
    assert_eq!(answer, shown, "{file}");
}

#[test]
fn the_matcher_ignores_whitespace_and_takes_ellipses_for_any_text() {
    assert!(matches("a b\n...\nc", "ab\nx\ny\nc\n"));
    assert!(matches("{\"k\":1,...}", "{\"k\":1,\"j\":2}"));
    assert!(!matches("a\nc", "a\nb\nc"));
    assert!(!matches("...\nc\n...\nb", "b\nc"));
    assert!(matches("...", "anything"));
}

/// The quick start's recipe for a 429 on purpose, run on free ports: `examples/narrow/` gives
/// everyone one seat that rejects, an upstream that never answers holds it, the second request
/// gets 429 and `/metrics` counts it.
#[test]
fn the_quick_start_429_recipe_gives_a_429_and_metrics_count_it() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    // Listening, never accepting: connections complete in the kernel's backlog and hang.
    let upstream = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let upstream = upstream.local_addr().expect("addr");
    let mut proxy = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
            .args([
                "serve",
                "--config-dir",
                "examples/narrow",
                "--upstream",
                &format!("http://{upstream}"),
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                "0",
                "--admin-address",
                "127.0.0.1:0",
            ])
            .current_dir(root())
            .env_remove("RUST_LOG")
            .stderr(Stdio::piped())
            .spawn()
            .expect("the proxy starts"),
    );
    let stderr = BufReader::new(proxy.0.stderr.take().expect("stderr"));
    let serving = stderr
        .lines()
        .map_while(Result::ok)
        .take(50)
        .find(|line| line.contains("Serving secure="))
        .expect("the proxy says where it serves");
    let port_of = |key: &str| -> String {
        let at = serving.find(key).expect(key) + key.len();
        serving[at..]
            .split_whitespace()
            .next()
            .and_then(|addr| addr.rsplit(':').next())
            .expect("a port")
            .to_owned()
    };
    let (secure, admin) = (port_of("secure="), port_of("admin="));
    let url = format!("https://127.0.0.1:{secure}/api/v1/namespaces/default/pods");

    let mut holder = KillOnDrop(
        Command::new("curl")
            .args(["-sk", "-m", "20", "-o", "/dev/null", &url])
            .spawn()
            .expect("curl runs"),
    );
    let metrics = || {
        let out = Command::new("curl")
            .args([
                "-s",
                "-m",
                "5",
                &format!("http://127.0.0.1:{admin}/metrics"),
            ])
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let executing =
        "apiserver_flowcontrol_current_executing_requests{flow_schema=\"everyone\",priority_level=\"narrow\"} 1";
    // Up to 20 s (the holder's own limit): on a loaded CI machine the first request once took
    // longer than the 5 s this waited before.
    let mut last = String::new();
    let mut seen = false;
    for _ in 0..400 {
        last = metrics();
        if last.contains(executing) {
            seen = true;
            break;
        }
        if let Ok(Some(status)) = holder.0.try_wait() {
            panic!("the holding request ended ({status}) before it was seen executing");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let narrow: Vec<&str> = last
        .lines()
        .filter(|l| l.contains("narrow") && !l.starts_with('#'))
        .collect();
    assert!(
        seen,
        "the first request holds narrow's seat; narrow's series: {narrow:#?}"
    );
    let second = Command::new("curl")
        .args([
            "-sk",
            "-m",
            "10",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &url,
        ])
        .output()
        .expect("curl runs");
    assert_eq!(String::from_utf8_lossy(&second.stdout), "429");
    let counted = "apiserver_flowcontrol_rejected_requests_total{flow_schema=\"everyone\",priority_level=\"narrow\",reason=\"concurrency-limit\"} 1";
    let scraped = metrics();
    drop(holder);
    drop(proxy);
    assert!(scraped.contains(counted), "{scraped}");
    // The README shows both lines.
    let text = readme();
    assert!(text.contains(counted) && text.contains(executing));
}
