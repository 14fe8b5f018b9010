#!/usr/bin/env bash
# Records benchmark rows on a GPU machine: the steps (bin/bench) and, when python3 has torch,
# PyTorch's scaled_dot_product_attention on the same shapes, side by side in one run, into
# OUTDIR/<gpu>.csv with a log beside it. Then: docs/benchmarks/render.py regenerates the tables.
#
#   docs/benchmarks/record.sh OUTDIR                  # the standard sweep
#   SEQS="4096" DIMS=64 CAUSAL=0 STEPS="01 04" docs/benchmarks/record.sh OUTDIR
#   DROPOUT="0 0.1" ...                              # dropout where a step has it (and PyTorch)
#   DTYPES="bf16 fp16" STEPS=08 TORCH_BACKENDS="torch_flash torch_cudnn" ...   # 16-bit
#   STEPS="04 05 07" SMYRF="1x64 2x64 4x64 8x32" BATCH=1 HEADS=16 DIMS=64 CAUSAL=0 \
#     SEQS="4096 8192 16384 32768 65536" ...         # SMYRF's clusterings beside dense, B·H = 16
#   CHECK=1 ...                                      # also each row's max_err against fp64 (bench --check)
#   STEPS=09 DTYPES=bf16 DIMS=128 SEQS="2048 4096 16384" BACKWARD=0 CHECK=1 \
#     TORCH_BACKENDS="torch_flash torch_cudnn" ...   # step 09's ladder and fp8 (with its fwd_prep, fwd_kernel rows)
#
# Expects a configured and built ./build (bash cmake/quickstart.sh does that).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: record.sh OUTDIR}
mkdir -p "$out"
SEQS=${SEQS:-"512 1024 2048 4096 8192 16384"}
DIMS=${DIMS:-"64 128"}
CAUSAL=${CAUSAL:-"0 1"}
STEPS=${STEPS:-""}
REPS=${REPS:-10}
WARMUP=${WARMUP:-3}
BACKWARD=${BACKWARD:-1}
DROPOUT=${DROPOUT:-0}
DTYPES=${DTYPES:-fp32}
TORCH_BACKENDS=${TORCH_BACKENDS-"torch_math torch_efficient"}
SMYRF=${SMYRF:-8x32}  # clusterings of the clustered step (07)
BATCH=${BATCH:-}      # empty: bench's and torch_sdpa.py's default, 16384/N
HEADS=${HEADS:-}      # empty: 2048/d
CHECK=${CHECK:-0}     # 1: bench --check (max_err against fp64; the FP8 rule for fp8)

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
slug=$(echo "$gpu" | sed -e 's/^NVIDIA //' -e 's/[^A-Za-z0-9]\+/-/g' | tr 'A-Z' 'a-z')
csv="$out/$slug.csv"
bwd=(); [ "$BACKWARD" = 1 ] && bwd=(--backward)
check=(); [ "$CHECK" = 1 ] && check=(--check)

shape=(); [ -n "$BATCH" ] && shape+=(--batch "$BATCH"); [ -n "$HEADS" ] && shape+=(--heads "$HEADS")
./build/bin/bench ${STEPS:+--steps "$STEPS"} --seqs "$SEQS" --dims "$DIMS" --causal "$CAUSAL" \
  --dropout "$DROPOUT" --dtypes "$DTYPES" --smyrf "$SMYRF" --reps "$REPS" --warmup "$WARMUP" "${shape[@]}" "${bwd[@]}" \
  "${check[@]}" --csv "$csv" 2>&1 | tee -a "$out/bench.log"
if [ -n "$TORCH_BACKENDS" ] && python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  PYTHONUNBUFFERED=1 python3 docs/benchmarks/torch_sdpa.py --seqs "$SEQS" --dims "$DIMS" \
    --causal "$CAUSAL" --dropout "$DROPOUT" --dtypes "$DTYPES" --reps "$REPS" --backends "$TORCH_BACKENDS" "${shape[@]}" \
    "${bwd[@]}" --csv "$csv" 2>&1 \
    | tee -a "$out/bench.log"
else
  echo "python3 with torch and a GPU not found: no PyTorch rows" | tee -a "$out/bench.log"
fi
echo "rows in $csv"
