# SPDX-License-Identifier: MIT
"""Writes answered before the devices complete them (NVMEFS_WRITE_BEHIND,
fs/core/data_io.c), on a mounted volume: usage write_behind.py MNT PHASE REF.

PHASE "write": small writes are answered early (.nvmefs/stats
data.behind_writes moves); right after each one, before its close, the file
shows its new size through another descriptor, reads back its bytes there,
and lseek(SEEK_DATA/SEEK_HOLE) sees data, not a hole (cp's test for a sparse
file); what asks for more is not answered early: O_DIRECT, O_SYNC, O_DSYNC,
a write larger than -o write_behind. The files' bytes are saved in the
directory REF (outside the mount) for PHASE "check", run after a remount, which reads them
all back.

PHASE "fail" (the test daemon, with writes to one member failing): each
small file is written and fsync'ed; a write answered early whose device
write failed must fail its fsync (EIO), and every file whose write and
fsync both succeeded must read back exactly once the fault is cleared
(PHASE "failcheck"); PHASE "doorfail" and "doorcheck" do the same through
the create door, under libnvmefs-preload.so, and PHASE "doorheld" checks
that the door's thread sends its small writes together (phase_doorheld);
PHASE "mountheld" that the mount's request loop does (phase_mountheld). PHASE "nosend": a write answered early that the
engine refuses to send fails the file's next fsync (phase_nosend).
"""
import errno
import json
import os
import sys

MNT, PHASE, REF = sys.argv[1], sys.argv[2], sys.argv[3]
fails = 0


def check(what, ok):
    global fails
    if not ok:
        print("FAIL: " + what, file=sys.stderr)
        fails += 1


def data_stats():
    with open(os.path.join(MNT, ".nvmefs/stats")) as f:
        return json.load(f)["data"]


def behind():
    return data_stats()["behind_writes"]


def payload(i, n):
    return bytes((i * 7 + k) % 251 for k in range(n))


def save(name, data):
    with open(os.path.join(REF, name), "wb") as f:
        f.write(data)


def phase_write():
    os.makedirs(REF, exist_ok=True)
    d = os.path.join(MNT, "wb")
    os.mkdir(d)
    sizes = [4096, 100, 65536, 12288, 1]
    b0 = behind()
    early = 0
    for i in range(200):
        n = sizes[i % len(sizes)]
        data = payload(i, n)
        p = os.path.join(d, "f%03d" % i)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        check("f%03d: write" % i, os.write(fd, data) == n)
        # Before the close: another descriptor sees it all.
        # (lseek first: a read would wait for the write, lseek must too.)
        r = os.open(p, os.O_RDONLY)
        check("f%03d: SEEK_DATA finds the data" % i, os.lseek(r, 0, os.SEEK_DATA) == 0)
        check("f%03d: SEEK_HOLE at the end" % i, os.lseek(r, 0, os.SEEK_HOLE) == n)
        check("f%03d: size %d right after the write" % (i, n), os.fstat(r).st_size == n)
        check("f%03d: read back right after the write" % i, os.pread(r, n + 1, 0) == data)
        os.close(r)
        os.close(fd)
        save("f%03d" % i, data)
        early += 1
    b1 = behind()
    # A commit's gather sends some the usual way; most go early.
    check("small writes answered early: %d of %d" % (b1 - b0, early), b1 - b0 >= early // 2)
    # Appended in blocks, each answered early (the next append's offset is
    # the size the last one set): one file, all there.
    p = os.path.join(d, "appended")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    whole = b""
    b = behind()
    for i in range(64):
        piece = payload(1000 + i, 4096)
        os.write(fd, piece)
        whole += piece
    check("appends answered early: %d of 64" % (behind() - b), behind() - b >= 32)
    # Unaligned pieces read their edge block first: answered at the end.
    for i in range(16):
        piece = payload(2000 + i, 777)
        os.write(fd, piece)
        whole += piece
    check("appended: size", os.fstat(fd).st_size == len(whole))
    os.close(fd)
    with open(p, "rb") as f:
        check("appended: content", f.read() == whole)
    save("appended", whole)
    # Overwritten in place, then read through another descriptor.
    p = os.path.join(d, "f000")
    fd = os.open(p, os.O_WRONLY)
    new = payload(5000, 4096)
    os.pwrite(fd, new, 0)
    with open(p, "rb") as f:
        check("overwrite: read back at once", f.read() == new)
    os.close(fd)
    save("f000", new)
    # What asks for more is answered when the devices are done.
    for name, flags, n in (("direct", os.O_DIRECT, 4096), ("sync", os.O_SYNC, 4096),
                           ("dsync", os.O_DSYNC, 4096), ("large", 0, 65537)):
        data = payload(7000, n)
        b = behind()
        fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | flags, 0o644)
        if flags & os.O_DIRECT:
            import mmap
            buf = mmap.mmap(-1, n)
            buf.write(data)
            os.write(fd, buf)
        else:
            os.write(fd, data)
        os.close(fd)
        check("%s write not answered early" % name, behind() == b)
        save(name, data)


def phase_tmp():
    """Temporary files: written, closed and unlinked at once (and unlinked
    while open, then closed), while the devices are slow (the test daemon's
    latency): a file's space must go only once its writes are done. When it
    went first, the writes' extents came after, into freed space (fsck,
    run by the test after the unmount, finds such blocks)."""
    d = os.path.join(MNT, "tmp")
    os.makedirs(d, exist_ok=True)
    afd = os.open(os.path.join(MNT, "anchor"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.fsync(afd)
    free0 = os.statvfs(MNT).f_bfree
    b = behind()
    for i in range(40):
        p = os.path.join(d, "t%03d" % i)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, payload(3000 + i, 8192))
        if i % 2:
            os.unlink(p)  # while open: freed at the last close
            os.close(fd)
        else:
            os.close(fd)
            os.unlink(p)
    check("temporary files answered early", behind() - b >= 20)
    check("all gone", not os.listdir(d))
    # Their space comes back with the commit after their writes (fsync
    # commits; space released by it counts as free).
    os.fsync(afd)
    os.close(afd)
    free1 = os.statvfs(MNT).f_bfree
    check("their space is free again: %d blocks before, %d after" % (free0, free1),
          free1 >= free0 - 16)


def fault(cmd):
    os.setxattr(MNT, "trusted.nvmefs.fault", cmd.encode())


def phase_edgefail():
    """An unaligned overwrite reads its edge block first; when that read
    fails, the write must fail with EIO (not wait for ever: it had asked
    to be answered early and was not counted as such)."""
    p = os.path.join(MNT, "edge")
    old = payload(4000, 8192)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, old)
    os.fsync(fd)
    for dev in range(4):
        fault("eio dev=%d ops=r" % dev)
    try:
        os.pwrite(fd, b"x" * 100, 10)
        check("an overwrite whose edge read fails fails", False)
    except OSError as e:
        check("edge read failed: EIO, not %s" % e, e.errno == errno.EIO)
    fault("clear")
    check("then it works", os.pwrite(fd, b"y" * 100, 10) == 100)
    os.close(fd)
    with open(p, "rb") as f:
        check("edge: content", f.read() == old[:10] + b"y" * 100 + old[110:])


def phase_check():
    names = sorted(os.listdir(REF))
    check("files saved", len(names) > 200)
    for name in names:
        with open(os.path.join(REF, name), "rb") as f:
            want = f.read()
        with open(os.path.join(MNT, "wb", name), "rb") as f:
            check("%s intact after a remount" % name, f.read() == want)


def phase_fail(sub="wbf"):
    os.makedirs(REF, exist_ok=True)
    d = os.path.join(MNT, sub)
    os.mkdir(d)
    s0 = data_stats()
    write_failed = fsync_failed = ok = 0
    for i in range(32):
        data = payload(9000 + i, 4096)
        fd = os.open(os.path.join(d, "g%02d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        except OSError as e:
            check("g%02d: write fails with EIO, not %s" % (i, e), e.errno == errno.EIO)
            write_failed += 1
            os.close(fd)
            continue
        try:
            os.fsync(fd)
            ok += 1
            save("g%02d" % i, data)
        except OSError as e:
            check("g%02d: fsync fails with EIO, not %s" % (i, e), e.errno == errno.EIO)
            fsync_failed += 1
        os.close(fd)
    s1 = data_stats()
    print("with member writes failing: %d files fine, %d writes failed, %d answered "
          "early and failed at fsync (%d device failures counted)"
          % (ok, write_failed, fsync_failed, s1["behind_errors"] - s0["behind_errors"]))
    check("some early-answered writes failed at fsync", fsync_failed >= 1)
    check("each counted", s1["behind_errors"] - s0["behind_errors"] >= fsync_failed)
    check("the files on the other members were fine", ok >= 1)


def phase_nosend():
    """A write answered early that the engine then refuses to send (the
    test daemon's "nomem" fault on every member: the submission fails,
    nothing reaches a device). On /dev/fuse the answer goes before the
    submission (data_io.c write_behind): the write returns, and the file's
    next fsync must fail with EIO, once. On an io_uring queue the blocks go
    first, and the write itself fails. Either way the refused bytes are not
    read back (the size stays, over a hole: zeros), and the file takes the
    next write and fsync."""
    with open(os.path.join(MNT, ".nvmefs/config")) as f:
        uring = "transport = io_uring" in f.read().splitlines()
    p = os.path.join(MNT, "nosend")
    data = payload(6000, 4096)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.fsync(fd)
    s0 = data_stats()
    for dev in range(4):
        fault("nomem dev=%d ops=w count=1" % dev)
    try:
        n, err = os.write(fd, data), None
    except OSError as e:
        n, err = 0, e
    fault("clear")
    s1 = data_stats()
    if uring:
        check("io_uring: the refused write fails (%s)" % err, err is not None)
    else:
        check("/dev/fuse: the write answered early (%s)" % err, n == 4096 and
              s1["behind_writes"] == s0["behind_writes"] + 1)
        try:
            os.fsync(fd)
            check("fsync after a write the engine refused fails", False)
        except OSError as e:
            check("fsync after a refused write: EIO, not %s" % e, e.errno == errno.EIO)
        check("counted once as a failure",
              data_stats()["behind_errors"] == s0["behind_errors"] + 1)
        os.fsync(fd)  # the error was reported once
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")  # cached mode: the kernel's copy of the page goes
    got = os.pread(fd, 8192, 0)
    check("the refused bytes are not read back (%d bytes)" % len(got),
          got != data and not got.strip(b"\0"))
    check("then a write works", os.pwrite(fd, data, 0) == 4096)
    os.fsync(fd)
    check("and reads back", os.pread(fd, 8192, 0) == data)
    os.close(fd)


def phase_failcheck(sub="wbf"):
    for name in sorted(os.listdir(REF)):
        with open(os.path.join(REF, name), "rb") as f:
            want = f.read()
        with open(os.path.join(MNT, sub, name), "rb") as f:
            check("%s: fsync'ed, intact" % name, f.read() == want)


def native_stats():
    with open(os.path.join(MNT, ".nvmefs/stats")) as f:
        return json.load(f)["native"]


def phase_doorfail():
    """PHASE "fail" run under libnvmefs-preload.so (test_preload.sh): the
    files are made and written through the create door, whose small writes
    are answered early as the mount's are (NVMEFS_WIRE_SQE_BEHIND): a
    device failure must fail the file's fsync, not pass unseen."""
    n0 = native_stats()
    phase_fail("wbd")
    n1 = native_stats()
    check("the 32 files were made through the door (%d)" % (n1["creates"] - n0["creates"]),
          n1["creates"] - n0["creates"] == 32)
    check("and written through it", n1["writes"] - n0["writes"] >= 1)


def phase_doorheld():
    """Under libnvmefs-preload.so: the door's thread holds its small writes
    answered early and sends them together (fs/native/server_io.c, "writes
    held back"). 200 files of 4 KiB made and written through the door, each
    tenth read back through the mount at once (a read of a held write's range
    waits for it, not forever); then most writes were held and sent, and
    every file reads back."""
    datas = [payload(12000 + i, 4096) for i in range(200)]  # made first: slow
    n0 = native_stats()
    d = os.path.join(MNT, "wbh")
    os.mkdir(d)
    for i in range(200):
        data = datas[i]
        p = os.path.join(d, "h%03d" % i)
        with open(p, "wb") as f:
            f.write(data)
        if i % 10 == 9:
            with open(p, "rb") as f:
                check("h%03d: read back through the mount at once" % i, f.read() == data)
    n1 = native_stats()
    made = n1["creates"] - n0["creates"]
    held = n1["held_writes"] - n0["held_writes"]
    sends = n1["held_sends"] - n0["held_sends"]
    print("200 files through the door: %d made there, %d writes held, in %d sends"
          % (made, held, sends))
    check("the files were made through the door (%d)" % made, made == 200)
    check("their writes were held (%d)" % held, held >= 100)
    # How many a send gathers depends on the pace (test_client's
    # held_writes checks the gathering itself): at least they were sent.
    check("and sent (%d writes in %d sends)" % (held, sends), 0 < sends <= held)
    for i in range(200):
        with open(os.path.join(d, "h%03d" % i), "rb") as f:
            check("h%03d: reads back" % i, f.read() == datas[i])


def phase_mountheld():
    """Through the mount on /dev/fuse, the request loop's worker holds the
    small writes it answers early and sends them together (fs/fuse/loop.c,
    "Writes held back"). 200 files of 4 KiB made and written, each tenth
    read back through another descriptor at once (a read of a held write's
    range waits for it, not forever); then most writes were held, sends
    gathered more than one write, an fsync through another descriptor
    every 25 files returns, and every file reads back. On io_uring
    (the queues put device writes on their rings) nothing is held."""
    datas = [payload(15000 + i, 4096) for i in range(200)]  # made first: slow
    with open(os.path.join(MNT, ".nvmefs/stats")) as f:
        uring = json.load(f)["transport"]["name"] == "io_uring"
    s0 = data_stats()
    d = os.path.join(MNT, "wbm")
    os.mkdir(d)
    for i in range(200):
        p = os.path.join(d, "m%03d" % i)
        with open(p, "wb") as f:
            f.write(datas[i])
        if i % 10 == 9:
            with open(p, "rb") as f:
                check("m%03d: read back through the mount at once" % i, f.read() == datas[i])
        if i % 25 == 24:
            # fsync through another descriptor: a commit that waits for
            # every write answered early, held ones included (the FSYNC
            # is a request the leader hands over, sending them first).
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    s1 = data_stats()
    held = s1["held_writes"] - s0["held_writes"]
    sends = s1["held_sends"] - s0["held_sends"]
    early = s1["behind_writes"] - s0["behind_writes"]
    print("200 files through the mount: %d answered early, %d held, in %d sends%s"
          % (early, held, sends, " (io_uring)" if uring else ""))
    if uring:
        check("io_uring: nothing held (%d)" % held, held == 0)
    else:
        check("their writes were held (%d of %d answered early)" % (held, early), held >= 100)
        check("and sent, more than one a send (%d writes in %d sends)" % (held, sends),
              0 < sends < held)
    for i in range(200):
        with open(os.path.join(d, "m%03d" % i), "rb") as f:
            check("m%03d: reads back" % i, f.read() == datas[i])


{"write": phase_write, "check": phase_check, "tmp": phase_tmp, "edgefail": phase_edgefail, "fail": phase_fail,
 "failcheck": phase_failcheck, "nosend": phase_nosend, "doorfail": phase_doorfail,
 "doorheld": phase_doorheld,
 "mountheld": phase_mountheld, "doorcheck": lambda: phase_failcheck("wbd")}[PHASE]()
sys.exit(1 if fails else 0)
