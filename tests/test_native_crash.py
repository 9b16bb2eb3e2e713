#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The writer and the checker of tests/test_native_crash.sh: what native
writes completed and an fsync covered survives the daemon's death.

  test_native_crash.py write DIR LIBNVMEFS EXPECT GO
  test_native_crash.py check DIR EXPECT

write: in DIR (a new directory on the mount) creates files and writes them
through libnvmefs (tests/torture.py's small ctypes wrapper) and through the
mount, in a fixed order:

  a  native writes, then fsync(2) through the mount: the last sync that
     does not go through the native client;
  b  native writes from the shared buffer (block-aligned, misaligned alike
     with the file offset, misaligned otherwise), from ordinary memory
     (bounced) and a batch of pieces submitted together, one past the end
     (a hole), then nvmefs_fsync;
  c  written through the mount only, then nvmefs_fsync on it: a native
     fsync covers the mount's writes;
  d  opened write-only, native writes, a truncation through the mount and a
     native write past the new end;
  e  native writes, nothing else, before the last sync: nvmefs_fsync of d;
  z  created and written natively after it, never synced: not promised
     (with power loss its writes are the unflushed ones that are dropped).

Everything after a's fsync becomes durable only through nvmefs_fsync (the
script mounts with a commit interval of an hour). Then it writes EXPECT
(JSON: name -> [size, sha256]; z is not in it), stays attached with every file registered
and open, and waits until the file GO exists (the script crashes the daemon
meanwhile).

check: DIR holds the files of EXPECT (and maybe z), each with its size and
sha256. Exit 0 or 1.
"""
import argparse
import hashlib
import json
import os
import random
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torture  # noqa: E402  (its Native class)

KIB, MIB = 1 << 10, 1 << 20


class Writer:
    def __init__(self, top, lib):
        self.top = top
        self.nat = torture.Native(lib, top)
        self.files = {}  # name -> (fd, bytearray: what it must hold)

    def create(self, name, mode=os.O_RDWR):
        fd = os.open(os.path.join(self.top, name), mode | os.O_CREAT | os.O_EXCL, 0o644)
        self.nat.reg(fd)
        self.files[name] = (fd, bytearray())
        return fd

    def put(self, name, off, length, how='shared', moff=0):
        """Write length bytes of the file's own data at off: how is a way
        of torture.Native.pwrite, or 'mount' (pwrite(2))."""
        fd, want = self.files[name]
        data = random.Random('%s:%d:%d' % (name, off, length)).randbytes(length)
        if how == 'mount':
            done = 0
            while done < length:
                done += os.pwrite(fd, data[done:], off + done)
        else:
            self.nat.pwrite(fd, data, off, how, moff)
        if len(want) < off + length:
            want.extend(bytes(off + length - len(want)))
        want[off:off + length] = data

    def truncate(self, name, size):
        fd, want = self.files[name]
        os.ftruncate(fd, size)
        del want[size:]
        want.extend(bytes(size - len(want)))

    def run(self):
        self.create('a')
        self.put('a', 0, MIB)
        self.put('a', MIB + 123, 5000, 'memory')
        os.fsync(self.files['a'][0])

        self.create('b')
        self.put('b', 0, 256 * KIB)  # zero copy
        self.put('b', 300000, 70001, 'shared', 300000 % 4096)  # head, middle, tail
        self.put('b', 400005, 8193, 'shared', 17)  # misaligned otherwise
        self.put('b', MIB - 1, 2, 'memory')  # across a block, bounced
        self.put('b', 0, 1, 'memory')  # 1 byte over written data
        self.put('b', 512 * KIB, 256 * KIB + 513, 'batch')
        self.put('b', 2 * MIB + 7, 4096, 'shared', 7)  # past the end: a hole before
        self.nat.fsync(self.files['b'][0])

        self.create('c')
        self.put('c', 0, 12345, 'mount')
        self.put('c', 4096, 4096, 'mount')
        self.put('c', 100000, 1, 'mount')
        self.nat.fsync(self.files['c'][0])

        self.create('d', os.O_WRONLY)
        self.put('d', 0, 64 * KIB)
        self.put('d', 64 * KIB, 64 * KIB + 1, 'memory')
        self.truncate('d', 10000)
        self.put('d', 20000, 100, 'shared', 20000 % 4096)

        self.create('e')
        self.put('e', 8192, 8192, 'batch')
        self.put('e', 0, 511, 'memory')
        self.nat.fsync(self.files['d'][0])
        expect = {n: [len(w), hashlib.sha256(w).hexdigest()] for n, (_, w) in self.files.items()}

        self.create('z')
        self.put('z', 0, 128 * KIB)
        self.put('z', 5, 5000, 'memory')
        return expect


def write(args):
    w = Writer(args.dir, args.lib)
    expect = w.run()
    with open(args.expect + '.tmp', 'w') as f:
        json.dump(expect, f)
    os.rename(args.expect + '.tmp', args.expect)
    print('write: %s: %s' % (args.dir, ', '.join('%s %d bytes' % (n, v[0])
                                                 for n, v in sorted(expect.items()))))
    end = time.monotonic() + 60
    while not os.path.exists(args.go) and time.monotonic() < end:
        time.sleep(0.02)
    # The daemon is gone: nothing to give back (nvmefs_detach would only
    # find the connection closed), and the process's exit closes the rest.
    return 0


def check(args):
    with open(args.expect) as f:
        expect = json.load(f)
    bad = []
    names = sorted(n for n in os.listdir(args.dir) if n != 'z')
    if names != sorted(expect):
        bad.append('files %s, want %s' % (names, sorted(expect)))
    for n, (size, sha) in sorted(expect.items()):
        p = os.path.join(args.dir, n)
        if not os.path.exists(p):
            bad.append('%s: missing (%d bytes, fsynced)' % (n, size))
            continue
        with open(p, 'rb') as f:
            got = f.read()
        if len(got) != size:
            bad.append('%s: size %d, want %d' % (n, len(got), size))
        elif hashlib.sha256(got).hexdigest() != sha:
            bad.append('%s: content differs (size %d)' % (n, size))
    for b in bad:
        print('FAIL: %s: %s' % (args.dir, b), file=sys.stderr)
    if not bad:
        print('check: %s: %d files, sizes and contents as fsynced' % (args.dir, len(expect)))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    w = sub.add_parser('write')
    for a in ('dir', 'lib', 'expect', 'go'):
        w.add_argument(a)
    c = sub.add_parser('check')
    for a in ('dir', 'expect'):
        c.add_argument(a)
    args = ap.parse_args()
    return write(args) if args.cmd == 'write' else check(args)


if __name__ == '__main__':
    sys.exit(main())
