#!/usr/bin/env bash
# cmake/ptxas_guard.sh on fake compile commands that print what ptxas prints: every note that
# wgmma was serialized (whatever its C751x code) and every spill not allowed must fail the compile
# and remove its -o output; allowed spills, clean output and the compiler's own failure must not
# be mistaken for them.
set -u
guard="$(dirname "$0")/../cmake/ptxas_guard.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
# expect CODE DESCRIPTION [GUARD OPTIONS] -- STDERR_LINE [EXIT]
expect() {
  local want=$1 what=$2
  shift 2
  local opts=()
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  local line=$1 code=${2:-0}
  touch "$dir/out.o"
  "$guard" "${opts[@]}" -- bash -c 'echo "$1" >&2; exit "$2"' _ "$line" "$code" -o "$dir/out.o" 2>/dev/null
  local rc=$?
  local left=kept
  [ -e "$dir/out.o" ] || left=removed
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $what: exit $rc, expected $want"
    fails=$((fails + 1))
  elif [ "$want" -eq 1 ] && [ "$left" = kept ]; then
    echo "FAIL: $what: the object was left behind"
    fails=$((fails + 1))
  else
    echo "ok: $what (exit $rc, object $left)"
  fi
}
ser='ptxas info    : (%s) Potential Performance Loss: wgmma.mma_async instructions are serialized due to %s in the function '"'"'_Z1kv'"'"''
expect 1 "C7513 (a register of a wgmma in flight written)" -- "$(printf "$ser" C7513 'non wgmma instructions defining accumulator registers')"
expect 1 "C7512 (too few registers)" -- "$(printf "$ser" C7512 'insufficient register resources for the wgmma pipeline')"
expect 1 "C7510 (another cause)" -- "$(printf "$ser" C7510 'the presence of Extern calls')"
spill="ptxas warning : Registers are spilled to local memory in function '_ZN2fs6hopper22hopper_backward_kernelI', 20 bytes spill stores, 40 bytes spill loads"
expect 1 "a spill, none allowed" -- "$spill"
expect 0 "a spill the regex allows" --allow-spills 'hopper_backward_kernel' -- "$spill"
expect 0 "ptxas's plain notes" -- "ptxas info    : Used 168 registers, used 1 barriers"
expect 3 "the compiler's own failure, passed on" -- "error: something" 3
# Quiet: a spill the regex allows is not printed but appended to --spill-log; the others are printed.
out=$("$guard" --allow-spills 'hopper_backward_kernel' --spill-log "$dir/spills.log" -- \
      bash -c 'echo "$1" >&2; echo "ptxas info    : Used 168 registers" >&2' _ "$spill" 2>&1 >/dev/null)
if grep -q "Registers are spilled" <<<"$out" || ! grep -q "Used 168 registers" <<<"$out"; then
  echo "FAIL: an allowed spill was printed, or another line was not: $out"
  fails=$((fails + 1))
elif ! grep -q "hopper_backward_kernel" "$dir/spills.log" 2>/dev/null; then
  echo "FAIL: the allowed spill is not in the spill log"
  fails=$((fails + 1))
else
  echo "ok: an allowed spill goes to the spill log, not the build's output"
fi
[ "$fails" -eq 0 ]
