#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The data path's promises, read off the daemon's counters (the "data"
# object of MOUNTPOINT/.nvmefs/stats, fs/fuse/ctl.c):
#  - zero copy: aligned 1 MiB writes go to the devices straight from the
#    buffer the request arrived in (every such write counted zero-copy, no
#    byte copied), in direct mode (O_DIRECT-like writes) and in cached mode
#    with -o writeback (the kernel's write-back of whole pages); an
#    unaligned write is copied
#    and counted, and every file reads back exactly;
#  - enough in flight: with every device write slowed to 300 ms (the test
#    daemon's latency fault), 4 threads writing one file at disjoint
#    offsets have 4 writes in flight at once (the kernel's inode lock and our
#    range lock let them in together); so do 4 readers of one file, and the
#    kernel's write-back of one file (cached, -o writeback) has several
#    writes out;
#  - direct mode reads ahead of a sequential reader (prefetch windows
#    answer its READs), of each descriptor of one file on its own, and a
#    window never hides a change: reads after an
#    overwrite, a truncate or an extension through another descriptor, from
#    the same descriptor, see the change, even while the window is still
#    being read;
#  - a close(2) costs no round trip: the first FLUSH is refused (ENOSYS)
#    and the kernel sends no more (FUSE requests counted by opcode);
#  - cached mode without -o writeback: a write-only handle leaves nothing in
#    the page cache (FUSE 7.39+), and readers' caches and mappings see its
#    writes; so do they an O_DIRECT handle's, in cached and direct mode;
#  - with -o writeback, syncfs after deleting a written file succeeds (the
#    kernel's late SETATTR of its times is answered, not refused);
#  - an overwrite (no metadata lock) moves mtime at once, durably, and a
#    time given after it wins; an unaligned one reads its edge blocks
#    (counted) and keeps the bytes around it.
# No timing is asserted: the counter says what overlapped.
# usage: test_datapath.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

[ $# = 1 ] || {
	echo "usage: test_datapath.sh BUILD_DIR" >&2
	exit 2
}
build=$1
mnt_time_limit 240 "$0" "$@"
mnt_need setfattr attr
mnt_need python3
[ -x "$build/tests/nvmefs-fi" ] || mnt_skip "$build/tests/nvmefs-fi not built"
mnt_setup "$build" 4 256M
MNT_DAEMON=tests/nvmefs-fi
MNT_FOREGROUND=1

counter() { # NAME -> value
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["data"][sys.argv[2]])' \
		"$MNT/.nvmefs/stats" "$1"
}

requests() { # OPCODE -> how many the daemon received
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["requests"].get(sys.argv[2], 0))' \
		"$MNT/.nvmefs/stats" "$1"
}

ctl() { # COMMAND
	setfattr -n trusted.nvmefs.fault -v "$1" "$MNT"
}

slow_members() { # US: every member's I/O takes at least US microseconds
	local d
	for d in 0 1 2 3; do ctl "latency dev=$d us=$1"; done
}

clear_members() { # no injected faults or latency left on any member
	local d
	for d in 0 1 2 3; do ctl "clear dev=$d"; done
}

head -c $((16 << 20)) /dev/urandom >"$MNT_TMP/src"

# ---- zero copy, direct mode ----
mnt_mount mode=direct
w0=$(counter writes)
z0=$(counter zero_copy_writes)
c0=$(counter copied_bytes)
dd if="$MNT_TMP/src" of="$MNT/a" bs=1M status=none
w1=$(counter writes)
z1=$(counter zero_copy_writes)
c1=$(counter copied_bytes)
check "direct: 16 aligned 1 MiB writes arrive as 16 requests (got $((w1 - w0)))" \
	test $((w1 - w0)) -eq 16
check "direct: every aligned write is zero-copy ($((z1 - z0)) of $((w1 - w0)))" \
	test $((z1 - z0)) -eq $((w1 - w0))
check "direct: no byte copied for aligned writes (got $((c1 - c0)))" test $((c1 - c0)) -eq 0
check "direct: the file reads back" cmp "$MNT_TMP/src" "$MNT/a"
# 5 writes of 1000 bytes at an odd offset: copied, counted, and right.
dd if="$MNT_TMP/src" of="$MNT/a" bs=1000 count=5 seek=7 conv=notrunc status=none
dd if="$MNT_TMP/src" of="$MNT_TMP/ref" bs=1M status=none
dd if="$MNT_TMP/src" of="$MNT_TMP/ref" bs=1000 count=5 seek=7 conv=notrunc status=none
c2=$(counter copied_bytes)
z2=$(counter zero_copy_writes)
check "direct: unaligned writes are copied (copied $((c2 - c1)) bytes for 5000)" \
	test $((c2 - c1)) -ge 5000
check "direct: unaligned writes are not counted zero-copy" test "$z2" -eq "$z1"
check "direct: the file with unaligned writes reads back" cmp "$MNT_TMP/ref" "$MNT/a"
# Each dd above opened and closed files; 20 more opens and closes, read
# and write: at most the first close of the mount sent a FLUSH.
for i in $(seq 10); do
	echo "$i" >"$MNT/c$i"
	cat "$MNT/c$i" >/dev/null
done
check "direct: closes send no FLUSH after the first ($(requests FLUSH) sent)" \
	test "$(requests FLUSH)" -le 1
check "direct: the files closed without FLUSH read back" test "$(cat "$MNT/c7")" = 7
# Read-ahead: a sequential 1 MiB reader is answered from windows.
h0=$(counter prefetch_hits)
dd if="$MNT/a" of=/dev/null bs=1M status=none
h1=$(counter prefetch_hits)
check "direct: a sequential reader is read ahead ($((h1 - h0)) of 16 READs from windows)" \
	test $((h1 - h0)) -ge 12
# Coherence: read 4 MiB of a file, change what its windows hold through
# another descriptor, read on from the first.
head -c $((8 << 20)) /dev/urandom >"$MNT_TMP/p0"
head -c $((8 << 20)) /dev/urandom >"$MNT_TMP/p1"
cp "$MNT_TMP/p0" "$MNT/p"
h2=$(counter prefetch_hits)
out=$(python3 - "$MNT/p" "$MNT_TMP/p0" "$MNT_TMP/p1" <<'PY'
import mmap, os, sys
path, p0, p1 = sys.argv[1:]
old, new = open(p0, "rb").read(), open(p1, "rb").read()
M = 1 << 20
buf = mmap.mmap(-1, 2 * M) # page-aligned: the kernel sends whole 1 MiB READs
def rd(fd, n):
    got = os.readv(fd, [memoryview(buf)[:n]])
    return bytes(buf[:got])
bad = []
# overwrite MiB 4-5 after reading MiB 0-3
fd = os.open(path, os.O_RDONLY)
for i in range(4):
    if rd(fd, M) != old[i * M:(i + 1) * M]: bad.append("read %d" % i)
w = os.open(path, os.O_WRONLY)
os.pwrite(w, new[4 * M:6 * M], 4 * M)
os.close(w)
if rd(fd, M) != new[4 * M:5 * M]: bad.append("MiB 4 after overwrite: stale")
if rd(fd, M) != new[5 * M:6 * M]: bad.append("MiB 5 after overwrite: stale")
# truncate to 6.5 MiB while windows are out for MiB 6 and 7
os.truncate(path, 6 * M + M // 2)
b = rd(fd, M)
if b != old[6 * M:6 * M + M // 2]: bad.append("after truncate: %d bytes" % len(b))
if rd(fd, M) != b"": bad.append("read past the truncated end")
# extend again: the old windows must not answer with their bytes
w = os.open(path, os.O_WRONLY)
os.pwrite(w, new[7 * M:8 * M], 7 * M)
os.close(w)
os.lseek(fd, 6 * M, os.SEEK_SET)
b = rd(fd, 2 * M)
want = old[6 * M:6 * M + M // 2] + bytes(M // 2) + new[7 * M:8 * M]
if b != want: bad.append("after extending: wrong bytes")
os.close(fd)
print(" ".join(bad) if bad else "ok")
PY
)
h3=$(counter prefetch_hits)
check "direct: the reader of that file was read ahead ($((h3 - h2)) READs from windows)" \
	test $((h3 - h2)) -ge 3
check "direct: read-ahead windows follow overwrite, truncate and extension ($out)" test "$out" = ok
# Read-ahead is per descriptor: two readers of one file, in turns, at
# different places, are each read ahead, and a third descriptor's open and
# close between their READs drops none of their windows.
h4=$(counter prefetch_hits)
wasted4=$(counter prefetch_wasted)
out=$(python3 - "$MNT/a" "$MNT_TMP/ref" <<'PY'
import mmap, os, sys
M = 1 << 20
want = open(sys.argv[2], "rb").read()
buf = mmap.mmap(-1, M)
fds = [os.open(sys.argv[1], os.O_RDONLY) for _ in range(2)]
bad = []
for i in range(8):
    for r, fd in enumerate(fds):
        off = (8 * r + i) * M
        n = os.preadv(fd, [buf], off)
        if bytes(buf[:n]) != want[off:off + M]: bad.append("reader %d MiB %d differs" % (r, off // M))
    os.close(os.open(sys.argv[1], os.O_RDONLY))
for fd in fds: os.close(fd)
print(" ".join(bad) if bad else "ok")
PY
)
h5=$(counter prefetch_hits)
wasted5=$(counter prefetch_wasted)
check "direct: two readers of one file read back ($out)" test "$out" = ok
check "direct: two readers of one file are each read ahead ($((h5 - h4)) of 16 READs from windows)" \
	test $((h5 - h4)) -ge 12
check "direct: closes of other descriptors dropped no window ($((wasted5 - wasted4)) wasted; the readers' own closes may drop 2 each)" \
	test $((wasted5 - wasted4)) -le 4
# A window whose read failed answers no later READ: that READ goes to the
# devices again. The second read of member 0 (the window for MiB 1) fails.
cp "$MNT_TMP/p0" "$MNT/e"
ctl "eio dev=0 ops=r after=1 count=1"
out=$(python3 - "$MNT/e" "$MNT_TMP/p0" <<'PY'
import mmap, os, sys, time
M = 1 << 20
want = open(sys.argv[2], "rb").read()
buf = mmap.mmap(-1, M)
fd = os.open(sys.argv[1], os.O_RDONLY)
bad = []
for i in range(3):
    try:
        n = os.preadv(fd, [buf], i * M)
        if bytes(buf[:n]) != want[i * M:(i + 1) * M]: bad.append("MiB %d differs" % i)
    except OSError as e:
        bad.append("MiB %d: %s" % (i, e.strerror))
    time.sleep(0.3) # the windows are in before the next READ
print(" ".join(bad) if bad else "ok")
PY
)
ctl "clear"
check "direct: a failed read-ahead window is not served ($out)" test "$out" = ok
# A window still being read when the file grows past it must not answer
# with the old end of file. File x is 1.5 MiB, MiB 0 on member 0 and MiB 1
# on member 1 (slowed to 1.5 s); reading MiB 0 sends a window for MiB 1,
# which reads the 1.5 MiB size and will be short. A write at MiB 2 (member
# 0, outside the window's range) returns while the window is still out;
# the READ of MiB 1 sent after it must get 1 MiB (its tail now a hole), not
# the window's half.
: >"$MNT/x"
setfattr -n user.nvmefs.layout -v chunk=1M,count=2,devs=0:1 "$MNT/x"
head -c $((3 << 19)) "$MNT_TMP/p0" >>"$MNT/x"
ctl "latency dev=1 us=1500000"
out=$(python3 - "$MNT/x" "$MNT_TMP/p0" "$MNT_TMP/p1" <<'PY'
import mmap, os, sys
M = 1 << 20
old, new = open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read()
buf = mmap.mmap(-1, M)
fd = os.open(sys.argv[1], os.O_RDONLY)
bad = []
n = os.preadv(fd, [buf], 0)
if bytes(buf[:n]) != old[:M]: bad.append("MiB 0 differs")
w = os.open(sys.argv[1], os.O_WRONLY) # its close leaves fd's windows alone
os.pwrite(w, new[:M], 2 * M)
os.close(w)
n = os.preadv(fd, [buf], M)
if n != M: bad.append("MiB 1 after the file grew: %d bytes" % n)
elif bytes(buf[:n]) != old[M:M + M // 2] + bytes(M // 2): bad.append("MiB 1 differs")
os.close(fd)
print(" ".join(bad) if bad else "ok")
PY
)
ctl "clear"
check "direct: a window being read does not answer with an old end of file ($out)" test "$out" = ok
# Closing drops the file's windows even when two handles close at once:
# 2 threads read the same file sequentially and close together, 300 times;
# then the pool must hold no more buffers than before (the workers' receive
# buffers).
pool_in_use() {
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["pool"]["in_use"])' \
		"$MNT/.nvmefs/stats"
}
sleep 1 # the closes above have been answered
held0=$(pool_in_use)
python3 - "$MNT/e" <<'PY'
import mmap, os, sys, threading
M = 1 << 20
together = threading.Barrier(2)
def reader():
    buf = mmap.mmap(-1, M)
    for _ in range(300):
        fd = os.open(sys.argv[1], os.O_RDONLY)
        for i in range(3):
            os.preadv(fd, [buf], i * M)
        together.wait()
        os.close(fd)
threads = [threading.Thread(target=reader) for _ in range(2)]
for t in threads: t.start()
for t in threads: t.join()
PY
sleep 1 # the kernel sends RELEASE in the background
held1=$(pool_in_use)
check "direct: no window left holding a pool buffer after the closes (in use: $held0 before, $held1 after)" \
	test "$held1" -le "$held0"
mnt_umount

# ---- zero copy, cached mode (the kernel's write-back cache) ----
mnt_mount mode=cached,writeback
w0=$(counter writes)
z0=$(counter zero_copy_writes)
c0=$(counter copied_bytes)
dd if="$MNT_TMP/src" of="$MNT/b" bs=1M conv=fsync status=none
w1=$(counter writes)
z1=$(counter zero_copy_writes)
c1=$(counter copied_bytes)
check "cached: write-back sent writes ($((w1 - w0)))" test $((w1 - w0)) -ge 1
check "cached: every page-aligned write-back is zero-copy ($((z1 - z0)) of $((w1 - w0)))" \
	test $((z1 - z0)) -eq $((w1 - w0))
check "cached: no byte copied (got $((c1 - c0)))" test $((c1 - c0)) -eq 0
echo 3 >/proc/sys/vm/drop_caches
check "cached: the file reads back" cmp "$MNT_TMP/src" "$MNT/b"
mnt_umount

# ---- cached mode, write-through: write-only opens skip the page cache ----
# cp opens its target write-only: with FUSE 7.39+ (whose direct_io writes
# invalidate the page cache they overwrite) that handle is direct_io, so
# nothing it wrote is left in the page cache; a reader holding the file in
# its cache (read and mmap) sees what such a handle writes.
mnt_mount mode=cached
kver=$(uname -r | awk -F. '{ print $1 * 1000 + $2 }')
if [ "$kver" -ge 6006 ]; then
	check "cached: write-only opens go direct on Linux $(uname -r) (FUSE 7.39+)" \
		grep -q '^write_only_direct = 1$' "$MNT/.nvmefs/config"
fi
if grep -q '^write_only_direct = 1$' "$MNT/.nvmefs/config"; then
	cp "$MNT_TMP/src" "$MNT/w"
	# Pages of a file in the page cache right after a write-only handle
	# wrote it all, seen through a mapping made before (mincore: a later
	# open or stat would revalidate the attributes and drop the cache).
	n=$(python3 - "$MNT/v" <<'PY'
import ctypes, mmap, os, sys
M = 1 << 20
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC)
os.ftruncate(fd, 4 * M)
m = mmap.mmap(fd, 4 * M, access=mmap.ACCESS_COPY)
w = os.open(sys.argv[1], os.O_WRONLY)
os.pwrite(w, os.urandom(4 * M), 0)
vec = (ctypes.c_ubyte * (4 * M // mmap.PAGESIZE))()
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
if ctypes.CDLL(None).mincore(ctypes.c_void_p(addr), ctypes.c_size_t(4 * M), vec):
    sys.exit("mincore failed")
print(sum(v & 1 for v in vec))
PY
)
	check "cached: a write-only handle left nothing in the page cache ($n of 1024 pages)" \
		test "$n" -eq 0
	check "cached: what a write-only handle wrote reads back" cmp "$MNT_TMP/src" "$MNT/w"
	out=$(python3 - "$MNT/w" <<'PY'
import mmap, os, sys
M = 1 << 20
fd = os.open(sys.argv[1], os.O_RDONLY)
old = os.pread(fd, 4 * M, 0) # now in the page cache
m = mmap.mmap(fd, 4 * M, prot=mmap.PROT_READ)
m[M:2 * M] # fault the mapping in
new = os.urandom(M)
w = os.open(sys.argv[1], os.O_WRONLY)
os.pwrite(w, new, M)
os.close(w)
bad = []
# the mapping first: a read revalidates the attributes, and the new mtime
# drops the whole cache (auto_inval_data), which would hide a stale page
if m[M:2 * M] != new: bad.append("mmap: stale")
if os.pread(fd, M, M) != new: bad.append("read: stale")
if os.pread(fd, M, 0) != old[:M] or os.pread(fd, M, 2 * M) != old[2 * M:3 * M]:
    bad.append("the rest changed")
print(" ".join(bad) if bad else "ok")
PY
)
	check "cached: a reader's cache and mapping see a write-only handle's writes ($out)" test "$out" = ok
else
	echo "kernel FUSE below 7.39: write-only opens stay cached; checks skipped"
fi
# A direct_io write through another handle (O_DIRECT in cached mode, any in
# direct mode) while a reader holds the file's pages (read, a shared
# mapping): Linux 6.6+ invalidates what such a write overwrites, so the
# daemon need not (docs/DATAPATH.md, "Coherence").
coherent() { # FILE: a reader's cache and shared mapping see an O_DIRECT write
	python3 - "$1" <<'PY'
import mmap, os, sys
M = 1 << 20
with open(sys.argv[1], "wb") as f:
    f.write(b"a" * 4 * M)
fd = os.open(sys.argv[1], os.O_RDONLY)
os.pread(fd, 4 * M, 0)  # now in the page cache
m = mmap.mmap(fd, 4 * M, prot=mmap.PROT_READ)
m[M:2 * M]
new = mmap.mmap(-1, M)  # page-aligned, for O_DIRECT
new.write(os.urandom(M))
w = os.open(sys.argv[1], os.O_WRONLY | os.O_DIRECT)
os.pwritev(w, [new], M)
os.close(w)
bad = []
if m[M:2 * M] != new[:]: bad.append("mmap: stale")
if os.pread(fd, M, M) != new[:]: bad.append("read: stale")
if os.pread(fd, M, 0) != b"a" * M: bad.append("the rest changed")
print(" ".join(bad) if bad else "ok")
PY
}
if mnt_direct_mmap; then
	out=$(coherent "$MNT/od")
	check "cached: a reader's cache and mapping see an O_DIRECT handle's writes ($out)" test "$out" = ok
	mnt_remount mode=direct
	out=$(coherent "$MNT/od")
	check "direct: a shared mapping sees another handle's writes ($out)" test "$out" = ok
fi
mnt_umount

# ---- requests in flight at once ----
# par MODE PATH: 4 threads, each writing (w) or reading (r) its own 1 MiB at
# disjoint offsets of one existing 4 MiB file, or all writing its first
# MiB (s).
par() {
	python3 - "$1" "$2" <<'EOF'
import mmap, os, sys, threading
mode, path = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
# Page-aligned buffers: in direct mode an unaligned one makes the kernel
# split each 1 MiB into two requests whose edge blocks overlap the
# neighbour's, and the range lock then rightly orders them.
def one(i):
    buf = mmap.mmap(-1, 1 << 20)
    if mode == "w":
        buf[:] = bytes([65 + i]) * (1 << 20)
        os.pwrite(fd, buf, i << 20)
    elif mode == "s":  # all on the same MiB: the range lock orders them
        buf[:] = bytes([65 + i]) * (1 << 20)
        os.pwrite(fd, buf, 0)
    else:
        assert os.preadv(fd, [buf], i << 20) == 1 << 20
ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
os.close(fd)
EOF
}

mnt_mount mode=direct
head -c $((4 << 20)) /dev/zero >"$MNT/c"
slow_members 300000
p0=$(counter peak_in_flight)
par w "$MNT/c"
p1=$(counter peak_in_flight)
check "direct: 4 writers of one file at disjoint offsets overlap (peak $p1, was $p0)" \
	test "$p1" -ge 4
python3 -c '
import sys
d = open(sys.argv[1], "rb").read()
assert all(d[i << 20:(i + 1) << 20] == bytes([65 + i]) * (1 << 20) for i in range(4))
' "$MNT/c" || check "direct: each writer's MiB is there" false
# A worker waiting for a range lock does not hold up other requests: with
# one worker reading /dev/fuse for everyone (fs/fuse/loop.c), it hands that job
# over before it waits. Writer A's MiB is at the devices for 2 s; writer
# B waits behind it for the same MiB; a LOOKUP sent then must be answered
# while A is still out (without the hand-over it takes 1.5 s or more).
# On FUSE over io_uring a request goes to its CPU's queue, so all three
# run on one CPU: B's wait and the LOOKUP meet in the same queue, whose
# leader hands its ring over before it waits (fs/fuse/uring.c).
slow_members 2000000
out=$(python3 - "$MNT/c" <<'PY'
import mmap, os, sys, threading, time
path = sys.argv[1]
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
fd = os.open(path, os.O_RDWR)
def write():
    buf = mmap.mmap(-1, 1 << 20)
    os.pwrite(fd, buf, 0)
a = threading.Thread(target=write)
b = threading.Thread(target=write)
a.start()
time.sleep(0.2)
b.start()
time.sleep(0.3)
t = time.monotonic()
try:
    os.stat(os.path.join(os.path.dirname(path), "no-such-name"))
except FileNotFoundError:
    pass
took = time.monotonic() - t
ok = a.is_alive() and took < 1.0
print("ok" if ok else "LOOKUP answered only after the write (%.2f s)" % took)
a.join()
b.join()
os.close(fd)
PY
)
check "direct: a request waiting for a range lock holds up no other ($out)" test "$out" = ok
clear_members
mnt_umount

# The counter counts requests at the devices, past their range lock: 4
# writers of the same MiB are one at a time there (so the checks above
# would see serialization).
mnt_mount mode=direct
slow_members 100000
par s "$MNT/c"
p=$(counter peak_in_flight)
check "direct: 4 writers of the same MiB are ordered by the range lock (peak $p)" test "$p" -eq 1
clear_members
mnt_umount

mnt_mount mode=direct
check "direct: the request loop polls 50 us by default" \
	grep -qx "spin_us = 50" "$MNT/.nvmefs/config"
slow_members 300000
par r "$MNT/c"
p=$(counter peak_in_flight)
check "direct: 4 readers of one file overlap (peak $p)" test "$p" -ge 4
clear_members
mnt_umount

# -o spin=0: every worker reads /dev/fuse (no leader); the same overlap.
mnt_mount mode=direct,spin=0
check "spin=0 is in force" grep -qx "spin_us = 0" "$MNT/.nvmefs/config"
slow_members 300000
par r "$MNT/c"
p=$(counter peak_in_flight)
check "direct, spin=0: 4 readers of one file overlap (peak $p)" test "$p" -ge 4
clear_members
mnt_umount
err=$("$build/nvmefs" "$MNT_DEVS" "$MNT" -o spin=often 2>&1) && rc=0 || rc=$?
check "spin=often is refused, naming the option (rc $rc: $err)" \
	sh -c '[ "$1" -ne 0 ] && case "$2" in *"bad spin '"'"'often'"'"'"*) true ;; *) false ;; esac' sh "$rc" "$err"

mnt_mount mode=cached,writeback
# The page cache takes dd's writes at once; the kernel writes them back
# at close (fuse_flush) or sync, together, to the slowed devices. (The
# devices used to be slowed after dd, when close had already written the
# pages back at full speed: the check then passed only when that happened
# to overlap.)
slow_members 100000
dd if="$MNT_TMP/src" of="$MNT/d" bs=1M status=none
sync "$MNT/d"
p=$(counter peak_in_flight)
check "cached: write-back of one file has several writes out (peak $p)" test "$p" -ge 2
clear_members
echo 3 >/proc/sys/vm/drop_caches
check "cached: the slowly written file reads back" cmp "$MNT_TMP/src" "$MNT/d"
# The kernel flushes a file's times (SETATTR) after its last name is gone:
# syncfs must not fail because the inode is freed (a bug found by bench.sh).
dd if="$MNT_TMP/src" of="$MNT/e" bs=1M count=8 conv=fsync status=none
rm "$MNT/e"
check "cached: syncfs after deleting a written file" sync -f "$MNT"
mnt_umount

# An overwrite of written blocks takes no metadata lock: its mtime goes to
# the inode's pending time and reaches the journal with the inode's next
# commit. It must show at once, survive a remount, and lose to times given
# after it (touch -d).
mnt_mount mode=direct
dd if="$MNT_TMP/src" of="$MNT/ow" bs=1M count=4 conv=fsync status=none
t0=$(stat -c %Y.%y "$MNT/ow")
sleep 1.1
w0=$(counter zero_copy_writes)
dd if="$MNT_TMP/src" of="$MNT/ow" bs=1M count=1 seek=2 conv=notrunc,fsync oflag=direct status=none
t1=$(stat -c %Y.%y "$MNT/ow")
check "direct: an overwrite went out ($(($(counter zero_copy_writes) - w0)) aligned writes)" \
	test "$(counter zero_copy_writes)" -gt "$w0"
check "direct: an overwrite moves mtime ($t0 -> $t1)" test "${t1%%.*}" -gt "${t0%%.*}"
mnt_remount mode=direct
check "direct: an overwrite's mtime survives a remount" test "$(stat -c %Y.%y "$MNT/ow")" = "$t1"
dd if="$MNT_TMP/src" of="$MNT/ow" bs=1M count=1 conv=notrunc oflag=direct status=none
touch -d 2001-01-01 "$MNT/ow"
check "direct: a time given after an overwrite wins" test "$(stat -c %Y "$MNT/ow")" = 978307200
# An unaligned overwrite reads its edge blocks (asynchronously, from the
# write's own I/O request) and keeps their other bytes.
cp "$MNT/ow" "$MNT_TMP/ow.ref"
e0=$(counter edge_reads)
printf 'EDGE' | dd of="$MNT/ow" bs=1 seek=$((3 * 1048576 + 4094)) conv=notrunc status=none
printf 'EDGE' | dd of="$MNT_TMP/ow.ref" bs=1 seek=$((3 * 1048576 + 4094)) conv=notrunc status=none
check "direct: an unaligned overwrite read its edge blocks ($(($(counter edge_reads) - e0)))" \
	test "$(counter edge_reads)" -gt "$e0"
check "direct: an unaligned overwrite keeps the bytes around it" cmp "$MNT/ow" "$MNT_TMP/ow.ref"
mnt_umount

mnt_result
