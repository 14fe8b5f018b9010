#!/usr/bin/env bash
# Builds the fuzz targets (FS_FUZZ=ON, clang-14, ASan + UBSan) in their own build folder and
# runs each on its committed seeds (tests/fuzz/corpus/<target>/) with the libFuzzer options
# given, e.g. a time per target or a number of inputs:
#
#   tests/fuzz/run.sh -max_total_time=15          what CI runs (cmake/quickstart.sh fuzz)
#   tests/fuzz/run.sh -runs=1000000               the long run
#   FS_FUZZ_TARGETS="fuzz_npy fuzz_cli" tests/fuzz/run.sh -runs=100000
#
# Inputs found along the way go to build-fuzz/corpus/<target>/ (never into the seeds); a crash,
# a sanitizer report, a leak or a timeout stops the run, leaves the input in
# build-fuzz/findings/ and makes this script exit 1.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${FS_FUZZ_BUILD:-build-fuzz}
cxx=${FS_FUZZ_CXX:-clang++-14}
cmake -S . -B "$build" -G Ninja -DFS_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" >/dev/null ||
  exit 1
cmake --build "$build" -j "${FS_FUZZ_JOBS:-2}" || exit 1
targets=${FS_FUZZ_TARGETS:-fuzz_npy fuzz_block_mask fuzz_cli fuzz_trace fuzz_decode fuzz_viz_model fuzz_viz_derive fuzz_plan fuzz_python_args}
mkdir -p "$build/findings"
status=0
for t in $targets; do
  mkdir -p "$build/corpus/$t"
  log="$build/findings/$t.log"
  start=$(date +%s)
  # -rss_limit_mb: the readers must refuse what they cannot hold, not grow past it.
  "$build/bin/$t" "$build/corpus/$t" "tests/fuzz/corpus/$t" -timeout=20 -rss_limit_mb=2560 \
    -artifact_prefix="$build/findings/$t-" -print_final_stats=1 "$@" >"$log" 2>&1
  code=$?
  runs=$(grep -E "^stat::number_of_executed_units" "$log" | awk '{print $2}')
  cov=$(grep -E "^#[0-9]+" "$log" | tail -1 | grep -oE "cov: [0-9]+" || true)
  printf '%-16s exit %d, %s inputs in %ds, %s\n' "$t" "$code" "${runs:-?}" "$(( $(date +%s) - start ))" "${cov:-cov: ?}"
  if [ $code -ne 0 ]; then
    status=1
    grep -E "ERROR|runtime error|SUMMARY|Test unit written|deadly signal" "$log" | head -20
  fi
done
[ $status -eq 0 ] && echo "fuzz: no findings" || echo "fuzz: FINDINGS (inputs and logs in $build/findings/)"
exit $status
