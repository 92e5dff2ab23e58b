//! Entry points for the fuzz targets in `fuzz/` that the public API does not reach without
//! touching the file system. Not part of the product's interface.

use std::path::Path;

use crate::auth::Identity;

/// Parses token-file text (`--token-auth-file`'s CSV) into its `(token, identity)` records, in
/// token order; a malformed file is an error message naming the line.
pub fn token_file(text: &str) -> Result<Vec<(String, Identity)>, String> {
    crate::auth::tokenfile_records(Path::new("fuzz.csv"), text)
}
