#!/usr/bin/env bash
# Instructions per proxied request, counted with callgrind (repeatable to ~0.1%, unlike timings on
# a shared host). BENCHMARKS.md ("Where one request's instructions go") was made with it.
#
#   scripts/callgrind.sh BIN PROTO N [CONNS STREAMS]      PROTO: h1 | h2
#
# Needs, as the load harness sets them up (../shared/bench: ./setup.sh): its fake apiserver on
# 127.0.0.1:18080 (`upstream/target/release/fake-apiserver --listen 127.0.0.1:18080 --threads 1`),
# and BENCH pointing at the harness copy (pki/server.pem, pki/server.key, pki/tokens.csv). The proxy
# runs pinned to one core (so on tokio's current-thread scheduler, as in the harness) with token
# authentication and the embedded default configuration. Instrumentation is off during start-up
# and a 300-request warm-up; then N and 3N requests are counted in two dumps, and the difference
# divided by 2N is the cost of one request without connection set-up.
# Per-function inclusive costs: callgrind_annotate --inclusive=yes on the two dumps, subtracted.
# Measure a `cargo build --release` binary: `cargo bench` overwrites target/release/kube-apf-proxy
# with its own build (no LTO, dev features), which counts 7% more (BENCHMARKS.md, issue 30).
set -euo pipefail
BIN=$1 PROTO=$2 N=$3 C=${4:-1} M=${5:-1}
: "${BENCH:?set BENCH to the load harness copy}" "${OUT:=$(mktemp -d)}" "${PORT:=48443}"
mkdir -p "$OUT"
cd "$BENCH"
taskset -c 0 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/cg.%p.out" \
  "$BIN" serve --bind-address 127.0.0.1 --secure-port "$PORT" --admin-address "127.0.0.1:$((PORT + 1))" \
  --upstream http://127.0.0.1:18080 --tls-cert-file pki/server.pem --tls-private-key-file pki/server.key \
  --token-auth-file pki/tokens.csv >"$OUT/proxy.log" 2>&1 &
VPID=$!
trap 'kill $VPID 2>/dev/null || true' EXIT
for _ in $(seq 300); do curl -sk -o /dev/null --max-time 1 "https://127.0.0.1:$PORT/healthz" && break; sleep 0.2; done
flags=(--h1); [[ $PROTO == h2 ]] && flags=()
load() { taskset -c 1 h2load "${flags[@]}" -n "$1" -c "$C" -m "$M" -H "Authorization: Bearer bench-token-alice" \
  "https://127.0.0.1:$PORT/api/v1/namespaces/default/pods/x" | grep -E "^requests:"; }
load 300 >/dev/null
for n in "$N" $((3 * N)); do
  callgrind_control -z $VPID >/dev/null 2>&1 && callgrind_control -i on $VPID >/dev/null 2>&1
  load "$n"
  callgrind_control -i off $VPID >/dev/null 2>&1 && callgrind_control -d "n$n" $VPID >/dev/null 2>&1
done
kill $VPID; wait $VPID 2>/dev/null || true; trap - EXIT
dumps=("$OUT"/cg.*.out.1 "$OUT"/cg.*.out.2)
a=$(sed -n 's/^totals: //p' "${dumps[0]}"); b=$(sed -n 's/^totals: //p' "${dumps[1]}")
echo "$PROTO, $C connection(s) x $M stream(s): $(( (b - a) / (2 * N) )) instructions per request (dumps in $OUT)"
