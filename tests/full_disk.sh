#!/usr/bin/env bash
# tests/full_disk.sh CODE REGEX COMMAND ARGS...
# Runs COMMAND in a private mount namespace where @FULL@ in its arguments (and in REGEX) is a
# folder on a full 16 KiB tmpfs; passes when it exits with CODE, its output matches REGEX
# (grep -E), and it left no file on that disk. Exits 77 (CTest's "skipped") where no mount namespace can be had
# (it needs root).
set -uo pipefail
if [ "${FS_FULL_DISK_INNER:-}" != 1 ]; then
  unshare -m true 2>/dev/null || { echo "SKIPPED (needs root for a tmpfs in a private mount namespace)"; exit 77; }
  FS_FULL_DISK_INNER=1 exec unshare -m --propagation private bash "$0" "$@"
fi
code=$1 regex=$2
shift 2
full=$(mktemp -d)
mount -t tmpfs -o size=16k tmpfs "$full" || { echo "SKIPPED (cannot mount a tmpfs)"; exit 77; }
head -c 16384 /dev/zero > "$full/filler" 2>/dev/null  # full to the last page
args=()
for a in "$@"; do args+=("${a//@FULL@/$full}"); done
out=$("${args[@]}" 2>&1)
got=$?
echo "$out"
left=$(find "$full" -type f ! -name filler | head -5)
umount "$full"
rmdir "$full"
[ "$got" -eq "$code" ] || { echo "expected exit code $code, got $got"; exit 1; }
regex=${regex//@FULL@/$full}
echo "$out" | grep -qE -- "$regex" || { echo "output does not match '$regex'"; exit 1; }
[ -z "$left" ] || { echo "left behind on the full disk: $left"; exit 1; }
exit 0
