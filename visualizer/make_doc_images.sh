#!/usr/bin/env bash
# Regenerates the screenshots of docs/visualizer.md (docs/images/viz_*.png) with the program
# itself, headless. Uses the recorded traces in docs/traces/ when step 01's and step 04's (for
# step 09's two pictures, step 09's fa3 forward) are there, synthetic ones (H200 timing model)
# otherwise. Run after building:
#
#   bash visualizer/make_doc_images.sh            # build/bin/flashsteps_viz
#   VIZ=build-viz/bin/flashsteps_viz bash visualizer/make_doc_images.sh
set -euo pipefail
cd "$(dirname "$0")/.."
viz=${VIZ:-build/bin/flashsteps_viz}
out=docs/images
mkdir -p "$out"

t01=docs/traces/01_naive.fwd.json
t04=docs/traces/04_online_softmax_fa2.fwd.json
[ -f "$t04" ] || t04=$(ls docs/traces/04_online_softmax*.fwd.json 2>/dev/null | head -1 || true)
if [ -f "$t01" ] && [ -n "$t04" ]; then
  # Logical order: a recorded run spends most of its real time between kernels.
  flash=("$t04" --order logical); naive=("$t01" --order logical)
  pair=("$t01" --compare "$t04" --order logical); causal=(--synthetic flash-causal)
  timeline=("$t04" --order real)
else
  flash=(--synthetic flash); naive=(--synthetic naive --heads 1)
  pair=(--synthetic pair --heads 1); causal=(--synthetic flash-causal)
  timeline=(--synthetic naive --heads 1)
fi

# Without a display the program runs itself under xvfb-run.
"$viz" "${flash[@]}" --at frac:0.45 --screenshot "$out/viz_overview_04.png"
"$viz" "${naive[@]}" --at frac:0.62 --screenshot "$out/viz_overview_01.png"
"$viz" "${pair[@]}" --at frac:0.8 --panels compare,counters,sms --screenshot "$out/viz_compare_01_04.png"
"$viz" "${causal[@]}" --at frac:0.55 --cta 15 --panels scores,softmax,counters --size 1400x700 --screenshot "$out/viz_causal_softmax.png"
"$viz" "${flash[@]}" --panels io --size 1100x640 --screenshot "$out/viz_io_calculator.png"
"$viz" "${timeline[@]}" --at frac:0.5 --panels timeline --size 1600x420 --screenshot "$out/viz_timeline.png"
# Step 09's lanes (producer, consumer 0, consumer 1), from fa3's causal forward recorded on the
# H200 (N = 512, d = 128, B·H = 2: 8 CTAs, one per SM). CTA 0 (query rows 384–511, four key tiles)
# at seq 126, 3.4 µs in: consumer 0 starts softmax 1 as consumer 1 starts QKᵀ 1; stage 0 already
# holds K 2's copy over V 0, which P̃V 0 still needs. Real time: the Schedule panel's axis is real
# time anyway, and the timeline under it shows all 24 lanes as bars ("skip idle" jumps to the
# kernel), where logical order would draw 298 events as hairlines. Without that trace, the
# synthetic one (H200 timing model).
t09=docs/traces/09_hopper_fa3.fwd.json
if [ -f "$t09" ]; then
  "$viz" "$t09" --order real --at seq:126 --panels schedule,timeline --size 1400x820 \
    --screenshot "$out/viz_schedule_09.png"
  "$viz" "$t09" --order real --at seq:126 --panels memory --size 1400x720 \
    --screenshot "$out/viz_memory_09.png"
else
  "$viz" --synthetic hopper --N 1024 --d 128 --heads 2 --sms 8 --at frac:0.3 --panels schedule,timeline --size 1400x620 \
    --screenshot "$out/viz_schedule_09.png"
  "$viz" --synthetic hopper --N 1024 --d 128 --heads 2 --sms 8 --at frac:0.3 --panels memory --size 1200x700 \
    --screenshot "$out/viz_memory_09.png"
fi

# The lessons of steps 02 and 03 (recorded traces only).
for t in 02_fused 03_tiled; do
  [ -f "docs/traces/$t.fwd.json" ] && "$viz" "docs/traces/$t.fwd.json" --order logical --at frac:0.55 \
    --panels memory,scores,counters,timeline --screenshot "$out/viz_overview_${t%%_*}.png"
done

# Step 05: the recomputation backward (dK/dV kernel, then dQ); step 06: a butterfly mask, the
# skipped blocks grey in the ghost score matrix.
t05=docs/traces/05_recompute_backward_deterministic.bwd.json
t06=docs/traces/06_block_sparse_atomic.fwd.json
[ -f "$t05" ] && "$viz" "$t05" --order logical --at frac:0.55 --panels memory,scores,counters,timeline \
  --screenshot "$out/viz_overview_05.png"
[ -f "$t06" ] && "$viz" "$t06" --order logical --at frac:0.98 --panels memory,scores,counters,timeline \
  --screenshot "$out/viz_overview_06.png"
# Step 07 (SMYRF): a round in progress, its gathered rows outlined in HBM where they lie and its
# clusters on the diagonal of the score matrix in the round's sorted order.
t07=$(ls docs/traces/07_smyrf*.fwd.json 2>/dev/null | head -1 || true)
[ -n "$t07" ] && "$viz" "$t07" --order logical --at frac:0.55 --panels memory,scores,counters,timeline \
  --screenshot "$out/viz_overview_07.png"
# ... and a whole round in original order: the same clusters, scattered.
[ -n "$t07" ] && "$viz" "$t07" --order logical --at frac:1 --round 2 --scores original --panels scores,counters \
  --size 1000x600 --screenshot "$out/viz_smyrf_original.png"
# Step 08: the tensor-core forward in bf16 (tensors drawn at 2 bytes an element).
t08=docs/traces/08_tensor_cores_fa2.fwd.json
[ -f "$t08" ] && "$viz" "$t08" --order logical --at frac:0.55 --panels memory,scores,counters,timeline \
  --screenshot "$out/viz_overview_08.png"
# Step 08's shared memory as the kernel's slots: r3_pipeline (two K/V stages, P through SRAM) while
# CTA 0 computes key tile 2 and tile 3 is in flight.
t08p=docs/traces/08_tensor_cores_r3_pipeline.fwd.json
[ -f "$t08p" ] && "$viz" "$t08p" --order logical --at frac:0.55 --panels memory --size 1300x760 \
  --screenshot "$out/viz_pipeline_08.png"
# Step 08's backward, tc_dkdv_kernel (key_warps): K and V kept all CTA long, each warp's 16 keys;
# query tile 1 computed from stage 1 while tile 2 is in flight into stage 0; dSᵀ read back by
# query columns while CTA 0 adds tile 1's share of dQ to dQacc by atomics (its Load dQacc, seq 117).
t08b=docs/traces/08_tensor_cores_key_warps.bwd.json
[ -f "$t08b" ] && "$viz" "$t08b" --order logical --at seq:117 --kernel 1 --cta 0 --panels memory --size 1300x760 \
  --screenshot "$out/viz_backward_08.png"
# And tc_dkdv_smem_kernel (fa2): 8 warps in 4 rows of 32 keys; CTA 0 writes query tile 0's Pᵀ and
# dSᵀ into SRAM, each warp its block of 32 keys × 64 queries (its compute dS event, seq 40).
t08s=docs/traces/08_tensor_cores_fa2.bwd.json
[ -f "$t08s" ] && "$viz" "$t08s" --order logical --at seq:40 --kernel 1 --cta 0 --panels memory --size 1300x760 \
  --screenshot "$out/viz_backward_smem_08.png"
# Step 10 (decoding) from its recording in docs/traces (an H100's: 2 sequences of 2048 keys in pages of
# 16, 16 heads over 4, the rule's 4 splits), split 1 of sequence 0, K/V head 1 followed, 45% of the way.
t10=docs/traces/10_decode_paged.fwd.json
[ -f "$t10" ] && "$viz" "$t10" --kernel 0 --cta 5 --at frac:0.45 --panels memory,scores,schedule,timeline \
  --screenshot "$out/viz_decode_paged.png"
# And from the synthetic trace (H200 timing model; the file's name says so): batch 2, 8 query heads over 2 K/V heads, one new token against 700 keys
# in shuffled pages of 16, 3 splits. Halfway in logical order: each split has computed its first tile
# and is loading its second, page by page; the combine is still to come.
"$viz" --synthetic decode --order logical --at frac:0.5 --panels memory,scores,schedule,timeline \
  --screenshot "$out/viz_decode_synthetic.png"
