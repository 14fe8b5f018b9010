#!/usr/bin/env bash
# The sanitizer suite: every step × variant of the table of steps (tests/sanitize_cases.cpp) under
# compute-sanitizer's memcheck, racecheck, synccheck and initcheck, each with --error-exitcode.
# Exits 0 only when every tool reports no error and every case passes its check against the
# fp64 reference; 77 (CTest's "skipped") without a GPU; 1 otherwise. Logs: BUILD/sanitize/TOOL.log.
#
#   tests/sanitize.sh [BUILD_DIR] [-- sanitize_cases args, e.g. --only 06]
#   tests/sanitize.sh BUILD_DIR --decode     step 10's program instead (its own driver, not the table):
#                                            the cases below, each checked against the fp64 reference
#   ctest --test-dir build -L sanitize --output-on-failure
set -uo pipefail
build=${1:-build}
[ $# -gt 0 ] && shift
decode=0
[ "${1:-}" = "--decode" ] && { decode=1; shift; }
[ "${1:-}" = "--" ] && shift
cases="$build/bin/sanitize_cases"
[ $decode -eq 1 ] && cases="$build/bin/step10_decode"
if [ ! -x "$cases" ]; then
  echo "sanitize.sh: $cases is missing: build first (cmake --build $build --target $(basename "$cases"))" >&2
  exit 2
fi
# Step 10's cases: contiguous and paged caches, the append, causal with several new tokens, one
# split and several (the combine), each head dimension, and the traced kernels (--trace, d = 64);
# small, as the tools slow a run 10-100×.
decode_cases=(
  "--cache-len 1000 --splits 1"
  "--cache-len 1000 --splits 3 --causal --new-tokens 8"
  "--cache-len 777 --dim 64 --page-size 16 --splits 5 --dtype fp16"
  "--cache-len 2000 --dim 256 --page-size 256 --append --new-tokens 3 --causal --rotary-dim 256"
  "--cache-len 0 --splits 2"
  "--cache-len 3000 --new-tokens 4 --window 300,0 --softcap 20 --alibi --causal"
  "--batch 3 --heads 16 --heads-kv 16 --cache-len 4097 --append --new-tokens 16 --rotary-dim 64 --rotary-interleaved"
  "--batch 2 --heads 16 --heads-kv 4 --cache-len 900 --dim 64 --page-size 16 --splits 3 --append --new-tokens 2 --causal --trace $build/sanitize_decode_trace.json"
)
run_cases() {  # the program under the tool "$@" (compute-sanitizer and its options)
  if [ $decode -eq 0 ]; then "$@" "$cases" "${case_args[@]}"; return; fi
  local rc=0 passed=0
  for c in "${decode_cases[@]}"; do
    # shellcheck disable=SC2086
    if "$@" "$cases" $c --check; then passed=$((passed + 1)); else rc=1; echo "FAIL step10_decode $c"; fi
  done
  echo "${#decode_cases[@]} cases: $passed passed"
  return $rc
}
case_args=("$@")
if [ $decode -eq 1 ]; then
  "$cases" --cache-len 16 > /dev/null 2>&1
  probe=$?
  [ $probe -eq 3 ] && probe=77  # step10_decode's exit code for no GPU
else
  "$cases" --probe
  probe=$?
fi
[ $probe -eq 77 ] && exit 77
[ $probe -ne 0 ] && exit 1

# compute-sanitizer ships with the CUDA toolkit; with a GPU its absence is a failure, not a skip.
sanitizer=$(command -v compute-sanitizer || true)
for dir in "${CUDA_HOME:-}" /usr/local/cuda; do
  [ -z "$sanitizer" ] && [ -n "$dir" ] && [ -x "$dir/bin/compute-sanitizer" ] && sanitizer="$dir/bin/compute-sanitizer"
done
if [ -z "$sanitizer" ]; then
  echo "sanitize.sh: compute-sanitizer not found on PATH, in \$CUDA_HOME/bin or /usr/local/cuda/bin" >&2
  exit 1
fi

logs="$build/sanitize$([ $decode -eq 1 ] && echo _decode)"
mkdir -p "$logs"
"$sanitizer" --version | tail -1
status=0
for tool in memcheck racecheck synccheck initcheck; do
  start=$(date +%s)
  run_cases "$sanitizer" --tool "$tool" --error-exitcode 9 --print-limit 50 > "$logs/$tool.log" 2>&1
  code=$?
  # One summary line per program run (step 10: one per case), counted: "6× ERROR SUMMARY: 0 errors".
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/$tool.log" | sed 's/^=* *//' | sort | uniq -c |
            sed -E 's/^ *([0-9]+) /\1× /' | paste -sd';' -)
  counts=$(grep -E "^[0-9]+ cases:" "$logs/$tool.log" | tail -1)
  printf '%-10s exit %d in %ds: %s; %s\n' "$tool" "$code" "$(( $(date +%s) - start ))" "${summary:-no summary}" \
    "${counts:-no case summary}"
  if [ $code -ne 0 ]; then
    status=1
    grep -E "^(FAIL|=========)" "$logs/$tool.log" | head -40
  fi
done
[ $status -eq 0 ] && echo "sanitize: every tool clean, every case passed" || echo "sanitize: FAILED (logs in $logs/)"
exit $status
