//! Strict decoding of a parsed YAML/JSON value into the raw mirror types.
//!
//! The apiserver decodes strictly when asked (`fieldValidation=Strict`) and otherwise only warns
//! about unknown fields. A configuration file has no later chance to be corrected, so we are
//! stricter: an unknown field or a value of the wrong type is an error, reported with its field
//! path, and decoding goes on so that every problem of the object is found in one run.
//! `null` behaves as in Go's JSON decoding: a zero value, or an absent optional section.

use std::collections::BTreeMap;

use crate::yaml::{Mapping, Value};

use super::*;
use crate::config::field::{go_quote, FieldError, FieldPath};

/// The fields of `metadata` that we accept (all of `ObjectMeta`, so that `kubectl get -o yaml`
/// output loads); only some of them are looked at.
const META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Decodes one object of `kind` (`FlowSchema` or `PriorityLevelConfiguration`) written in
/// `version`, with every decoding problem found. `None` for any other kind.
pub(in crate::config) fn decode_object(
    value: &Value,
    kind: &str,
    version: ApiVersion,
) -> Option<(RawObject, Vec<FieldError>)> {
    let mut dec = Decoder::default();
    let root = FieldPath::default();
    let top = dec.fields(
        Some(value),
        &root,
        &["apiVersion", "kind", "metadata", "spec", "status"],
    );
    let get = |key: &str| top.as_ref().and_then(|t| t.get(key));
    let meta = dec.meta(get("metadata"));
    let status = dec.status(get("status"));
    let spec_path = FieldPath::new("spec");
    let object = match kind {
        "FlowSchema" => RawObject::FlowSchema(RawFlowSchema {
            version,
            meta,
            spec: dec.flow_schema_spec(get("spec"), &spec_path),
            status,
        }),
        "PriorityLevelConfiguration" => RawObject::PriorityLevel(RawPriorityLevelConfiguration {
            version,
            meta,
            spec: dec.priority_level_spec(get("spec"), &spec_path, version),
            status,
        }),
        _ => return None,
    };
    Some((object, dec.errors))
}

/// Describes a value for a wrong-type error.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {}", go_quote(s)),
        Value::Sequence(_) => "a list".to_string(),
        Value::Mapping(_) => "an object".to_string(),
        Value::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

/// Explains an unknown field: the other versions' name for the shares field, or the one known
/// field it is a near miss of (a typo or a wrong case).
fn hint(key: &str, known: &[&str]) -> String {
    let renamed = [
        ("assuredConcurrencyShares", "nominalConcurrencyShares"),
        ("nominalConcurrencyShares", "assuredConcurrencyShares"),
    ];
    if let Some((_, to)) = renamed
        .iter()
        .find(|(from, to)| key == *from && known.contains(to))
    {
        return format!("this apiVersion names the field {to}");
    }
    did_you_mean(key, known)
        .map(|field| format!("did you mean {field:?}?"))
        .unwrap_or_default()
}

/// The known field `key` is close to, when exactly one is: the same but for case, or within an
/// edit distance of 2 (1 for names of up to 4 letters). None when none or several are close.
pub(crate) fn did_you_mean<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = key.to_ascii_lowercase();
    let close = |field: &&&str| {
        let reach = if field.len() <= 4 { 1 } else { 2 };
        field.to_ascii_lowercase() == lower || edit_distance(key, field) <= reach
    };
    let mut candidates = known.iter().filter(close);
    match (candidates.next(), candidates.next()) {
        (Some(field), None) => Some(field),
        _ => None,
    }
}

/// Levenshtein distance over characters (insertions, deletions and substitutions cost 1).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// The fields of one mapping, with its path.
struct Fields<'v> {
    map: &'v Mapping,
    path: FieldPath,
}

impl<'v> Fields<'v> {
    fn get(&self, key: &str) -> Option<&'v Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn path(&self, key: &str) -> FieldPath {
        self.path.child(key)
    }
}

#[derive(Default)]
struct Decoder {
    errors: Vec<FieldError>,
}

// === impl Decoder: scalars and containers ===

impl Decoder {
    fn wrong(&mut self, path: &FieldPath, expected: &str, got: &Value) {
        self.errors
            .push(FieldError::wrong_type(path, expected, &describe(got)));
    }

    /// The fields of an object; `None` when absent or null. Unknown keys are reported.
    fn fields<'v>(
        &mut self,
        v: Option<&'v Value>,
        path: &FieldPath,
        known: &[&str],
    ) -> Option<Fields<'v>> {
        match v? {
            Value::Null => None,
            Value::Mapping(map) => {
                for key in map.keys() {
                    match key.as_str() {
                        Some(k) if known.contains(&k) => {}
                        Some(k) => self
                            .errors
                            .push(FieldError::unknown_field(&path.child(k), &hint(k, known))),
                        None => self.wrong(path, "string keys", key),
                    }
                }
                Some(Fields {
                    map,
                    path: path.clone(),
                })
            }
            other => {
                self.wrong(path, "an object", other);
                None
            }
        }
    }

    fn string(&mut self, f: &Fields<'_>, key: &str) -> String {
        match f.get(key) {
            None => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                self.wrong(&f.path(key), "a string", other);
                String::new()
            }
        }
    }

    fn opt_i32(&mut self, f: &Fields<'_>, key: &str) -> Option<i32> {
        let v = f.get(key)?;
        let n = v.as_i64().and_then(|n| i32::try_from(n).ok());
        if n.is_none() {
            self.wrong(&f.path(key), "an int32", v);
        }
        n
    }

    fn i64(&mut self, f: &Fields<'_>, key: &str) -> i64 {
        let v = f.get(key);
        let n = v.and_then(Value::as_i64);
        if let (Some(v), None) = (v, n) {
            self.wrong(&f.path(key), "an int64", v);
        }
        n.unwrap_or(0)
    }

    fn i32(&mut self, f: &Fields<'_>, key: &str) -> i32 {
        self.opt_i32(f, key).unwrap_or(0)
    }

    fn bool(&mut self, f: &Fields<'_>, key: &str) -> bool {
        match f.get(key) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.wrong(&f.path(key), "a boolean", other);
                false
            }
        }
    }

    fn list<T>(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        mut item: impl FnMut(&mut Self, &Value, &FieldPath) -> T,
    ) -> Vec<T> {
        let path = f.path(key);
        match f.get(key) {
            None => Vec::new(),
            Some(Value::Sequence(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| item(self, v, &path.index(i)))
                .collect(),
            Some(other) => {
                self.wrong(&path, "a list", other);
                Vec::new()
            }
        }
    }

    fn strings(&mut self, f: &Fields<'_>, key: &str) -> Vec<String> {
        self.list(f, key, |dec, v, path| match v {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => {
                dec.wrong(path, "a string", other);
                String::new()
            }
        })
    }

    fn string_map(&mut self, f: &Fields<'_>, key: &str) -> BTreeMap<String, String> {
        let path = f.path(key);
        let mut out = BTreeMap::new();
        match f.get(key) {
            None => {}
            Some(Value::Mapping(map)) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        (Some(k), Value::String(s)) => {
                            out.insert(k.to_string(), s.clone());
                        }
                        (Some(k), Value::Null) => {
                            out.insert(k.to_string(), String::new());
                        }
                        (Some(k), other) => self.wrong(&path.child(k), "a string", other),
                        (None, _) => self.wrong(&path, "string keys", k),
                    }
                }
            }
            Some(other) => self.wrong(&path, "an object", other),
        }
        out
    }
}

// === impl Decoder: metadata and status ===

impl Decoder {
    fn meta(&mut self, v: Option<&Value>) -> RawMeta {
        let Some(f) = self.fields(v, &FieldPath::new("metadata"), META_FIELDS) else {
            return RawMeta::default();
        };
        RawMeta {
            name: self.string(&f, "name"),
            namespace: self.string(&f, "namespace"),
            uid: self.string(&f, "uid"),
            generation: self.i64(&f, "generation"),
            labels: self.string_map(&f, "labels"),
            annotations: self.string_map(&f, "annotations"),
        }
    }

    fn status(&mut self, v: Option<&Value>) -> RawStatus {
        let Some(f) = self.fields(v, &FieldPath::new("status"), &["conditions"]) else {
            return RawStatus::default();
        };
        let condition_types = self.list(&f, "conditions", |dec, v, path| {
            let known = ["type", "status", "lastTransitionTime", "reason", "message"];
            dec.fields(Some(v), path, &known)
                .map(|c| dec.string(&c, "type"))
                .unwrap_or_default()
        });
        RawStatus { condition_types }
    }
}

// === impl Decoder: FlowSchema ===

impl Decoder {
    fn flow_schema_spec(&mut self, v: Option<&Value>, path: &FieldPath) -> RawFlowSchemaSpec {
        let known = [
            "priorityLevelConfiguration",
            "matchingPrecedence",
            "distinguisherMethod",
            "rules",
        ];
        let Some(f) = self.fields(v, path, &known) else {
            return RawFlowSchemaSpec::default();
        };
        let pl = self.fields(
            f.get("priorityLevelConfiguration"),
            &f.path("priorityLevelConfiguration"),
            &["name"],
        );
        let dm = self.fields(
            f.get("distinguisherMethod"),
            &f.path("distinguisherMethod"),
            &["type"],
        );
        RawFlowSchemaSpec {
            priority_level_name: pl.map(|pl| self.string(&pl, "name")).unwrap_or_default(),
            matching_precedence: self.i32(&f, "matchingPrecedence"),
            distinguisher_method: dm.map(|dm| self.string(&dm, "type")),
            rules: self.list(&f, "rules", |dec, v, path| dec.rule(v, path)),
        }
    }

    fn rule(&mut self, v: &Value, path: &FieldPath) -> RawPolicyRulesWithSubjects {
        let known = ["subjects", "resourceRules", "nonResourceRules"];
        let Some(f) = self.fields(Some(v), path, &known) else {
            return RawPolicyRulesWithSubjects::default();
        };
        RawPolicyRulesWithSubjects {
            subjects: self.list(&f, "subjects", |dec, v, path| dec.subject(v, path)),
            resource_rules: self.list(&f, "resourceRules", |dec, v, path| {
                dec.resource_rule(v, path)
            }),
            non_resource_rules: self.list(&f, "nonResourceRules", |dec, v, path| {
                dec.non_resource_rule(v, path)
            }),
        }
    }

    fn subject(&mut self, v: &Value, path: &FieldPath) -> RawSubject {
        let known = ["kind", "user", "group", "serviceAccount"];
        let Some(f) = self.fields(Some(v), path, &known) else {
            return RawSubject::default();
        };
        let user = self.fields(f.get("user"), &f.path("user"), &["name"]);
        let group = self.fields(f.get("group"), &f.path("group"), &["name"]);
        let sa = self.fields(
            f.get("serviceAccount"),
            &f.path("serviceAccount"),
            &["namespace", "name"],
        );
        RawSubject {
            kind: self.string(&f, "kind"),
            user: user.map(|u| self.string(&u, "name")),
            group: group.map(|g| self.string(&g, "name")),
            service_account: sa.map(|sa| RawServiceAccount {
                namespace: self.string(&sa, "namespace"),
                name: self.string(&sa, "name"),
            }),
        }
    }

    fn resource_rule(&mut self, v: &Value, path: &FieldPath) -> RawResourcePolicyRule {
        let known = [
            "verbs",
            "apiGroups",
            "resources",
            "clusterScope",
            "namespaces",
        ];
        let Some(f) = self.fields(Some(v), path, &known) else {
            return RawResourcePolicyRule::default();
        };
        RawResourcePolicyRule {
            verbs: self.strings(&f, "verbs"),
            api_groups: self.strings(&f, "apiGroups"),
            resources: self.strings(&f, "resources"),
            cluster_scope: self.bool(&f, "clusterScope"),
            namespaces: self.strings(&f, "namespaces"),
        }
    }

    fn non_resource_rule(&mut self, v: &Value, path: &FieldPath) -> RawNonResourcePolicyRule {
        let Some(f) = self.fields(Some(v), path, &["verbs", "nonResourceURLs"]) else {
            return RawNonResourcePolicyRule::default();
        };
        RawNonResourcePolicyRule {
            verbs: self.strings(&f, "verbs"),
            non_resource_urls: self.strings(&f, "nonResourceURLs"),
        }
    }
}

// === impl Decoder: PriorityLevelConfiguration ===

impl Decoder {
    fn priority_level_spec(
        &mut self,
        v: Option<&Value>,
        path: &FieldPath,
        version: ApiVersion,
    ) -> RawPriorityLevelSpec {
        let Some(f) = self.fields(v, path, &["type", "limited", "exempt"]) else {
            return RawPriorityLevelSpec::default();
        };
        let limited = self.fields(
            f.get("limited"),
            &f.path("limited"),
            &[
                version.shares_field(),
                "lendablePercent",
                "borrowingLimitPercent",
                "limitResponse",
            ],
        );
        let exempt = self.fields(
            f.get("exempt"),
            &f.path("exempt"),
            &["nominalConcurrencyShares", "lendablePercent"],
        );
        RawPriorityLevelSpec {
            type_: self.string(&f, "type"),
            limited: limited.map(|l| self.limited(&l, version)),
            exempt: exempt.map(|e| RawExempt {
                nominal_concurrency_shares: self.opt_i32(&e, "nominalConcurrencyShares"),
                lendable_percent: self.opt_i32(&e, "lendablePercent"),
            }),
        }
    }

    fn limited(&mut self, f: &Fields<'_>, version: ApiVersion) -> RawLimited {
        let shares = self.opt_i32(f, version.shares_field());
        // Before v1 the shares field is a plain int32: absent and 0 are the same value.
        let shares = match version {
            ApiVersion::V1 => shares,
            _ => Some(shares.unwrap_or(0)),
        };
        let lr = self.fields(
            f.get("limitResponse"),
            &f.path("limitResponse"),
            &["type", "queuing"],
        );
        let limit_response = match lr {
            None => RawLimitResponse::default(),
            Some(lr) => {
                let q = self.fields(
                    lr.get("queuing"),
                    &lr.path("queuing"),
                    &["queues", "handSize", "queueLengthLimit"],
                );
                RawLimitResponse {
                    type_: self.string(&lr, "type"),
                    queuing: q.map(|q| RawQueuing {
                        queues: self.i32(&q, "queues"),
                        hand_size: self.i32(&q, "handSize"),
                        queue_length_limit: self.i32(&q, "queueLengthLimit"),
                    }),
                }
            }
        };
        RawLimited {
            shares,
            lendable_percent: self.opt_i32(f, "lendablePercent"),
            borrowing_limit_percent: self.opt_i32(f, "borrowingLimitPercent"),
            limit_response,
        }
    }
}

#[cfg(test)]
mod did_you_mean_tests {
    use super::{did_you_mean, edit_distance, hint};

    const SPEC: &[&str] = &[
        "priorityLevelConfiguration",
        "matchingPrecedence",
        "distinguisherMethod",
        "rules",
    ];

    #[test]
    fn edit_distance_counts_single_edits() {
        let cases = [
            ("", "", 0),
            ("rules", "rules", 0),
            ("rule", "rules", 1),
            ("rulse", "rules", 2),
            ("matchingPrecendence", "matchingPrecedence", 1),
            ("kind", "spec", 4),
        ];
        for (a, b, want) in cases {
            assert_eq!(edit_distance(a, b), want, "{a} {b}");
        }
    }

    #[test]
    fn a_near_miss_of_one_known_field_is_named() {
        let cases = [
            ("matchingPrecendence", Some("matchingPrecedence")),
            ("MatchingPrecedence", Some("matchingPrecedence")),
            ("rule", Some("rules")),
            ("priorityLevel", None),
            ("unknownField", None),
        ];
        for (key, want) in cases {
            assert_eq!(did_you_mean(key, SPEC), want, "{key}");
        }
        // Two equally close fields: no guess.
        assert_eq!(did_you_mean("ab", &["aa", "bb"]), None);
        assert_eq!(
            hint("distinguisherMetod", SPEC),
            "did you mean \"distinguisherMethod\"?"
        );
        assert_eq!(hint("somethingElse", SPEC), "");
    }
}
