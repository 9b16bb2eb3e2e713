#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Unit tests (no root, nothing mounted) of examples/deepnvme: fastpersist.py
(torch.save into HandleWriter's double buffer, torch.load from MemReader
and StreamReader), with a recording handle that checks the order of
operations (a half is rewritten only after wait(), offsets and lengths) and
with the real nvmefs.aio_handle on a plain directory (its fallback), in
both of torch's formats and with buffers of a few KiB, so that every path
of the double buffer and of the tail-first stream runs, and the zero-copy
load (views of the buffer; refused for the legacy format); and utils.py's
option handling (--aio_config, sizes). Exit 77 without torch.

usage: test_fastpersist.py BUILD_DIR [unittest options]   (exit 0 pass, 1 fail)
"""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
import testlib  # noqa: E402

testlib.take_build_dir("test_fastpersist.py")
sys.path.insert(0, testlib.EXAMPLES)
try:
    import torch
except ImportError:
    print("SKIP: no torch for this python3 (Debian package python3-torch)")
    sys.exit(77)

import fastpersist  # noqa: E402
import nvmefs  # noqa: E402
import utils  # noqa: E402


class RecordingHandle:
    """The handle's calls fastpersist makes, done with plain file I/O, and
    checked: an async write's buffer is not touched again before wait()."""

    def __init__(self):
        self.log = []
        self.pending = []  # (tensor, bytes at submission)

    def _write(self, buffer, filename, offset):
        with open(filename, "r+b") as f:
            f.seek(offset)
            f.write(buffer.numpy().tobytes())

    def async_pwrite(self, buffer, filename, file_offset=0):
        self.log.append(("async_pwrite", file_offset, buffer.numel()))
        self.pending.append((buffer, buffer.numpy().tobytes(), filename, file_offset))
        return 0

    def wait(self):
        n = len(self.pending)
        for buf, data, filename, offset in self.pending:
            if buf.numpy().tobytes() != data:
                raise AssertionError("a buffer in flight was changed before wait()")
            self._write(buf, filename, offset)
        self.pending = []
        self.log.append(("wait", n))
        return n

    def sync_pwrite(self, buffer, filename, file_offset=0):
        self.log.append(("sync_pwrite", file_offset, buffer.numel()))
        self._write(buffer, filename, file_offset)
        return 1

    def sync_pread(self, buffer, filename, file_offset=0):
        self.log.append(("sync_pread", file_offset, buffer.numel()))
        with open(filename, "rb") as f:
            f.seek(file_offset)
            data = f.read(buffer.numel())
        buffer[:len(data)].copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        return 1


def state_dict():
    return {"a": torch.arange(3000, dtype=torch.float32), "b": torch.ones(7, 5, dtype=torch.float64),
            "c": torch.arange(10, dtype=torch.int8), "nested": {"d": torch.zeros(1)}}


def same(x, y):
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    return torch.equal(x, y)


@contextlib.contextmanager
def stream_reader(data, **kw):
    """A StreamReader(**kw) with a RecordingHandle over a file in a
    temporary directory that holds data: (reader, handle), the reader
    finished on leaving."""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x")
        with open(p, "wb") as f:
            f.write(data)
        h = RecordingHandle()
        buf = torch.zeros(len(data), dtype=torch.uint8)
        r = fastpersist.StreamReader(p, h, buf, len(data), **kw)
        yield r, h
        r.finish()


class Writer(unittest.TestCase):
    def test_double_buffer_order(self):
        """Halves of 4 KiB: whole halves go async at increasing offsets,
        never two in flight, the tail synchronously; the bytes are those of
        torch.save into memory."""
        h = RecordingHandle()
        sd = state_dict()
        ref = io.BytesIO()
        torch.save(sd, ref)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.pt")
            with open(p, "wb") as f:
                f.write(b"old contents, longer than nothing" * 1000)  # emptied by the save
            n = fastpersist.save(sd, p, h, torch.zeros(8192 + 100, dtype=torch.uint8))
            with open(p, "rb") as f:
                self.assertEqual(f.read(), ref.getvalue())
        self.assertEqual(n, len(ref.getvalue()))
        writes = [e for e in h.log if e[0] != "wait"]
        self.assertEqual([e[1] for e in writes], [4096 * i for i in range(len(writes))])
        self.assertTrue(all(e == ("async_pwrite", e[1], 4096) for e in writes[:-1]))
        self.assertEqual(writes[-1][0], "sync_pwrite")
        self.assertEqual(writes[-1][1] + writes[-1][2], n)
        inflight = 0
        for e in h.log:
            inflight = 0 if e[0] == "wait" else inflight + (e[0] == "async_pwrite")
            self.assertLessEqual(inflight, 1, h.log)

    def test_refusals(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(ValueError, "at least 8 KiB"):
                fastpersist.HandleWriter(os.path.join(d, "x"), RecordingHandle(),
                                         torch.zeros(4096, dtype=torch.uint8))
            with self.assertRaisesRegex(ValueError, "uint8"):
                fastpersist.HandleWriter(os.path.join(d, "x"), RecordingHandle(),
                                         torch.zeros(8192, dtype=torch.float32))


class Readers(unittest.TestCase):
    def test_mem_reader(self):
        t = torch.arange(100, dtype=torch.uint8)
        r = fastpersist.MemReader(t, 50)
        self.assertEqual(r.read(3), bytes([0, 1, 2]))
        self.assertEqual(r.seek(-2, io.SEEK_END), 48)
        self.assertEqual(r.read(10), bytes([48, 49]))
        self.assertEqual(r.read(10), b"")
        self.assertEqual(r.seek(5, io.SEEK_SET), 5)
        self.assertEqual(r.seek(5, io.SEEK_CUR), 10)
        with self.assertRaises(OSError):
            r.seek(-1)

    def test_stream_tail_first(self):
        """The last chunk is read first, then the rest in order; a read
        waits for its bytes; the result is the file."""
        data = os.urandom(5 * 4096 + 123)
        with stream_reader(data, chunk=4096) as (r, h):
            r.seek(-10, io.SEEK_END)
            self.assertEqual(r.read(10), data[-10:])
            r.seek(0)
            self.assertEqual(r.read(), data)
        self.assertEqual([e[1:] for e in h.log], [(0, len(data))])  # under 4 MiB: all of it at once
        with stream_reader(data, chunk=8192, tail=4096 + 123) as (r, h):
            self.assertEqual(r.read(), data)
        self.assertEqual([e[1:] for e in h.log], [(16384, 4096 + 123), (0, 8192), (8192, 8192)])

    def test_stream_error(self):
        class Failing(RecordingHandle):
            def sync_pread(self, buffer, filename, file_offset=0):
                raise OSError(5, "boom", filename)
        buf = torch.zeros(8192, dtype=torch.uint8)
        r = fastpersist.StreamReader("/nonexistent", Failing(), buf, 8192)
        with self.assertRaisesRegex(OSError, "boom"):
            r.read(1)
        with self.assertRaisesRegex(OSError, "boom"):
            r.finish()


class RealHandle(unittest.TestCase):
    """nvmefs.aio_handle on a plain directory (O_DIRECT or buffered)."""

    def test_round_trips(self):
        h = nvmefs.aio_handle(block_size=65536, queue_depth=4, num_threads=2)
        u8 = torch.empty(0, dtype=torch.uint8)
        wbuf = h.new_cpu_locked_tensor(3 * 8192, u8)
        sd = state_dict()
        sd["big"] = torch.arange(300000, dtype=torch.int32)
        try:
            with tempfile.TemporaryDirectory() as d:
                for zf in (True, False):
                    p = os.path.join(d, f"sd{zf}.pt")
                    w = fastpersist.HandleWriter(p, h, wbuf)
                    torch.save(sd, w, _use_new_zipfile_serialization=zf)
                    w.close()
                    self.assertTrue(same(sd, torch.load(p)), zf)
                    rbuf = h.new_cpu_locked_tensor(os.path.getsize(p), u8)
                    for stream in (False, True):
                        self.assertTrue(same(sd, fastpersist.load(p, h, rbuf, stream=stream)),
                                        (zf, stream))
                    if zf:
                        views = fastpersist.load(p, h, rbuf, zero_copy=True)
                        self.assertTrue(same(sd, views))
                        # views of the buffer: its bytes are the tensors'
                        lo, hi = rbuf.data_ptr(), rbuf.data_ptr() + rbuf.numel()
                        self.assertTrue(lo <= views["big"].data_ptr() < hi)
                        del views
                    else:
                        with self.assertRaisesRegex(ValueError, "zero_copy needs torch's zip format"):
                            fastpersist.load(p, h, rbuf, zero_copy=True)
                    h.free_cpu_locked_tensor(rbuf)
                with self.assertRaisesRegex(ValueError, "do not fit"):
                    fastpersist.load(p, h, torch.zeros(10, dtype=torch.uint8))
        finally:
            h.free_cpu_locked_tensor(wbuf)
            h.close()


class Utils(unittest.TestCase):
    def test_sizes(self):
        self.assertEqual([utils.parse_size(t) for t in ("1M", "4k", "12", "x", "1.5M")],
                         [1 << 20, 4096, 12, None, None])

    def test_aio_config(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "c.json")
            with open(cfg, "w") as f:
                json.dump({"aio": {"block_size": 4 << 20, "queue_depth": 16, "num_threads": 2,
                                   "single_submit": False, "overlap_events": True}}, f)
            old = sys.argv
            try:
                sys.argv = ["x", "--nvme_folder", d, "--aio_config", cfg, "--queue_depth", "64"]
                a = utils.parse_write_arguments("t", handle=True)
            finally:
                sys.argv = old
            self.assertEqual((a.block_size, a.queue_depth, a.threads, a.overlap_events, a.single_submit),
                             (4 << 20, 64, 2, True, False))
            self.assertEqual(a.mb_size, 1024)


if __name__ == "__main__":
    unittest.main()
