#!/usr/bin/env bash
# Times two builds of the project on the same GPU, in one run, shape by shape: the kernels of a
# change against those of the commit before it. For a change that must not slow any kernel (a
# refactor, a build-time cut): every row's ratio should be 1 within the spread of repeats.
#
#   docs/benchmarks/compare_builds.sh BASE_COMMIT OUTDIR        # from a configured, built ./build
#   STEPS="05 06" DTYPES=fp32 SEQS="4096 16384" ... compare_builds.sh ...
#
# Builds BASE_COMMIT's bench (a git worktree in $BASE_DIR, default /tmp/fs-base; its build without
# tests) unless $BASE_DIR/build/bin/bench exists; ./build/bin/bench is the change's. Then, for each
# step and element type, runs the base's bench and the change's in turn, ROUNDS times (default 2),
# each writing its own CSV (OUTDIR/base.csv, OUTDIR/change.csv), and prints a table of every
# configuration's median over the rounds: base ms, change ms, change/base. Options as record.sh's:
# STEPS, SEQS, DIMS, CAUSAL, DTYPES, BACKWARD, REPS, WARMUP, VARIANTS; VARIANTS_08 (and so on) names
# one step's variants, e.g. VARIANTS_08="fa2 deterministic 3xtf32" VARIANTS_09="fa3 deterministic fp8".
set -euo pipefail
cd "$(dirname "$0")/../.."
base_commit=${1:?usage: compare_builds.sh BASE_COMMIT OUTDIR}
out=${2:?usage: compare_builds.sh BASE_COMMIT OUTDIR}
mkdir -p "$out"
BASE_DIR=${BASE_DIR:-/tmp/fs-base}
STEPS=${STEPS:-"04 05 06 07 08 09"}
SEQS=${SEQS:-"4096 16384"}
DIMS=${DIMS:-"64 128"}
CAUSAL=${CAUSAL:-"0 1"}
DTYPES=${DTYPES:-"fp32 bf16 fp16"}
BACKWARD=${BACKWARD:-1}
REPS=${REPS:-10}
WARMUP=${WARMUP:-3}
ROUNDS=${ROUNDS:-2}
VARIANTS=${VARIANTS:-}

if [ ! -x "$BASE_DIR/build/bin/bench" ]; then
  [ -d "$BASE_DIR" ] || git worktree add --detach "$BASE_DIR" "$base_commit" >/dev/null
  cmake -S "$BASE_DIR" -B "$BASE_DIR/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFS_BUILD_TESTS=OFF \
    ${CMAKE_PREFIX_PATH:+-DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH"} \
    ${CMAKE_CUDA_ARCHITECTURES:+-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES"} >"$out/base_configure.log"
  cmake --build "$BASE_DIR/build" --target bench >"$out/base_build.log" 2>&1
fi

bwd=(); [ "$BACKWARD" = 1 ] && bwd=(--backward)
for round in $(seq "$ROUNDS"); do
  for step in $STEPS; do
    per_step="VARIANTS_$step"
    variants=${!per_step:-$VARIANTS}
    for dtype in $DTYPES; do
      for who in base change; do
        bin=./build/bin/bench commit=${FS_COMMIT:-}
        [ "$who" = base ] && bin="$BASE_DIR/build/bin/bench" commit=$base_commit  # the rows name their build
        # A step without kernels of this type runs nothing (bench skips it).
        FS_COMMIT=$commit "$bin" --steps "$step" --dtypes "$dtype" --seqs "$SEQS" --dims "$DIMS" --causal "$CAUSAL" \
          ${variants:+--variants "$variants"} --reps "$REPS" --warmup "$WARMUP" "${bwd[@]}" \
          --csv "$out/$who.csv" >>"$out/$who.log" 2>&1 || echo "round $round step $step $dtype: $who's bench exit $?"
      done
    done
  done
done

python3 - "$out/base.csv" "$out/change.csv" <<'EOF' | tee "$out/compare.txt"
import csv, statistics, sys
def rows(path):
    out = {}
    for r in csv.DictReader(open(path)):
        key = (r["step"], r["pass"], r["dtype"], r["N"], r["d"], r["causal"], r.get("dropout", ""), r.get("mask", ""))
        out.setdefault(key, []).append(float(r["median_ms"]))
    return out
base, change = rows(sys.argv[1]), rows(sys.argv[2])
print(f"{'step':32} {'pass':4} {'dtype':5} {'N':>6} {'d':>4} {'causal':>6} {'base ms':>10} {'change ms':>10} {'ratio':>7}")
worst = []
for key in sorted(base):
    if key not in change:
        print(f"{key[0]:32} {key[1]:4} {key[2]:5} {key[3]:>6} {key[4]:>4} {key[5]:>6}  (no row of the change)")
        continue
    b, c = statistics.median(base[key]), statistics.median(change[key])
    worst.append((c / b, key))
    print(f"{key[0]:32} {key[1]:4} {key[2]:5} {key[3]:>6} {key[4]:>4} {key[5]:>6} {b:10.4f} {c:10.4f} {c / b:7.3f}")
worst.sort(reverse=True)
if worst:
    print(f"{len(worst)} configurations; change/base median {statistics.median(r for r, _ in worst):.3f}, "
          f"largest {worst[0][0]:.3f} ({' '.join(worst[0][1][:6])})")
EOF
