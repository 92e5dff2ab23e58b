//! Configuration loading: one file of arbitrary YAML or JSON (every API version, lists,
//! multi-document) through read → parse → default → validate → resolve → dump (the reload is
//! `config_roundtrip`'s).
//!
//! Input: the first byte picks the format (even: YAML, odd: JSON), the rest is the file.
//! Invariants: loading never panics; a configuration that loads has the mandatory `exempt` and
//! `catch-all` objects, FlowSchemas of unique names each of whose priority level exists, and
//! dangling FlowSchemas each of whose level does not; it dumps without panicking. The dump is
//! here so that the YAML emitter (`unsafe-libyaml`'s, as the parser) runs under the sanitizer in
//! CI's bounded run too, where `config_roundtrip` runs without it.
#![no_main]

use kube_apf_proxy::config::load::load_sources;
use kube_apf_proxy::config::to_yaml;
use kube_apf_proxy::fuzzing::config_file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(file) = config_file(data) else {
        return;
    };
    let Ok(loaded) = load_sources(&[file]) else {
        return;
    };
    let config = &loaded.config;
    for level in ["exempt", "catch-all"] {
        assert!(config.priority_level(level).is_some(), "no {level} level");
    }
    assert!(
        config.flow_schemas().iter().any(|fs| fs.name == "exempt"),
        "no exempt FlowSchema"
    );
    let _ = config.catch_all();
    let schemas = config.flow_schemas();
    for (i, fs) in schemas.iter().enumerate() {
        assert!(
            config.priority_level(&fs.priority_level).is_some(),
            "FlowSchema {} in use names a missing level",
            fs.name
        );
        assert!(
            schemas[..i].iter().all(|other| other.name != fs.name),
            "FlowSchema {} twice",
            fs.name
        );
    }
    for (fs, level) in config.dangling() {
        assert!(
            config.priority_level(level).is_none(),
            "FlowSchema {} set aside though {level} exists",
            fs.name
        );
    }
    std::hint::black_box(to_yaml(config));
});
