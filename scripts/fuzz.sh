#!/usr/bin/env bash
# Bounded fuzzing of the parsers and header handling with cargo-fuzz (libFuzzer), one target after
# another: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]. Prints the executions each target
# reached and fails on any crash (the input is kept in fuzz/artifacts/<target>/). With
# FUZZ_LOG_DIR set, each target's libFuzzer log is written there as <target>.log while it runs
# (its last `cov:` line gives the coverage and corpus size).
#
# A parser whose semantic property is heavy has two targets: the parser alone, fast, and the
# property on inputs kept small (`-max_len` below, and a cut inside the harness): config_load and
# config_roundtrip, watch_stream and watch_objects, workload and workload_run, queueset_scenario and
# queueset_scenario_run; audit_events has two (trace_ahead, trace_replay). They read the parser's
# seeds.
#
# A long campaign (RELIABILITY.md) is the same script with a larger budget, every target sanitized:
#   FUZZ_SANITIZER=address FUZZ_RUNS=10000000 FUZZ_JOBS=2 FUZZ_LOG_DIR=DIR scripts/fuzz.sh 3600
# Beside other work, lower its whole session: with the kernel's autogroups, `nice` ranks a process
# only against its own session, so where the file exists run `echo 19 > /proc/$$/autogroup` in that
# shell first.
# FUZZ_RUNS stops a target at that many executions (or at its seconds, whichever comes first);
# FUZZ_JOBS runs that many targets at a time (the table still lists them in order). With
# FUZZ_LOG_DIR, a Markdown table follows: executions, exec/s, corpus size, coverage (edges) and
# crashes per target, as RELIABILITY.md records them.
#
# cargo-fuzz needs a nightly toolchain for its sanitizer flags; with only stable, it runs with
# RUSTC_BOOTSTRAP=1 and `--sanitizer none` (coverage-guided all the same, without AddressSanitizer,
# which safe Rust rarely needs). Corpora start from the committed seeds (fuzz/seeds/) plus the
# configuration fixtures, and grow in fuzz/corpus/ (not committed).
#
# With nightly, every target runs under AddressSanitizer but three property targets: trace_ahead
# and trace_replay, which start threads and a paused-clock replay per input, and config_roundtrip,
# which parses twice. The sanitizer makes them 4-6 times slower (under 2,000 exec/s), it guards
# only `unsafe` code and the crate has none, and their parser twins run the same code under it
# (audit_events the trace readers; config_load the YAML parser, and the dumper on what loads).
# They are built without it into fuzz/target/unsanitized/. FUZZ_SANITIZER=address (a long
# campaign) or none runs every target with that one.
#
# ASAN_OPTIONS, unless set: no allocation stacks in a report and no stack-use-after-return
# check, which saves a sixth to a fifth of a YAML target's time (RELIABILITY.md). A crash's input
# is kept: `cargo fuzz run TARGET fuzz/artifacts/TARGET/crash-...` runs it again with the
# sanitizer's defaults, stacks included.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-20}
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(request_info config_load config_roundtrip token_file headers
  selectors watch_stream watch_objects exec_credential h2_frames admission_review audit_events
  trace_ahead trace_replay workload workload_run queueset_scenario queueset_scenario_run
  coordination_record)
CARGO_FUZZ_VERSION=0.13.2

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi
if rustup run nightly rustc --version >/dev/null 2>&1; then
  toolchain=(+nightly); nightly=1
else
  echo "fuzz: no nightly toolchain; stable with RUSTC_BOOTSTRAP=1 and no sanitizer"
  export RUSTC_BOOTSTRAP=1; toolchain=(); nightly=
fi

# The sanitizer a target runs under (see above), and where its binary is built: a build without
# the sanitizer has its own target directory, so the two builds never rebuild each other.
sanitizer_of() {
  if [[ -n ${FUZZ_SANITIZER:-} ]]; then echo "$FUZZ_SANITIZER"
  elif [[ -z $nightly ]]; then echo none
  else
    case $1 in trace_ahead | trace_replay | config_roundtrip) echo none ;; *) echo address ;; esac
  fi
}
target_dir_of() {
  if [[ $(sanitizer_of "$1") == none && -n $nightly ]]; then echo target/unsanitized
  else echo target; fi
}

# The seeds a target reads: its own, and those of the parser target whose property it checks.
seeds_of() {
  case $1 in
    config_roundtrip) echo config_load ;;
    watch_objects) echo watch_stream ;;
    trace_ahead | trace_replay) echo audit_events ;;
    workload_run) echo workload ;;
    queueset_scenario_run) echo queueset_scenario ;;
    *) echo "$1" ;;
  esac
}
# The longest input libFuzzer makes: small for the targets that run a property on what they read.
max_len_of() {
  case $1 in
    config_roundtrip) echo 8193 ;;
    trace_ahead | trace_replay | workload_run | watch_objects | queueset_scenario_run) echo 4096 ;;
    *) echo 65536 ;;
  esac
}

# Seeds: the committed ones; every configuration fixture as YAML (selector byte 0) or JSON (1);
# every workload fixture; the audit log fixture.
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  seeds=$(seeds_of "$t")
  [[ -d fuzz/seeds/$seeds ]] && cp -n fuzz/seeds/"$seeds"/* "fuzz/corpus/$t/" 2>/dev/null || true
  case $seeds in
    config_load)
      while IFS= read -r -d '' f; do
        selector='\x00'; [[ $f == *.json ]] && selector='\x01'
        name=$(echo "$f" | tr '/' '_')
        { printf "$selector"; cat "$f"; } > "fuzz/corpus/$t/seed-$name"
      done < <(find tests/fixtures/config config -type f \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) -print0)
      ;;
    workload)
      for f in tests/fixtures/workloads/*.yaml; do cp -n "$f" "fuzz/corpus/$t/seed-$(basename "$f")"; done
      ;;
    audit_events)
      for f in tests/fixtures/audit/*.log; do cp -n "$f" "fuzz/corpus/$t/seed-$(basename "$f")"; done
      ;;
  esac
done

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

# `cargo fuzz build` takes one target or none (all of them): those in fuzz/target are built at
# once, those without the sanitizer (beside a sanitized build) one by one.
main_dir=()
for t in "${TARGETS[@]}"; do
  if [[ $(target_dir_of "$t") == target ]]; then main_dir+=("$t"); continue; fi
  (cd fuzz && cargo "${toolchain[@]}" fuzz build -O --sanitizer none \
    --target-dir target/unsanitized "$t")
done
if [[ ${#main_dir[@]} -gt 0 ]]; then
  one=(); [[ ${#main_dir[@]} -eq 1 ]] && one=("${main_dir[0]}")
  (cd fuzz && cargo "${toolchain[@]}" fuzz build -O --sanitizer "$(sanitizer_of "${main_dir[0]}")" \
    "${one[@]}")
fi

export ASAN_OPTIONS=${ASAN_OPTIONS-malloc_context_size=0:detect_stack_use_after_return=0}

# Where a target's libFuzzer log goes: FUZZ_LOG_DIR, so a long campaign's progress can be read
# and outlives the script, or the results directory.
log_of() {
  if [[ -n ${FUZZ_LOG_DIR:-} ]]; then echo "$FUZZ_LOG_DIR/$1.log"; else echo "$results/$1.log"; fi
}
[[ -z ${FUZZ_LOG_DIR:-} ]] || mkdir -p "$FUZZ_LOG_DIR"

# One target: its row of the table in $results/$t.row, its libFuzzer log at `log_of`.
run_target() {
  local t=$1 log result runs=()
  log=$(log_of "$1")
  [[ -n ${FUZZ_RUNS:-} ]] && runs=(-runs="$FUZZ_RUNS")
  if (cd fuzz && cargo "${toolchain[@]}" fuzz run -O --sanitizer "$(sanitizer_of "$t")" \
        --target-dir "$(target_dir_of "$t")" "$t" "corpus/$t" -- \
        -max_total_time="$SECONDS_PER_TARGET" "${runs[@]}" -rss_limit_mb=2048 \
        -max_len="$(max_len_of "$t")" -timeout=10 -print_final_stats=1) >"$log" 2>&1; then
    result=ok
  else
    result="CRASH (see fuzz/artifacts/$t/)"
    { grep -m1 -A6 -E "panicked at|ERROR: (AddressSanitizer|libFuzzer)" "$log" || true; tail -40 "$log"; } >&2
  fi
  local execs rate
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  printf '%-22s %12s %10s %s\n' "$t" "$execs" "$rate" "$result" > "$results/$t.row"
}

results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
status=0
# A target's row of the table.
report() {
  cat "$results/$1.row"
  grep -q ' ok$' "$results/$1.row" || status=1
}
printf '%-22s %12s %10s %s\n' target executions exec/s result
jobs_at_once=${FUZZ_JOBS:-1}
if [[ $jobs_at_once -le 1 ]]; then
  # One at a time, each row as its target ends.
  for t in "${TARGETS[@]}"; do run_target "$t"; report "$t"; done
else
  for t in "${TARGETS[@]}"; do
    while [[ $(jobs -rp | wc -l) -ge $jobs_at_once ]]; do wait -n || true; done
    run_target "$t" &
  done
  wait
  for t in "${TARGETS[@]}"; do report "$t"; done
fi

# The campaign's record: the last `cov:` line of each log gives the edges and the corpus.
if [[ -n ${FUZZ_LOG_DIR:-} ]]; then
  echo
  echo "| target | executions | exec/s | corpus (inputs) | coverage (edges) | crashes |"
  echo "|---|---:|---:|---:|---:|---|"
  for t in "${TARGETS[@]}"; do
    read -r _ execs rate result < "$results/$t.row"
    last=$(grep -E '^#[0-9]+.*cov: [0-9]+' "$(log_of "$t")" | tail -1 || true)
    edges=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo '?')
    corpus=$(grep -oE 'corp: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo '?')
    crashes=none; [[ $result == ok ]] || crashes="1 (fuzz/artifacts/$t/)"
    echo "| \`$t\` | $execs | $rate | $corpus | $edges | $crashes |"
  done
fi
exit $status
