#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The store's counters in .nvmefs/stats ("metadata"."store", fs/fuse/ctl.c)
# and the daemon's thread names, on a volume of 2 images of 256 MiB (a
# 4 MiB journal ring: a flush every few thousand creates):
#  - on a fresh mount: no flush, no compaction, no block written;
#  - 3,000 files created, then a 60 KiB extended attribute set on one of
#    them until a compaction ran (at most 4,000 times): flushes and
#    flushed_blocks grew, flushed_blocks at least flushes; the compaction
#    read and wrote blocks; every file created is there, the attribute's
#    last value too;
#  - the threads are named (ps -L, top -H): nvmefs-commit, nvmefs-compact,
#    nvmefs-w0 (the FUSE workers);
#  - after a remount the counters start again from zero (since the mount),
#    and the runs written before are still there (runs > 0).
# Exit 77 (skip) without root, /dev/fuse, the nvmefs binaries or python3.
# usage: test_meta_stats.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -ne 1 ]; then
	echo "usage: test_meta_stats.sh BUILD_DIR" >&2
	exit 2
fi
build=$1
mnt_time_limit 240 "$0" "$@"
py=/usr/bin/python3
mnt_need "$py" python3
mnt_setup "$build" 2 256M

# store KEY...: numbers from .nvmefs/stats's metadata.store.
store() {
	"$py" - "$MNT/.nvmefs/stats" "$@" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["metadata"]["store"]
print(" ".join(str(int(s[k])) for k in sys.argv[2:]))
EOF
}

mnt_mount
read -r f0 fb0 c0 cw0 < <(store flushes flushed_blocks compactions compact_written_blocks)
check "fresh mount: no flush ($f0), block flushed ($fb0), compaction ($c0) or block compacted ($cw0)" \
	test "$f0.$fb0.$c0.$cw0" = 0.0.0.0

# 3,000 files, then a 60 KiB extended attribute set again and again on one
# of them (its journal records fill the ring: a flush every few dozen,
# while the store keeps one value) until a compaction ran.
made=3000
"$py" - "$MNT" <<'EOF'
import json, os, sys
root = sys.argv[1]
os.mkdir(os.path.join(root, "d"))
for i in range(3000):
    os.close(os.open(os.path.join(root, "d", "f%05d" % i), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
f = os.path.join(root, "d", "f00000")
for i in range(4000):
    os.setxattr(f, "user.big", bytes([i & 0xff]) * 60000)
    if i % 20 == 19 and json.load(open(os.path.join(root, ".nvmefs", "stats")))["metadata"]["store"]["compactions"]:
        break
EOF
read -r f1 fb1 c1 cr1 cw1 mem runs < <(store flushes flushed_blocks compactions compact_read_blocks \
	compact_written_blocks memtable_bytes runs)
# (memtable_bytes only shown: a commit may flush it at any moment)
echo "$f1 flushes ($fb1 blocks), $c1 compactions (read $cr1, wrote $cw1 blocks), $runs runs, memtable $mem bytes"
check "flushes counted ($f1)" test "$f1" -ge 1
check "flushed blocks counted ($fb1 for $f1 flushes)" test "$fb1" -ge "$f1"
check "a compaction ran within 4,000 attribute writes ($c1)" test "$c1" -ge 1
check "compacted blocks read ($cr1) and written ($cw1)" test "$cr1" -gt 0 -a "$cw1" -gt 0
check "every file there" test "$(find "$MNT" -path "$MNT/.nvmefs" -prune -o -type f -print | wc -l)" = "$made"
last_xattr() {
	"$py" -c 'import os, sys; v = os.getxattr(sys.argv[1], "user.big"); print(len(v), len(set(v)))' "$MNT/d/f00000"
}
check "the attribute: one value of 60,000 bytes" test "$(last_xattr)" = "60000 1"

pid=$(_mnt_daemon_pids | head -1)
names=$(cat /proc/"$pid"/task/*/comm 2>/dev/null | sort -u | xargs)
for t in nvmefs-commit nvmefs-compact nvmefs-w0; do
	check "a thread named $t (threads: $names)" grep -qw -- "$t" <<<"$names"
done

mnt_remount
read -r f2 fb2 c2 cw2 runs2 < <(store flushes flushed_blocks compactions compact_written_blocks runs)
check "after the remount: counters from zero ($f2 $fb2 $c2 $cw2)" test "$f2.$fb2.$c2.$cw2" = 0.0.0.0
check "after the remount: the runs are there ($runs2)" test "$runs2" -gt 0
check "after the remount: every file there" \
	test "$(find "$MNT" -path "$MNT/.nvmefs" -prune -o -type f -print | wc -l)" = "$made"
check "after the remount: the attribute" test "$(last_xattr)" = "60000 1"
mnt_umount
mnt_result
