#!/usr/bin/env bash
# The README's two commands:
#   bash cmake/quickstart.sh          set up, build, run the tour (every step, checked and timed)
#   bash cmake/quickstart.sh test     set up, build, run the tests (ctest)
# and what CI adds:
#   bash cmake/quickstart.sh fuzz     set up clang, build the fuzz targets in build-fuzz/ and run
#                                     each for FS_FUZZ_SECONDS (15) on its seeds (tests/fuzz/run.sh)
# Set-up: the Debian packages the build needs are installed when run as root; otherwise the
# exact apt-get line is printed. Extra arguments go to the tour or to ctest.
# FS_DEPS_PREFIX=/opt/deps/usr uses packages unpacked there instead (machines without apt).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-tour}
[ $# -gt 0 ] && shift
case "$mode" in
  tour|test|fuzz) ;;
  *) echo "usage: bash cmake/quickstart.sh [tour|test|fuzz] [args...]" >&2; exit 2 ;;
esac

packages=(cmake ninja-build g++ catch2 nlohmann-json3-dev libcli11-dev)
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
# The Python module is built for the distribution's interpreter, where apt put NumPy and pytest
# (a python3 earlier on PATH may be another one).
[ -x /usr/bin/python3 ] && config+=(-DPython3_EXECUTABLE=/usr/bin/python3)
cmake "${config[@]}" >/dev/null
cmake --build build

if [ "$mode" = test ]; then
  exec ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
fi
./build/bin/tour --trace-dir "${FS_TOUR_TRACES:-build/traces}" "$@"

# --- The visualizer, after the tour (docs/visualizer.md) ---------------------------------
# Replays the traces the tour recorded (FS_TOUR_TRACES, when it had a GPU) and those shipped
# in docs/traces/. Without a display it renders a storyboard of PNGs through Xvfb and says
# where. Absent where its packages are (the build then has no flashsteps_viz).
if [ -x build/bin/flashsteps_viz ]; then
  viz_args=()
  [ -d "${FS_TOUR_TRACES:-build/traces}" ] && viz_args+=("${FS_TOUR_TRACES:-build/traces}")
  exec ./build/bin/flashsteps_viz "${viz_args[@]}"
fi
