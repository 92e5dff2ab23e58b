#!/usr/bin/env bash
# Overload and soak through the release proxy (bounded: about SOAK_SECS + 25 s). Loopback only.
# Prints the table RELIABILITY.md quotes. Usage: SOAK_SECS=30 scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --locked --bench overload -- soak
