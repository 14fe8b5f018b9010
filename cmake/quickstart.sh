#!/usr/bin/env bash
# The README's two commands:
#   bash cmake/quickstart.sh          set up, then the tour step by step: each step's program is
#                                     built and runs its rows (checked and timed; without a GPU, the
#                                     CPU reference) before the next step compiles, then the visualizer
#   bash cmake/quickstart.sh test     set up, build everything, run the tests (ctest)
# and what CI adds:
#   bash cmake/quickstart.sh fuzz     set up clang, build the fuzz targets in build-fuzz/ and run
#                                     each for FS_FUZZ_SECONDS (15) on its seeds (tests/fuzz/run.sh)
# Set-up: the Debian packages the build needs are installed when run as root; otherwise the
# exact apt-get line is printed. Extra arguments go to the tour (each step's --tour) or to ctest.
# FS_DEPS_PREFIX=/opt/deps/usr uses packages unpacked there instead (machines without apt).
# FS_STEPS="01 04" builds those steps (and what they build on) alone, and their tests.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-tour}
[ $# -gt 0 ] && shift
case "$mode" in
  tour|test|fuzz) ;;
  *) echo "usage: bash cmake/quickstart.sh [tour|test|fuzz] [args...]" >&2; exit 2 ;;
esac

packages=(cmake ninja-build g++ catch2 nlohmann-json3-dev libcli11-dev)
# ccache: a rebuild after a small change takes seconds (CMakeLists.txt uses it where it is found).
packages+=(ccache)
# The visualizer (Dear ImGui, GLFW, OpenGL, stb, DejaVu) and its headless runs (Xvfb + Mesa).
packages+=(libimgui-dev libglfw3-dev libstb-dev fonts-dejavu-core xvfb xauth libgl1-mesa-dri)
# The benchmark figures (docs/benchmarks/render.py, which CI runs with --check): Debian's matplotlib,
# for /usr/bin/python3.
packages+=(python3-matplotlib)
# The Python module (common/python) and its tests (tests/python), for Debian's /usr/bin/python3.
packages+=(python3-dev pybind11-dev libdlpack-dev python3-numpy python3-pytest)
# The fuzz targets: libFuzzer, AddressSanitizer and UBSan come with clang's runtime libraries.
[ "$mode" = fuzz ] && packages+=(clang-14 libclang-rt-14-dev)

if [ -z "${FS_DEPS_PREFIX:-}" ]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
      echo "Installing ${missing[*]}"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
      echo "Missing packages. Run:"
      echo "  sudo apt-get install -y ${missing[*]}"
      exit 1
    fi
  fi
fi

nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "The CUDA toolkit (nvcc) was not found on PATH or in /usr/local/cuda/bin."
  echo "Install it from https://developer.nvidia.com/cuda-downloads, then run this again."
  exit 1
fi

if [ "$mode" = fuzz ]; then
  export PATH="$(dirname "$nvcc"):$PATH"  # the fuzz build finds the CUDA headers by nvcc's place
  exec bash tests/fuzz/run.sh -max_total_time="${FS_FUZZ_SECONDS:-15}" "$@"
fi

config=(-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc")
[ -n "${FS_DEPS_PREFIX:-}" ] && config+=(-DCMAKE_PREFIX_PATH="$FS_DEPS_PREFIX")
[ -n "${CUDAARCHS:-}" ] && config+=(-DCMAKE_CUDA_ARCHITECTURES="$CUDAARCHS")
config+=(-DFS_STEPS="${FS_STEPS:-}")
# The Python module is built for the distribution's interpreter, where apt put NumPy and pytest
# (a python3 earlier on PATH may be another one).
[ -x /usr/bin/python3 ] && config+=(-DPython3_EXECUTABLE=/usr/bin/python3)
cmake "${config[@]}" >/dev/null
rm -f build/ptxas_spills.log

# The spills cmake/ptxas_guard.sh lets through (step 09's traced and backward kernels) are counted
# here in one line, not printed kernel by kernel.
spills_note() {
  [ -s build/ptxas_spills.log ] || return 0
  echo "quickstart: $(sort -u build/ptxas_spills.log | wc -l) step 09 kernels (traced or backward) keep a few" \
       "registers in local memory, as cmake/ptxas_guard.sh allows (build/ptxas_spills.log)"
}

if [ "$mode" = test ]; then
  cmake --build build
  spills_note
  # CI (FS_BUILD_REPORT=1) prints what the build spent its time on, so that a slower one is seen.
  [ -n "${FS_BUILD_REPORT:-}" ] && python3 cmake/build_report.py build --top 10
  exec ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
fi

# --- The tour, step by step ---------------------------------------------------------------------
# Each step's program is built and runs its rows of the tour (stepNN --tour: every variant at one
# size, checked against the fp64 reference and timed, a traced run recorded into FS_TOUR_TRACES for
# the visualizer) before the next step compiles; without a GPU the first one runs the CPU reference.
targets=$(ninja -C build -t targets all 2>/dev/null | cut -d: -f1)
steps=()
for dir in steps/[0-9][0-9]_*/; do
  name=$(basename "$dir")
  grep -qx "step$name" <<<"$targets" && steps+=("$name")  # FS_STEPS may leave some out
done
traces=${FS_TOUR_TRACES:-build/traces}
header=()
for i in "${!steps[@]}"; do
  name=${steps[$i]}
  rest=("${steps[@]:$((i + 1))}")
  later=${rest[*]%%_*}
  echo "quickstart: compiling step ${name%%_*}'s program${later:+ (then ${later// /, }, then the visualizer)}"
  cmake --build build --target "step$name"
  "./build/bin/step$name" --tour "${header[@]}" --trace-dir "$traces" "$@"
  header=(--no-header)
done

# --- The visualizer, after the tour (docs/visualizer.md) ---------------------------------
# Replays the traces the tour recorded (FS_TOUR_TRACES, when it had a GPU) and those shipped
# in docs/traces/. Without a display it renders a storyboard of PNGs through Xvfb and says
# where. Absent where its packages are (the build then has no flashsteps_viz).
rest=(tour bench io_model trace_validate)
grep -qx flashsteps_viz <<<"$targets" && rest+=(flashsteps_viz)
echo "quickstart: compiling ${rest[*]} (the tests are built by: bash cmake/quickstart.sh test)"
cmake --build build --target "${rest[@]}"
spills_note
if [ -x build/bin/flashsteps_viz ]; then
  viz_args=()
  [ -d "$traces" ] && viz_args+=("$traces")
  exec ./build/bin/flashsteps_viz "${viz_args[@]}"
fi
