#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""count_requests.py MNT [N]: the FUSE requests each common file operation
costs on an nvmefs mount, counted from MNT/.nvmefs/stats ("requests").

Each sequence runs on N files of 4 KiB (default 200) in a directory of its
own; the counts are per file, rounded to 2 places. Caches are dropped
(/proc/sys/vm/drop_caches: root) where a sequence says "cold". FORGET and
BATCH_FORGET are left out: the kernel sends them when it drops inodes,
whenever its memory asks, not because of the operation; so are the
requests of reading the stats file itself (measured first, subtracted). Prints one JSON
object: {sequence: {opcode: requests per file}}. tests/test_requests.sh
asserts on it; docs/DATAPATH.md "Requests per file operation" shows it.
"""
import json
import os
import shutil
import subprocess
import sys
import time

SIZE = 4096
SKIP = {"FORGET", "BATCH_FORGET"}


def stats(mnt):
    """MNT/.nvmefs/stats, read the same way each time (so that each read of
    it costs the same requests: measured, and subtracted)."""
    fd = os.open(os.path.join(mnt, ".nvmefs", "stats"), os.O_RDONLY)
    try:
        text = b""
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            text += b
    finally:
        os.close(fd)
    return json.loads(text)


def requests(mnt):
    return stats(mnt)["requests"]


def delta(before, after, own):
    """Requests per opcode from before to after, less own (one stats read)."""
    return {k: v - before.get(k, 0) - own.get(k, 0) for k, v in after.items()
            if k not in SKIP and v - before.get(k, 0) - own.get(k, 0)}


def forgets(mnt):
    r = requests(mnt)
    return r.get("FORGET", 0) + r.get("BATCH_FORGET", 0)


def drop_caches(mnt, sync=True):
    """The kernel forgets what it can, and the daemon has had its FORGETs
    (they come in the background): after each drop, until none comes in
    50 ms. Twice: an inode a background RELEASE held at the first drop
    goes at the second. sync: the volume's journal committed first."""
    if sync:
        os.sync()
    for _ in range(2):
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        seen, end = forgets(mnt), time.monotonic() + 10
        while time.monotonic() < end:
            time.sleep(0.05)
            now = forgets(mnt)
            if now == seen:
                break
            seen = now


def main():
    mnt = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    top = os.path.join(mnt, "count_requests")
    os.mkdir(top)
    data = os.urandom(SIZE)
    out = {}
    # What a read of the stats file costs, as seen between two reads
    # (after a first: the kernel's first close sends a FLUSH, none after).
    requests(mnt)
    r1 = requests(mnt)
    r2 = requests(mnt)
    own = {k: v - r1.get(k, 0) for k, v in r2.items() if v != r1.get(k, 0)}

    def per_file(d):
        return {k: round(v / n, 2) for k, v in sorted(d.items())}

    def names(d):
        return [os.path.join(d, "f%05d" % i) for i in range(n)]

    def count(name, fn, cold=False):
        if cold:
            drop_caches(mnt)
        before = requests(mnt)
        fn()
        out[name] = per_file(delta(before, requests(mnt), own))

    a = os.path.join(top, "a")
    os.mkdir(a)

    def create():
        for p in names(a):
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, data)
            os.close(fd)

    def py_write():
        for p in names(a):
            with open(p, "wb") as f:
                f.write(data)

    def py_read():
        for p in names(a):
            with open(p, "rb") as f:
                if f.read() != data:
                    raise SystemExit("wrong content: " + p)

    def os_read():
        for p in names(a):
            fd = os.open(p, os.O_RDONLY)
            b = os.read(fd, SIZE + 1)
            os.close(fd)
            if b != data:
                raise SystemExit("wrong content: " + p)

    def stat():
        for p in names(a):
            os.stat(p)

    def cp():
        subprocess.run(["cp", "-r", a, os.path.join(top, "b")], check=True)

    def tar_c():
        with open(os.devnull, "wb") as null:
            tar = subprocess.Popen(["tar", "-C", top, "-cf", "-", "a"], stdout=subprocess.PIPE)
            shutil.copyfileobj(tar.stdout, null)
            if tar.wait():
                raise SystemExit("tar c failed")

    def tar_x():
        c = os.path.join(top, "c")
        os.mkdir(c)
        tar = subprocess.Popen(["tar", "-C", top, "-cf", "-", "a"], stdout=subprocess.PIPE)
        # The archive is made first (counted apart), then extracted.
        blob = tar.stdout.read()
        if tar.wait():
            raise SystemExit("tar c failed")
        before = requests(mnt)
        subprocess.run(["tar", "-C", c, "-xf", "-"], input=blob, check=True)
        out["tar x"] = per_file(delta(before, requests(mnt), own))

    def unlink():
        for p in names(a):
            os.unlink(p)

    count("create (os.open O_CREAT, os.write, os.close)", create)
    count("overwrite (open(p, 'wb').write)", py_write)
    count("stat, cold", stat, cold=True)
    count("read (open(p, 'rb').read()), cold", py_read, cold=True)
    count("read again (open(p, 'rb').read())", py_read)
    count("read (os.open, os.read, os.close), cold", os_read, cold=True)
    count("cp -r, cold", cp, cold=True)
    count("tar c, cold", tar_c, cold=True)
    drop_caches(mnt)
    tar_x()
    count("unlink", unlink)
    shutil.rmtree(top)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
