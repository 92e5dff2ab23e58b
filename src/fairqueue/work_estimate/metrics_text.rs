//! Reads object counts and sizes from the upstream's Prometheus metrics.
//!
//! The apiserver publishes what its storage layer polls every minute (`UpdateStoreStats` in
//! `storage/etcd3/metrics/metrics.go`): `apiserver_storage_objects{resource="pods.apps"}`
//! (stable, deprecated in 1.34), `apiserver_resource_objects{group,resource}` (1.34+) and, with
//! `SizeBasedListCostEstimate`, `apiserver_resource_size_estimate_bytes{group,resource}` (average
//! size × count). A failed poll is published as −1.

/// The tracker key of a group and resource: `GroupResource.String()`, i.e. `resource` for the core
/// group and `resource.group` otherwise.
pub fn resource_key(group: &str, resource: &str) -> String {
    with_resource_key(group, resource, str::to_owned)
}

/// Gives [`resource_key`]'s key to `use_key` without allocating it when it fits on the stack
/// (the object-count look-up of every list does this).
pub(super) fn with_resource_key<T>(
    group: &str,
    resource: &str,
    use_key: impl FnOnce(&str) -> T,
) -> T {
    if group.is_empty() {
        return use_key(resource);
    }
    let mut buf = [0u8; 128];
    let len = resource.len() + 1 + group.len();
    if len <= buf.len() {
        buf[..resource.len()].copy_from_slice(resource.as_bytes());
        buf[resource.len()] = b'.';
        buf[resource.len() + 1..len].copy_from_slice(group.as_bytes());
        // Two strings joined by an ASCII dot are UTF-8.
        if let Ok(key) = std::str::from_utf8(&buf[..len]) {
            return use_key(key);
        }
    }
    use_key(&format!("{resource}.{group}"))
}

/// What one sample measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageMetric {
    /// Number of stored objects.
    ObjectCount,
    /// Estimated total size of the stored objects, in bytes.
    SizeEstimateBytes,
}

/// One sample of a storage metric, keyed like the object count tracker (`resource.group`).
#[derive(Debug, Clone, PartialEq)]
pub struct StorageSample {
    /// `resource` for the core group, else `resource.group`.
    pub key: String,
    /// The metric family.
    pub metric: StorageMetric,
    /// The sample value (−1 when the apiserver failed to poll its storage).
    pub value: f64,
}

/// Extracts the storage samples from a Prometheus text exposition; other families, comments and
/// malformed lines are skipped.
pub fn parse_storage_metrics(text: &str) -> Vec<StorageSample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<StorageSample> {
    let line = line.trim();
    if line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = &line[..name_end];
    let metric = match name {
        "apiserver_storage_objects" | "apiserver_resource_objects" => StorageMetric::ObjectCount,
        "apiserver_resource_size_estimate_bytes" => StorageMetric::SizeEstimateBytes,
        _ => return None,
    };
    let rest = line[name_end..].trim_start();
    let (labels, rest) = match rest.strip_prefix('{') {
        Some(after) => parse_labels(after)?,
        None => (Vec::new(), rest),
    };
    // The value, then an optional timestamp.
    let value: f64 = rest.split_whitespace().next()?.parse().ok()?;
    if !value.is_finite() {
        return None;
    }
    let label = |n: &str| labels.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    let key = if name == "apiserver_storage_objects" {
        // Already `GroupResource.String()`.
        label("resource")?.to_string()
    } else {
        resource_key(label("group").unwrap_or(""), label("resource")?)
    };
    Some(StorageSample { key, metric, value })
}

/// Parses `name="value",...}` and returns the labels and the text after the `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Some((labels, rest));
        }
        let (name, after) = s.split_once('=')?;
        let after = after.trim_start().strip_prefix('"')?;
        let (value, after) = parse_quoted(after)?;
        labels.push((name.trim().to_string(), value));
        s = after.trim_start();
        s = s.strip_prefix(',').unwrap_or(s);
    }
}

/// Reads a label value up to its closing quote, undoing `\\`, `\"` and `\n`.
fn parse_quoted(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_counts_and_sizes_of_every_version() {
        let text = r#"
# HELP apiserver_storage_objects [STABLE] Number of stored objects
# TYPE apiserver_storage_objects gauge
apiserver_storage_objects{resource="pods"} 1234
apiserver_storage_objects{resource="deployments.apps"} 7 1700000000000
apiserver_resource_objects{group="",resource="pods"} 1234
apiserver_resource_objects{resource="leases",group="coordination.k8s.io",} -1
apiserver_resource_size_estimate_bytes{group="apps",resource="deployments"} 2.1e+04
apiserver_storage_objects_other{resource="x"} 1
apiserver_request_total{verb="GET"} 5
apiserver_storage_objects{resource="bad"} NaN
apiserver_storage_objects{resource="broken} 3
apiserver_storage_objects{resource="esc\"aped"} 3
"#;
        let got = parse_storage_metrics(text);
        let want = [
            ("pods", StorageMetric::ObjectCount, 1234.0),
            ("deployments.apps", StorageMetric::ObjectCount, 7.0),
            ("pods", StorageMetric::ObjectCount, 1234.0),
            (
                "leases.coordination.k8s.io",
                StorageMetric::ObjectCount,
                -1.0,
            ),
            (
                "deployments.apps",
                StorageMetric::SizeEstimateBytes,
                21000.0,
            ),
            ("esc\"aped", StorageMetric::ObjectCount, 3.0),
        ];
        let want: Vec<StorageSample> = want
            .iter()
            .map(|(k, m, v)| StorageSample {
                key: k.to_string(),
                metric: *m,
                value: *v,
            })
            .collect();
        assert_eq!(got, want);
    }
}
