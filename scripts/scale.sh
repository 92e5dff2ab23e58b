#!/usr/bin/env bash
# Cluster scale through the release proxy (BENCHMARKS.md, RELIABILITY.md). Loopback only, bounded.
#   scripts/scale.sh          memory per watch and per queued request, GET p99 with 20,000 watches
#   scripts/scale.sh relay    watch-event relay beside nginx
#   scripts/scale.sh soak     waves of watches, GOAWAY every few seconds, one upstream restart
# Knobs (env): see the doc comment of benches/scale.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
# 20,000 watches hold twice as many sockets in the benchmark process (client and upstream side).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec cargo bench --locked --bench scale -- "${1:-memory}"
