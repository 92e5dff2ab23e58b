#!/usr/bin/env bash
# Installs what the build and the tests need on a fresh machine; idempotent and quiet when all is there.
set -euo pipefail

need_apt=()
command -v curl >/dev/null 2>&1 || need_apt+=(curl)

if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing ${need_apt[*]}" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install ${need_apt[*]} (tests that need them are skipped otherwise)" >&2
  fi
fi

command -v cargo >/dev/null 2>&1 || { echo "setup: cargo is required (rustup)" >&2; exit 1; }
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt >/dev/null 2>&1 || true
