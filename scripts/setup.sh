#!/usr/bin/env bash
# Set-up of a fresh machine for building and testing: the Rust components the checks use, then the
# external programs the end-to-end tests drive (scripts/install-test-deps.sh). Idempotent and quiet
# when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null 2>&1 || { echo "setup: cargo is required (rustup)" >&2; exit 1; }
if command -v rustup >/dev/null 2>&1; then
  for component in clippy rustfmt; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" \
      || rustup component add "$component" >/dev/null 2>&1 || true
  done
fi
scripts/install-test-deps.sh
