#!/usr/bin/env bash
# The sanitizer suite: every step × variant of the table of steps (tests/sanitize_cases.cpp) under
# compute-sanitizer's memcheck, racecheck, synccheck and initcheck, each with --error-exitcode.
# Exits 0 only when every tool reports no error and every case passes its check against the
# fp64 reference; 77 (CTest's "skipped") without a GPU; 1 otherwise. Logs: BUILD/sanitize/TOOL.log.
#
#   tests/sanitize.sh [BUILD_DIR] [-- sanitize_cases args, e.g. --only 06]
#   ctest --test-dir build -L sanitize --output-on-failure
set -uo pipefail
build=${1:-build}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
cases="$build/bin/sanitize_cases"
if [ ! -x "$cases" ]; then
  echo "sanitize.sh: $cases is missing: build first (cmake --build $build --target sanitize_cases)" >&2
  exit 2
fi
"$cases" --probe
probe=$?
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

logs="$build/sanitize"
mkdir -p "$logs"
"$sanitizer" --version | tail -1
status=0
for tool in memcheck racecheck synccheck initcheck; do
  start=$(date +%s)
  "$sanitizer" --tool "$tool" --error-exitcode 9 --print-limit 50 "$cases" "$@" > "$logs/$tool.log" 2>&1
  code=$?
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/$tool.log" | tail -1)
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
