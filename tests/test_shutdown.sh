#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# FS_IOC_SHUTDOWN (xfstests' godown and xfs_io's shutdown; issue 35),
# through an ioctl on the mount point as godown makes it:
#   - a user's shutdown is refused with EPERM and changes nothing;
#   - root's succeeds while a writer is busy, and again on the same
#     descriptor;
#   - then every request that reaches the daemon answers EIO (create,
#     write and fsync on a file opened before, a direct read, a lookup, a
#     directory listing, an open, a remount read-write), while statfs
#     answers and .nvmefs/stats and config (and nvmefs-stat) say so;
#   - no byte of any member changes after it, neither while the mount
#     stays up nor at the unmount, which is prompt;
#   - fsck finds the volume clean with journal transactions to replay,
#     which the next mount replays: A (fsync'ed before) is intact, and so is
#     B (written, not synced: the shutdown commits what is logged, as
#     godown -f asks; the daemon cannot see the flags), nothing made after
#     the shutdown exists, and that mount, in the background, prints
#     nothing (it replays and reclaims a file unlinked while open); fsck
#     after it is clean too.
# usage: test_shutdown.sh BUILD [cached|direct]
set -euo pipefail
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib_mount.sh"
mnt_time_limit 240 "$0" "$@"
build=$(realpath "$1")
mode=${2:-direct}
py=/usr/bin/python3
MNT_FOREGROUND=1
mnt_setup "$build" 2 256M

# godown's ioctl on PATH, TIMES times on one descriptor (a shut down
# volume refuses the open): OK for each success, else the errno's name.
shutdown_ioctl() { # PATH [TIMES]
	"$py" - "$1" "${2:-1}" <<'EOF'
import errno, fcntl, os, struct, sys
FS_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32), XFS_IOC_GOINGDOWN
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
    for _ in range(int(sys.argv[2])):
        fcntl.ioctl(fd, FS_IOC_SHUTDOWN, struct.pack("I", 1))  # LOGFLUSH: godown -f
        print("OK", end=" ")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)), end=" ")
print()
EOF
}
# CMD... fails with EIO ("Input/output error").
fails_eio() {
	local out
	! out=$("$@" 2>&1) && [[ $out == *"Input/output error"* ]]
}
stats_shut_down() { # true|false: what .nvmefs/stats says
	"$py" -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))['shut_down'] != (sys.argv[2] == 'true'))" \
		"$MNT/.nvmefs/stats" "$1"
}
members_sum() { cat "${MNT_DEV_LIST[@]}" | sha256sum; }

mnt_mount "mode=$mode,commit=30"
head -c 3M /dev/urandom >"$MNT_TMP/a"
head -c 1M /dev/urandom >"$MNT_TMP/b"
# A: written and fsync'ed. B: written, not synced (the committer waits
# 30 s). D: a directory to list later.
"$py" -c "
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, open(sys.argv[2], 'rb').read()); os.fsync(fd); os.close(fd)
" "$MNT/a" "$MNT_TMP/a"
cp "$MNT_TMP/b" "$MNT/b"
mkdir "$MNT/d"
touch "$MNT/d/x"
# A file unlinked while open at the shutdown: the next mount reclaims it.
echo orphan >"$MNT/o"
exec 4<"$MNT/o"
rm "$MNT/o"

# A user's shutdown: EPERM, nothing changes.
chmod 711 "$MNT_TMP"
out=$(su nobody -s /bin/bash -c "$(declare -f shutdown_ioctl); py=$py shutdown_ioctl '$MNT'")
check "a user's shutdown is refused with EPERM ($out)" test "$out" = "EPERM "
check "... the volume still takes changes" touch "$MNT/after_user"

# A writer busy during the shutdown, on a file opened before it.
# It rewrites its first 16 MiB over and over (no ENOSPC), until an error.
"$py" -c "
import errno, os, sys
buf = b'w' * 65536
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
    i = 0
    while True:
        os.pwrite(fd, buf, (i % 256) * 65536)
        i += 1
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
    sys.exit(1)
" "$MNT/w" >"$MNT_TMP/writer.err" &
writer=$!
exec 3>>"$MNT/b"
sleep 0.3
out=$(shutdown_ioctl "$MNT" 2)
check "root's shutdown of the mount point succeeds, and again ($out)" test "$out" = "OK OK "
sum0=$(members_sum)
# Not for ever: without a shutdown it would write on.
for _ in $(seq 200); do
	kill -0 "$writer" 2>/dev/null || break
	sleep 0.1
done
kill "$writer" 2>/dev/null || true
wait "$writer" && rc=0 || rc=$?
check "the busy writer stops with an error ($rc)" test "$rc" != 0
check "... EIO ($(cat "$MNT_TMP/writer.err"))" grep -qx EIO "$MNT_TMP/writer.err"
out=$(shutdown_ioctl "$MNT")
check "shut down: opening the mount point fails with EIO ($out)" test "$out" = "EIO "

check "shut down: create fails with EIO" fails_eio touch "$MNT/c"
check "shut down: mkdir fails with EIO" fails_eio mkdir "$MNT/e"
check "shut down: a write to a file open before fails with EIO" \
	fails_eio "$py" -c "import os; os.write(3, b'more')"
check "shut down: fsync of a file open before fails with EIO" \
	fails_eio "$py" -c "import os; os.fsync(3)"
check "shut down: a direct read fails with EIO" \
	fails_eio dd if="$MNT/a" of=/dev/null bs=4096 count=1 iflag=direct status=none
check "shut down: a lookup of a new name fails with EIO" fails_eio stat "$MNT/d/nothing"
check "shut down: a listing fails with EIO" fails_eio ls "$MNT/d"
check "shut down: a remount read-write fails" \
	bash -c "! '$build/nvmefs' '$MNT_DEVS' '$MNT' -o remount,rw 2>/dev/null"
exec 3>&- 4<&-
check "shut down: statfs answers" stat -f "$MNT" >/dev/null
check "shut down: .nvmefs/stats says so" stats_shut_down true
check "shut down: .nvmefs/config says so" grep -qx "shut_down = 1" "$MNT/.nvmefs/config"
check "shut down: nvmefs-stat says so" bash -c "'$build/nvmefs-stat' '$MNT' | grep -q 'SHUT DOWN'"
sleep 1.5
check "no byte of a member changes after the shutdown" test "$(members_sum)" = "$sum0"

start=$SECONDS
mnt_umount
check "the unmount is prompt ($((SECONDS - start)) s)" test $((SECONDS - start)) -le 10
check "the unmount writes nothing to the members" test "$(members_sum)" = "$sum0"
check "the daemon logged the shutdown" grep -q "shut down (FS_IOC_SHUTDOWN)" "$MNT_TMP/nvmefs.log"
out=$("$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}" 2>&1) && rc=0 || rc=$?
check "fsck after the shutdown: clean ($rc: $out)" test "$rc" = 0
check "... and the journal to replay (what the next mount does)" \
	grep -q "replayed [1-9][0-9]* transaction(s)" <<<"$out"

# In the background, as mount(8) runs it: the notes of the replay and of
# the reclaimed file go to syslog, not to the mount's output (xfstests
# compares it: generic/417, 530).
MNT_FOREGROUND=0
logged=$(stat -c %s "$MNT_TMP/nvmefs.log")
mnt_mount "mode=$mode"
out=$(tail -c +$((logged + 1)) "$MNT_TMP/nvmefs.log" | grep -v '^mount: ' || true)
check "the mount after the shutdown prints nothing ($out)" test -z "$out"
check "A (fsync'ed) is intact" cmp "$MNT/a" "$MNT_TMP/a"
check "B (logged, not synced: committed by the shutdown) is intact" cmp "$MNT/b" "$MNT_TMP/b"
check "the entries made before are there" test -e "$MNT/d/x" -a -e "$MNT/after_user"
check "nothing made after the shutdown exists" test ! -e "$MNT/c" -a ! -e "$MNT/e"
check ".nvmefs/stats: not shut down after the mount" stats_shut_down false
check "the volume takes changes again" touch "$MNT/c"
mnt_umount
check "fsck after the next mount: clean" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
mnt_result
