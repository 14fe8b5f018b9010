#!/usr/bin/env bash
# Measures the DRAM bytes every step's kernels move, with Nsight Compute, next to the IO
# model: OUTDIR/<gpu>_ncu.csv (a row per kernel launch) and OUTDIR/<gpu>_model.csv.
#   docs/benchmarks/ncu_bytes.sh OUTDIR [B H N d]      (default 1 8 2048 64, non-causal)
# Clocks are left as they are (--clock-control none): see the device notes.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: ncu_bytes.sh OUTDIR [B H N d]}
B=${2:-1}; H=${3:-8}; N=${4:-2048}; D=${5:-64}
mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
slug=$(echo "$gpu" | sed -e 's/^NVIDIA //' -e 's/[^A-Za-z0-9]\+/-/g' | tr 'A-Z' 'a-z')
raw="$out/ncu_raw.csv"; : > "$raw"
for s in 01_naive 02_fused 03_tiled "04_online_softmax --variant alg1" "04_online_softmax --variant fa2"; do
  bwd=""; case "$s" in 0[12]*) bwd=--backward;; esac
  ncu --clock-control none --print-units base --csv \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
      ./build/bin/step$s --batch "$B" --heads "$H" --seq "$N" --dim "$D" $bwd 2>/dev/null \
    | grep '^"' | sed "s|^|$(echo "$s" | tr ' ' '_'),|" >> "$raw"
done
python3 docs/benchmarks/ncu_normalize.py "$raw" --gpu "$gpu" --shape "$B,$H,$N,$D" \
  --commit "${FS_COMMIT:-unknown}" --date "$(date -u +%F)" > "$out/${slug}_ncu.csv"
./build/bin/io_model --batch "$B" --heads "$H" --seq "$N" --dim "$D" > "$out/${slug}_model.csv"
echo "wrote $out/${slug}_ncu.csv and $out/${slug}_model.csv"
