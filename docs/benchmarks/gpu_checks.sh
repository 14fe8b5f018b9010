#!/usr/bin/env bash
# The GPU checks of a change, resumable, for a GPU machine that is lent for minutes at a time:
# build the change and its base, compare their production kernels, run the sanitizer suite, the GPU
# tests and Nsight Compute's byte counts, each a task that is skipped once done, so that a call cut
# short by its time limit resumes in the next call on the same (warm) machine.
#
#   docs/benchmarks/gpu_checks.sh OUTDIR TASK...
#   BASE_SRC=base.tar.gz BASE_COMMIT=4617e66 DEADLINE=540 docs/benchmarks/gpu_checks.sh /tmp/checks \
#       builds compare sanitize gpu_tests ncu
#
# Tasks, in the order given:
#   builds     configure and build ./build (bench, the step programs, sanitize_cases, io_model, the
#              GPU tests) and, in parallel, BASE_SRC's bench in /tmp/fs-base (BASE_SRC: a `git
#              archive` tarball or a folder; none: no base)
#   compare    compare_builds.sh against the base: the production variants of steps 08 and 09
#              (STEPS, DTYPES, VARIANTS_08, VARIANTS_09 may override)
#   compare47  steps 04-07 the same way, fewer repetitions (their kernels are slow)
#   sanitize   tests/sanitize.sh -- --only 08, then 09 (SANITIZE_STEPS may override)
#   gpu_tests  ctest -L gpu
#   ncu        ncu_bytes.sh for step 09 at its default shape and at B=1 H=16 N=16384 d=128
#   builds10   step 10 alone (its program, its GPU and host tests), for a call that needs no more
#   builds09   step 09's program and io_model (for ncu) beside step 10's, without the base
#   decode     step 10's GPU tests and command-line tests, then the sanitizer over its cases
#              (tests/sanitize.sh --decode)
#   trace10    step 10's traced runs (d = 64: contiguous, pages of 16 shuffled, an append), each
#              checked and its trace validated, written to OUTDIR/traces
#   decode_bench  decode_bench.py --sweep: step 10 next to PyTorch's SDPA, rows in OUTDIR/decode.csv
#   python10   the Python module with steps 04, 05, 08, 09 and 10 alone (./build-py), and every test of
#              tests/python/gpu/ on it: flashsteps.attention (step 09 chosen on sm_90), attention_with_kvcache,
#              the flash_attn_interface, the custom ops under torch.compile and in CUDA graphs; then the
#              GPU tests of steps 04-08's features and of step 10 in that build, and steps 08's and 09's at
#              head dimensions between their compiled ones (test_tensor_cores_gpu, test_hopper_gpu [head_dim])
#   sanitize_hd the sanitizer over head dimensions between the compiled ones (step 08 at d = 59 and 80,
#              step 09 at 80 and 136), in python10's build-py
#   auto_bench flashsteps.attention(step="auto") beside step 09's program and cuDNN, bf16 d = 128, N = 4K
#              (after python10, in its build-py)
#   pip_venv   `pip install .` from a clone into a fresh virtual environment (the system's PyTorch
#              seen), then every test of tests/python/ from the installed package (pip_venv below)
# A task starts only while the time since the start plus its usual length is below DEADLINE
# seconds (default 540): what it writes is always complete. Each writes under OUTDIR; the log of
# the calls is OUTDIR/checks.log. CMAKE_PREFIX_PATH and CMAKE_CUDA_ARCHITECTURES (default 90) reach
# both configures. FS_COMMIT names the change's rows.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out=${1:?usage: gpu_checks.sh OUTDIR TASK...}
shift
mkdir -p "$out/.done"
deadline=${DEADLINE:-540}
start=$(date +%s)
base_commit=${BASE_COMMIT:-base}
cfg=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90}"
     ${CMAKE_PREFIX_PATH:+-DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH"} -DPython3_EXECUTABLE="$(command -v python3)")
log() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$out/checks.log"; }

declare -A usual=([builds]=450 [compare]=260 [compare47]=300 [sanitize]=280 [gpu_tests]=300 [ncu]=60
                  [builds10]=150 [builds09]=300 [decode]=150 [decode_bench]=200 [trace10]=40
                  [python10]=420 [pip_venv]=480 [auto_bench]=60 [sanitize_hd]=120)  # seconds (python10: 300 before test_compile.py, whose compiles are not yet timed)

task_builds() {
  nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > "$out/gpu.txt" 2>&1
  local base_pid=
  if [ -n "${BASE_SRC:-}" ]; then
    mkdir -p /tmp/fs-base
    if [ -d "$BASE_SRC" ]; then cp -r "$BASE_SRC"/. /tmp/fs-base/; else tar -xzf "$BASE_SRC" -C /tmp/fs-base; fi
    ( cmake -S /tmp/fs-base -B /tmp/fs-base/build "${cfg[@]}" -DFS_BUILD_TESTS=OFF > "$out/base_configure.log" 2>&1 &&
      ninja -C /tmp/fs-base/build -j5 bench > "$out/base_build.log" 2>&1 ) &
    base_pid=$!
  fi
  cmake -S . -B build "${cfg[@]}" > "$out/configure.log" 2>&1 || return 1
  # The GPU tests, the Python module and the step programs, as this build names them.
  local targets
  mapfile -t targets < <(ninja -C build -t targets all 2>/dev/null | cut -d: -f1 |
                         grep -E '^test_.*_gpu$|^fs_python$|^step[0-9][0-9]_')
  ninja -C build -j11 bench sanitize_cases io_model "${targets[@]}" > "$out/build.log" 2>&1
  local rc=$?
  [ -n "$base_pid" ] && { wait "$base_pid" || rc=1; }
  echo "warning lines in the change's build: $(grep -c warning "$out/build.log")"
  return $rc
}
task_compare() {
  BASE_DIR=/tmp/fs-base STEPS=${STEPS:-"08 09"} DTYPES=${DTYPES:-"bf16 fp32"} \
    VARIANTS_08=${VARIANTS_08:-"fa2 deterministic 3xtf32"} VARIANTS_09=${VARIANTS_09:-"fa3 deterministic fp8"} \
    ROUNDS=2 docs/benchmarks/compare_builds.sh "$base_commit" "$out/compare" > /dev/null 2>&1
  tail -1 "$out/compare/compare.txt"
}
task_compare47() {
  BASE_DIR=/tmp/fs-base STEPS="04 05 06 07" DTYPES=fp32 VARIANTS_04=fa2 REPS=5 WARMUP=2 ROUNDS=2 \
    docs/benchmarks/compare_builds.sh "$base_commit" "$out/compare47" > /dev/null 2>&1
  tail -1 "$out/compare47/compare.txt"
}
# tests/sanitize.sh over BUILD's cases with sanitize_cases' ARGS: its output in OUTDIR/NAME.log, the
# tools' logs in OUTDIR/NAME/, its last lines printed.
sanitize_into() {  # NAME BUILD ARGS...
  local name=$1 build=$2 rc=0
  shift 2
  tests/sanitize.sh "$build" -- "$@" > "$out/$name.log" 2>&1 || rc=1
  mkdir -p "$out/$name" && cp "$build"/sanitize/*.log "$out/$name/"
  tail -3 "$out/$name.log"
  return $rc
}
task_sanitize() {
  local rc=0 s
  for s in ${SANITIZE_STEPS:-08 09}; do sanitize_into "sanitize_$s" build --only "$s" || rc=1; done
  return $rc
}
task_gpu_tests() { ctest --test-dir build -L gpu -j4 > "$out/ctest_gpu.log" 2>&1; local rc=$?; grep -E "tests passed|tests failed" "$out/ctest_gpu.log"; return $rc; }
task_ncu() {
  STEPS=09 docs/benchmarks/ncu_bytes.sh "$out/ncu" > "$out/ncu.log" 2>&1 &&
    STEPS=09 docs/benchmarks/ncu_bytes.sh "$out/ncu_16k" 1 16 16384 128 >> "$out/ncu.log" 2>&1
}
task_builds10() {
  nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > "$out/gpu.txt" 2>&1
  cmake -S . -B build "${cfg[@]}" > "$out/configure.log" 2>&1 || return 1
  ninja -C build -j16 step10_decode test_decode_gpu test_decode_host > "$out/build10.log" 2>&1
}
task_builds09() {
  nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > "$out/gpu.txt" 2>&1
  cmake -S . -B build "${cfg[@]}" > "$out/configure.log" 2>&1 || return 1
  ninja -C build -j16 step09_hopper io_model step10_decode test_decode_gpu test_decode_host > "$out/build09.log" 2>&1
}
task_python10() {
  python3 -c "import torch, pytest" 2> /dev/null || { echo "python10: needs PyTorch and pytest"; return 1; }
  cmake -S . -B build-py "${cfg[@]}" -DFS_STEPS="04;05;08;09;10" > "$out/configure_py.log" 2>&1 || return 1
  ninja -C build-py -j16 fs_python test_decode_gpu test_flash_features_gpu test_tensor_cores_gpu test_hopper_gpu \
    > "$out/build_py.log" 2>&1 ||
    { tail -20 "$out/build_py.log"; return 1; }
  local rc=0
  PYTHONPATH=build-py/python PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider \
    tests/python/gpu/ > "$out/pytest_gpu.log" 2>&1 || rc=1
  tail -15 "$out/pytest_gpu.log"
  ctest --test-dir build-py -L gpu -R "decode|features" -j4 > "$out/ctest_py_gpu.log" 2>&1 || rc=1
  grep -E "tests passed|tests failed|\*\*\*Failed" "$out/ctest_py_gpu.log"
  build-py/bin/test_tensor_cores_gpu "[head_dim]" > "$out/head_dim_gpu.log" 2>&1 || rc=1  # step 08 at any d
  tail -3 "$out/head_dim_gpu.log"
  build-py/bin/test_hopper_gpu "[head_dim]" > "$out/head_dim_09_gpu.log" 2>&1 || rc=1  # step 09 at d between its own
  tail -3 "$out/head_dim_09_gpu.log"
  return $rc
}
task_sanitize_hd() {
  [ -d build-py ] || { echo "sanitize_hd: needs python10's build-py"; return 1; }
  ninja -C build-py -j16 sanitize_cases > "$out/build_sanitize_hd.log" 2>&1 || return 1
  local rc=0 case
  for case in 08:59 08:80 09:80 09:136; do
    sanitize_into "sanitize_hd_${case/:/_d}" build-py --only "${case%:*}" --with "d=${case#*:}" || rc=1
  done
  return $rc
}
task_pip_venv() {
  # A new user's install: a clone of this tree, a fresh virtual environment that sees the system's
  # PyTorch (--system-site-packages), `pip install .` (its build requirements from WHEELS, a folder of
  # scikit-build-core's and pybind11's wheels, where the machine reaches no package index), then the
  # module's tests from the installed package, run outside the tree.
  local rc=0 clone=/tmp/fs-clone venv=/tmp/fs-venv wheels=${WHEELS:-$PWD/.devdeps/wheels}
  python3 -c "import torch, pytest" 2> /dev/null || { echo "pip_venv: needs PyTorch and pytest"; return 1; }
  rm -rf "$clone" "$venv"
  git clone -q . "$clone" 2> "$out/pip_clone.log" || { mkdir -p "$clone" && git ls-files -z | xargs -0 cp --parents -t "$clone"; }
  python3 -m venv --system-site-packages "$venv" > "$out/pip_venv.log" 2>&1 || return 1
  ( cd "$clone" && "$venv/bin/pip" install --no-index --find-links "$wheels" \
      --config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90}" \
      --config-settings=cmake.define.FS_STEPS="04;05;08;09;10" \
      ${CMAKE_PREFIX_PATH:+--config-settings=cmake.define.CMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH"} . ) \
      > "$out/pip_install.log" 2>&1 ||
    { tail -20 "$out/pip_install.log"; return 1; }
  tail -2 "$out/pip_install.log"
  ( cd /tmp && "$venv/bin/python" -c "import flashsteps, json; print(flashsteps.__file__); print(json.dumps(flashsteps.info()))" ) \
    > "$out/pip_import.log" 2>&1 || rc=1
  cat "$out/pip_import.log"
  ( cd /tmp && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$clone/tests/python" ) > "$out/pytest_installed.log" 2>&1 || rc=1
  tail -15 "$out/pytest_installed.log"
  return $rc
}
task_auto_bench() {
  # flashsteps.attention(step="auto") against step 09's program, bf16 d = 128, B·N = 16K, H = 16, in
  # one run on one GPU (needs python10's build-py): the module's call costs beside the kernels'.
  [ -d build-py ] || { echo "auto_bench: needs python10's build-py"; return 1; }
  ninja -C build-py -j16 step09_hopper > "$out/build_auto_bench.log" 2>&1 || return 1
  local rc=0 c
  for c in 0 1; do
    build-py/bin/step09_hopper --dtype bf16 --batch 4 --heads 16 --seq 4096 --dim 128 $([ $c = 1 ] && echo --causal) \
      --backward --bench --reps 30 --csv "$out/auto_bench.csv" >> "$out/auto_bench.log" 2>&1 || rc=1
  done
  PYTHONPATH=build-py/python python3 docs/benchmarks/torch_sdpa.py --backends "flashsteps_auto flashsteps_09 torch_cudnn" \
    --dtypes bf16 --dims 128 --seqs 4096 --backward --reps 30 --csv "$out/auto_bench.csv" >> "$out/auto_bench.log" 2>&1 || rc=1
  grep -E "flashsteps|torch_cudnn|ms" "$out/auto_bench.log" | tail -12
  return $rc
}
task_decode() {
  local rc=0
  ninja -C build -j16 step10_decode test_decode_gpu test_decode_host > "$out/build_decode.log" 2>&1 || return 1
  ctest --test-dir build -R "decode" -L "gpu|cpu" -E "emulated" -j4 > "$out/ctest_decode.log" 2>&1 || rc=1
  grep -E "tests passed|tests failed" "$out/ctest_decode.log"
  tests/sanitize.sh build --decode > "$out/sanitize_decode.log" 2>&1 || rc=1
  mkdir -p "$out/sanitize_decode" && cp build/sanitize_decode/*.log "$out/sanitize_decode/"
  tail -6 "$out/sanitize_decode.log"
  return $rc
}
task_trace10() {
  local rc=0 common="--dim 64 --batch 2 --heads 16 --heads-kv 4 --cache-len 2048 --check"
  mkdir -p "$out/traces"
  # shellcheck disable=SC2086
  build/bin/step10_decode $common --trace "$out/traces/10_decode_contiguous.fwd.json" > "$out/trace10.log" 2>&1 || rc=1
  # shellcheck disable=SC2086
  build/bin/step10_decode $common --page-size 16 --trace "$out/traces/10_decode_paged.fwd.json" >> "$out/trace10.log" 2>&1 || rc=1
  # shellcheck disable=SC2086
  build/bin/step10_decode $common --page-size 16 --append --new-tokens 4 --causal \
    --trace "$out/traces/10_decode_paged_append.fwd.json" >> "$out/trace10.log" 2>&1 || rc=1
  grep -E "^trace|INVALID|check" "$out/trace10.log"
  return $rc
}
task_decode_bench() {
  python3 docs/benchmarks/decode_bench.py --bin build/bin/step10_decode --csv "$out/decode.csv" --sweep \
    > "$out/decode_bench.log" 2>&1
  local rc=$?
  tail -30 "$out/decode_bench.log"
  return $rc
}

for t in "$@"; do
  if [ -f "$out/.done/$t" ]; then log "$t: done in an earlier call"; continue; fi
  if ! declare -F "task_$t" > /dev/null; then log "$t: no such task"; continue; fi
  if [ $(( $(date +%s) - start + ${usual[$t]:-60} )) -gt "$deadline" ]; then log "$t: not started (deadline)"; continue; fi
  log "$t: start"
  if "task_$t"; then touch "$out/.done/$t"; log "$t: done"; else log "$t: FAILED"; fi
done
