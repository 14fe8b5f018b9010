#!/usr/bin/env bash
# The compiler launcher of step 09's translation units (steps/09_hopper/CMakeLists.txt):
#
#   ptxas_guard.sh [--allow-spills REGEX] -- COMPILE COMMAND...
#
# runs the compile command and fails it where ptxas reported either of two silent slowdowns:
#   C751x  wgmma.mma_async serialized: ptxas waits for each wgmma before issuing the next, so that
#          nothing overlaps the tensor cores' work. The code says why: C7513 where a register that
#          a wgmma in flight reads or writes is written by other instructions before the wait,
#          C7512 where the wgmmas in flight need more registers than the function may have (at
#          setmaxnreg's budget), and others; every note that says "serialized" fails.
#   spills registers spilled to local memory (ptxas -warn-spills, which the step passes), except
#          in the functions whose mangled names match REGEX.
# Both are only notes from ptxas: without this the build succeeds with them. The spills REGEX
# allows are not printed: with --spill-log FILE they are appended there (quickstart.sh counts them
# in one line), so that a newcomer's build prints no warning that asks nothing of them.
allow=""
spill_log=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --allow-spills) allow="$2"; shift 2 ;;
    --spill-log) spill_log="$2"; shift 2 ;;
    *) echo "ptxas_guard.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "${1:-}" = "--" ] && shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>"$log"
rc=$?
spill_re='Registers are spilled'
if [ -n "$allow" ]; then
  # Every line but the allowed spills goes on to the build's output; those go to the spill log.
  grep -vE "$spill_re.*($allow)" "$log" >&2
  allowed=$(grep -E "$spill_re" "$log" | grep -E "$allow")
  if [ -n "$allowed" ] && [ -n "$spill_log" ]; then printf '%s\n' "$allowed" >>"$spill_log"; fi
else
  cat "$log" >&2
fi
[ "$rc" -eq 0 ] || exit "$rc"
bad=$(grep -E 'wgmma\.mma_async instructions are serialized|\(C751[0-9]\)' "$log")
spills=$(grep -E "$spill_re" "$log")
if [ -n "$allow" ] && [ -n "$spills" ]; then spills=$(grep -vE "$allow" <<<"$spills"); fi
if [ -n "$bad$spills" ]; then
  echo "error: ptxas serialized wgmma (C751x) or spilled registers where the step allows none (above); see cmake/ptxas_guard.sh" >&2
  # The object must not stay behind as if it were good: remove the -o output.
  prev=""
  for arg in "$@"; do
    if [ "$prev" = "-o" ]; then rm -f "$arg"; fi
    prev="$arg"
  done
  exit 1
fi
exit 0
