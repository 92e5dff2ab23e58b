//! The binary's help, as a newcomer reads it: the commands first, each command's own flags and
//! exit codes under it.

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .args(args)
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn top_level_help_lists_the_commands_and_leaves_serve_flags_to_serve_help() {
    for flag in ["--help", "-h"] {
        let text = help(&[flag]);
        let commands = text.find("Commands:").expect("a command list");
        for command in ["serve", "check", "classify", "lint", "webhook", "simulate"] {
            assert!(
                text[commands..].contains(&format!("\n  {command} ")),
                "{command} in {text}"
            );
        }
        assert!(!text.contains("--upstream-ca-file"), "{text}");
        assert!(text.contains("kube-apf-proxy serve --help"), "{text}");
        assert!(text.lines().count() < 40, "{flag}: {text}");
    }
    let serve = help(&["serve", "--help"]);
    for flag in [
        "--upstream",
        "--upstream-ca-file",
        "--tls-cert-file",
        "--config-dir",
    ] {
        assert!(serve.contains(flag), "{flag} in serve --help");
    }
}

#[test]
fn check_and_lint_short_help_list_exit_code_2() {
    assert!(help(&["check", "-h"]).contains(", 2 when the directory"));
    let lint = help(&["lint", "-h"]);
    assert!(
        lint.contains("Exit 0 clean, 1 errors, 2 when the configuration cannot be read, 3"),
        "{lint}"
    );
}

#[test]
fn classify_output_help_speaks_of_classify() {
    let text = help(&["classify", "--help"]);
    let output = &text[text.find("--output").expect("--output")..];
    let output = &output[..output.find("-h, --help").expect("help after output")];
    assert!(output.contains("each FlowSchema tried"), "{output}");
    for other in ["lint", "simulate", "finding"] {
        assert!(!output.contains(other), "{other}: {output}");
    }
}
