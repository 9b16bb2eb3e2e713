#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mkfs.nvmefs on image files full of old data (issue 6):
#  - by default the old contents are discarded (the image becomes sparse),
#    with a progress line when stderr is a terminal (script(1) gives one)
#    and none when it is not;
#  - -K keeps them (the image stays allocated);
#  - it prints the UUID and how to mount by it, with -o search= naming the
#    images' directory (test_fstab mounts as printed).
# usage: test_mkfs.sh BUILD_DIR
set -euo pipefail
[ $# = 1 ] || {
	echo "usage: test_mkfs.sh BUILD_DIR" >&2
	exit 2
}
build=$(realpath "$1")
command -v script >/dev/null || { echo "SKIP: script(1) not installed"; exit 77; }
t=$(mktemp -d "${TMPDIR:-/tmp}/nvmefs-mkfs.XXXXXX")
trap 'rm -rf "$t"' EXIT
fail=0
check() {
	local msg=$1
	shift
	"$@" || { echo "FAIL: $msg" >&2; fail=$((fail + 1)); }
}
kib() { du -k "$1" | cut -f1; }

for i in 0 1; do head -c 64M /dev/urandom >"$t/m$i"; done
check "old data allocated" test "$(kib "$t/m0")" -ge 65000
script -qec "'$build/mkfs.nvmefs' -f '$t/m0' '$t/m1'" "$t/tty.log" >/dev/null
check "progress on a terminal" grep -q "discarding old contents: 100%" "$t/tty.log"
check "the members are discarded ($(kib "$t/m0") KiB left)" test "$(kib "$t/m0")" -lt 8192
check "and the volume is sound" "$build/fsck.nvmefs" -n "$t/m0" "$t/m1"

for i in 0 1; do head -c 64M /dev/urandom >"$t/m$i"; done
"$build/mkfs.nvmefs" -f -K "$t/m0" "$t/m1" >"$t/out" 2>"$t/err"
check "-K keeps old contents" test "$(kib "$t/m0")" -ge 60000
check "no progress when not a terminal" bash -c "! grep -q discarding '$t/err'"
uuid=$(sed -n 's/^  UUID=//p' "$t/out")
check "a UUID is printed ($uuid)" bash -c "[[ '$uuid' =~ ^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$ ]]"
check "with the mount command that uses it, searching the images' directory" \
	grep -qF "nvmefs uuid=$uuid MOUNTPOINT -o search=$(realpath "$t") (" "$t/out"
[ "$fail" = 0 ] && echo "all checks passed" && exit 0
exit 1
