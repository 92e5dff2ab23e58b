//! Entry points for the fuzz targets in `fuzz/` that the public API does not reach without
//! touching the file system. Not part of the product's interface.

use std::path::Path;

use crate::auth::Identity;

/// Parses token-file text (`--token-auth-file`'s CSV) into its `(token, identity)` records, in
/// token order; a malformed file is an error message naming the line.
pub fn token_file(text: &str) -> Result<Vec<(String, Identity)>, String> {
    crate::auth::tokenfile_records(Path::new("fuzz.csv"), text)
}

/// Whether `labels.Parse` accepts the label selector.
pub fn label_selector_is_valid(selector: &str) -> bool {
    crate::request_info::label_selector_is_valid(selector)
}

/// The value of the field selector's exact `field` term (`field=v` or `field==v`, unescaped), or
/// `None` when the selector does not parse.
pub fn field_selector_exact_match(selector: &str, field: &str) -> Option<Option<String>> {
    crate::request_info::field_selector_exact_match(selector, field)
}
