//! Judging one admission request: validation errors deny, lint findings warn.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

use super::{AdmissionRequest, AdmissionResponse};
use crate::config::load::{load_parsed, load_sources, parse_sources, ParsedSources, SourceFile};
use crate::config::parse::{prescan, Format};
use crate::config::{ConfigError, Loaded, Problem};
use crate::lint::{lint, Code, Finding, LintOptions};

/// The longest warning the apiserver passes on whole (`truncateItemRunes` in k8s.io/apiserver
/// `pkg/endpoints/filters/warning.go`); longer ones are cut here, at a word, before it cuts them
/// mid-word.
pub const MAX_WARNING_CHARS: usize = 256;

/// The most findings turned into warnings; the rest are counted in the last one.
const MAX_WARNINGS: usize = 10;

/// The most characters of the `lint-findings` audit annotation.
const MAX_AUDIT_CHARS: usize = 4096;

/// The file name problems about the reviewed object carry.
const OBJECT_FILE: &str = "request.object";

/// Judges admission requests against a reference configuration.
#[derive(Debug, Clone)]
pub struct Reviewer {
    /// The reference configuration's files, parsed once: the rest of the cluster's flow
    /// control, as the webhook sees it.
    base: ParsedSources,
    /// `(code, kind, name, field)` of the findings the reference configuration has on its own,
    /// so that a review reports only what the object adds about other objects.
    base_findings: BTreeSet<(String, String, String, String)>,
    options: LintOptions,
    configmap_label: (String, String),
}

fn key(f: &Finding) -> (String, String, String, String) {
    (
        f.code.to_string(),
        f.kind.to_string(),
        f.name.clone(),
        f.field_path.clone(),
    )
}

impl Reviewer {
    /// A reviewer over `base`, which must load (the webhook refuses to start otherwise).
    /// `configmap_label` (`key`, `value`) selects the ConfigMaps that hold the proxy's
    /// configuration.
    pub fn new(
        base: Vec<SourceFile>,
        options: LintOptions,
        configmap_label: (String, String),
    ) -> Result<Reviewer, ConfigError> {
        let loaded = load_sources(&base)?;
        let base_findings = lint(&loaded, &options).iter().map(key).collect();
        Ok(Reviewer {
            base: parse_sources(&base),
            base_findings,
            options,
            configmap_label,
        })
    }

    /// The answer to one request.
    pub fn review(&self, request: &AdmissionRequest) -> AdmissionResponse {
        let mut response = AdmissionResponse {
            uid: request.uid.clone(),
            allowed: true,
            ..Default::default()
        };
        let (Some(object), "CREATE" | "UPDATE", "") = (
            &request.object,
            request.operation.as_str(),
            request.sub_resource.as_str(),
        ) else {
            return response;
        };
        let resource = &request.resource;
        let judged = match (resource.group.as_str(), resource.resource.as_str()) {
            (crate::config::raw::GROUP, "flowschemas" | "prioritylevelconfigurations") => {
                self.review_object(object, request.operation == "CREATE")
            }
            ("", "configmaps") if self.selects(object) => self.review_configmap(request, object),
            _ => return response,
        };
        match judged {
            Judged::Denied(status) => {
                response.allowed = false;
                response.status = Some(*status);
            }
            Judged::Allowed { findings, notes } => {
                let kind = object["kind"].as_str().unwrap_or_default();
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                response.warnings = warnings(&findings, notes, Some((kind, name)));
                response.audit_annotations = audit_annotations(&findings);
            }
        }
        response
    }

    fn selects(&self, object: &serde_json::Value) -> bool {
        let (k, v) = &self.configmap_label;
        object["metadata"]["labels"][k].as_str() == Some(v)
    }

    /// Judges one FlowSchema or PriorityLevelConfiguration against the reference configuration.
    /// A level being created is not reported unused: `kubectl apply` creates a level before the
    /// FlowSchemas that will use it, and a warning then would be noise on every normal apply.
    fn review_object(&self, object: &serde_json::Value, create: bool) -> Judged {
        let file = SourceFile {
            name: OBJECT_FILE.to_string(),
            bytes: object.to_string().into_bytes(),
            format: Format::Json,
        };
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let group_kind = format!("{kind}.{}", crate::config::raw::GROUP);
        let object_parsed = parse_sources(std::slice::from_ref(&file));
        let alone = match load_parsed(&ParsedSources::default(), &object_parsed) {
            Ok(alone) => alone,
            Err(ConfigError::Invalid { problems, .. }) => {
                return Judged::Denied(Box::new(invalid(
                    &group_kind,
                    kind,
                    name,
                    &problems,
                    field_of,
                )));
            }
            Err(e) => return Judged::note(format!("not checked: {e}")),
        };
        if alone.sources.is_empty() {
            let version = object["apiVersion"].as_str().unwrap_or_default();
            return Judged::note(format!(
                "kube-apf-proxy does not read {version}/{kind}: not checked"
            ));
        }
        match load_parsed(&self.base, &object_parsed) {
            Ok(combined) => {
                let findings = lint(&combined, &self.options)
                    .into_iter()
                    .filter(|f| {
                        (f.kind == kind && f.name == name) || !self.base_findings.contains(&key(f))
                    })
                    .filter(|f| !(create && f.code == Code::PriorityLevelUnused && f.name == name))
                    .collect();
                // What the apiserver's ensurer will do to the object (a suggested object marked
                // for auto-update gets its built-in spec back): the client should know.
                let label = format!("{kind}/{name}");
                let notes = combined
                    .warnings
                    .iter()
                    .filter(|w| w.file == OBJECT_FILE && w.object == label)
                    .filter(|w| w.message.starts_with("spec: "))
                    .map(|w| w.message.clone())
                    .collect();
                Judged::Allowed { findings, notes }
            }
            // The reference configuration was valid alone and the object alone: this is a
            // conflict between them that the loader names (it never happens with one object).
            Err(e) => Judged::note(format!("not checked against the rest: {e}")),
        }
    }

    fn review_configmap(&self, request: &AdmissionRequest, object: &serde_json::Value) -> Judged {
        let mut files: Vec<SourceFile> = object["data"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| {
                let format = match key.rsplit_once('.')?.1 {
                    "yaml" | "yml" => Format::Yaml,
                    "json" => Format::Json,
                    _ => return None,
                };
                Some(SourceFile {
                    name: format!("data[{key}]"),
                    bytes: value.as_str().unwrap_or_default().as_bytes().to_vec(),
                    format,
                })
            })
            .collect();
        // A ConfigMap volume's files are read in name order, as the keys sort.
        files.sort_by(|a, b| a.name.cmp(&b.name));
        let name = object["metadata"]["name"].as_str().unwrap_or(&request.name);
        if let Some(problem) = over_budget(&files) {
            return Judged::Denied(Box::new(invalid(
                "ConfigMap",
                "ConfigMap",
                name,
                &[problem],
                |p| (p.file.clone(), p.message.clone()),
            )));
        }
        match load_sources(&files) {
            Ok(loaded) => {
                let mut notes = Vec::new();
                if files.is_empty() {
                    notes.push(
                        "no .yaml, .yml or .json keys: the proxy would run on the mandatory \
                         objects only"
                            .to_string(),
                    );
                }
                Judged::Allowed {
                    findings: lint(&loaded, &self.options),
                    notes,
                }
            }
            Err(ConfigError::Invalid { problems, .. }) => Judged::Denied(Box::new(invalid(
                "ConfigMap",
                "ConfigMap",
                name,
                &problems,
                |p| {
                    let message = if p.object.is_empty() {
                        p.message.clone()
                    } else {
                        format!("{}: {}", p.object, p.message)
                    };
                    (p.file.clone(), message)
                },
            ))),
            Err(e) => Judged::note(format!("not checked: {e}")),
        }
    }
}

/// The most bytes of configuration one ConfigMap review parses: the apiserver's own limit on a
/// ConfigMap's data (`MaxSecretSize`, 1 MiB), so nothing it would store is refused.
pub const MAX_CONFIGMAP_BYTES: usize = 1 << 20;

/// A problem when the ConfigMap's configuration keys together exceed [`MAX_CONFIGMAP_BYTES`] or
/// the parser's token budget ([`prescan::MAX_TOKENS`], over all the keys), or one nests too
/// deep: checked before any of them is parsed.
fn over_budget(files: &[SourceFile]) -> Option<Problem> {
    let bytes: usize = files.iter().map(|f| f.bytes.len()).sum();
    if bytes > MAX_CONFIGMAP_BYTES {
        return Some(Problem::new(
            "data",
            "",
            format!("the configuration keys hold {bytes} bytes, more than the {MAX_CONFIGMAP_BYTES} a ConfigMap may hold"),
        ));
    }
    let mut budget = prescan::MAX_TOKENS;
    for file in files {
        let text = String::from_utf8_lossy(&file.bytes);
        match prescan::prescan(&text, budget) {
            Ok(shape) => budget -= shape.tokens,
            Err(e) => {
                return Some(Problem::new(
                    &file.name,
                    "",
                    format!("not parsed: {e} (counted over all the configuration keys)"),
                ))
            }
        }
    }
    None
}

/// What a review found.
enum Judged {
    Denied(Box<Status>),
    Allowed {
        findings: Vec<Finding>,
        notes: Vec<String>,
    },
}

impl Judged {
    fn note(note: String) -> Judged {
        Judged::Allowed {
            findings: Vec::new(),
            notes: vec![note],
        }
    }
}

/// A problem of a single object as `(field, message)`: the message's leading field path, when
/// it has one (`spec.x: Invalid value: ...`).
fn field_of(p: &Problem) -> (String, String) {
    match p.message.split_once(": ") {
        Some((field, rest)) if !field.contains(' ') => (field.to_string(), rest.to_string()),
        _ => (String::new(), p.message.clone()),
    }
}

/// The `reason` of a `StatusCause`, from the error's type as `field.Error` writes it.
fn cause_reason(message: &str) -> &'static str {
    let types = [
        ("Required value", "FieldValueRequired"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Forbidden", "FieldValueForbidden"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
    ];
    types
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map_or("FieldValueInvalid", |(_, reason)| reason)
}

/// The apiserver's answer to an invalid object (`errors.NewInvalid`): 422, reason `Invalid`,
/// message `KIND.GROUP "NAME" is invalid: [...]`, one cause per problem.
fn invalid(
    qualified_kind: &str,
    kind: &str,
    name: &str,
    problems: &[Problem],
    split: impl Fn(&Problem) -> (String, String),
) -> Status {
    let causes: Vec<StatusCause> = problems
        .iter()
        .map(|p| {
            let (field, message) = split(p);
            StatusCause {
                reason: Some(cause_reason(&message).to_string()),
                field: (!field.is_empty()).then_some(field),
                message: Some(message),
            }
        })
        .collect();
    let listed: Vec<String> = problems
        .iter()
        .map(|p| {
            let (field, message) = split(p);
            if field.is_empty() {
                message
            } else {
                format!("{field}: {message}")
            }
        })
        .collect();
    let all = match listed.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    Status {
        status: Some("Failure".to_string()),
        message: Some(format!("{qualified_kind} {name:?} is invalid: {all}")),
        reason: Some("Invalid".to_string()),
        code: Some(422),
        details: Some(StatusDetails {
            name: Some(name.to_string()),
            group: qualified_kind.split_once('.').map(|(_, g)| g.to_string()),
            kind: Some(kind.to_string()),
            causes: Some(causes),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Cuts `s` to at most [`MAX_WARNING_CHARS`] characters at a word boundary, marking the cut
/// with `...`; a single word longer than that is cut where it must be.
pub(super) fn shorten(s: &str) -> String {
    if s.chars().count() <= MAX_WARNING_CHARS {
        return s.to_string();
    }
    let budget = MAX_WARNING_CHARS - 3;
    let end = s.char_indices().nth(budget).map_or(s.len(), |(i, _)| i);
    let (kept, rest) = s.split_at(end);
    // Whole words: up to the limit when a word ends there, else up to the last space before it.
    let cut = if rest.starts_with(' ') {
        end
    } else {
        kept.rfind(' ').unwrap_or(end)
    };
    format!("{}...", s[..cut].trim_end())
}

/// One warning per finding: `[CODE] message` about the reviewed object itself (the client knows
/// which object it sent), `KIND/NAME: [CODE] message` about another.
fn warnings(
    findings: &[Finding],
    notes: Vec<String>,
    reviewed: Option<(&str, &str)>,
) -> Vec<String> {
    let mut out: Vec<String> = notes.iter().map(|n| shorten(n)).collect();
    for f in findings.iter().take(MAX_WARNINGS) {
        let text = if reviewed == Some((f.kind, f.name.as_str())) {
            format!("[{}] {}", f.code, f.message)
        } else {
            format!("{}/{}: [{}] {}", f.kind, f.name, f.code, f.message)
        };
        out.push(shorten(&text));
    }
    if findings.len() > MAX_WARNINGS {
        let more = findings.len() - MAX_WARNINGS;
        out.push(format!(
            "... and {more} more finding(s): run kube-apf-proxy lint"
        ));
    }
    out
}

fn audit_annotations(findings: &[Finding]) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    if findings.is_empty() {
        return annotations;
    }
    let codes: BTreeSet<&str> = findings.iter().map(|f| f.code.as_str()).collect();
    annotations.insert(
        "lint-codes".to_string(),
        codes.into_iter().collect::<Vec<_>>().join(","),
    );
    let mut text: String = findings
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    if text.len() > MAX_AUDIT_CHARS {
        let mut cut = MAX_AUDIT_CHARS;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    annotations.insert("lint-findings".to_string(), text);
    annotations
}

impl Reviewer {
    /// The reference configuration as loaded.
    pub fn base(&self) -> Result<Loaded, ConfigError> {
        load_parsed(&self.base, &ParsedSources::default())
    }
}
