#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Statahead (fs/fuse/statahead.c): a directory walked in readdir order is
# read ahead of the walker into the kernel's cache. After a remount (the
# kernel's cache cold), on directories of 3,000 files:
#  - os.stat of every file in creation order (the readdir order): each
#    size right, and the daemon answered fewer than a quarter of them with
#    a LOOKUP, the rest came from jobs (.nvmefs/stats "statahead": jobs,
#    entries; "requests": LOOKUP);
#  - the same in the root directory (its inode is the kernel's own);
#  - the same after files were removed and renamed among them (holes and
#    new cookies in the order): every name the listing gives is found,
#    with its size, and no removed name;
#  - os.stat in a random order starts no job, nor a walk of a directory
#    of 40 files (fewer than 64: a job there costs more than its lookups,
#    and its walk to the mount point raced an umount right after);
#  - small files' data pushed into the page cache (direct mode,
#    cache_small): after a remount, os.open/os.read/os.close of 450 files
#    of 4 KiB in order gets each one's content with fewer than a quarter
#    as many READs, the rest pushed (statahead.pushed); a pushed file's
#    first open moves its atime (relatime), as the READ it saves would
#    have; files pushed and not yet opened, then overwritten, truncated or
#    appended to, read back as changed; a walk that only stats pushes
#    nothing;
#  - -o statahead=0: no job, every stat a LOOKUP;
#  - unmounting right after a walk stopped early, with a long job still
#    reading (-o statahead=16384, 20,000 files): fusermount3 -u succeeds
#    (the job reads through a clone of the mount, which an umount does not
#    wait for; through the mount itself it failed with EBUSY) and the
#    daemon exits; 3 times.
# Exit 77 (skip) without root, /dev/fuse, the nvmefs binaries or python3,
# or when the daemon may not read ahead (no CAP_SYS_ADMIN or
# CAP_DAC_READ_SEARCH: statahead turns itself off).
# usage: test_statahead.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -ne 1 ]; then
	echo "usage: test_statahead.sh BUILD_DIR" >&2
	exit 2
fi
build=$1
mnt_time_limit 240 "$0" "$@"
py=/usr/bin/python3
mnt_need "$py" python3
mnt_setup "$build" 2 256M
N=3000

# stats KEY...: numbers from .nvmefs/stats, by path (requests.LOOKUP).
stats() {
	"$py" - "$MNT/.nvmefs/stats" "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
out = []
for k in sys.argv[2:]:
    v = d
    for p in k.split("."):
        v = v.get(p, 0) if isinstance(v, dict) else 0
    out.append(str(int(v)))
print(" ".join(out))
EOF
}

# walk DIR ORDER [PREFIX]: os.stat of DIR's files PREFIX0..PREFIX(N-1)
# (those present; PREFIX f) in ORDER (seq or random), each size checked
# (its number + 1 bytes).
walk() {
	"$py" - "$1" "$2" "$N" "${3:-f}" <<'EOF'
import os, random, sys
d, order, n, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
names = ["%s%05d" % (prefix, i) for i in range(n)]
if order == "random":
    random.Random(7).shuffle(names)
missing = 0
for name in names:
    try:
        st = os.stat(os.path.join(d, name))
    except FileNotFoundError:
        missing += 1
        continue
    want = int(name[len(prefix):]) + 1
    if st.st_size != want:
        sys.exit("%s: size %d, not %d" % (name, st.st_size, want))
print(missing)
EOF
}

mnt_mount
"$py" - "$MNT" "$N" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for d in ("a", "b", "c", "e"):
    os.mkdir(os.path.join(root, d))
    for i in range(n if d != "e" else 20000):
        with open(os.path.join(root, d, "f%05d" % i), "wb") as f:
            f.write(b"x" * (i + 1))
for i in range(n):
    with open(os.path.join(root, "r%05d" % i), "wb") as f:
        f.write(b"x" * (i + 1))
os.mkdir(os.path.join(root, "s"))
for i in range(40):
    with open(os.path.join(root, "s", "f%05d" % i), "wb") as f:
        f.write(b"x" * (i + 1))
EOF
# b: holes (every 7th removed) and renamed entries (new cookies at the end)
for i in $(seq 0 7 $((N - 1))); do rm "$MNT/b/$(printf f%05d "$i")"; done
for i in $(seq 3 50 $((N - 1))); do
	[ $((i % 7)) != 0 ] || continue
	f=$(printf f%05d "$i")
	mv "$MNT/b/$f" "$MNT/b/$f.tmp" && mv "$MNT/b/$f.tmp" "$MNT/b/$f"
done
# p: 600 files of 4 KiB, each its own bytes, atime in 2001 (before mtime)
"$py" - "$MNT" <<'EOF'
import os, sys
d = os.path.join(sys.argv[1], "p")
os.mkdir(d)
for i in range(600):
    p = os.path.join(d, "f%05d" % i)
    with open(p, "wb") as f:
        f.write(i.to_bytes(2, "little") * 2048)
    os.utime(p, (978307200, os.stat(p).st_mtime))
EOF
mnt_remount

read -r l0 j0 e0 < <(stats requests.LOOKUP statahead.jobs statahead.entries)
check "walk of a: every file there" test "$(walk "$MNT/a" seq)" = 0
read -r l1 j1 e1 on < <(stats requests.LOOKUP statahead.jobs statahead.entries statahead.on)
if [ "$on" = 0 ]; then
	mnt_umount
	mnt_skip "statahead is off: the daemon may not read ahead (CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH)"
fi
echo "a: $((l1 - l0)) lookups, $((j1 - j0)) jobs, $((e1 - e0)) entries read ahead"
check "walk of a: fewer than N/4 lookups ($((l1 - l0)))" test $((l1 - l0)) -lt $((N / 4))
check "walk of a: jobs ran ($((j1 - j0)))" test $((j1 - j0)) -gt 0
check "walk of a: entries read ahead ($((e1 - e0)))" test $((e1 - e0)) -gt $((N / 2))

# A walker that outruns the read-ahead (its round trips got faster with
# cpu_latency: 1 walk in about 30 of the root did, 860 lookups) is given
# one more walk, after a remount, so that a race lost once is told from
# statahead not working.
for try in 1 2; do
	read -r l0 j0 < <(stats requests.LOOKUP statahead.jobs)
	missing=$(walk "$MNT" seq r)
	read -r l1 j1 < <(stats requests.LOOKUP statahead.jobs)
	[ $((l1 - l0)) -ge $((N / 4)) ] && [ "$try" = 1 ] || break
	echo "walk of the root: $((l1 - l0)) lookups, the walker ahead of the read-ahead: once more"
	mnt_remount
done
check "walk of the root: every file there" test "$missing" = 0
check "walk of the root: fewer than N/4 lookups ($((l1 - l0)))" test $((l1 - l0)) -lt $((N / 4))
check "walk of the root: jobs ran ($((j1 - j0)))" test $((j1 - j0)) -gt 0

# b: what the listing has is found, what was removed is not
missing=$(walk "$MNT/b" seq)
check "walk of b: the removed files missing ($missing)" test "$missing" = $(((N + 6) / 7))
check "walk of b: matches the listing" "$py" - "$MNT/b" "$N" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
want = sorted("f%05d" % i for i in range(n) if i % 7)
got = sorted(os.listdir(d))
sys.exit(0 if got == want else "listing: %d names, %d expected" % (len(got), len(want)))
EOF

read -r j2 < <(stats statahead.jobs)
check "random walk of c: every file there" test "$(walk "$MNT/c" random)" = 0
read -r j3 < <(stats statahead.jobs)
check "random walk of c: no job ($((j3 - j2)))" test "$j3" = "$j2"
check "walk of s (40 files): every file there" test "$(walk "$MNT/s" seq)" = $((N - 40))
read -r j4 < <(stats statahead.jobs)
check "walk of s (40 files): no job ($((j4 - j3)))" test "$j4" = "$j3"

# readp FIRST LAST: os.open, os.read, os.close of p's files FIRST..LAST in
# order, each one's content checked (overwritten ones: 0xee, 4096 bytes;
# truncated: empty; appended: 4096 + 3 bytes).
readp() {
	"$py" - "$MNT/p" "$1" "$2" <<'EOF'
import os, sys
d, a, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(a, b + 1):
    fd = os.open(os.path.join(d, "f%05d" % i), os.O_RDONLY)
    got = os.read(fd, 8193)
    os.close(fd)
    want = i.to_bytes(2, "little") * 2048
    if 500 <= i < 505:
        want = b"\xee" * 4096
    elif i == 505:
        want = b""
    elif i == 506:
        want += b"abc"
    if got != want:
        sys.exit("p/f%05d: %d bytes, not the %d expected" % (i, len(got), len(want)))
EOF
}
if grep -q '^mode = direct' "$MNT/.nvmefs/config"; then
	# As for the root's walk: one more read after a remount, if the
	# reader outran the pushes.
	for try in 1 2; do
		read -r r0 p0 < <(stats requests.READ statahead.pushed)
		readp 0 449 && read_ok=1 || read_ok=0
		read -r r1 p1 < <(stats requests.READ statahead.pushed)
		echo "p: $((r1 - r0)) READs, $((p1 - p0)) files pushed"
		[ $((r1 - r0)) -ge 112 ] && [ "$read_ok" = 1 ] && [ "$try" = 1 ] || break
		echo "push: the reader ahead of the pushes: once more"
		mnt_remount
	done
	check "push: files 0-449 read in order, content right" test "$read_ok" = 1
	check "push: fewer than a quarter READ ($((r1 - r0)) of 450)" test $((r1 - r0)) -lt 112
	check "push: files pushed ($((p1 - p0)))" test $((p1 - p0)) -gt 225
	check "push: a pushed file's open moved atime (relatime)" \
		test "$(stat -c %X "$MNT/p/f00300")" -gt 978307200
	# Pushed ahead of the walk (at 450) and not opened yet: changed behind it.
	"$py" - "$MNT/p" <<'EOF'
import os, sys
d = sys.argv[1]
for i in range(500, 505):
    fd = os.open(os.path.join(d, "f%05d" % i), os.O_WRONLY)
    os.pwrite(fd, b"\xee" * 4096, 0)
    os.close(fd)
os.truncate(os.path.join(d, "f00505"), 0)
with open(os.path.join(d, "f00506"), "ab") as f:
    f.write(b"abc")
EOF
	check "push: files changed after their push read back changed" readp 450 599
	mnt_remount
	read -r p2 j5 < <(stats statahead.pushed statahead.jobs)
	check "stat walk of a: every file there" test "$(walk "$MNT/a" seq)" = 0
	read -r p3 j6 < <(stats statahead.pushed statahead.jobs)
	check "stat walk of a: jobs ran ($((j6 - j5)))" test $((j6 - j5)) -gt 0
	check "stat walk of a: no file pushed ($((p3 - p2)))" test "$p3" = "$p2"
fi

# unmounting while a job still reads: a walk stopped at 2,000 of 20,000
for _ in 1 2 3; do
	mnt_remount statahead=16384
	"$py" -c "
import os, sys
for i in range(2000):
    os.stat(os.path.join(sys.argv[1], 'f%05d' % i))" "$MNT/e"
	mnt_umount
	mnt_mount
done

mnt_remount statahead=0
read -r l0 j0 on < <(stats requests.LOOKUP statahead.jobs statahead.on)
check "statahead=0: off" test "$on" = 0
check "statahead=0: walk of a" test "$(walk "$MNT/a" seq)" = 0
read -r l1 j1 < <(stats requests.LOOKUP statahead.jobs)
check "statahead=0: no job" test "$j1" = "$j0"
check "statahead=0: a lookup each ($((l1 - l0)))" test $((l1 - l0)) -ge "$N"
mnt_umount
mnt_result
