//! The loading pipeline: read files → parse documents → default → validate → resolve.

use std::collections::BTreeMap;
use std::path::Path;

use super::parse::{parse_file, Format, ParsedObject};
use super::raw::RawObject;
use super::{
    convert, defaults, maintain, validate, Config, ConfigError, Loaded, ObjectSource, Problem,
};

/// A configuration file's name (as problems name it) and content.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as given (directory joined with the file name).
    pub name: String,
    /// The bytes of the file.
    pub bytes: Vec<u8>,
    /// YAML or JSON, by extension.
    pub format: Format,
}

fn format_of(path: &Path) -> Option<Format> {
    match path.extension()?.to_str()? {
        "yaml" | "yml" => Some(Format::Yaml),
        "json" => Some(Format::Json),
        _ => None,
    }
}

/// Reads the `.yaml`, `.yml` and `.json` files of `dir`, sorted by name; other names (and so
/// ordinary subdirectories) are ignored. An entry with a configuration name that is not a file (a
/// directory put where `flowcontrol.yaml` was) is an error: ignoring it would drop its objects
/// silently, where a reload must keep the last good configuration.
pub fn read_dir(dir: &Path) -> Result<Vec<SourceFile>, ConfigError> {
    let read_dir_err = |source| ConfigError::ReadDir {
        dir: dir.to_path_buf(),
        source,
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_dir_err)? {
        let path = entry.map_err(read_dir_err)?.path();
        if let Some(format) = format_of(&path) {
            paths.push((path, format));
        }
    }
    paths.sort_by(|a, b| a.0.cmp(&b.0));
    let mut files = Vec::new();
    for (path, format) in paths {
        let meta = std::fs::metadata(&path).map_err(|source| ConfigError::ReadFile {
            path: path.clone(),
            source,
        })?;
        if !meta.is_file() {
            return Err(ConfigError::ReadFile {
                path,
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            });
        }
        let bytes = read_bounded(&path).map_err(|source| ConfigError::ReadFile {
            path: path.clone(),
            source,
        })?;
        files.push(SourceFile {
            name: path.display().to_string(),
            bytes,
            format,
        });
    }
    Ok(files)
}

/// The largest configuration file read; the bootstrap configuration is about 10 KiB.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            MAX_FILE_BYTES >> 20
        )));
    }
    Ok(bytes)
}

/// Parses, defaults, validates and resolves the given files.
pub fn load_sources(files: &[SourceFile]) -> Result<Loaded, ConfigError> {
    load_with_overrides(files, &[])
}

/// Like [`load_sources`], for objects read from a cluster: as stored, without the bootstrap
/// ensurer's rules ([`super::maintain`]). A cluster whose apiserver runs flow control has applied
/// them already (with its own version's built-in specs); one that does not never applies them.
pub fn load_sources_as_stored(files: &[SourceFile]) -> Result<Loaded, ConfigError> {
    load_parsed_with(
        &parse_sources(files),
        &ParsedSources::default(),
        Ensurer::AsStored,
    )
}

/// Whether the apiserver's bootstrap ensurer's rules apply to the objects loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ensurer {
    /// Files: suggested objects marked for auto-update get the built-in spec.
    Applies,
    /// A cluster's objects, as stored.
    AsStored,
}

/// Like [`load_sources`] over `files` followed by `overrides`, except that an object of
/// `overrides` replaces the object of the same kind and name in `files` (what the configuration
/// would be once the object is created or updated: the admission webhook's view).
pub fn load_with_overrides(
    files: &[SourceFile],
    overrides: &[SourceFile],
) -> Result<Loaded, ConfigError> {
    load_parsed(&parse_sources(files), &parse_sources(overrides))
}

/// Files read and split into objects, not yet defaulted or validated: what
/// [`load_parsed`] starts from, kept by callers that load the same files many times.
#[derive(Debug, Clone, Default)]
pub struct ParsedSources {
    /// The file names, in reading order.
    files: Vec<String>,
    objects: Vec<ParsedObject>,
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
}

/// Reads the documents of every file.
pub fn parse_sources(files: &[SourceFile]) -> ParsedSources {
    let mut out = ParsedSources::default();
    for file in files {
        out.files.push(file.name.clone());
        let Ok(text) = std::str::from_utf8(&file.bytes) else {
            out.problems
                .push(Problem::new(&file.name, "", "not valid UTF-8".into()));
            continue;
        };
        let parsed = parse_file(&file.name, text, file.format);
        out.problems.extend(parsed.problems);
        out.warnings.extend(parsed.warnings);
        out.objects.extend(parsed.objects);
    }
    out
}

/// Defaults, validates and resolves `base` followed by `overrides`, an object of `overrides`
/// replacing the object of the same kind and name in `base`.
pub fn load_parsed(base: &ParsedSources, overrides: &ParsedSources) -> Result<Loaded, ConfigError> {
    load_parsed_with(base, overrides, Ensurer::Applies)
}

fn load_parsed_with(
    base: &ParsedSources,
    overrides: &ParsedSources,
    ensurer: Ensurer,
) -> Result<Loaded, ConfigError> {
    let replaced = |o: &ParsedObject| {
        overrides
            .objects
            .iter()
            .any(|r| r.object.kind() == o.object.kind() && r.object.name() == o.object.name())
    };
    let mut objects: Vec<ParsedObject> = base
        .objects
        .iter()
        .filter(|o| !replaced(o))
        .chain(&overrides.objects)
        .cloned()
        .collect();
    let mut problems: Vec<Problem> = base
        .problems
        .iter()
        .chain(&overrides.problems)
        .cloned()
        .collect();
    let warnings: Vec<Problem> = base
        .warnings
        .iter()
        .chain(&overrides.warnings)
        .cloned()
        .collect();
    for obj in &mut objects {
        prepare_for_create(&mut obj.object);
        default_object(&mut obj.object);
    }
    for obj in &objects {
        problems.extend(object_problems(obj));
    }
    problems.extend(duplicate_names(&objects));
    // File by file, as the files were read; within a file, in the order found.
    let order: BTreeMap<&str, usize> = base
        .files
        .iter()
        .chain(&overrides.files)
        .enumerate()
        .map(|(i, f)| (f.as_str(), i))
        .collect();
    problems.sort_by_key(|p| order.get(p.file.as_str()).copied());
    if !problems.is_empty() {
        return Err(ConfigError::Invalid { problems, warnings });
    }
    resolve(&objects, warnings, ensurer)
}

/// What the apiserver does to an object before validating it, for these two kinds.
///
/// Mirrors `rest.BeforeCreate` → `EnsureObjectNamespaceMatchesRequestNamespace` in
/// k8s.io/apiserver (`pkg/registry/rest/meta.go`): both kinds are cluster-scoped, so a
/// `metadata.namespace` (Helm stamps one on every object it renders) is cleared, not refused.
pub(in crate::config) fn prepare_for_create(object: &mut RawObject) {
    let meta = match object {
        RawObject::FlowSchema(fs) => &mut fs.meta,
        RawObject::PriorityLevel(pl) => &mut pl.meta,
    };
    meta.namespace.clear();
}

fn default_object(object: &mut RawObject) {
    match object {
        RawObject::FlowSchema(fs) => defaults::default_flow_schema(fs),
        RawObject::PriorityLevel(pl) => defaults::default_priority_level(pl),
    }
}

fn object_problems(obj: &ParsedObject) -> Vec<Problem> {
    let errors = match &obj.object {
        RawObject::FlowSchema(fs) => validate::validate_flow_schema(fs),
        RawObject::PriorityLevel(pl) => validate::validate_priority_level(pl),
    };
    let label = obj.origin.label(obj.object.kind(), obj.object.name());
    obj.decode_errors
        .iter()
        .chain(&errors)
        .map(|e| Problem::new(&obj.origin.file, &label, e.to_string()))
        .collect()
}

/// A name defined twice for one kind (the apiserver cannot hold two such objects).
fn duplicate_names(objects: &[ParsedObject]) -> Vec<Problem> {
    let mut first: BTreeMap<(&str, &str), &ParsedObject> = BTreeMap::new();
    let mut problems = Vec::new();
    for obj in objects {
        let (kind, name) = (obj.object.kind(), obj.object.name());
        if name.is_empty() {
            continue;
        }
        match first.get(&(kind, name)) {
            None => {
                first.insert((kind, name), obj);
            }
            Some(earlier) => {
                let msg = format!(
                    "metadata.name: Duplicate value: {}: also defined in {} ({})",
                    super::field::go_quote(name),
                    earlier.origin.file,
                    earlier.origin.label(kind, name),
                );
                let label = obj.origin.label(kind, name);
                problems.push(Problem::new(&obj.origin.file, &label, msg));
            }
        }
    }
    problems
}

fn resolve(
    objects: &[ParsedObject],
    mut warnings: Vec<Problem>,
    ensurer: Ensurer,
) -> Result<Loaded, ConfigError> {
    let mut flow_schemas = Vec::new();
    let mut levels = Vec::new();
    let mut files = BTreeMap::new();
    let mut problems = Vec::new();
    let mut sources = Vec::new();
    for obj in objects {
        let label = obj.origin.label(obj.object.kind(), obj.object.name());
        sources.push(ObjectSource {
            kind: obj.object.kind(),
            name: obj.object.name().to_string(),
            file: obj.origin.file.clone(),
            version: obj.object.version(),
        });
        let mut maintained = |why: Option<String>| {
            if let Some(why) = why {
                let msg = format!("spec: {why}");
                warnings.push(Problem::new(&obj.origin.file, &label, msg));
            }
        };
        let converted = match &obj.object {
            RawObject::FlowSchema(raw) => convert::flow_schema(raw).map(|fs| {
                let (fs, why) = match ensurer {
                    Ensurer::Applies => maintain::flow_schema(fs, &raw.meta),
                    Ensurer::AsStored => (fs, None),
                };
                maintained(why);
                files.insert(fs.name.clone(), (obj.origin.file.clone(), label.clone()));
                flow_schemas.push(fs);
            }),
            RawObject::PriorityLevel(raw) => convert::priority_level(raw).map(|pl| {
                let (pl, why) = match ensurer {
                    Ensurer::Applies => maintain::priority_level(pl, &raw.meta),
                    Ensurer::AsStored => (pl, None),
                };
                maintained(why);
                levels.push(pl);
            }),
        };
        if converted.is_none() {
            // Validation accepts only objects that convert; this is a bug, reported, not hidden.
            let msg = "internal error: a validated object did not convert".to_string();
            problems.push(Problem::new(&obj.origin.file, &label, msg));
        }
    }
    if !problems.is_empty() {
        return Err(ConfigError::Invalid { problems, warnings });
    }
    let config = Config::resolve(flow_schemas, levels);
    // Last, one each (`check` prints them beside its OK line).
    let names: Vec<&str> = config
        .priority_levels()
        .map(|pl| pl.name.as_str())
        .collect();
    for (fs, level) in config.dangling() {
        let (file, label) = files
            .get(&fs.name)
            .cloned()
            .unwrap_or_else(|| (String::new(), format!("FlowSchema/{}", fs.name)));
        let mut message = dangling_message(level);
        if let Some(near) = super::raw::did_you_mean(level, &names) {
            message.push_str(&format!(
                " (did you mean {}?)",
                super::field::go_quote(near)
            ));
        }
        warnings.push(Problem::new(&file, &label, message));
    }
    Ok(Loaded {
        config,
        warnings,
        sources,
    })
}

/// The apiserver's `Dangling` condition message, plus what it means here.
pub fn dangling_message(level: &str) -> String {
    format!(
        "This FlowSchema references the PriorityLevelConfiguration object named {} but there \
         is no such object; it is skipped for matching",
        super::field::go_quote(level)
    )
}
