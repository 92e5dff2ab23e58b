#!/usr/bin/env bash
# Bounded fuzzing of the parsers and header handling with cargo-fuzz (libFuzzer), one target after
# another: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]. Prints the executions each target
# reached and fails on any crash (the input is kept in fuzz/artifacts/<target>/).
#
# cargo-fuzz needs a nightly toolchain for its sanitizer flags; with only stable, it runs with
# RUSTC_BOOTSTRAP=1 and `--sanitizer none` (coverage-guided all the same, without AddressSanitizer,
# which safe Rust rarely needs). Corpora start from the committed seeds (fuzz/seeds/) plus the
# configuration fixtures, and grow in fuzz/corpus/ (not committed).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-20}
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(request_info config_load token_file headers selectors watch_stream exec_credential h2_frames admission_review audit_events workload)
CARGO_FUZZ_VERSION=0.13.2

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi
if rustup run nightly rustc --version >/dev/null 2>&1; then
  toolchain=(+nightly); sanitizer=address
else
  echo "fuzz: no nightly toolchain; stable with RUSTC_BOOTSTRAP=1 and no sanitizer"
  export RUSTC_BOOTSTRAP=1; toolchain=(); sanitizer=none
fi

# Seeds: the committed ones, and every configuration fixture as YAML (selector byte 0) or JSON (1).
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  [[ -d fuzz/seeds/$t ]] && cp -n fuzz/seeds/"$t"/* "fuzz/corpus/$t/" 2>/dev/null || true
done
if [[ " ${TARGETS[*]} " == *" config_load "* ]]; then
  while IFS= read -r -d '' f; do
    selector='\x00'; [[ $f == *.json ]] && selector='\x01'
    name=$(echo "$f" | tr '/' '_')
    { printf "$selector"; cat "$f"; } > "fuzz/corpus/config_load/seed-$name"
  done < <(find tests/fixtures/config config -type f \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) -print0)
fi

# Every request target in the request_info unit tests, as `METHOD\nTARGET` (a bare target is a GET).
if [[ " ${TARGETS[*]} " == *" request_info "* ]]; then
  n=0
  while IFS= read -r line; do
    method=GET; target=$line
    if [[ $line =~ ^\"([A-Za-z]+)\",\ *\"(/.*)\"$ ]]; then method=${BASH_REMATCH[1]}; target=${BASH_REMATCH[2]}
    elif [[ $line =~ ^\(\ *\"(/.*)\",\ *\"$ ]]; then target=${BASH_REMATCH[1]}; fi
    n=$((n + 1)); printf '%s\n%s' "$method" "$target" > "fuzz/corpus/request_info/seed-test-$n"
  done < <(cat src/request_info/tests.rs src/request_info/tests/*.rs | tr '\n' ' ' \
             | grep -oE '"[A-Za-z]+", *"/[^"]*"|\( *"/[^"]*", *"' | sort -u)
fi

# `cargo fuzz build` takes one target or none (all of them).
build_target=(); [[ ${#TARGETS[@]} -eq 1 ]] && build_target=("${TARGETS[0]}")
(cd fuzz && cargo "${toolchain[@]}" fuzz build -O --sanitizer "$sanitizer" "${build_target[@]}")

status=0
printf '%-14s %12s %10s %s\n' target executions exec/s result
for t in "${TARGETS[@]}"; do
  log=$(mktemp)
  if (cd fuzz && cargo "${toolchain[@]}" fuzz run -O --sanitizer "$sanitizer" "$t" "corpus/$t" -- \
        -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
        -print_final_stats=1) >"$log" 2>&1; then
    result=ok
  else
    result="CRASH (see fuzz/artifacts/$t/)"; status=1; tail -40 "$log"
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  printf '%-14s %12s %10s %s\n' "$t" "$execs" "$rate" "$result"
  rm -f "$log"
done
exit $status
