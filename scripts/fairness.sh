#!/usr/bin/env bash
# Fairness through the release proxy beside nginx (bounded: about 4 × FAIR_SECS). Loopback only;
# nginx comes from scripts/install-test-deps.sh. Usage: FAIR_SECS=15 scripts/fairness.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --locked --bench overload -- fairness
