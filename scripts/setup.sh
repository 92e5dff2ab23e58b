#!/usr/bin/env bash
# Set-up of a fresh machine for building and testing: the Rust components the checks use, the
# external programs the end-to-end tests drive (scripts/install-test-deps.sh), and the real
# kube-apiserver of tests/real_apiserver, built from Go modules (scripts/kube-apiserver.sh build;
# several minutes the first time, cached in target/kube-apiserver/ after), and Helm for the chart's
# tests, built the same way (scripts/helm.sh build, cached in target/helm/), and Kubernetes' own APF
# e2e specs that tests/real_apiserver/apf_e2e.rs runs through the proxy (scripts/apf-e2e.sh build,
# cached in target/apf-e2e/). Idempotent and quiet when everything is there.
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
if command -v go >/dev/null 2>&1; then
  scripts/kube-apiserver.sh build
  scripts/helm.sh build
  scripts/apf-e2e.sh build
elif [ "${CI:-}" = "true" ]; then
  echo "setup: Go is required in CI (tests/real_apiserver builds kube-apiserver, Helm and the APF e2e suite from Go modules)" >&2
  exit 1
else
  echo "setup: Go is not installed; the real kube-apiserver tests (tests/real_apiserver) will be skipped" >&2
fi
