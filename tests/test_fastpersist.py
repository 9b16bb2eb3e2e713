#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Unit tests (no root, nothing mounted) of examples/deepnvme: fastpersist.py
(torch.save into HandleWriter's double buffer, ZipWriter's zip format
against torch.save's byte for byte, with zip64 against bytes torch 1.13
wrote, its CRC thread's failures and its fallback to torch.save; torch.load
from MemReader and StreamReader), with a recording handle that checks the order of
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
import threading
import unittest
import zipfile
import zlib
from unittest import mock

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
    """Equal tensors (dtype and shape too) in equal containers."""
    if isinstance(x, dict):
        return type(x) is type(y) and x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return type(x) is type(y) and len(x) == len(y) and all(map(same, x, y))
    if isinstance(x, torch.Tensor):
        return (isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape
                and x.stride() == y.stride() and torch.equal(x, y))
    return x == y


def state_dicts():
    """(name, object) to save: every kind of storage and record _save
    makes, records under and over ZipWriter's CRC-thread threshold."""
    base = torch.arange(1 << 19, dtype=torch.float32)  # 2 MiB: the CRC thread's
    return [
        ("empty", {}),
        ("scalars", {"step": 7, "lr": 0.5, "name": "x", "none": None}),
        ("views of one storage", {"w": base, "head": base[:10],
                                  "mid": base[1000:3000].view(40, 50)}),
        ("non-contiguous", {"t": torch.arange(12.0).view(3, 4).t(), "s": base[::3]}),
        ("dtypes", {str(d): torch.arange(5).to(d)
                    for d in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                              torch.float16, torch.bfloat16, torch.float64, torch.complex64)}),
        ("zero elements", {"e": torch.empty(0), "e2": torch.zeros(3, 0), "one": torch.ones(1)}),
        ("0-dim", {"x": torch.tensor(3.5)}),
        ("nested", {"model": state_dict(),
                    "opt": {"state": {0: {"m": base.clone()}}, "groups": [{"lr": 1}]},
                    "list": [torch.ones(2), (torch.zeros(1, dtype=torch.int64), 3)]}),
        ("a tensor", torch.ones(4097, dtype=torch.uint8)),
    ]


def torch_bytes(obj, **kw):
    f = io.BytesIO()
    torch.save(obj, f, **kw)
    return f.getvalue()


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


class NullHandle:
    """A handle that writes nothing."""

    def async_pwrite(self, buffer, filename, file_offset=0):
        return 0

    def wait(self):
        return 1

    def sync_pwrite(self, buffer, filename, file_offset=0):
        return 1


# What torch 1.13's torch.save wrote when a record reaches 4 GiB ("big")
# and when records lie past 4 GiB ("far"): for each record its name,
# offset, size, CRC, local header and data descriptor, then the central
# directory and end records (tests/ captured them from torch.save into a
# file object that kept all but the tensors' bytes).
GOLDEN = {
    'big': ([
        ('archive/data.pkl', 0, 171, 0x6f43453a,
         ('504b03040000080800000000000000000000000000000000000010001200617263686976652f6461'
          '74612e706b6c46420e005a5a5a5a5a5a5a5a5a5a5a5a5a5a'),
         '504b07083a45436fab000000ab000000'),
        ('archive/data/0', 251, 4294971392, 0xb875d37f,
         ('504b0304000008080000000000000000000000000000000000000e001900617263686976652f6461'
          '74612f300100100000100000010000000000000000000000464201005a'),
         '504b07087fd375b800100000010000000010000001000000'),
        ('archive/version', 4294971736, 2, 0x55679ed1,
         ('504b0304000008080000000000000000000000000000000000000f003b00617263686976652f7665'
          '7273696f6e01000800581100000100000046422b005a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a'
          '5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a'),
         '504b0708d19e675502000000000000000200000000000000'),
    ], ('504b01020000000008080000000000003a45436fab000000ab000000100000000000000000000000'
        '000000000000617263686976652f646174612e706b6c504b01020000000008080000000000007fd3'
        '75b8ffffffffffffffff0e00140000000000000000000000fb000000617263686976652f64617461'
        '2f300100100000100000010000000010000001000000504b0102000000000808000000000000d19e'
        '675502000000020000000f000c0000000000000000000000ffffffff617263686976652f76657273'
        '696f6e010008005811000001000000504b06062c000000000000001e032d00000000000000000003'
        '000000000000000300000000000000d700000000000000da11000001000000504b060700000000b1'
        '1200000100000001000000504b05060000000003000300d7000000ffffffff0000')),
    'far': ([
        ('archive/data.pkl', 0, 316, 0x56a405b2,
         ('504b03040000080800000000000000000000000000000000000010001200617263686976652f6461'
          '74612e706b6c46420e005a5a5a5a5a5a5a5a5a5a5a5a5a5a'),
         '504b0708b205a4563c0100003c010000'),
        ('archive/data/0', 396, 2254857830, 0x0b728b1b,
         ('504b0304000008080000000000000000000000000000000000000e000800617263686976652f6461'
          '74612f30464204005a5a5a5a'),
         '504b07081b8b720b6666668666666686'),
        ('archive/data/1', 2254858294, 2254857830, 0x0b728b1b,
         ('504b0304000008080000000000000000000000000000000000000e001e00617263686976652f6461'
          '74612f3146421a005a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a'),
         '504b07081b8b720b6666668666666686'),
        ('archive/data/2', 4509716214, 12, 0xdc7c4e94,
         ('504b0304000008080000000000000000000000000000000000000e001e00617263686976652f6461'
          '74612f3201000800f6cecc0c0100000046420e005a5a5a5a5a5a5a5a5a5a5a5a5a5a'),
         '504b0708944e7cdc0c000000000000000c00000000000000'),
        ('archive/version', 4509716324, 2, 0x55679ed1,
         ('504b0304000008080000000000000000000000000000000000000f002f00617263686976652f7665'
          '7273696f6e0100080064cfcc0c0100000046421f005a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a'
          '5a5a5a5a5a5a5a5a5a5a5a5a'),
         '504b0708d19e675502000000000000000200000000000000'),
    ], ('504b0102000000000808000000000000b205a4563c0100003c010000100000000000000000000000'
        '000000000000617263686976652f646174612e706b6c504b01020000000008080000000000001b8b'
        '720b66666686666666860e000000000000000000000000008c010000617263686976652f64617461'
        '2f30504b01020000000008080000000000001b8b720b66666686666666860e000000000000000000'
        '0000000036686686617263686976652f646174612f31504b0102000000000808000000000000944e'
        '7cdc0c0000000c0000000e000c0000000000000000000000ffffffff617263686976652f64617461'
        '2f3201000800f6cecc0c01000000504b0102000000000808000000000000d19e6755020000000200'
        '00000f000c0000000000000000000000ffffffff617263686976652f76657273696f6e0100080064'
        'cfcc0c01000000504b06062c000000000000001e032d000000000000000000050000000000000005'
        '000000000000004701000000000000dacfcc0c01000000504b06070000000021d1cc0c0100000001'
        '000000504b0506000000000500050047010000ffffffff0000')),
}


class ZipFormat(unittest.TestCase):
    """fastpersist.save in the zip format: ZipWriter, not torch.save."""

    def save(self, obj, handle=None, **kw):
        """fastpersist.save(obj) into a file of a temporary directory with
        4 KiB halves: the file's bytes."""
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.pt")
            n = fastpersist.save(obj, p, handle or RecordingHandle(),
                                 torch.zeros(8192 + 100, dtype=torch.uint8), **kw)
            with open(p, "rb") as f:
                data = f.read()
        self.assertEqual(n, len(data))
        return data

    def check_reads(self, obj, data, miniz=True):
        """torch.load from the bytes, from a file (unless not miniz) and
        zero-copy (Python's zipfile's reading), and Python's zipfile's
        testzip (every CRC)."""
        self.assertIsNone(zipfile.ZipFile(io.BytesIO(data)).testzip())
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.pt")
            with open(p, "wb") as f:
                f.write(data)
            if miniz:
                self.assertTrue(same(obj, torch.load(io.BytesIO(data))))
                self.assertTrue(same(obj, torch.load(p)))
            buf = torch.zeros(len(data), dtype=torch.uint8)
            views = fastpersist.load(p, RecordingHandle(), buf, zero_copy=True)
            self.assertTrue(same(obj, views))
        return views

    def test_same_bytes_as_torch_save(self):
        """Byte for byte what torch.save writes (names, order, alignment,
        CRCs, directories), whether the CRC runs on the thread or not, by
        ISA-L or zlib."""
        isal = fastpersist._isal_crc32()
        for name, obj in state_dicts():
            for crc_thread, crc in ((1 << 20, isal), (1, isal), (1, None)):
                with self.subTest(name, crc_thread=crc_thread, isal=crc is not None), \
                     mock.patch.object(fastpersist, "_CRC_THREAD", crc_thread), \
                     mock.patch.object(fastpersist, "_isal", [crc]):
                    data = self.save(obj)
                    self.assertEqual(data, torch_bytes(obj))
                    self.check_reads(obj, data)
        z = zipfile.ZipFile(io.BytesIO(data))
        self.assertEqual(z.namelist(), ["archive/data.pkl", "archive/data/0", "archive/version"])
        self.assertEqual(z.read("archive/version"), b"3\n")

    def test_layout(self):
        """What the byte comparison stands on: data at multiples of 64,
        stored, the shared storage once, its views views of it on load."""
        obj = dict(state_dicts())["views of one storage"]
        data = self.save(obj)
        views = self.check_reads(obj, data)
        self.assertEqual(views["head"].storage().data_ptr(), views["w"].storage().data_ptr())
        mem = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        records = fastpersist._Records(fastpersist.MemReader(mem, len(data)))
        self.assertEqual(sorted(records.records), ["data.pkl", "data/0", "version"])
        self.assertTrue(all(start % 64 == 0 for start, _ in records.records.values()), records.records)
        self.assertTrue(all(i.compress_type == zipfile.ZIP_STORED
                            for i in zipfile.ZipFile(io.BytesIO(data)).infolist()))

    def test_zip64_as_torch(self):
        """The headers, descriptors and directories of records over 4 GiB
        and past 4 GiB are those torch 1.13 wrote."""
        for case, (records, tail) in GOLDEN.items():
            with self.subTest(case):
                entries, end = [], 0
                for name, offset, nbytes, crc, header, descriptor in records:
                    name = name.encode()
                    self.assertEqual(fastpersist._local_header(name, offset, nbytes).hex(), header)
                    self.assertEqual(fastpersist._descriptor(offset, nbytes, crc).hex(), descriptor)
                    entries.append(fastpersist._central_entry(name, offset, nbytes, crc))
                    end = offset + len(header) // 2 + nbytes + len(descriptor) // 2
                cd = b"".join(entries)
                self.assertEqual((cd + fastpersist._end_records(len(entries), end, len(cd))).hex(), tail)

    def test_zip64_read(self):
        """With zip64 from 0 bytes on (every size and offset), Python's
        zipfile and torch.load read it; from 300 on (some sizes, the
        offsets past 300), Python's zipfile (torch's miniz takes a
        record's 32-bit offset, 0xFFFFFFFF, plus its 32-bit size for past
        the end of an archive under 4 GiB: a file this small cannot say
        that with torch)."""
        obj = dict(state_dicts())["nested"]
        for at in (0, 300):
            with self.subTest(at=at), mock.patch.object(fastpersist, "_ZIP64_AT", at):
                data = self.save(obj)
                self.assertNotEqual(data, torch_bytes(obj))
                self.check_reads(obj, data, miniz=at == 0)
                z = zipfile.ZipFile(io.BytesIO(data))
                self.assertEqual(z.namelist(), zipfile.ZipFile(io.BytesIO(torch_bytes(obj))).namelist())

    def test_crc_thread_failure(self):
        """A CRC that fails on the worker thread fails the save, and no
        file is left; so does a write that fails while the thread runs."""
        crc32, where = fastpersist._crc32, []

        def failing(addr, n):
            where.append(threading.current_thread() is threading.main_thread())
            if not where[-1]:
                raise MemoryError("crc boom")
            return crc32(addr, n)

        class FailingHandle(RecordingHandle):
            def async_pwrite(self, buffer, filename, file_offset=0):
                if file_offset >= 1 << 20:
                    raise OSError(5, "write boom", filename)
                return super().async_pwrite(buffer, filename, file_offset)

        obj = dict(state_dicts())["nested"]
        for handle, patch, error in ((RecordingHandle(), failing, "crc boom"),
                                     (FailingHandle(), crc32, "write boom")):
            with self.subTest(error), tempfile.TemporaryDirectory() as d, \
                 mock.patch.object(fastpersist, "_crc32", patch):
                p = os.path.join(d, "x.pt")
                with self.assertRaisesRegex(Exception, error):
                    fastpersist.save(obj, p, handle, torch.zeros(8192 + 100, dtype=torch.uint8))
                self.assertEqual(os.listdir(d), [])
                self.assertEqual(handle.pending, [])
        self.assertIn(False, where)

    def test_fallback(self):
        """Where _save is not torch 1.13's (its signature), and in the
        legacy format, torch.save writes: the same bytes."""
        real, writers = torch.serialization._save, []

        def other(obj, zip_file, pickle_module, pickle_protocol, _disable_byteorder_record=False):
            writers.append(type(zip_file).__name__)
            return real(obj, zip_file, pickle_module, pickle_protocol)

        obj = dict(state_dicts())["nested"]
        with mock.patch.object(torch.serialization, "_save", other):
            self.assertIsNone(fastpersist._save_fn())
            data = self.save(obj)
        self.assertEqual(writers, ["PyTorchFileWriter"])
        self.assertEqual(data, torch_bytes(obj))
        self.assertIsNotNone(fastpersist._save_fn())
        data = self.save(obj, _use_new_zipfile_serialization=False)
        self.assertEqual(data, torch_bytes(obj, _use_new_zipfile_serialization=False))
        self.assertTrue(same(obj, torch.load(io.BytesIO(data))))

    def test_crc_combined(self):
        """The CRC of chunks taken from both ends, combined, is zlib's of
        the whole, for sizes around the chunk's, by ISA-L and by zlib."""
        data = os.urandom(3 * 4096 + 5)
        buf = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        self.assertIsNotNone(fastpersist._isal_crc32())  # nvmefs builds with libisal
        for n, isal in ((n, isal) for n in (0, 1, 4095, 4096, 4097, 8192, 3 * 4096, len(data))
                        for isal in (True, False)):
            with self.subTest(n=n, isal=isal), \
                 mock.patch.object(fastpersist, "_isal", [fastpersist._isal_crc32() if isal else None]):
                job = fastpersist._Crc(buf.data_ptr(), n, 4096)
                job.run(True)
                self.assertEqual(job.value(), zlib.crc32(data[:n]))
                job = fastpersist._Crc(buf.data_ptr(), n, 4096)
                thread = threading.Thread(target=job.run, args=(False,))
                thread.start()
                job.run(True)
                thread.join()
                self.assertEqual(job.value(), zlib.crc32(data[:n]))

    def test_save_args(self):
        """torch.save's pickle_protocol reaches the pickle."""
        obj = dict(state_dicts())["scalars"]
        data = self.save(obj, pickle_protocol=4)
        self.assertEqual(data, torch_bytes(obj, pickle_protocol=4))
        self.assertNotEqual(data, torch_bytes(obj))


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
                    fastpersist.save(sd, p, h, wbuf, _use_new_zipfile_serialization=zf)
                    self.assertTrue(same(sd, torch.load(p)), zf)
                    with open(p, "rb") as f:
                        self.assertEqual(f.read(), torch_bytes(sd, _use_new_zipfile_serialization=zf))
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
