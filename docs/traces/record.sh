#!/usr/bin/env bash
# Records the traces that ship here: for every step program in build/bin and each of its kernel
# variants, a traced forward (and backward, where the step has one) at the traced runs' default
# shape (B=H=1, N=256, d=64; step 06 at N = 1024, see EXTRA), each validated; then rewrites README.md to say how they were
# recorded. On a GPU machine, after bash cmake/quickstart.sh:
#
#   bash docs/traces/record.sh
#   STEPS="01 04" bash docs/traces/record.sh      # some steps only
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/traces
bin=${BIN:-build/bin}
STEPS=${STEPS:-""}
commit=${FS_COMMIT:-$(git describe --always --dirty --abbrev=10 2>/dev/null || echo unknown)}
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)

# Per-step arguments: step 06 traces a flat butterfly (2 factors) over 8 × 8 blocks of 128, so
# that the blocks it skips show (the default N = 256 would be 2 × 2 blocks).
# Step 08 runs in bf16 (it has no fp32 kernel).
declare -A EXTRA=([06]="--seq 1024 --pattern butterfly:2 --trace-cap 2048" [08]="--dtype bf16")

# Step 10 (decoding) has its own driver and no variants: three traces of one problem (d = 64, its
# traced kernels' head dimension; 2 sequences of 2048 keys, 16 heads over 4 K/V heads, the split
# rule's splits): the contiguous cache, pages of 16 in shuffled order, and pages with an append of
# 4 causal tokens (the append kernel too).
decode_args="--dim 64 --batch 2 --heads 16 --heads-kv 4 --cache-len 2048 --check"
declare -A DECODE=([contiguous]="" [paged]="--page-size 16" [paged_append]="--page-size 16 --append --new-tokens 4 --causal")

recorded=()
for exe in "$bin"/step[0-9][0-9]_*; do
  prog=$(basename "$exe")
  id=${prog#step}
  if [ -n "$STEPS" ] && ! grep -qw "${id%%_*}" <<<"$STEPS"; then continue; fi
  if [ "$prog" = step10_decode ]; then
    for k in contiguous paged paged_append; do
      name=10_decode_$k
      read -r -a args <<<"$decode_args ${DECODE[$k]}"
      "$exe" "${args[@]}" --trace "$out/$name.fwd.json"
      recorded+=("$name|$prog ${args[*]} --trace $out/$name.fwd.json|$name.fwd.json")
    done
    continue
  fi
  variants=$("$exe" --help | sed -n 's/.*--variant TEXT:{\([^}]*\)}.*/\1/p' | tr ',' ' ')
  for v in ${variants:-default}; do
    name=$id
    vargs=()
    if [ "$v" != default ]; then name=${id}_$v; vargs=(--variant "$v"); fi
    read -r -a extra <<<"${EXTRA[${id%%_*}]:-}"
    cmd=("$exe" "${vargs[@]}" "${extra[@]}" --trace "$out/$name.fwd.json")
    # A step without a backward refuses --backward with exit code 2 before touching the GPU.
    if "${cmd[@]}" --backward; then
      recorded+=("$name|${cmd[*]#$bin/} --backward|$name.fwd.json $name.bwd.json")
    else
      [ $? -eq 2 ] || exit 1
      "${cmd[@]}"
      recorded+=("$name|${cmd[*]#$bin/}|$name.fwd.json")
    fi
  done
done

files=()
for r in "${recorded[@]}"; do for f in ${r##*|}; do files+=("$out/$f"); done; done
"$bin"/trace_validate "${files[@]}" | tee "$out/validate.log"

{
  echo "# Recorded traces"
  echo
  echo "Traces of the step programs' own traced runs (\`--trace\`, docs/trace-format.md), recorded"
  echo "by \`bash docs/traces/record.sh\` on $gpu (GPU, driver) at commit $commit, $(date -u +%F)."
  echo "The visualizer opens them on any machine; so do ui.perfetto.dev and chrome://tracing."
  echo "CTest validates every trace here (\`trace: the traces in docs/traces validate\`)."
  echo
  echo "| trace | files | command (from build/bin) |"
  echo "| --- | --- | --- |"
  for r in "${recorded[@]}"; do
    IFS='|' read -r name cmd fs <<<"$r"
    echo "| $name | ${fs// /, } | \`${cmd//$out\//}\` (files written to docs/traces/) |"
  done
  echo
  echo "The validator's summary of each (validate.log):"
  echo
  echo '```'
  sed "s|^$out/||" "$out/validate.log"
  echo '```'
} >"$out/README.md"
echo "wrote $out/README.md"
