//! A replica's Lease, both ways: the JSON written (a merge patch, or the object to create) and
//! what a Lease read from the API says ([`LeaseState`]). Sans-I/O.
//!
//! The record lives in one annotation, [`ANNOTATION`], as versioned JSON
//! (`{"version":1,"share":..,"claim":..,"demand":..,"levels":{..},"seq":..}`). A version this code does
//! not know, or a value that does not decode, is [`LeaseState::Unreadable`]: the protocol then
//! counts that replica as holding the whole budget.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use serde::{Deserialize, Serialize};

use super::protocol::{LeaseState, Record};

/// The label every replica's Lease carries, and the selector of the watch.
pub const LABEL: (&str, &str) = ("app.kubernetes.io/name", "kube-apf-proxy");

/// The annotation that holds the record.
pub const ANNOTATION: &str = "apf.kube-apf-proxy.io/coordination";

/// The record format written.
pub const RECORD_VERSION: u32 = 1;

/// Lease names are `kube-apf-proxy-<ID>`.
pub const NAME_PREFIX: &str = "kube-apf-proxy-";

/// The annotation's JSON.
#[derive(Debug, Serialize, Deserialize)]
struct RawRecord {
    version: u32,
    share: u32,
    claim: u32,
    #[serde(default)]
    demand: f64,
    #[serde(default)]
    levels: BTreeMap<String, f64>,
    #[serde(default)]
    seq: u64,
}

/// The Lease name of replica `id`.
pub fn lease_name(id: &str) -> String {
    format!("{NAME_PREFIX}{id}")
}

/// The collection path of the Leases in `namespace`.
pub fn collection_path(namespace: &str) -> String {
    format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases")
}

/// The path of replica `id`'s Lease in `namespace`.
pub fn object_path(namespace: &str, id: &str) -> String {
    format!("{}/{}", collection_path(namespace), lease_name(id))
}

/// The label selector, query-encoded.
pub fn label_selector() -> String {
    format!(
        "labelSelector={}%3D{}",
        LABEL.0.replace('/', "%2F"),
        LABEL.1
    )
}

/// The annotation's value for `record`.
pub fn encode_record(record: &Record) -> String {
    let raw = RawRecord {
        version: RECORD_VERSION,
        share: record.share,
        claim: record.claim,
        demand: record.demand,
        levels: record.levels.clone(),
        seq: record.seq,
    };
    serde_json::to_string(&raw).unwrap_or_default()
}

/// The record in an annotation's value; `None` for another version or a value that does not
/// decode.
pub fn decode_record(value: &str) -> Option<Record> {
    let raw: RawRecord = serde_json::from_str(value).ok()?;
    if raw.version != RECORD_VERSION || !raw.demand.is_finite() {
        return None;
    }
    Some(Record {
        share: raw.share,
        claim: raw.claim.max(raw.share),
        demand: raw.demand.max(0.0),
        levels: raw
            .levels
            .into_iter()
            .filter(|(_, seats)| seats.is_finite())
            .map(|(level, seats)| (level, seats.max(0.0)))
            .collect(),
        seq: raw.seq,
    })
}

/// What a Lease read from the API says: its replica id (from its name), its resource version,
/// and its state. `None` for a Lease that is not a replica's (another name).
pub fn read(lease: &Lease) -> Option<(String, String, LeaseState)> {
    let name = lease.metadata.name.as_deref()?;
    let id = name.strip_prefix(NAME_PREFIX)?.to_string();
    let version = lease.metadata.resource_version.clone().unwrap_or_default();
    let holder = lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or("");
    let state = if holder.is_empty() {
        LeaseState::Released
    } else {
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION))
            .and_then(|v| decode_record(v))
            .map_or(LeaseState::Unreadable, LeaseState::Holding)
    };
    Some((id, version, state))
}

/// The Lease of replica `id` holding `record`, renewed at `renew_time`: the body of a create,
/// and of a merge patch (which replaces the fields it names and leaves the rest).
pub fn body(
    id: &str,
    record: &Record,
    lease_duration_seconds: i32,
    renew_time: std::time::SystemTime,
) -> serde_json::Value {
    let since_epoch = renew_time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
    let nanos = i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0);
    let renew = k8s_openapi::jiff::Timestamp::new(seconds, nanos)
        .ok()
        .and_then(|t| serde_json::to_value(MicroTime(t)).ok())
        .unwrap_or_default();
    serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease_name(id),
            "labels": { LABEL.0: LABEL.1 },
            "annotations": { ANNOTATION: encode_record(record) },
        },
        "spec": {
            "holderIdentity": id,
            "leaseDurationSeconds": lease_duration_seconds,
            "renewTime": renew,
        },
    })
}

/// The merge patch that gives the Lease up: `holderIdentity` emptied (what client-go's leader
/// election writes on release), the record's share 0.
pub fn release_patch() -> serde_json::Value {
    serde_json::json!({
        "metadata": { "annotations": { ANNOTATION: serde_json::Value::Null } },
        "spec": { "holderIdentity": "" },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            share: 10,
            claim: 12,
            demand: 3.5,
            levels: BTreeMap::from([("workload-low".to_string(), 3.5)]),
            seq: 7,
        }
    }

    fn lease_from(body: serde_json::Value, rv: &str) -> Lease {
        let mut lease: Lease = serde_json::from_value(body).expect("a Lease");
        lease.metadata.resource_version = Some(rv.into());
        lease
    }

    #[test]
    fn a_written_lease_reads_back_as_the_same_record() {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let body = body("pod-a", &record(), 15, at);
        assert_eq!(body["metadata"]["name"], "kube-apf-proxy-pod-a");
        assert_eq!(body["metadata"]["labels"][LABEL.0], LABEL.1);
        assert_eq!(body["spec"]["renewTime"], "2023-11-14T22:13:20.000000Z");
        let read = read(&lease_from(body, "42"));
        assert_eq!(
            read,
            Some((
                "pod-a".to_string(),
                "42".to_string(),
                LeaseState::Holding(record())
            ))
        );
    }

    #[test]
    fn unknown_versions_and_bad_values_are_unreadable() {
        for value in [
            r#"{"version":2,"share":1,"claim":1}"#,
            r#"{"share":1,"claim":1}"#,
            "not json",
            r#"{"version":1,"share":-1,"claim":1}"#,
        ] {
            assert_eq!(decode_record(value), None, "{value}");
        }
        let mut lease = lease_from(body("b", &record(), 15, std::time::UNIX_EPOCH), "1");
        lease.metadata.annotations = None;
        assert_eq!(read(&lease).map(|r| r.2), Some(LeaseState::Unreadable));
    }

    #[test]
    fn a_record_read_writes_back_as_itself_whatever_its_numbers() {
        // Found by the coordination_record fuzz target: a 51-digit integer demand. JSON numbers
        // must decode to the nearest f64, or the value written back decodes to another one.
        let value = r#"{"version":1,"share":11,"claim":14,"demand":112.5,"levels":{"global-default":117643124444444444444444444444444444444444444400000}}"#;
        let read = decode_record(value).expect("a record");
        assert_eq!(decode_record(&encode_record(&read)), Some(read));
        // A level's demand is a seat count like the total's: negative clamps to zero.
        let negative = r#"{"version":1,"share":1,"claim":1,"levels":{"a":-3}}"#;
        assert_eq!(decode_record(negative).expect("a record").levels["a"], 0.0);
    }

    #[test]
    fn an_empty_holder_is_a_released_lease_and_other_names_are_ignored() {
        let mut lease = lease_from(body("b", &record(), 15, std::time::UNIX_EPOCH), "1");
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = Some(String::new());
        }
        assert_eq!(read(&lease).map(|r| r.2), Some(LeaseState::Released));
        lease.metadata.name = Some("someone-else".into());
        assert_eq!(read(&lease), None);
    }

    #[test]
    fn the_selector_is_query_encoded() {
        assert_eq!(
            label_selector(),
            "labelSelector=app.kubernetes.io%2Fname%3Dkube-apf-proxy"
        );
    }
}
