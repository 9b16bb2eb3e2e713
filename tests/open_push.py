#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""open_push.py MNT MODE: the open's push (fs/fuse/ops_file.c, open_push) on
an nvmefs mount in MODE (direct, cached or cached,writeback), as root (it
drops the kernel's caches). Prints one line per check, "FAIL: ..." for a
failed one; exit status 1 when any failed. tests/test_open_push.sh runs it.

An open through the page cache of a small file the kernel holds no pages
of stores the file's data there before it replies, when a read would
leave the atime: the program's reads send nothing. What it must keep:
  - the data is the file's (a cold read after an overwrite and after a
    truncation through another path);
  - no READ for such a read; a READ, and the atime moved, for a file not
    read since it changed; an open that reads nothing leaves the atime;
  - a file open elsewhere is not pushed: the store would overwrite the
    pages a shared mapping dirtied (their content read back, not the
    devices'). Direct mode tests the rule: in cached mode the mapping's
    own open already tells the next one the kernel holds pages;
  - files above 64 KiB are not pushed; 64 KiB is;
  - with -o writeback nothing is pushed (dirty pages outlive handles).
"""
import mmap
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import count_requests  # noqa: E402  (its stats reading and drop_caches)

MNT, MODE = sys.argv[1], sys.argv[2]
D = os.path.join(MNT, "open_push")
failed = 0


def check(what, ok, detail=""):
    global failed
    if ok:
        print("ok: " + what)
    else:
        failed += 1
        print("FAIL: %s%s" % (what, ": " + detail if detail else ""))


def all_stats():
    return count_requests.stats(MNT)


def stats():
    s = all_stats()
    return s["requests"].get("READ", 0), s["data"]["open_pushes"]


def cold(sync=True):
    """The kernel forgets the files (and their pages), and the daemon has
    had its FORGETs (count_requests.drop_caches)."""
    count_requests.drop_caches(MNT, sync)


def write(p, data):
    with open(p, "wb") as f:
        f.write(data)


def read(p, n=1 << 20):
    fd = os.open(p, os.O_RDONLY)
    try:
        return os.read(fd, n)
    finally:
        os.close(fd)


def delta(fn):
    """fn()'s result, and the READs and pushes it cost (less the READs of
    reading the stats file, measured between two reads of it)."""
    stats()
    r0, p0 = stats()
    own = stats()[0] - r0
    r0 += own
    out = fn()
    r1, p1 = stats()
    return out, r1 - r0 - own, p1 - p0


def sa_forgotten():
    """Statahead pushes files ahead of a walk that reads them (direct
    mode); the kernel forgets some before the walk opens them. An open of
    one that reads nothing leaves its atime: the push's read is not noted.
    After the forget the files are stat'ed and opened in reverse order,
    which statahead does not follow (no job pushes them again)."""
    w = os.path.join(D, "walk")
    os.mkdir(w)
    names = [os.path.join(w, "f%04d" % i) for i in range(400)]
    data = os.urandom(4096)
    for p in names:
        write(p, data)
    cold()
    p0 = all_stats()["statahead"]["pushed"]
    for p in names[:40]:
        read(p)
    # The walk's first job pushes what its READDIRPLUS brought, far ahead.
    end = time.monotonic() + 10
    st = all_stats()["statahead"]
    while time.monotonic() < end and st["on"] and st["pushed"] - p0 < 100:
        time.sleep(0.05)
        st = all_stats()["statahead"]
    # The pushes in flight end before the kernel forgets the files.
    end, seen = time.monotonic() + 10, None
    while time.monotonic() < end and st["pushed"] != seen:
        seen = st["pushed"]
        time.sleep(0.2)
        st = all_stats()["statahead"]
    pushed = st["pushed"] - p0
    if not st["on"]:
        print("statahead off: the forgotten push not checked")
        return
    check("statahead pushed ahead of a walk (%d files)" % pushed, pushed >= 100)
    cold()
    rest = names[:39:-1]
    before = [os.stat(p).st_atime_ns for p in rest]
    for p in rest:
        os.close(os.open(p, os.O_RDONLY))
    cold()
    moved = sum(os.stat(p).st_atime_ns != t for p, t in zip(rest, before))
    check("pushed, forgotten, opened without a read: atime kept", moved == 0,
          "%d of %d moved" % (moved, len(before)))


def main():
    wb = MODE == "cached,writeback"
    os.mkdir(D)
    a = os.path.join(D, "a")
    data = os.urandom(4096)
    write(a, data)

    # First read since the write: the atime moves, so no push.
    cold()
    at0 = os.stat(a).st_atime_ns
    time.sleep(0.01)
    got, reads, pushes = delta(lambda: read(a))
    check("first read after a write: right data", got == data)
    check("first read after a write: not pushed", pushes == 0, "%d pushes" % pushes)
    check("first read after a write: a READ", reads >= 1, "%d READs" % reads)
    # With -o writeback the kernel stamps the write's mtime from its coarse
    # clock, which can be before the create's atime: relatime keeps it.
    if not wb:
        check("first read after a write: atime moved", os.stat(a).st_atime_ns != at0)

    # Read since it changed: the next cold open pushes, its read sends nothing.
    cold()
    got, reads, pushes = delta(lambda: read(a))
    check("cold read of a file read before: right data", got == data)
    if wb:
        check("writeback: not pushed", pushes == 0, "%d pushes" % pushes)
    else:
        check("cold read of a file read before: pushed", pushes == 1, "%d pushes" % pushes)
        check("cold read of a file read before: no READ", reads == 0, "%d READs" % reads)

    # Changed through another path (a write, a truncation), then cold.
    new = os.urandom(4096)
    write(a, new)
    read(a)  # read since the change: the next cold open may push
    cold()
    check("after an overwrite: the new data", read(a) == new)
    os.truncate(a, 1000)
    read(a)
    cold()
    check("after a truncation: the short file", read(a) == new[:1000])

    # An open that reads nothing, of a file changed since its last read,
    # leaves the atime (a push would have had to note a read).
    write(a, data)
    cold()
    at2 = os.stat(a).st_atime_ns
    time.sleep(0.01)
    _, _, pushes = delta(lambda: os.close(os.open(a, os.O_RDONLY)))
    cold()
    check("an open without a read: atime kept", os.stat(a).st_atime_ns == at2)
    check("an open without a read, file changed since read: not pushed", pushes == 0)

    # Open elsewhere, with a page a shared mapping dirtied: no push over it.
    m = os.path.join(D, "m")
    write(m, data)
    read(m)
    cold()
    fd = os.open(m, os.O_RDWR)
    mm = mmap.mmap(fd, 4096)
    mm[0:8] = b"MAPPED!!"
    _, _, pushes = delta(lambda: read(m, 8))
    want = b"MAPPED!!"
    got = read(m, 8)
    check("open elsewhere: not pushed", pushes == 0, "%d pushes" % pushes)
    check("open elsewhere: a reader sees the mapping's bytes", got == want, repr(got))
    mm.close()
    os.close(fd)
    cold()
    check("open elsewhere: the mapping's bytes kept", read(m, 8) == want)

    # Overwritten in place since its last read (the size kept: the mtime
    # moves without a size change): the next read moves the atime, so the
    # open does not push.
    o = os.path.join(D, "o")
    write(o, data)
    read(o)
    cold()
    at3 = os.stat(o).st_atime_ns
    fd = os.open(o, os.O_WRONLY)
    os.pwrite(fd, new[:100], 0)
    os.close(fd)
    cold(sync=False)  # no commit: the overwrite's time not yet folded in
    got, _, pushes = delta(lambda: read(o))
    check("overwritten in place: right data", got == new[:100] + data[100:])
    check("overwritten in place: not pushed", pushes == 0, "%d pushes" % pushes)
    if not wb:
        cold()
        check("overwritten in place: the read moved the atime", os.stat(o).st_atime_ns != at3)

    if MODE == "direct":
        sa_forgotten()

    # The size rule: 64 KiB pushed, one byte more not.
    for size, pushed in ((64 << 10, 1), ((64 << 10) + 1, 0)):
        p = os.path.join(D, "s%d" % size)
        blob = os.urandom(size)
        write(p, blob)
        read(p)
        cold()
        got, _, pushes = delta(lambda: read(p))
        check("%d bytes: right data" % size, got == blob)
        check("%d bytes: %s" % (size, "pushed" if pushed and not wb else "not pushed"),
              pushes == (0 if wb else pushed), "%d pushes" % pushes)


if __name__ == "__main__":
    main()
    sys.exit(1 if failed else 0)
