//! `config dump`: a configuration file (its first 8 KiB) that loads, dumped to YAML and loaded
//! again: the heavier half of `config_load`.
//!
//! Input: as `config_load`'s. Invariants: a configuration that loads dumps to YAML that loads
//! again into the same objects (dump → load → dump is stable).
#![no_main]

use kube_apf_proxy::config::load::{load_sources, SourceFile};
use kube_apf_proxy::config::parse::Format;
use kube_apf_proxy::config::to_yaml;
use kube_apf_proxy::fuzzing::config_file;
use libfuzzer_sys::fuzz_target;

/// The longest file read: the rest is cut off (the largest configuration fixture is 7.3 KiB).
const MAX_BYTES: usize = 8192;

fuzz_target!(|data: &[u8]| {
    let data = &data[..data.len().min(MAX_BYTES + 1)];
    let Some(file) = config_file(data) else {
        return;
    };
    let Ok(loaded) = load_sources(&[file]) else {
        return;
    };
    let dumped = to_yaml(&loaded.config);
    let again = SourceFile {
        name: "dump.yaml".to_string(),
        bytes: dumped.clone().into_bytes(),
        format: Format::Yaml,
    };
    let reloaded = match load_sources(&[again]) {
        Ok(reloaded) => reloaded,
        Err(error) => panic!("the dump of a valid configuration does not load: {error}\n{dumped}"),
    };
    // Comments (the header, the `# Dangling:` notes) are not part of the objects compared.
    assert_eq!(
        objects(&to_yaml(&reloaded.config)),
        objects(&dumped),
        "dump → load → dump is stable"
    );
});

fn objects(yaml: &str) -> Vec<&str> {
    yaml.lines().filter(|l| !l.starts_with('#')).collect()
}
