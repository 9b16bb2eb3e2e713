#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""nvmefs.aio_handle (python/nvmefs, issue 22) against plain-file reference
results, in a scratch directory made under DIR:

 - every method (sync_/async_ pread and pwrite, pread/pwrite with validate
   and async, wait, read, write, new_cpu_locked_tensor,
   free_cpu_locked_tensor), the getters and the constructor's arguments;
 - a grid of sizes and file offsets that are not multiples of the block
   size or of 4096 (0, 1, 7, 4095, 4096, 4097, 1 MiB+3, 5 MiB+1234), with 1
   and 3 threads and odd block sizes, every kind of buffer (locked tensors,
   ordinary tensors, numpy arrays, bytearray, memoryview, mmap, bytes):
   what the handle writes is what open().read() reads, what open().write()
   wrote is what the handle reads, and no byte around a buffer is touched;
 - asynchronous operations: several outstanding, then wait() returning
   their count; async calls return before their I/O is done;
 - errors as OSError with the errno and the file name: missing file
   (ENOENT), read past the end (EINVAL), a read-only directory and an
   unreadable file for a user who is not root (EACCES), failed I/O from
   wait(); ValueError/TypeError for buffers that cannot be used;
 - --native all: on an nvmefs mount (MOUNT) the daemon's native counters
   (MOUNT/.nvmefs/stats) count every byte, with no byte copied for locked
   tensors at aligned offsets, one client per thread; --native reads: a
   mount with -o writeback, where native writes are refused and the handle
   writes through the mount; --native none: any other directory, where the
   handle falls back to O_DIRECT (buffered where that is refused);
 - --faults (the mount's daemon is tests/nvmefs-fi): device errors under
   the native client raise EIO naming the file;
 - --remount: a handle goes on working after its volume is remounted;
 - --install: `cmake --install BUILD --prefix TMP` gives a package that
   imports with PYTHONPATH=TMP/lib/python3.X/dist-packages and loads TMP's
   libnvmefs.

usage: test_aio_handle.py --dir DIR [--native all|reads|none] [--mount MOUNT]
                          [--faults] [--remount DAEMON DEVICES OPTIONS LOG]
                          [-k PATTERN]...
       test_aio_handle.py --install BUILD
The package comes from PYTHONPATH (build/python for the build tree's);
tests/test_aio_handle.sh mounts a volume and runs this there.
"""

import argparse
import contextlib
import ctypes
import errno
import io
import json
import mmap
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

sys.dont_write_bytecode = True

# The child of test_read_only_directory needs neither (torch takes seconds).
AS_USER = sys.argv[1:2] == ["--as-user"]
try:
    if AS_USER:
        raise ImportError
    import numpy as np
except ImportError:
    np = None
try:
    if AS_USER:
        raise ImportError
    import torch
except ImportError:
    torch = None

nvmefs = None  # imported in main(), after the arguments: --install needs none
handle_mod = None

KiB, MiB = 1 << 10, 1 << 20
# Sizes and offsets in the manner of littlefs's tests: around the 4096
# alignment of zero copy and O_DIRECT, around the block sizes, and big.
SIZES = (0, 1, 7, 4095, 4096, 4097, MiB + 3, 5 * MiB + 1234)
# The same around 4096 and the block sizes, each a multiple of 3: a
# parallel operation's size must divide by intra_op_parallelism (else -1,
# as DeepSpeed's _is_valid_parallel_aio_op), and the grids run 3 threads.
SIZES3 = (0, 3, 9, 4095, 4098, 4101, MiB + 5, 5 * MiB + 1234)
OFFSETS = (0, 1, 7, 4095, 4097, MiB + 3)
KINDS = ("locked", "tensor", "numpy", "bytearray", "memoryview", "mmap", "bytes")
NOBODY = 65534

ARGS = argparse.Namespace(dir=None, native="none", mount=None, faults=False, remount=None,
                          install=None)
POOL = os.urandom(8 * MiB)  # random bytes every test slices its data from


def data_at(seed, n):
    """n pseudo-random bytes, different for different seeds."""
    start = (seed * 7919) % (len(POOL) - n) if n < len(POOL) else 0
    return POOL[start:start + n]


def first_difference(a, b):
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return i
    return min(len(a), len(b))


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def put_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def vm_locked_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmLck:"):
                return int(line.split()[1])
    raise AssertionError("no VmLck in /proc/self/status")


def native_stats():
    with open(os.path.join(ARGS.mount, ".nvmefs", "stats")) as f:
        return json.load(f)["native"]


def stats_delta(before, after):
    return {k: after[k] - before[k] for k in before}


class Buf:
    """A buffer of one kind with n bytes (data, or zeros), inside a bigger
    allocation whose bytes around it (guards) must stay as they were."""

    GUARD = 0xA5

    def __init__(self, h, kind, n, data=None):
        self.kind, self.n, self._free = kind, n, None
        g = 4096 if kind in ("locked", "mmap") else 3  # 3: an odd address
        self.g = g
        total = n + 2 * g
        if kind == "locked":
            back = h.new_cpu_locked_tensor(total, torch.empty(0, dtype=torch.uint8))
            back.fill_(self.GUARD)
            self.obj = back[g:g + n]
            self._raw = back.numpy()
            self._free = lambda: h.free_cpu_locked_tensor(back)
        elif kind == "tensor":
            back = torch.full((total,), self.GUARD, dtype=torch.uint8)
            self.obj = back[g:g + n]
            self._raw = back.numpy()
        elif kind == "numpy":
            back = np.full(total, self.GUARD, dtype=np.uint8)
            self.obj = back[g:g + n]
            self._raw = back
        elif kind == "memoryview":
            back = bytearray([self.GUARD]) * total
            self.obj = memoryview(back)[g:g + n]
            self._raw = back
        elif kind == "mmap":
            self._map = mmap.mmap(-1, total)
            self._map[:] = bytes([self.GUARD]) * total
            self.obj = memoryview(self._map)[g:g + n]
            self._raw = self._map
        elif kind == "bytearray":  # no guards: it is its own allocation
            self.g = 0
            self.obj = bytearray(n)
            self._raw = self.obj
        elif kind == "bytes":
            self.g = 0
            self.obj = bytes(data if data is not None else bytes(n))
            self._raw = self.obj
            return
        else:
            raise ValueError(kind)
        if data is not None:
            self._view()[self.g:self.g + n] = data

    def _view(self):
        return memoryview(self._raw).cast("B") if not isinstance(self._raw, memoryview) \
            else self._raw

    def bytes(self):
        return bytes(self._view()[self.g:self.g + self.n])

    def guards_ok(self):
        v = self._view()
        want = bytes([self.GUARD]) * self.g
        return bytes(v[:self.g]) == want and bytes(v[self.g + self.n:]) == want

    def close(self):
        if isinstance(self.obj, memoryview):
            self.obj.release()
        if self.kind == "mmap":
            self._map.close()
        if self._free is not None:
            self._free()


def need_torch(test):
    return unittest.skipUnless(torch is not None and np is not None,
                               "torch and numpy are not installed")(test)


class Base(unittest.TestCase):
    """A scratch directory under --dir, and handles to close."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="aio.", dir=ARGS.dir)
        self._handles = []

    def tearDown(self):
        for h in self._handles:
            h.close()
        shutil.rmtree(self.dir)

    def handle(self, *args, **kw):
        h = nvmefs.aio_handle(*args, **kw)
        self._handles.append(h)
        return h

    def path(self, name):
        return os.path.join(self.dir, name)

    def assertSameBytes(self, got, want, what):
        if got != want:
            at = first_difference(got, want)
            self.fail(f"{what}: {len(got)} bytes, want {len(want)}; first difference at {at}")

    def assertOSError(self, cm, err, filename):
        e = cm.exception
        self.assertEqual(e.errno, err, f"errno {e.errno} ({e}), want {errno.errorcode[err]}")
        self.assertEqual(e.filename, filename, f"the exception names {e.filename!r}: {e}")


class Constructor(Base):
    def test_defaults_as_deepnvme(self):
        h = self.handle()
        self.assertEqual((h.get_block_size(), h.get_queue_depth(), h.get_single_submit(),
                          h.get_overlap_events(), h.get_thread_count()),
                         (1048576, 128, False, False, 1))

    def test_arguments_positional_and_by_name(self):
        h = self.handle(12293, 7, True, True, 3)
        self.assertEqual((h.get_block_size(), h.get_queue_depth(), h.get_single_submit(),
                          h.get_overlap_events(), h.get_thread_count()),
                         (12293, 7, True, True, 3))
        h = self.handle(num_threads=2, overlap_events=True, block_size=4096, queue_depth=1,
                        single_submit=False)
        self.assertEqual((h.get_block_size(), h.get_queue_depth(), h.get_single_submit(),
                          h.get_overlap_events(), h.get_thread_count()),
                         (4096, 1, False, True, 2))
        self.assertEqual(h.get_intra_op_parallelism(), 2)

    def test_the_arguments_work(self):
        # single_submit and overlap_events change nothing in the results,
        # the tiny queue depth and block size only the number of requests.
        data = data_at(1, 3 * 4096 + 6)  # divides by 2 and 3
        for args in ((4096, 1, True, False, 1), (1000, 2, False, True, 2),
                     (4097, 3, True, True, 3)):
            with self.subTest(args=args):
                h = self.handle(*args)
                p = self.path("f%d" % args[0])
                self.assertEqual(h.sync_pwrite(data, p), 1)
                self.assertSameBytes(file_bytes(p), data, "written")
                got = bytearray(len(data) - 12)
                self.assertEqual(h.sync_pread(got, p, 9), 1)
                self.assertSameBytes(bytes(got), data[9:9 + len(got)], "read")

    def test_bad_arguments(self):
        for kw in ({"block_size": 0}, {"block_size": -4096}, {"block_size": 4096.0},
                   {"queue_depth": 0}, {"num_threads": 0}, {"num_threads": -1},
                   {"queue_depth": "8"}, {"intra_op_parallelism": 0},
                   {"intra_op_parallelism": 2.0}):
            with self.subTest(kw=kw), self.assertRaises(ValueError):
                nvmefs.aio_handle(**kw)
        with self.assertRaises(TypeError):  # both names, two values
            nvmefs.aio_handle(intra_op_parallelism=2, num_threads=3)


def grid_cases(thirds, kinds, plain, sizes=SIZES):
    """A grid's cases: (seed, size, offset, third, kind) for every size,
    offset and third in thirds(size, offset), the buffer kinds taken in
    turn (plain for those that need torch, without it)."""
    k = 0
    for size in sizes:
        for off in OFFSETS:
            for third in thirds(size, off):
                kind = kinds[k % len(kinds)]
                k += 1
                if kind in ("locked", "tensor", "numpy") and torch is None:
                    kind = plain
                yield k, size, off, third, kind


class Grid(Base):
    """Sizes x offsets x buffer kinds, 1 and 3 threads."""

    def grid_write(self, h, tag):
        # the file before the write: none, longer than it, or ending inside it
        pre_lens = lambda size, off: (0, off + size + 5000, off + size // 2)  # noqa: E731
        sizes = SIZES if h.get_intra_op_parallelism() == 1 else SIZES3
        for k, size, off, pre_len, kind in grid_cases(pre_lens, KINDS, "bytearray", sizes):
            with self.subTest(size=size, off=off, pre=pre_len, kind=kind):
                self.one_write(h, tag, kind, size, off, pre_len, k)

    def one_write(self, h, tag, kind, size, off, pre_len, seed):
        p = self.path(f"w{tag}")
        pre = data_at(seed + 1000, pre_len)
        put_file(p, pre)
        data = data_at(seed, size)
        buf = Buf(h, kind, size, data)
        try:
            self.assertEqual(h.sync_pwrite(buf.obj, p, off), 1)
        finally:
            buf.close()
        model = bytearray(pre)
        if size:
            model.extend(bytes(max(0, off + size - len(model))))
            model[off:off + size] = data
        self.assertEqual(os.stat(p).st_size, len(model), "the size right after the write")
        self.assertSameBytes(file_bytes(p), bytes(model), "the file")
        os.unlink(p)

    def grid_read(self, h, tag):
        # the read ends at the end of the file, or before; no bytes: not writable
        tails = lambda size, off: (0, 4099)  # noqa: E731
        sizes = SIZES if h.get_intra_op_parallelism() == 1 else SIZES3
        for k, size, off, tail, kind in grid_cases(tails, KINDS[:-1], "memoryview", sizes):
            with self.subTest(size=size, off=off, tail=tail, kind=kind):
                self.one_read(h, tag, kind, size, off, tail, k)

    def one_read(self, h, tag, kind, size, off, tail, seed):
        p = self.path(f"r{tag}")
        content = data_at(seed, off + size + tail)
        put_file(p, content)
        buf = Buf(h, kind, size)
        try:
            self.assertEqual(h.sync_pread(buf.obj, p, off), 1)
            self.assertSameBytes(buf.bytes(), content[off:off + size], "read")
            self.assertTrue(buf.guards_ok(), "bytes around the buffer changed")
        finally:
            buf.close()
        os.unlink(p)

    def test_write_1_thread(self):
        self.grid_write(self.handle(), "1")

    def test_write_3_threads_odd_block(self):
        self.grid_write(self.handle(block_size=3 * 4096 + 5, queue_depth=4, num_threads=3), "3")

    def test_read_1_thread(self):
        self.grid_read(self.handle(), "1")

    def test_read_3_threads_odd_block(self):
        self.grid_read(self.handle(block_size=3 * 4096 + 5, queue_depth=4, num_threads=3), "3")

    def test_parts_split_over_threads(self):
        """An operation is cut into num_threads contiguous parts at 4096
        boundaries, each moved by its own thread."""
        h = self.handle(block_size=65536, num_threads=3)
        seen = []
        real = handle_mod._Worker.move

        def move(worker, op, start, length):
            seen.append((threading.get_ident(), start, length))
            real(worker, op, start, length)

        data = data_at(5, 3 * MiB + 9)
        with mock.patch.object(handle_mod._Worker, "move", move):
            h.sync_pwrite(data, self.path("p"))
        self.assertSameBytes(file_bytes(self.path("p")), data, "written in 3 parts")
        seen.sort(key=lambda s: s[1])
        self.assertEqual(len({s[0] for s in seen}), 3, f"parts and their threads: {seen}")
        self.assertEqual(seen[0][1], 0)
        for a, b in zip(seen, seen[1:]):
            self.assertEqual(a[1] + a[2], b[1], f"parts not contiguous: {seen}")
            self.assertEqual(b[1] % 4096, 0, f"a part starts off 4096: {seen}")
        self.assertEqual(seen[-1][1] + seen[-1][2], len(data))


class Methods(Base):
    N = MiB + 4098  # off 4096, and divides by the 2 threads

    def setUp(self):
        super().setUp()
        self.h = self.handle(block_size=256 * KiB, num_threads=2)
        self.src = self.path("src")
        self.content = data_at(11, 3 * self.N)
        put_file(self.src, self.content)

    def test_sync_pread_pwrite(self):
        got = bytearray(self.N)
        self.assertEqual(self.h.sync_pread(got, self.src, 4097), 1)
        self.assertSameBytes(bytes(got), self.content[4097:4097 + self.N], "sync_pread")
        self.assertEqual(self.h.sync_pread(got, self.src), 1)  # file_offset defaults to 0
        self.assertSameBytes(bytes(got), self.content[:self.N], "sync_pread at 0")
        p = self.path("dst")
        self.assertEqual(self.h.sync_pwrite(bytes(got), p), 1)
        self.assertEqual(self.h.sync_pwrite(b"xyzw", p, 7), 1)
        want = bytearray(self.content[:self.N])
        want[7:11] = b"xyzw"
        self.assertSameBytes(file_bytes(p), bytes(want), "sync_pwrite, then 4 bytes at 7")

    def test_async_pread_pwrite(self):
        got = bytearray(self.N)
        self.assertEqual(self.h.async_pread(got, self.src, 7), 0)
        self.assertEqual(self.h.wait(), 1)
        self.assertSameBytes(bytes(got), self.content[7:7 + self.N], "async_pread")
        p = self.path("dst")
        self.assertEqual(self.h.async_pwrite(got, p, 4095), 0)
        self.assertEqual(self.h.wait(), 1)
        self.assertSameBytes(file_bytes(p), bytes(4095) + bytes(got), "async_pwrite")

    def test_pread_pwrite_flags(self):
        for validate in (False, True):
            for async_op in (False, True):
                with self.subTest(validate=validate, async_op=async_op):
                    off = 4097 if async_op else 1
                    got = bytearray(self.N)
                    ret = self.h.pread(got, self.src, validate, async_op, off)
                    if async_op:
                        self.assertEqual(ret, 0)
                        self.assertEqual(self.h.wait(), 1)
                    else:
                        self.assertEqual(ret, 1)
                    self.assertSameBytes(bytes(got), self.content[off:off + self.N], "pread")
                    p = self.path(f"dst{validate}{async_op}")
                    ret = self.h.pwrite(got, p, validate, async_op, off)
                    if async_op:
                        self.assertEqual(ret, 0)
                        self.assertEqual(self.h.wait(), 1)
                    else:
                        self.assertEqual(ret, 1)
                    self.assertSameBytes(file_bytes(p), bytes(off) + bytes(got), "pwrite")
        # DeepNVMe's order: buffer, filename, validate, async, file_offset.
        got = bytearray(6)
        self.assertEqual(self.h.pread(buffer=got, filename=self.src, validate=True,
                                      async_op=False, file_offset=3), 1)
        self.assertEqual(bytes(got), self.content[3:9])
        # DeepSpeed's keywords: async (reserved in Python, so by **), example_tenosr
        got = bytearray(6)
        self.assertEqual(self.h.pread(got, self.src, False, file_offset=5, **{"async": True}), 0)
        self.assertEqual(self.h.wait(), 1)
        self.assertEqual(bytes(got), self.content[5:11])
        self.assertEqual(self.h.pwrite(buffer=got, filename=self.path("kw"), validate=True,
                                       **{"async": False}), 1)
        for bad in ({}, {"async": True, "async_op": True}, {"async_op": True, "asink": 1}):
            with self.subTest(bad=bad), self.assertRaises(TypeError):
                self.h.pread(got, self.src, False, **bad)
        if np is not None:
            a = self.h.new_cpu_locked_tensor(num_elem=4, example_tenosr=np.empty(0, np.int32))
            self.assertEqual((a.dtype, a.shape), (np.dtype(np.int32), (4,)))
            self.assertTrue(self.h.free_cpu_locked_tensor(tensor=a))

    def test_validate_compares_with_the_file(self):
        """With I/O that moves nothing, validate reports the difference
        (EIO, naming the file) and no validation reports nothing."""
        got = bytearray(self.N)
        p = self.path("dst")
        with mock.patch.object(handle_mod._Worker, "move", lambda *a: None):
            self.assertEqual(self.h.pread(got, self.src, False, False), 1)
            with self.assertRaises(OSError) as cm:
                self.h.pread(got, self.src, True, False)
            self.assertOSError(cm, errno.EIO, self.src)
            self.assertEqual(self.h.pwrite(b"abcd", p, False, False), 1)
            with self.assertRaises(OSError) as cm:
                self.h.pwrite(b"abcd", p, True, False)
            self.assertOSError(cm, errno.EIO, p)
            self.assertEqual(self.h.pwrite(b"abcd", p, True, True), 0)
            with self.assertRaises(OSError) as cm:
                self.h.wait()
            self.assertOSError(cm, errno.EIO, p)
        self.assertEqual(self.h.wait(), 0)

    def test_read_write(self):
        """DeepNVMe's older synchronous forms: 0; read takes the file from
        file_offset to its end, which must be the buffer's size."""
        got = bytearray(len(self.content))
        self.assertEqual(self.h.read(got, self.src, False), 0)
        self.assertSameBytes(bytes(got), self.content, "read")
        got = bytearray(len(self.content) - 4097)
        self.assertEqual(self.h.read(got, self.src, True, 4097), 0)
        self.assertSameBytes(bytes(got), self.content[4097:], "read at 4097")
        with self.assertRaises(OSError) as cm:
            self.h.read(bytearray(10), self.src, False)
        self.assertOSError(cm, errno.EINVAL, self.src)
        p = self.path("dst")
        self.assertEqual(self.h.write(self.content[:self.N], p, True), 0)
        self.assertEqual(self.h.write(b"tail", p, False, self.N + 3), 0)
        self.assertSameBytes(file_bytes(p), self.content[:self.N] + bytes(3) + b"tail", "write")

    def test_wait_without_operations(self):
        self.assertEqual(self.h.wait(), 0)
        self.h.sync_pwrite(b"xy", self.path("x"))
        self.assertEqual(self.h.wait(), 0, "a synchronous operation was left pending")

    def test_writes_never_truncate(self):
        """Files are created 0600 and never truncated (DeepNVMe's open)."""
        p = self.path("dst")
        old = os.umask(0)
        try:
            self.h.sync_pwrite(b"abcd", p)
        finally:
            os.umask(old)
        self.assertEqual(os.stat(p).st_mode & 0o777, 0o600)
        put_file(p, self.content)
        self.h.sync_pwrite(b"abcd", p, 5)
        self.assertSameBytes(file_bytes(p), self.content[:5] + b"abcd" + self.content[9:],
                             "a short write into a longer file")

    def test_holes_read_as_zeros(self):
        p = self.path("sparse")
        self.assertEqual(self.h.sync_pwrite(b"end!", p, 5 * MiB + 1), 1)
        self.assertEqual(os.stat(p).st_size, 5 * MiB + 5)
        with open(p, "r+b") as f:
            f.truncate(7 * MiB)
        got = bytearray(b"x") * (7 * MiB - 4098)
        self.assertEqual(self.h.sync_pread(got, p, 4098), 1)
        want = bytes(5 * MiB + 1 - 4098) + b"end!" + bytes(2 * MiB - 5)
        self.assertSameBytes(bytes(got), want, "holes and the truncated tail")

    def test_descriptor_as_the_file(self):
        """A descriptor in place of the name: used, and left open."""
        fd = os.open(self.src, os.O_RDWR)
        try:
            got = bytearray(4098)
            self.assertEqual(self.h.sync_pread(got, fd, 4095), 1)
            self.assertSameBytes(bytes(got), self.content[4095:4095 + 4098], "read by fd")
            self.assertEqual(self.h.sync_pwrite(b"ABCDEFGH", fd, 1), 1)
            got = bytearray(len(self.content) - 3)
            self.assertEqual(self.h.read(got, fd, False, 3), 0)
            with self.assertRaises(OSError) as cm:
                self.h.read(bytearray(10), fd, False)
            self.assertOSError(cm, errno.EINVAL, f"/proc/self/fd/{fd}")
            os.fstat(fd)  # still open
        finally:
            os.close(fd)
        self.assertSameBytes(file_bytes(self.src)[:9], self.content[:1] + b"ABCDEFGH", "by fd")
        self.assertSameBytes(bytes(got[:6]), b"CDEFGH", "read() by fd")

    def test_descriptor_with_o_append(self):
        """Explicit offsets also on an O_APPEND descriptor (as the native
        client's requests): pwrite(2) there would append."""
        fd = os.open(self.src, os.O_WRONLY | os.O_APPEND)
        try:
            self.assertEqual(self.h.sync_pwrite(b"01234567", fd, 3), 1)
            self.assertEqual(self.h.sync_pwrite(data_at(12, 4096), fd, 4096), 1)
        finally:
            os.close(fd)
        want = bytearray(self.content)
        want[3:11] = b"01234567"
        want[4096:8192] = data_at(12, 4096)
        self.assertSameBytes(file_bytes(self.src), bytes(want), "written at the offsets")

    def test_no_descriptor_left(self):
        # Every thread of the handle makes its connections (on nvmefs) first.
        self.h.sync_pwrite(bytearray(self.N), self.path("warm"))
        self.h.sync_pread(bytearray(self.N), self.path("warm"))
        before = open_fds()
        for i in range(10):
            self.h.async_pread(bytearray(100), self.src, i * 4097)
            self.h.async_pwrite(data_at(i, 5000), self.path(f"n{i}"), i)
            with contextlib.redirect_stderr(io.StringIO()):  # its line about the file
                self.assertEqual(self.h.sync_pread(bytearray(2), self.path("missing")), -1)
                self.assertEqual(self.h.sync_pwrite(bytearray(3), self.path("n0")), -1)
            self.assertRaises(OSError, self.h.async_pread, bytearray(10), self.src,
                              3 * self.N - 9)
        self.assertEqual(self.h.wait(), 20)
        for i in range(10):
            self.assertEqual(self.h.sync_pwrite(b"st", self.path(f"n{i}"), i), 1)
        self.assertEqual(open_fds(), before, "descriptors left open")

    def test_sync_counts_what_it_waited_for(self):
        """As DeepNVMe's: a synchronous operation waits for every pending
        one and returns how many completed."""
        got = bytearray(100)
        self.assertEqual(self.h.async_pread(got, self.src, 5), 0)
        self.assertEqual(self.h.async_pwrite(b"a" * 10, self.path("a")), 0)
        self.assertEqual(self.h.sync_pwrite(b"b" * 10, self.path("b")), 3)
        self.assertEqual(bytes(got), self.content[5:105])
        self.assertEqual(file_bytes(self.path("a")), b"a" * 10)
        self.assertEqual(self.h.wait(), 0)


class Buffers(Base):
    """Every kind of buffer, written with the handle and read with open(),
    and the other way round."""

    def roundtrip(self, h, obj, raw, name):
        p = self.path(name)
        self.assertEqual(h.sync_pwrite(obj, p, 4097), 1)
        self.assertSameBytes(file_bytes(p), bytes(4097) + raw, f"{name} written")
        put_file(p, b"\0" * 5 + raw[::-1])
        self.assertEqual(h.sync_pread(obj, p, 5), 1)

    @need_torch
    def test_tensors_and_arrays(self):
        h = self.handle(num_threads=3)
        n = 3 * 4096 + 3
        t = torch.randn(n)  # float32: 49164 bytes
        raw = t.numpy().tobytes()
        self.roundtrip(h, t, raw, "tensor")
        self.assertSameBytes(t.numpy().tobytes(), raw[::-1], "tensor read")
        t2 = torch.arange(2 * n, dtype=torch.int64).reshape(2, n)  # 2-D, contiguous
        raw = t2.numpy().tobytes()
        self.roundtrip(h, t2, raw, "tensor2d")
        self.assertSameBytes(t2.numpy().tobytes(), raw[::-1], "2-D tensor read")
        a = np.random.default_rng(1).random(n)
        raw = a.tobytes()
        self.roundtrip(h, a, raw, "numpy")
        self.assertSameBytes(a.tobytes(), raw[::-1], "numpy read")
        s = torch.arange(100, dtype=torch.int16)[3:51]  # a contiguous slice: its bytes only
        raw = s.numpy().tobytes()
        self.roundtrip(h, s, raw, "slice")
        self.assertSameBytes(s.numpy().tobytes(), raw[::-1], "slice read")

    def test_buffer_protocol(self):
        import array
        h = self.handle(num_threads=2)
        ba = bytearray(data_at(3, 9002))
        raw = bytes(ba)
        self.roundtrip(h, ba, raw, "bytearray")
        self.assertSameBytes(bytes(ba), raw[::-1], "bytearray read")
        mv = memoryview(bytearray(data_at(4, 8194)))
        raw = bytes(mv)
        self.roundtrip(h, mv, raw, "memoryview")
        self.assertSameBytes(bytes(mv), raw[::-1], "memoryview read")
        arr = array.array("d", range(1000))
        raw = arr.tobytes()
        self.roundtrip(h, arr, raw, "array")
        self.assertSameBytes(arr.tobytes(), raw[::-1], "array read")
        m = mmap.mmap(-1, 2 * 4096)
        m[:] = data_at(5, 2 * 4096)
        raw = bytes(m)
        self.roundtrip(h, m, raw, "mmap")
        self.assertSameBytes(bytes(m), raw[::-1], "mmap read")
        m.close()

    def test_buffer_let_go_after_wait(self):
        """Once an operation is waited for, the handle holds nothing of its
        buffer: a bytearray may grow, an mmap close."""
        h = self.handle(num_threads=2)
        p = self.path("g")
        put_file(p, data_at(9, 3 * 4096))
        ba = bytearray(3 * 4096)
        h.sync_pread(ba, p)
        ba.extend(b"more")  # BufferError while an export is held
        m = mmap.mmap(-1, 3 * 4096)
        self.assertEqual(h.async_pread(m, p), 0)
        self.assertEqual(h.wait(), 1)
        self.assertEqual(m[:], data_at(9, 3 * 4096))
        m.close()
        m = mmap.mmap(-1, 3 * 4096)  # also after a failure
        with mock.patch.object(handle_mod._Worker, "move", lambda *a: None), \
                self.assertRaises(OSError):
            h.pwrite(m, p, True, False, 5)  # nothing written: validation fails
        m.close()

    def test_bytes_for_writes(self):
        h = self.handle()
        p = self.path("b")
        data = data_at(6, 12345)
        self.assertEqual(h.sync_pwrite(data, p, 1), 1)
        self.assertEqual(h.sync_pwrite(memoryview(data)[100:200], p, 20000), 1)
        want = bytes(1) + data + bytes(20000 - 12346) + data[100:200]
        self.assertSameBytes(file_bytes(p), want, "bytes and a read-only memoryview written")
        with self.assertRaises(TypeError):
            h.sync_pread(bytes(10), p)

    def test_unusable_buffers(self):
        h = self.handle()
        p = self.path("u")
        put_file(p, bytes(100000))
        cases = [("a strided memoryview", memoryview(bytearray(100))[::2])]
        if torch is not None:
            cases += [("a transposed tensor", torch.zeros(30, 40).t()),
                      ("a strided tensor", torch.zeros(100)[::2]),
                      ("a meta tensor", torch.empty(10, device="meta")),
                      ("a strided array", np.zeros(100)[::3])]
        for what, buf in cases:
            for op in (h.sync_pread, h.sync_pwrite, h.async_pread, h.async_pwrite):
                with self.subTest(what=what, op=op.__name__), self.assertRaises(ValueError):
                    op(buf, p)
        if np is not None:
            ro = np.zeros(10)
            ro.flags.writeable = False
            with self.assertRaises(ValueError):
                h.sync_pread(ro, p)
            self.assertEqual(h.sync_pwrite(ro, p), 1)  # reading it is fine
        self.assertEqual(h.wait(), 0, "a refused operation was left pending")


@need_torch
class LockedTensors(Base):
    DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
              "float64", "bool", "complex64")
    COUNTS = (0, 3, 21, 3003, 12291, 3 * (256 * KiB + 1))  # for 3 threads: multiples of 3

    def fill(self, t, seed):
        g = torch.Generator().manual_seed(seed)
        if t.dtype == torch.bool:
            t.copy_(torch.randint(0, 2, t.shape, generator=g).bool())
        elif t.dtype.is_floating_point or t.dtype.is_complex:
            t.copy_(torch.randn(t.shape, generator=g).to(t.dtype))
        else:
            t.copy_(torch.randint(-100, 100, t.shape, generator=g).to(t.dtype))

    def raw(self, t):
        n = t.numel() * t.element_size()
        return ctypes.string_at(t.data_ptr(), n) if n else b""

    def test_dtypes_counts_alignment(self):
        h = self.handle(num_threads=3)
        for name in self.DTYPES:
            dtype = getattr(torch, name)
            for n in self.COUNTS:
                with self.subTest(dtype=name, num_elem=n):
                    t = h.new_cpu_locked_tensor(n, torch.empty(3, dtype=dtype))
                    self.assertEqual((t.dtype, t.numel(), t.dim()), (dtype, n, 1))
                    self.assertTrue(t.is_contiguous())
                    self.assertEqual(t.device.type, "cpu")
                    self.assertEqual(t.data_ptr() % 4096, 0, "not page-aligned")
                    self.fill(t, n)
                    p = self.path(f"{name}.{n}")
                    self.assertEqual(h.sync_pwrite(t, p), 1)
                    self.assertSameBytes(file_bytes(p), self.raw(t), "locked tensor written")
                    u = h.new_cpu_locked_tensor(n, t)
                    self.assertEqual(h.sync_pread(u, p), 1)
                    self.assertTrue(torch.equal(t, u), "read back differs")
                    self.assertTrue(h.free_cpu_locked_tensor(t))
                    self.assertTrue(h.free_cpu_locked_tensor(u))
                    os.unlink(p)

    def test_numpy_example(self):
        h = self.handle()
        for dtype in (np.uint8, np.float16, np.float32, np.int64):
            with self.subTest(dtype=dtype):
                a = h.new_cpu_locked_tensor(4097, np.empty(0, dtype=dtype))
                self.assertIsInstance(a, np.ndarray)
                self.assertEqual((a.dtype, a.shape), (np.dtype(dtype), (4097,)))
                self.assertEqual(a.__array_interface__["data"][0] % 4096, 0)
                a[:] = np.arange(4097) % 100
                p = self.path("np")
                h.sync_pwrite(a, p)
                self.assertSameBytes(file_bytes(p), a.tobytes(), "locked array written")
                self.assertTrue(h.free_cpu_locked_tensor(a))

    def test_memory_is_locked_and_freed(self):
        h = self.handle()
        before = vm_locked_kib()
        t = h.new_cpu_locked_tensor(4 * MiB // 4, torch.empty(0, dtype=torch.float32))
        t.fill_(1.5)  # usable memory
        held = vm_locked_kib()
        self.assertGreaterEqual(held - before, 4 * MiB // KiB, "VmLck did not grow by 4 MiB")
        self.assertTrue(h.free_cpu_locked_tensor(t))
        self.assertLessEqual(vm_locked_kib(), held - 4 * MiB // KiB, "VmLck did not drop")

    def test_no_elements(self):
        h = self.handle()
        for example in (torch.empty(0, dtype=torch.float16), np.empty(0, dtype=np.int32)):
            with self.subTest(example=type(example)):
                t = h.new_cpu_locked_tensor(0, example)
                self.assertEqual((type(t), t.dtype, t.shape[0]),
                                 (type(example), example.dtype, 0))
                p = self.path("empty")
                self.assertEqual(h.sync_pwrite(t, p), 1)
                self.assertEqual(os.stat(p).st_size, 0)
                self.assertEqual(h.sync_pread(t, p), 1)
                self.assertFalse(h.free_cpu_locked_tensor(example), "not the handle's")
                self.assertTrue(h.free_cpu_locked_tensor(t))
                self.assertFalse(h.free_cpu_locked_tensor(t), "freed twice")
        with self.assertRaises(ValueError):
            h.new_cpu_locked_tensor(-1, torch.empty(0))

    def test_address_used_again(self):
        """A locked tensor freed and allocated again (at the same address,
        as a rule) moves the new tensor's bytes, through every thread."""
        h = self.handle(block_size=MiB, num_threads=3)
        p = self.path("again")
        for i in range(6):
            t = h.new_cpu_locked_tensor(3 * MiB, torch.empty(0, dtype=torch.uint8))
            t.fill_(i)
            self.assertEqual(h.sync_pwrite(t, p), 1)
            self.assertSameBytes(file_bytes(p), bytes([i]) * 3 * MiB, f"round {i} written")
            put_file(p, bytes([100 + i]) * 3 * MiB)
            self.assertEqual(h.sync_pread(t, p), 1)
            self.assertSameBytes(t.numpy().tobytes(), bytes([100 + i]) * 3 * MiB,
                                 f"round {i} read")
            self.assertTrue(h.free_cpu_locked_tensor(t))

    def test_free(self):
        """Locked tensors belong to the process, not to a handle: DeepSpeed
        0.19's pinned-tensor manager is process-wide
        (csrc/pin_memory/deepspeed_pin_tensor.h, deepspeed_pin_tensor_t::
        shared(); its test_pinned_manager.py test_buffer_is_shared_across_
        handles), so any handle frees any handle's tensor, once."""
        h, other = self.handle(), self.handle()
        t = h.new_cpu_locked_tensor(100, torch.empty(0))
        o = other.new_cpu_locked_tensor(100, torch.empty(0))
        self.assertFalse(h.free_cpu_locked_tensor(torch.zeros(100)), "an ordinary tensor")
        self.assertFalse(h.free_cpu_locked_tensor(o[1:]), "not an allocation's start")
        self.assertTrue(h.free_cpu_locked_tensor(o), "another handle's tensor")
        self.assertFalse(other.free_cpu_locked_tensor(o), "freed twice")
        self.assertTrue(h.free_cpu_locked_tensor(t))
        self.assertFalse(h.free_cpu_locked_tensor(t), "freed twice")


class Async(Base):
    def test_outstanding_then_wait(self):
        h = self.handle(block_size=64 * KiB, queue_depth=8, num_threads=3)
        sources = []
        for i in range(3):
            p = self.path(f"in{i}")
            put_file(p, data_at(100 + i, 2 * MiB + i))
            sources.append(p)
        n3 = lambda n: n - n % 3  # noqa: E731 - sizes that divide by the 3 threads
        writes = [(self.path(f"out{i}"), data_at(200 + i, n3(MiB + 4097 * i)), 4095 * i)
                  for i in range(4)]
        reads = [(p, bytearray(n3(2 * MiB + i - 7 * i)), 7 * i) for i, p in enumerate(sources)]
        rets = [h.async_pwrite(d, p, off) for p, d, off in writes]
        rets += [h.async_pread(b, p, off) for p, b, off in reads]
        rets.append(h.pwrite(b"validated", self.path("v"), True, True, 3))
        rets.append(h.pread(bytearray(3), sources[0], True, True, 2 * MiB - 3))
        self.assertEqual(rets, [0] * 9)
        self.assertEqual(h.wait(), 9)
        for p, d, off in writes:
            self.assertSameBytes(file_bytes(p), bytes(off) + d, f"async write {p}")
        for i, (p, b, off) in enumerate(reads):
            self.assertSameBytes(bytes(b), file_bytes(p)[off:off + len(b)], f"async read {p}")
        self.assertSameBytes(file_bytes(self.path("v")), bytes(3) + b"validated", "validated")
        self.assertEqual(h.wait(), 0)

    def test_async_returns_before_the_io(self):
        """async_* return at once with the I/O held back; wait() blocks
        until it is done (and lets other Python threads run meanwhile)."""
        h = self.handle(num_threads=2)
        gate = threading.Event()
        real = handle_mod._Worker.move

        def held_back(worker, op, start, length):
            gate.wait(20)
            real(worker, op, start, length)

        p = self.path("later")
        data = data_at(7, 100000)
        with mock.patch.object(handle_mod._Worker, "move", held_back):
            self.assertEqual(h.async_pwrite(data, p), 0)
            got = bytearray(100)
            put_file(self.path("src"), b"s" * 100)
            self.assertEqual(h.async_pread(got, self.path("src")), 0)
            time.sleep(0.1)
            self.assertEqual(os.path.getsize(p), 0, "written before the I/O was let go")
            self.assertEqual(bytes(got), bytes(100), "read before the I/O was let go")
            threading.Timer(0.2, gate.set).start()
            t0 = time.monotonic()
            self.assertEqual(h.wait(), 2)
            self.assertGreater(time.monotonic() - t0, 0.1, "wait() did not wait")
        self.assertSameBytes(file_bytes(p), data, "written")
        self.assertEqual(bytes(got), b"s" * 100)

    def test_failure_raised_by_wait(self):
        """An asynchronous operation's I/O failure comes out of wait(),
        after every operation is done, naming its file."""
        h = self.handle()
        real = handle_mod._Worker.move
        bad = self.path("bad")

        def failing(worker, op, start, length):
            if op.filename == bad:
                raise OSError(errno.EIO, "injected", op.filename)
            real(worker, op, start, length)

        with mock.patch.object(handle_mod._Worker, "move", failing):
            self.assertEqual(h.async_pwrite(b"1" * 5000, self.path("good1")), 0)
            self.assertEqual(h.async_pwrite(b"2" * 5000, bad), 0)
            self.assertEqual(h.async_pwrite(b"3" * 5000, self.path("good2")), 0)
            with self.assertRaises(OSError) as cm:
                h.wait()
            self.assertOSError(cm, errno.EIO, bad)
        self.assertEqual(file_bytes(self.path("good2")), b"3" * 5000)
        self.assertEqual(h.wait(), 0)
        self.assertEqual(h.sync_pwrite(b"ok", bad), 1, "the handle works on after a failure")


class Threads(Base):
    """One handle shared by many threads, as ZeRO-Infinity's swappers share
    theirs (issue 32): every synchronous call returns 1 only once its own
    bytes are there, whatever the other threads do meanwhile."""

    THREADS, ROUNDS = 8, 150

    def _run_threads(self, body):
        errors = []

        def guarded(t):
            try:
                body(t)
            except BaseException as e:  # noqa: B902 - reported below
                errors.append(f"thread {t}: {type(e).__name__}: {e}")

        threads = [threading.Thread(target=guarded, args=(t,)) for t in range(self.THREADS)]
        # The interpreter hands the GIL over every microsecond instead of
        # every 5 ms: the threads' calls interleave at many more points.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        finally:
            sys.setswitchinterval(interval)
        self.assertEqual(errors, [])

    def _shared_sync(self, num_threads):
        h = self.handle(block_size=64 * KiB, queue_depth=4, num_threads=num_threads)
        counts = []

        def body(t):
            path = self.path(f"t{t}")
            buf = bytearray(24 * KiB + 3 + 4098 * t)  # divides by 3
            for r in range(self.ROUNDS):
                want = data_at(1000 * t + r, len(buf))
                off = 4096 * (r % 3) + 13 * (r % 2)
                got_w = h.sync_pwrite(want, path, off)
                got_r = h.sync_pread(buf, path, off)
                counts.append((got_w, got_r))
                if bytes(buf) != want:
                    raise AssertionError(f"round {r}: read {first_difference(bytes(buf), want)} "
                                         "bytes as written, then other bytes")

        self._run_threads(body)
        wrong = [c for c in counts if c != (1, 1)]
        self.assertEqual(len(counts), self.THREADS * self.ROUNDS)
        self.assertEqual(wrong, [], f"{len(wrong)} of {len(counts)} calls did not return 1")
        self.assertEqual(h.wait(), 0)

    def test_shared_handle_sync_1_thread(self):
        self._shared_sync(1)

    def test_shared_handle_sync_3_threads(self):
        self._shared_sync(3)

    def test_async_from_threads_then_one_wait(self):
        """Asynchronous operations of many threads are all counted by the
        one wait() that collects them, each exactly once."""
        h = self.handle(block_size=64 * KiB, queue_depth=4, num_threads=2)
        per = 5

        def body(t):
            for r in range(per):
                self.assertEqual(h.async_pwrite(data_at(t * 100 + r, 70 * KiB + 2 * r),
                                                self.path(f"a{t}.{r}")), 0)

        self._run_threads(body)
        self.assertEqual(h.wait(), self.THREADS * per)
        self.assertEqual(h.wait(), 0)
        for t in range(self.THREADS):
            for r in range(per):
                self.assertSameBytes(file_bytes(self.path(f"a{t}.{r}")),
                                     data_at(t * 100 + r, 70 * KiB + 2 * r), f"a{t}.{r}")


class DeepSpeedApi(Base):
    """What DeepSpeed 0.19's async_io op (csrc/aio/py_lib/py_ds_aio.cpp) has
    beyond DeepNVMe's tutorial, and its return codes (issue 32)."""

    def test_intra_op_parallelism(self):
        """The constructor's fifth argument, by position or name; the older
        num_threads keyword the same; each getter's name."""
        for h in (self.handle(4096, 8, False, False, 3),
                  self.handle(intra_op_parallelism=3),
                  self.handle(block_size=4096, num_threads=3),
                  self.handle(intra_op_parallelism=3, num_threads=3)):
            self.assertEqual((h.get_intra_op_parallelism(), h.get_thread_count()), (3, 3))
            self.assertEqual(len(h._workers), 3)
        self.assertEqual(self.handle().get_intra_op_parallelism(), 1)

    def test_alignment(self):
        """get_alignment(): whole pages for each thread, a multiple of
        DeepSpeed's 512 x intra_op_parallelism; a size of it splits into
        page-aligned parts."""
        for n in (1, 2, 3):
            h = self.handle(block_size=65536, num_threads=n)
            a = h.get_alignment()
            self.assertEqual(a, n * 4096)
            self.assertEqual(a % (n * 512), 0)
            self.assertTrue(all(s % 4096 == 0 and ln % 4096 == 0
                                for s, ln in h._parts(5 * a)), h._parts(5 * a))

    @need_torch
    def test_is_pinned(self):
        """A locked tensor, any view inside it, of this handle or another,
        is pinned; ordinary memory is not."""
        h, other = self.handle(), self.handle()
        t = h.new_cpu_locked_tensor(4096, torch.empty(0, dtype=torch.float32))
        a = h.new_cpu_locked_tensor(100, np.empty(0, dtype=np.int16))
        try:
            for what, buf, want in (("a locked tensor", t, True),
                                    ("a view inside it", t.narrow(0, 1024, 1024), True),
                                    ("its last element", t[-1:], True),
                                    ("a locked numpy array", a, True),
                                    ("a slice of it", a[3:7], True),
                                    ("a tensor", torch.empty(4096), False),
                                    ("an array", np.empty(10), False),
                                    ("a bytearray", bytearray(10), False)):
                with self.subTest(what=what):
                    self.assertIs(h.is_pinned(buf), want)
                    self.assertIs(other.is_pinned(buf), want, "another handle differs")
        finally:
            h.free_cpu_locked_tensor(t)
            h.free_cpu_locked_tensor(a)
        self.assertFalse(h.is_pinned(t), "a freed tensor is still pinned")

    @need_torch
    def test_pin_handle(self):
        """DeepSpeed's pin_memory op: the same process-wide tensors."""
        p, h = nvmefs.pin_handle(), self.handle()
        t = p.new_cpu_locked_tensor(3000, torch.empty(0, dtype=torch.float16))
        self.assertEqual((t.dtype, t.numel(), t.data_ptr() % 4096), (torch.float16, 3000, 0))
        self.assertTrue(p.is_pinned(t) and h.is_pinned(t) and h.is_pinned(t[5:9]))
        t.copy_(torch.arange(3000, dtype=torch.float16))
        self.assertEqual(h.sync_pwrite(t, self.path("p")), 1)
        self.assertSameBytes(file_bytes(self.path("p")), t.numpy().tobytes(), "written")
        self.assertTrue(h.free_cpu_locked_tensor(t), "an aio_handle frees a pin_handle's")
        self.assertFalse(p.free_cpu_locked_tensor(t), "freed twice")
        u = h.new_cpu_locked_tensor(10, torch.empty(0, dtype=torch.uint8))
        self.assertFalse(p.free_cpu_locked_tensor_by_ptr(u.data_ptr() + 1))
        self.assertTrue(p.free_cpu_locked_tensor_by_ptr(u.data_ptr()))
        self.assertFalse(p.free_cpu_locked_tensor_by_ptr(u.data_ptr()), "freed twice")

    @need_torch
    def test_async_pwrite_on_a_descriptor(self):
        """async_pwrite(buffer, fd, file_offset), the descriptor by position
        or fd=, as DeepSpeed's TestAsyncFileOffset: 1 KiB pieces of a
        locked tensor at 1 KiB offsets, through a descriptor opened
        O_DIRECT, left open."""
        h = self.handle(block_size=1024, queue_depth=2, num_threads=2)
        data = torch.frombuffer(bytearray(data_at(60, 4096)), dtype=torch.uint8)
        t = h.new_cpu_locked_tensor(4096, data)
        t.copy_(data)
        p = self.path("fd")
        for k, (start, n) in enumerate(((0, 1024), (1024, 2048), (3072, 1024))):
            flags = os.O_CREAT | os.O_WRONLY | (os.O_DIRECT if k != 1 else 0)
            try:
                fd = os.open(p, flags)
            except OSError:  # a filesystem that refuses O_DIRECT
                fd = os.open(p, os.O_CREAT | os.O_WRONLY)
            try:
                piece = torch.narrow(t, 0, start, n)
                if k == 0:
                    self.assertEqual(h.async_pwrite(piece, fd, start), 0)
                else:
                    self.assertEqual(h.async_pwrite(buffer=piece, fd=fd, file_offset=start), 0)
                self.assertEqual(h.wait(), 1)
                os.fstat(fd)  # still open
            finally:
                os.close(fd)
            self.assertSameBytes(file_bytes(p), data_at(60, start + n), f"after piece {k}")
        self.assertEqual(h.async_pwrite(buffer=t, filename=p, file_offset=1), 0)
        self.assertEqual(h.wait(), 1)
        for bad in ({}, {"filename": p, "fd": 3}):
            with self.subTest(bad=bad), self.assertRaises(TypeError):
                h.async_pwrite(t, **bad)
        h.free_cpu_locked_tensor(t)

    def test_size_not_divisible_by_the_threads(self):
        """-1 and a line on stderr, as DeepSpeed's _is_valid_parallel_aio_op
        (deepspeed_py_io_handle.cpp): nothing read, written, created or
        left pending. read() and write(), not parallel, take any size; a
        read past the end is refused first (DeepSpeed asserts first)."""
        h = self.handle(block_size=4096, num_threads=3)
        src, dst = self.path("src"), self.path("dst")
        put_file(src, data_at(61, 20000))
        fd = os.open(src, os.O_WRONLY)
        try:
            for what, call in (
                    ("sync_pread", lambda b: h.sync_pread(b, src, 1)),
                    ("async_pread", lambda b: h.async_pread(b, src)),
                    ("pread", lambda b: h.pread(b, src, True, False, 7)),
                    ("sync_pwrite", lambda b: h.sync_pwrite(b, dst)),
                    ("async_pwrite", lambda b: h.async_pwrite(b, dst, 5)),
                    ("async_pwrite fd", lambda b: h.async_pwrite(b, fd=fd)),
                    ("pwrite", lambda b: h.pwrite(b, dst, False, True))):
                for n in (1, 4097, 10000):
                    with self.subTest(what=what, n=n):
                        buf = bytearray(b"u") * n
                        err = io.StringIO()
                        with contextlib.redirect_stderr(err):
                            self.assertEqual(call(buf), -1)
                        self.assertIn("do not divide by intra_op_parallelism 3", err.getvalue())
                        self.assertEqual(buf, bytearray(b"u") * n, "read into")
        finally:
            os.close(fd)
        self.assertEqual(h.wait(), 0)
        self.assertFalse(os.path.exists(dst), "created")
        self.assertSameBytes(file_bytes(src), data_at(61, 20000), "written")
        with self.assertRaises(OSError) as cm:
            h.sync_pread(bytearray(20000), src, 1)  # past the end and indivisible
        self.assertOSError(cm, errno.EINVAL, src)
        got = bytearray(19999)
        self.assertEqual(h.read(got, src, True, 1), 0)
        self.assertSameBytes(bytes(got), data_at(61, 20000)[1:], "read()")
        self.assertEqual(h.write(got, dst, True, 3), 0)
        self.assertSameBytes(file_bytes(dst), bytes(3) + bytes(got), "write()")
        self.assertEqual(h.sync_pread(bytearray(9999), src, 1), 1)  # divisible: fine

    def test_aio_read_write(self):
        """The op's module-level aio_read and aio_write
        (deepspeed_py_aio.cpp): the whole file, 0, with validation."""
        p = self.path("m")
        data = data_at(62, 3 * MiB + 5)
        for validate in (False, True):
            with self.subTest(validate=validate):
                self.assertEqual(nvmefs.aio_write(data, p, 65536, 8, False, True, validate), 0)
                self.assertSameBytes(file_bytes(p), data, "aio_write")
                got = bytearray(len(data))
                self.assertEqual(nvmefs.aio_read(got, p, 65536, 8, True, False, validate), 0)
                self.assertSameBytes(bytes(got), data, "aio_read")
        with self.assertRaises(OSError) as cm:  # DeepSpeed asserts: the file's size
            nvmefs.aio_read(bytearray(10), p, 65536, 8, False, False, False)
        self.assertOSError(cm, errno.EINVAL, p)

    @need_torch
    def test_deepspeed_memcpy(self):
        """deepspeed_py_copy.cpp: dest.size(0) float32s from src into dest;
        0. ValueError where DeepSpeed would copy past either tensor or into
        a temporary (a dest that is not contiguous)."""
        src = torch.randn(1000)
        dest = torch.zeros(1000)
        self.assertEqual(nvmefs.deepspeed_memcpy(dest, src), 0)
        self.assertTrue(torch.equal(dest, src))
        src2 = torch.randn(2000)[::2]  # not contiguous: its contiguous copy is read
        self.assertEqual(nvmefs.deepspeed_memcpy(dest, src2), 0)
        self.assertTrue(torch.equal(dest, src2))
        d2 = torch.zeros(4, 5)  # size(0) = 4 float32s, as DeepSpeed's
        s2 = torch.randn(4, 5)
        self.assertEqual(nvmefs.deepspeed_memcpy(d2, s2), 0)
        self.assertTrue(torch.equal(d2.reshape(-1)[:4], s2.reshape(-1)[:4]))
        self.assertTrue(torch.equal(d2.reshape(-1)[4:], torch.zeros(16)))
        for what, d, s in (("dest not contiguous", torch.zeros(10, 4).t(), torch.zeros(40)),
                           ("src too small", torch.zeros(100), torch.zeros(99)),
                           ("dest of 1-byte elements", torch.zeros(100, dtype=torch.uint8),
                            torch.zeros(100))):
            with self.subTest(what=what), self.assertRaises(ValueError):
                nvmefs.deepspeed_memcpy(d, s)

    @need_torch
    def test_blocking_calls_release_the_gil(self):
        """DeepSpeed's test_aio_gil.py test_blocking_aio_releases_gil on
        CPU tensors (theirs needs CUDA-pinned memory): with the switch
        interval at 60 s another thread runs only if a blocking call lets
        go of the GIL."""
        h = self.handle(4096, 2, True, True, 2)
        payload = data_at(63, 4096)
        src, dst = self.path("gsrc"), self.path("gdst")
        put_file(src, payload)
        for name in ("pread", "pwrite", "sync_pread", "sync_pwrite"):
            with self.subTest(op=name):
                read = "pread" in name
                buf = (torch.zeros(4096, dtype=torch.uint8) if read
                       else torch.frombuffer(bytearray(payload), dtype=torch.uint8))
                path = src if read else dst
                call = {"pread": lambda: h.pread(buf, path, False, False, 0),
                        "pwrite": lambda: h.pwrite(buf, path, False, False, 0),
                        "sync_pread": lambda: h.sync_pread(buf, path, 0),
                        "sync_pwrite": lambda: h.sync_pwrite(buf, path, 0)}[name]
                ready, ran, gate = threading.Event(), threading.Event(), threading.Lock()
                gate.acquire()

                def peer():
                    ready.set()
                    with gate:
                        ran.set()

                th = threading.Thread(target=peer)
                th.start()
                self.assertTrue(ready.wait(5))
                interval = sys.getswitchinterval()
                try:
                    sys.setswitchinterval(60)
                    gate.release()
                    # Calls until the peer has run, for at most 10 s (well
                    # inside the 60 s interval, so nothing but a call that
                    # lets go lets it run): on a loaded machine the peer may
                    # not get a CPU while one short read is in the kernel,
                    # and 32 calls were once not enough.
                    until = time.monotonic() + 10
                    while not ran.is_set() and time.monotonic() < until:
                        self.assertEqual(call(), 1)
                    self.assertTrue(ran.is_set(), f"{name} held the GIL in every call")
                finally:
                    sys.setswitchinterval(interval)
                    th.join(5)
                want = payload
                got = bytes(buf.numpy()) if read else file_bytes(dst)
                self.assertSameBytes(got, want, name)

    def test_reads_beside_locked_tensor_management(self):
        """test_aio_gil.py's test_concurrent_unpinned_read_and_locked_tensor_
        management on CPU memory: reads on one thread, locked tensors made
        and freed on another, one handle."""
        if np is None:
            self.skipTest("numpy is not installed")
        h = self.handle(4096, 2, True, True, 2)
        payload = data_at(64, 4096)
        put_file(self.path("s"), payload)
        buf = bytearray(4096)
        start = threading.Barrier(2, timeout=30)
        errors = []

        def reads():
            start.wait()
            for _ in range(32):
                if h.sync_pread(buf, self.path("s"), 0) != 1:
                    errors.append("a read did not return 1")

        def manage():
            start.wait()
            for _ in range(32):
                t = h.new_cpu_locked_tensor(4096, np.empty(1, dtype=np.uint8))
                if not h.free_cpu_locked_tensor(t):
                    errors.append("a free returned False")

        threads = [threading.Thread(target=f) for f in (reads, manage)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        self.assertEqual(errors, [])
        self.assertEqual(bytes(buf), payload)


class Gpu(Base):
    """CUDA tensors through locked host memory (_bounce.py): the pipeline
    with a host copier standing in for CUDA's copies (runs everywhere),
    and real CUDA tensors where torch has CUDA."""

    def fake_device(self, tensors, chunk):
        """Patches: tensors (by id) take the device path with a copier that
        copies on the host; the bounce buffers hold chunk bytes."""
        copiers = []
        ids = {id(t) for t in tensors}

        def copier(buf):
            if id(buf) not in ids:
                return None
            c = handle_mod._bounce.HostCopier(buf)
            copiers.append(c)
            return c
        return copiers, [mock.patch.object(handle_mod._bounce, "device_copier", copier),
                         mock.patch.object(handle_mod._bounce, "CHUNK", chunk)]

    @need_torch
    def test_pipeline_with_a_host_copier(self):
        from nvmefs import _pinned

        h = self.handle(block_size=16 * KiB, queue_depth=4, num_threads=2)
        n = 5 * 64 * KiB + 4098  # 6 chunks of 64 KiB, the last one short
        src = torch.frombuffer(bytearray(data_at(70, n)), dtype=torch.uint8)
        floats = torch.randn(3 * 64 * KiB // 4 + 6)  # float32, 3 chunks and a bit
        dst = torch.zeros(n, dtype=torch.uint8)
        dstf = torch.zeros_like(floats)
        odd = torch.zeros(3, dtype=torch.uint8)  # 3 bytes do not divide by 2 threads
        locked_before = dict(_pinned.MANAGER._locked)
        copiers, patches = self.fake_device([src, floats, dst, dstf, odd], 64 * KiB)
        p, pf = self.path("g"), self.path("gf")
        with patches[0], patches[1]:
            self.assertEqual(h.sync_pwrite(src, p, 4097), 1)
            self.assertSameBytes(file_bytes(p), bytes(4097) + data_at(70, n), "written")
            self.assertEqual(copiers[-1].copies, 6, "a copy per chunk")
            self.assertEqual(h.async_pread(dst, p, 4097), 0)
            self.assertEqual(h.pwrite(floats, pf, True, True), 0)  # validated
            self.assertEqual(h.wait(), 2)
            self.assertTrue(torch.equal(dst, src), "read back")
            self.assertSameBytes(file_bytes(pf), floats.numpy().tobytes(), "floats written")
            self.assertEqual(h.pread(dstf, pf, True, False), 1)
            self.assertTrue(torch.equal(dstf, floats), "floats read back")
            # DeepSpeed's checks and codes hold for device tensors too
            with contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(h.sync_pread(dst, self.path("missing")), -1)
                self.assertEqual(h.sync_pwrite(odd, p), -1)
            # a failure in the file I/O of a chunk comes out of wait()
            real = handle_mod._Worker.move

            def failing(worker, op, start, length):
                if op.offset >= 4097 + 2 * 64 * KiB:
                    raise OSError(errno.EIO, "injected", op.filename)
                real(worker, op, start, length)

            with mock.patch.object(handle_mod._Worker, "move", failing):
                self.assertEqual(h.async_pread(dst, p, 4097), 0)
                with self.assertRaises(OSError) as cm:
                    h.wait()
                self.assertOSError(cm, errno.EIO, p)
            self.assertEqual(h.sync_pread(dst, p, 4097), 1, "works on after a failure")
        self.assertEqual(dict(_pinned.MANAGER._locked), locked_before, "bounce buffers left")

    @unittest.skipUnless(torch is not None and torch.cuda.is_available(),
                         "torch has no CUDA device here (torch.cuda.is_available() is False)")
    def test_cuda_tensors(self):
        h = self.handle(block_size=MiB, queue_depth=8, num_threads=2)
        dev = torch.device("cuda")
        n = 3 * (64 << 20) // 2 + 4098  # more than 2 bounce chunks
        host = torch.frombuffer(bytearray(os.urandom(n)), dtype=torch.uint8)
        t = host.to(dev)
        p = self.path("cuda")
        self.assertEqual(h.sync_pwrite(t, p, 4096), 1)
        self.assertSameBytes(file_bytes(p)[4096:], host.numpy().tobytes(),
                             "a CUDA tensor written")
        u = torch.zeros(n, dtype=torch.uint8, device=dev)
        self.assertEqual(h.async_pread(u, p, 4096), 0)
        self.assertEqual(h.wait(), 1)
        self.assertTrue(torch.equal(u.cpu(), host), "a CUDA tensor read")
        f = torch.randn(1 << 20, device=dev, dtype=torch.float16)
        self.assertEqual(h.pwrite(f, p, True, False), 1)
        g = torch.empty_like(f)
        self.assertEqual(h.pread(g, p, True, False), 1)
        self.assertTrue(torch.equal(f, g), "float16 on the GPU")
        self.assertFalse(h.is_pinned(f))


class Errors(Base):
    def test_missing_file(self):
        """-1 and a line on stderr naming the file, as DeepSpeed's
        (deepspeed_py_io_handle.cpp: pread returns -1 when get_file_size
        fails, pwrite when open_file does; read and write likewise; its
        report_file_error prints the name), for every method, async too:
        nothing is left pending."""
        h = self.handle()
        p, d = self.path("missing"), self.path("no/such/dir")
        for what, call, name in (
                ("sync_pread", lambda: h.sync_pread(bytearray(10), p), p),
                ("async_pread", lambda: h.async_pread(bytearray(10), p), p),
                ("pread", lambda: h.pread(bytearray(10), p, True, False, 0), p),
                ("read", lambda: h.read(bytearray(10), p, False), p),
                ("sync_pwrite", lambda: h.sync_pwrite(b"x", d), d),
                ("async_pwrite", lambda: h.async_pwrite(b"x", d), d),
                ("pwrite", lambda: h.pwrite(b"x", d, True, True), d),
                ("write", lambda: h.write(b"x", d, False), d),
                ("aio_read", lambda: nvmefs.aio_read(bytearray(10), p, 4096, 8, False, False,
                                                     False), p),
                ("aio_write", lambda: nvmefs.aio_write(b"x", d, 4096, 8, False, False,
                                                       False), d)):
            with self.subTest(what=what):
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    self.assertEqual(call(), -1)
                self.assertIn(name, err.getvalue())
                self.assertIn("No such file or directory", err.getvalue())
        self.assertEqual(h.wait(), 0)
        self.assertFalse(os.path.exists(p))

    def test_read_past_the_end(self):
        h = self.handle(num_threads=3)
        p = self.path("short")
        put_file(p, data_at(8, 9999))
        # DeepSpeed asserts on these, before its check of the split (so
        # also for sizes that do not divide by the 3 threads).
        for n, off in ((10000, 0), (1, 9999), (4096, 8000), (1, 1 << 40)):
            with self.subTest(n=n, off=off):
                with self.assertRaises(OSError) as cm:
                    h.sync_pread(bytearray(n), p, off)
                self.assertOSError(cm, errno.EINVAL, p)
                with self.assertRaises(OSError) as cm:
                    h.async_pread(bytearray(n), p, off)
                self.assertOSError(cm, errno.EINVAL, p)
        with self.assertRaises(OSError) as cm:
            h.sync_pread(bytearray(1), p, -1)
        self.assertOSError(cm, errno.EINVAL, p)
        got = bytearray(9999)  # exactly to the end is fine
        self.assertEqual(h.sync_pread(got, p), 1)
        self.assertEqual(h.wait(), 0)

    def test_not_a_regular_file(self):
        h = self.handle()
        with self.assertRaises(OSError) as cm:
            h.sync_pread(bytearray(0), self.dir)
        self.assertOSError(cm, errno.EINVAL, self.dir)
        with contextlib.redirect_stderr(io.StringIO()):
            # DeepSpeed's open_file fails (EISDIR): -1
            self.assertEqual(h.sync_pwrite(b"x", self.dir), -1)
        with self.assertRaises(OSError) as cm:  # opened, but no file to write
            h.sync_pwrite(b"x", "/dev/null")
        self.assertOSError(cm, errno.EINVAL, "/dev/null")

    def test_read_only_directory(self):
        """EACCES for a user the modes deny: root is not one (it has
        CAP_DAC_OVERRIDE), so as root the operations run in a child as
        nobody (65534), after that child showed it can write where it may."""
        ro, rw = self.path("ro"), self.path("rw")
        os.mkdir(ro)
        os.mkdir(rw)
        secret = self.path("secret")
        put_file(secret, b"s" * 100)
        os.chmod(secret, 0)  # unreadable also for its owner (no CAP_DAC_OVERRIDE)
        os.chmod(ro, 0o555)
        os.chmod(rw, 0o777)
        os.chmod(self.dir, 0o711)
        if os.geteuid() != 0:
            if os.access(ro, os.W_OK):
                self.skipTest(f"uid {os.geteuid()} may write into a 0555 directory "
                              "(CAP_DAC_OVERRIDE?): no user to test EACCES with")
            out = as_user_checks(ro, rw, secret)
        else:
            out = self.run_as_nobody(ro, rw, secret)
        self.assertEqual(out["control"], 1, f"nobody's write into a 0777 directory: {out}")
        st = os.stat(os.path.join(rw, "ok"))
        self.assertEqual(st.st_uid, os.geteuid() if os.geteuid() else NOBODY)
        self.assertEqual(file_bytes(os.path.join(rw, "ok")), b"c" * 5000)
        # DeepSpeed's open_file fails (EACCES): -1, and the file named on stderr
        for what in ("sync_pwrite", "async_pwrite", "pwrite_validate"):
            self.assertEqual(out[what], [-1, os.path.join(ro, what)], what)
        self.assertEqual(out["sync_pread"], [-1, secret])
        self.assertEqual(os.listdir(ro), [], "something was created in the 0555 directory")

    def run_as_nobody(self, ro, rw, secret):
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(nvmefs.__file__)))
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pkg, "PYTHONDONTWRITEBYTECODE": "1"}
        if "NVMEFS_LIBRARY" in os.environ:
            env["NVMEFS_LIBRARY"] = os.environ["NVMEFS_LIBRARY"]
        kw = dict(user=NOBODY, group=NOBODY, extra_groups=[], env=env, capture_output=True,
                  text=True, timeout=60, cwd="/")
        probe = subprocess.run([sys.executable, "-c", "import nvmefs"], **kw)
        if probe.returncode:
            self.skipTest(f"user {NOBODY} cannot import nvmefs from {pkg} "
                          f"(a directory it may not read?): {probe.stderr.strip()[-300:]}")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--as-user", ro, rw,
                            secret], **kw)
        self.assertEqual(r.returncode, 0, f"the child as nobody failed: {r.stderr}")
        return json.loads(r.stdout)


def as_user_checks(ro, rw, secret):
    """What test_read_only_directory's user sees: {check: [errno, filename]}."""
    h = nvmefs.aio_handle()
    out = {"control": h.sync_pwrite(b"c" * 5000, os.path.join(rw, "ok"))}
    calls = {"sync_pwrite": lambda p: h.sync_pwrite(b"x" * 5000, p),
             "async_pwrite": lambda p: h.async_pwrite(b"x" * 5000, p),
             "pwrite_validate": lambda p: h.pwrite(b"x" * 5000, p, True, False, 4097),
             "sync_pread": lambda p: h.sync_pread(bytearray(100), secret)}
    for what, call in calls.items():
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                ret = call(os.path.join(ro, what))
            name = os.path.join(ro, what) if "write" in what else secret
            out[what] = [ret, name if f"{name}: Permission denied" in err.getvalue()
                         else err.getvalue()]
        except OSError as e:
            out[what] = [e.errno, e.filename]
    out["pending"] = h.wait()
    h.close()
    return out


class Native(Base):
    """On an nvmefs mount: the native client moves the bytes (the daemon's
    counters), zero copy for locked tensors at aligned offsets."""

    def setUp(self):
        if ARGS.native == "none":
            self.skipTest("not an nvmefs mount (--native none)")
        super().setUp()

    @need_torch
    def test_locked_tensor_zero_copy(self):
        h = self.handle(num_threads=3)
        n = 3 * MiB
        t = h.new_cpu_locked_tensor(n, torch.empty(0, dtype=torch.uint8))
        t.copy_(torch.frombuffer(bytearray(data_at(21, n)), dtype=torch.uint8))
        p = self.path("zc")
        s0 = native_stats()
        self.assertEqual(h.sync_pwrite(t, p, MiB), 1)
        d = stats_delta(s0, native_stats())
        if ARGS.native == "all":
            self.assertEqual(d["write_bytes"], n, f"native counters: {d}")
            self.assertGreaterEqual(d["writes"], 3, f"3 threads' writes: {d}")
        else:  # -o writeback: native writes are refused
            self.assertEqual(d["write_bytes"], 0, f"native counters: {d}")
        self.assertEqual(d["copied_bytes"], 0, f"bytes copied in the daemon: {d}")
        self.assertSameBytes(file_bytes(p), bytes(MiB) + self.raw(t), "written")
        u = h.new_cpu_locked_tensor(n, t)
        s0 = native_stats()
        self.assertEqual(h.sync_pread(u, p, MiB), 1)
        d = stats_delta(s0, native_stats())
        self.assertEqual(d["read_bytes"], n, f"native counters: {d}")
        self.assertEqual(d["copied_bytes"], 0, f"bytes copied in the daemon: {d}")
        self.assertTrue(torch.equal(t, u))
        h.free_cpu_locked_tensor(t)
        h.free_cpu_locked_tensor(u)

    def raw(self, t):
        return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())

    def test_other_buffers_and_unaligned_ranges(self):
        """Ordinary buffers and unaligned ranges go native too; the daemon
        copies (and counts) only the unaligned ones."""
        h = self.handle()
        p = self.path("u")
        s0 = native_stats()
        data = data_at(22, 3 * 4096)
        self.assertEqual(h.sync_pwrite(bytearray(data), p, 4096), 1)
        d = stats_delta(s0, native_stats())
        if ARGS.native == "all":
            self.assertEqual(d["write_bytes"], len(data), f"native counters: {d}")
        self.assertEqual(d["copied_bytes"], 0, f"an aligned range copied in the daemon: {d}")
        s0 = native_stats()
        self.assertEqual(h.sync_pwrite(b"odd" * 1000, p, 7), 1)
        d = stats_delta(s0, native_stats())
        if ARGS.native == "all":
            self.assertEqual(d["write_bytes"], 3000, f"native counters: {d}")
            self.assertGreater(d["copied_bytes"], 0, f"unaligned, not copied? {d}")
        want = bytes(7) + b"odd" * 1000 + bytes(4096 - 3007) + data
        self.assertSameBytes(file_bytes(p), want, "written")
        got = bytearray(4097)
        s0 = native_stats()
        self.assertEqual(h.sync_pread(got, p, 4095), 1)
        d = stats_delta(s0, native_stats())
        self.assertEqual(d["read_bytes"], 4097, f"native counters: {d}")
        self.assertGreater(d["copied_bytes"], 0, f"unaligned, not copied? {d}")
        self.assertSameBytes(bytes(got), want[4095:4095 + 4097], "read")

    def wait_clients(self, n):
        """The daemon's count of connected clients once it is n (a client
        that detached is counted until the daemon's thread for it ends)."""
        end = time.monotonic() + 5
        while native_stats()["clients"] != n and time.monotonic() < end:
            time.sleep(0.05)
        return native_stats()["clients"]

    def test_one_client_per_thread(self):
        """A connection per thread of the handle, all closed by close().
        (Every handle of the earlier tests is closed.)"""
        self.assertEqual(self.wait_clients(0), 0, "clients left by closed handles")
        s0 = native_stats()
        h = nvmefs.aio_handle(block_size=MiB, num_threads=3)
        try:
            p = self.path("c")
            put_file(p, data_at(23, 3 * MiB))
            got = bytearray(3 * MiB)
            h.sync_pread(got, p)
            self.assertSameBytes(bytes(got), data_at(23, 3 * MiB), "read")
            d = stats_delta(s0, native_stats())
            self.assertEqual(d["connects"], 3, f"one connection per thread: {d}")
            self.assertEqual(d["clients"], 3, f"connected while the handle lives: {d}")
        finally:
            h.close()
        self.assertEqual(self.wait_clients(0), 0, "close() left clients connected")


class Faults(Base):
    """--faults (the daemon is tests/nvmefs-fi): device errors under the
    native client come out as OSError EIO naming the file, from the call or
    from wait(); once cleared, the same operations work. Member 3 holds no
    metadata, so its write errors fail data writes only."""

    def setUp(self):
        if not ARGS.faults:
            self.skipTest("no fault injection (--faults: the daemon is tests/nvmefs-fi)")
        super().setUp()

    def tearDown(self):
        self.ctl("clear")
        super().tearDown()

    def ctl(self, command):
        os.setxattr(ARGS.mount, "trusted.nvmefs.fault", command.encode())

    @need_torch
    def test_write_error(self):
        h = self.handle(num_threads=2)
        t = h.new_cpu_locked_tensor(4 * MiB, torch.empty(0, dtype=torch.uint8))
        t.copy_(torch.frombuffer(bytearray(data_at(41, 4 * MiB)), dtype=torch.uint8))
        p = self.path("w")
        self.ctl("eio dev=3 ops=w")
        with self.assertRaises(OSError) as cm:
            h.sync_pwrite(t, p)
        self.assertOSError(cm, errno.EIO, p)
        self.assertEqual(h.async_pwrite(bytearray(4 * MiB), p, 4096), 0)  # bounced
        with self.assertRaises(OSError) as cm:
            h.wait()
        self.assertOSError(cm, errno.EIO, p)
        self.ctl("clear")
        self.assertEqual(h.sync_pwrite(t, p), 1)
        self.assertSameBytes(file_bytes(p), t.numpy().tobytes(), "written once cleared")
        h.free_cpu_locked_tensor(t)

    def test_read_error(self):
        h = self.handle(num_threads=2)
        p = self.path("r")
        put_file(p, data_at(42, 4 * MiB + 6))
        got = bytearray(4 * MiB + 6)
        for fault in ("eio dev=1 ops=r", "short dev=2 ops=r"):
            with self.subTest(fault=fault):
                self.ctl(fault)
                with self.assertRaises(OSError) as cm:
                    h.sync_pread(got, p)
                self.assertOSError(cm, errno.EIO, p)
                self.assertEqual(h.async_pread(got, p), 0)
                with self.assertRaises(OSError) as cm:
                    h.wait()
                self.assertOSError(cm, errno.EIO, p)
                self.ctl("clear")
        self.assertEqual(h.sync_pread(got, p), 1)
        self.assertSameBytes(bytes(got), data_at(42, 4 * MiB + 6), "read once cleared")


class Fallback(Base):
    """Any other directory: no native client, O_DIRECT where it is taken,
    buffered where it is not, the same results (the other classes)."""

    def setUp(self):
        if ARGS.native != "none":
            self.skipTest("an nvmefs mount (--native %s)" % ARGS.native)
        super().setUp()

    def test_not_nvmefs(self):
        with self.assertRaises(OSError) as cm:
            nvmefs.Client(self.dir)
        self.assertEqual(cm.exception.errno, errno.ENOTSUP, cm.exception)

    def takes_o_direct(self):
        p = self.path("probe")
        m = mmap.mmap(-1, 4096)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_DIRECT)
        except OSError:
            return False
        try:
            return os.pwritev(fd, [m], 0) == 4096
        except OSError:
            return False
        finally:
            os.close(fd)
            os.unlink(p)

    def record_opens(self, refuse_direct):
        real = os.open
        flags = []

        def opener(path, fl, *a, **kw):
            flags.append(fl)
            if refuse_direct and fl & os.O_DIRECT:
                raise OSError(errno.EINVAL, "O_DIRECT refused (test)", path)
            return real(path, fl, *a, **kw)
        return flags, mock.patch("os.open", opener)

    def test_o_direct_for_aligned_blocks(self):
        if not self.takes_o_direct():
            self.skipTest(f"{ARGS.dir} refuses O_DIRECT")
        h = self.handle(block_size=64 * KiB, num_threads=2)
        m = mmap.mmap(-1, MiB)
        m[:] = data_at(30, MiB)
        flags, patch = self.record_opens(False)
        with patch:
            h.sync_pwrite(m, self.path("d"), 4096)
        self.assertTrue(any(f & os.O_DIRECT for f in flags), f"no O_DIRECT open: {flags}")
        self.assertSameBytes(file_bytes(self.path("d")), bytes(4096) + m[:], "written")

    def test_buffered_where_o_direct_is_refused(self):
        h = self.handle(block_size=64 * KiB, num_threads=3)
        m = mmap.mmap(-1, 768 * KiB)  # divides by 3
        m[:] = data_at(31, 768 * KiB)
        flags, patch = self.record_opens(True)
        p = self.path("b")
        with patch:
            self.assertEqual(h.sync_pwrite(m, p, 8192), 1)
            got = mmap.mmap(-1, 768 * KiB)
            self.assertEqual(h.sync_pread(got, p, 8192), 1)
        self.assertTrue(any(f & os.O_DIRECT for f in flags), "O_DIRECT was not tried")
        self.assertSameBytes(file_bytes(p), bytes(8192) + m[:], "written buffered")
        self.assertSameBytes(got[:], m[:], "read buffered")


class Install(unittest.TestCase):
    """cmake --install into a scratch prefix: an importable package that
    loads the prefix's libnvmefs (not the build tree's, nor another)."""

    def test_install_prefix(self):
        prefix = tempfile.mkdtemp(prefix="nvmefs_install.")
        try:
            r = subprocess.run(["cmake", "--install", ARGS.install, "--prefix", prefix],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            site = os.path.join(prefix, "lib", "python%d.%d" % sys.version_info[:2],
                                "dist-packages")
            self.assertTrue(os.path.isfile(os.path.join(site, "nvmefs", "handle.py")),
                            f"no package in {site}")
            env = {k: v for k, v in os.environ.items()
                   if k not in ("NVMEFS_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
            env["PYTHONPATH"] = site
            code = ("import nvmefs, os, sys\n"
                    "h = nvmefs.aio_handle()\n"
                    "p = os.path.join(sys.argv[1], 'f')\n"
                    "assert h.sync_pwrite(b'installed', p, 3) == 1\n"
                    "b = bytearray(9)\n"
                    "assert h.sync_pread(b, p, 3) == 1 and b == b'installed', b\n"
                    "maps = [l.split()[-1] for l in open('/proc/self/maps') if 'libnvmefs' in l]\n"
                    "print(nvmefs.__file__)\n"
                    "import json\n"
                    "print(json.dumps(sorted(set(os.path.realpath(m) for m in maps))))\n")
            r = subprocess.run([sys.executable, "-c", code, prefix], capture_output=True,
                               text=True, timeout=60, env=env, cwd="/")
            self.assertEqual(r.returncode, 0, f"importing the installed package: {r.stderr}")
            pkg, libs = r.stdout.splitlines()
            self.assertTrue(pkg.startswith(site + "/"), f"imported {pkg}, not from {site}")
            libs = json.loads(libs)
            real_prefix = os.path.realpath(prefix)
            self.assertTrue(libs and all(lib.startswith(real_prefix + "/") for lib in libs),
                            f"libnvmefs loaded from {libs}, not from {prefix}")
        finally:
            shutil.rmtree(prefix)


class Remount(Base):
    """--remount DAEMON DEVICES OPTIONS LOG: a handle outlives a remount of
    its volume. Its threads' connections were to the old daemon, and the
    new mount has the old one's st_dev (an unmount frees the number)."""

    def setUp(self):
        if not ARGS.remount:
            self.skipTest("no --remount")
        super().setUp()

    def remount(self):
        daemon, devices, options, log = ARGS.remount
        with open(os.path.join(ARGS.mount, ".nvmefs", "config")) as f:
            pid = next(int(line.split("=")[1]) for line in f if line.startswith("pid ="))
        subprocess.run(["fusermount3", "-u", ARGS.mount], check=True, timeout=60)
        end = time.monotonic() + 30
        while os.path.exists(f"/proc/{pid}"):  # it lets go of the devices
            self.assertLess(time.monotonic(), end, f"daemon {pid} still there 30 s after unmounting")
            time.sleep(0.05)
        with open(log, "a") as out:  # a file: a pipe kept open by the daemon hangs ctest
            subprocess.run([daemon, devices, ARGS.mount, "-o", options], check=True, timeout=30,
                           stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        while not os.path.ismount(ARGS.mount):
            self.assertLess(time.monotonic(), end + 30, f"{ARGS.mount} not mounted again")
            time.sleep(0.05)

    def test_handle_outlives_a_remount(self):
        h = self.handle(num_threads=2)
        p = self.path("r")
        old, new = data_at(50, 3 * MiB + 6), data_at(51, 3 * MiB + 6)
        self.assertEqual(h.sync_pwrite(old, p), 1)
        dev = os.stat(ARGS.mount).st_dev
        self.remount()
        now = os.stat(ARGS.mount).st_dev
        if now != dev:
            # Another mount took the number meanwhile (other tests run
            # too). What a reused number gives, made sure of: the threads'
            # clients for this st_dev are those of the daemon that is gone.
            for w in h._workers:
                w.clients[now] = w.clients.pop(dev)
        s0 = native_stats()
        got = bytearray(len(old))
        self.assertEqual(h.sync_pread(got, p), 1)
        self.assertSameBytes(bytes(got), old, "read after the remount")
        self.assertEqual(h.sync_pwrite(new, p), 1)
        self.assertSameBytes(file_bytes(p), new, "written after the remount")
        d = stats_delta(s0, native_stats())
        self.assertEqual(d["read_bytes"], len(old), f"native reads after the remount: {d}")
        if ARGS.native == "all":
            self.assertEqual(d["write_bytes"], len(new), f"native writes after the remount: {d}")


def main():
    global nvmefs, handle_mod
    if AS_USER:  # the child of test_read_only_directory: --as-user RO RW SECRET
        import nvmefs as mod
        nvmefs = mod
        print(json.dumps(as_user_checks(*sys.argv[2:])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="make the scratch directories under DIR")
    ap.add_argument("--native", choices=("all", "reads", "none"), default="none",
                    help="what goes through nvmefs's native client: all (an nvmefs "
                    "mount), reads (a mount with -o writeback), none (not nvmefs)")
    ap.add_argument("--mount", help="the nvmefs mount point (its .nvmefs/stats)")
    ap.add_argument("--faults", action="store_true",
                    help="the daemon of --mount is tests/nvmefs-fi: inject device errors")
    ap.add_argument("--remount", nargs=4, metavar=("DAEMON", "DEVICES", "OPTIONS", "LOG"),
                    help="how --mount was mounted: the remount test unmounts and runs "
                    "DAEMON DEVICES MOUNT -o OPTIONS, its output appended to LOG")
    ap.add_argument("--install", metavar="BUILD", help="test cmake --install of BUILD")
    ap.add_argument("-k", action="append", dest="patterns", metavar="PATTERN",
                    help="only the tests whose names match (as unittest's -k)")
    args = ap.parse_args()
    if not args.dir and not args.install:
        ap.error("--dir or --install")
    if (args.native != "none" or args.faults or args.remount) and not args.mount:
        ap.error("--native all|reads, --faults and --remount need --mount")
    ARGS.__dict__.update(vars(args))
    loader = unittest.TestLoader()
    if args.patterns:
        loader.testNamePatterns = [p if "*" in p else f"*{p}*" for p in args.patterns]
    suite = unittest.TestSuite()
    if args.dir:
        import nvmefs as mod
        import nvmefs.handle as hmod
        nvmefs, handle_mod = mod, hmod
        fstype = subprocess.run(["stat", "-f", "-c", "%T", args.dir], capture_output=True,
                                text=True).stdout.strip()
        print(f"nvmefs from {os.path.dirname(mod.__file__)}; scratch under {args.dir} "
              f"({fstype}); native: {args.native}", flush=True)
        for cls in (Constructor, Grid, Methods, Buffers, LockedTensors, Async, Threads,
                    DeepSpeedApi, Gpu, Errors, Native, Faults, Fallback, Remount):
            suite.addTests(loader.loadTestsFromTestCase(cls))
    if args.install:
        suite.addTests(loader.loadTestsFromTestCase(Install))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
