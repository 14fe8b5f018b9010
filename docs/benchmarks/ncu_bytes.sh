#!/usr/bin/env bash
# Measures the DRAM bytes every step's kernels move, with Nsight Compute, next to the IO
# model: OUTDIR/<gpu>_ncu.csv (a row per kernel launch) and OUTDIR/<gpu>_model.csv.
#   docs/benchmarks/ncu_bytes.sh OUTDIR [B H N d]      (default 1 8 2048 64, non-causal)
#   STEPS="05 06" docs/benchmarks/ncu_bytes.sh OUTDIR   only those steps; the other steps' rows
#                                                       are kept from docs/benchmarks/<gpu>_ncu.csv
# Steps 01, 02, 05, 06, 07 run forward and backward (07 with its default 8 rounds of 32); 05 and 06 both dQ variants; 06 with
# --pattern butterfly (the IO model is printed for the same mask); 08 in bf16 (io_model prints
# each step in its first dtype); 09's fa3 forward and backward in bf16 (an sm_90 GPU: H100, H200;
# its fp8 variant runs at d = 128 only). FS_COMMIT names the commit.
# Clocks are left as they are (--clock-control none): see the device notes.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: ncu_bytes.sh OUTDIR [B H N d]}
B=${2:-1}; H=${3:-8}; N=${4:-2048}; D=${5:-64}
pattern=butterfly
mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
slug=$(echo "$gpu" | sed -e 's/^NVIDIA //' -e 's/[^A-Za-z0-9]\+/-/g' | tr 'A-Z' 'a-z')
# label | program and its own options
runs=(
  "01_naive|step01_naive --backward"
  "02_fused|step02_fused --backward"
  "03_tiled|step03_tiled"
  "04_online_softmax/alg1|step04_online_softmax --variant alg1"
  "04_online_softmax/fa2|step04_online_softmax --variant fa2"
  "05_recompute_backward/atomic|step05_recompute_backward --variant atomic --backward"
  "05_recompute_backward/deterministic|step05_recompute_backward --variant deterministic --backward"
  "06_block_sparse/atomic|step06_block_sparse --variant atomic --pattern $pattern --backward"
  "06_block_sparse/deterministic|step06_block_sparse --variant deterministic --pattern $pattern --backward"
  "07_smyrf|step07_smyrf --backward"
  "08_tensor_cores/fa2|step08_tensor_cores --variant fa2 --dtype bf16"
  "09_hopper/fa3|step09_hopper --variant fa3 --dtype bf16 --backward"
)
raw="$out/ncu_raw.csv"; : > "$raw"
for r in "${runs[@]}"; do
  label=${r%%|*}; cmd=${r#*|}
  if [ -n "${STEPS:-}" ] && ! [[ " $STEPS " == *" ${label:0:2} "* ]]; then continue; fi
  # shellcheck disable=SC2086  # cmd is the program and its options, split on purpose
  ncu --clock-control none --print-units base --csv \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
      ./build/bin/$cmd --batch "$B" --heads "$H" --seq "$N" --dim "$D" 2>/dev/null \
    | grep '^"' | sed "s|^|$label,|" >> "$raw"
done
keep=()
[ -n "${STEPS:-}" ] && [ -f "docs/benchmarks/${slug}_ncu.csv" ] && keep=(--keep "docs/benchmarks/${slug}_ncu.csv")
python3 docs/benchmarks/ncu_normalize.py "$raw" --gpu "$gpu" --shape "$B,$H,$N,$D" \
  --commit "${FS_COMMIT:-unknown}" --date "$(date -u +%F)" ${keep[@]+"${keep[@]}"} > "$out/${slug}_ncu.csv"
./build/bin/io_model --batch "$B" --heads "$H" --seq "$N" --dim "$D" --pattern "$pattern" > "$out/${slug}_model.csv"
echo "wrote $out/${slug}_ncu.csv and $out/${slug}_model.csv"
