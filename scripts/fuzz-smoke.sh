#!/usr/bin/env bash
# Runs every fuzz target of crates/threadline/fuzz for a while (FUZZ_SECONDS each, default 20)
# from its committed corpus, and fails on the first crash (the input is left in
# crates/threadline/fuzz/artifacts/<target>/). New inputs go to FUZZ_WORK (default: a temporary
# directory), never into the committed corpus. Stable Rust works: RUSTC_BOOTSTRAP=1 lets
# cargo fuzz pass its -Z flags. Ends with 'fuzz: N passed, N failed'.
#
#   scripts/fuzz-smoke.sh                      # every target, 20 s each
#   FUZZ_SECONDS=1200 FUZZ_WORK=/tmp/fuzz-long scripts/fuzz-smoke.sh restore_lines
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
fuzz="$here/crates/threadline/fuzz"
seconds=${FUZZ_SECONDS:-20}
work=${FUZZ_WORK:-$(mktemp -d)}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(json_parse restore_lines snapshot_import stream_assembler convert)

if ! command -v cargo-fuzz >/dev/null; then
  cargo install cargo-fuzz --locked --version 0.13.2 || exit 1
fi
export RUSTC_BOOTSTRAP=1
cd "$fuzz" || exit 1
cargo fuzz build -O || exit 1

passed=0 failed=0
for t in "${targets[@]}"; do
  mkdir -p "$work/corpus/$t" "$work/logs"
  log="$work/logs/$t.log"
  # new inputs go to the first directory; the committed seeds are only read
  cargo fuzz run -O "$t" "$work/corpus/$t" "corpus/$t" -- \
    -max_total_time="$seconds" -max_len=65536 -timeout=30 -rss_limit_mb=4096 \
    -print_final_stats=1 >"$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  # the whole seed corpus is replayed first, however short the run: it can take longer
  took=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
    echo "fuzz $t: ok, ${runs:-?} executions in ${took:-$seconds} s (${cov:-cov: ?})"
  else
    failed=$((failed + 1))
    echo "fuzz $t: FAILED (exit $rc), input in $fuzz/artifacts/$t/; log $log:"
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -20
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
