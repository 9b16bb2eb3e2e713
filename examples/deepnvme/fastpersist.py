# SPDX-License-Identifier: MIT
"""torch.save and torch.load through an nvmefs.aio_handle, FastPersist's
way (DeepSpeed's deepspeed/io FastFileWriter): serialization goes into
locked memory and the handle moves it.

save(obj, path, handle, locked): the state dict is serialized into
HandleWriter, which copies what it is given into one half of a locked
buffer while the handle writes the other half (asynchronously, as
DeepSpeed's double buffer does), then writes the rest and fsyncs. In
torch's zip format (its default) ZipWriter, torch 1.13's zip writer
redone in Python, takes torch's records and writes the bytes torch.save
would, but checksums each tensor on a second thread while the main one
copies it; in the legacy format torch.save itself writes into
HandleWriter. The file is an ordinary torch file: torch.load reads it.

load(path, handle, locked): the handle reads the whole file into a locked
buffer, and torch.load unpickles from that memory (MemReader); each tensor
gets memory of its own (one copy out of the buffer, as torch.load from any
file makes), so the buffer can be reused at once.

The memory copies run with the GIL released (ctypes.memmove), so the
handle's threads keep their requests flowing meanwhile.
"""
import concurrent.futures
import ctypes
import ctypes.util
import io
import os
import pickle
import struct
import threading
import warnings
import zlib


def _address(buf):
    """The address of a bytes-like object's memory (read-only ones too)."""
    import numpy

    return numpy.frombuffer(buf, dtype=numpy.uint8).ctypes.data


def _threads(handle):
    """The handle's intra_op_parallelism (1 for handles without the getter)."""
    get = getattr(handle, "get_intra_op_parallelism", None)
    return get() if get is not None else 1


def _checked(ret, what, path):
    """A handle's return code: -1 (DeepSpeed's, and nvmefs's, for a file
    that cannot be opened or a size that does not divide by the threads)
    as an OSError, not a silent loss."""
    if ret is not None and ret < 0:
        raise OSError(5, f"the handle's {what} returned {ret}", path)
    return ret


def _whole(handle, read, tensor, path, offset):
    """A synchronous pread or pwrite of all of a uint8 tensor at offset. A
    parallel operation's size must divide by the handle's threads (else
    DeepSpeed's and nvmefs's handles return -1): the handle moves the
    largest front that does, plain I/O the fewer than threads bytes left."""
    n = tensor.numel()
    head = n - n % _threads(handle)
    if head:
        part = tensor[:head]
        _checked(handle.sync_pread(part, path, offset) if read
                 else handle.sync_pwrite(part, path, offset),
                 "sync_pread" if read else "sync_pwrite", path)
    if head < n:
        tail = memoryview(tensor[head:].numpy())
        fd = os.open(path, os.O_RDONLY if read else os.O_WRONLY)
        try:
            got = (os.preadv(fd, [tail], offset + head) if read
                   else os.pwrite(fd, tail, offset + head))
        finally:
            os.close(fd)
        if got != n - head:
            raise OSError(5, f"short {'read' if read else 'write'} at {offset + head}", path)


class HandleWriter(io.RawIOBase):
    """A write-only file object over path, backed by locked (a uint8 tensor
    of new_cpu_locked_tensor, at least 8 KiB): bytes written are copied
    into one half of it; a full half goes to the handle's async_pwrite
    while the other half fills. close() writes what is left, waits and
    fsyncs (flush() does nothing: torch.save calls it before the end)."""

    def __init__(self, path, handle, locked):
        super().__init__()
        unit = 4096 * _threads(handle)  # whole pages for each of the handle's threads
        half = locked.numel() // 2 // unit * unit
        if half == 0 or locked.element_size() != 1:
            raise ValueError("the buffer must be a uint8 tensor of at least "
                             f"{2 * unit // 1024} KiB")
        with open(path, "wb"):
            pass  # created, or emptied of a previous save
        self.path, self.h, self.half = path, handle, half
        self.bufs = [locked[:half], locked[half:2 * half]]
        self.addrs = [b.data_ptr() for b in self.bufs]
        self.cur = self.fill = 0  # the half being filled, and how far
        self.off = 0  # the file offset of that half
        self.pending = False  # the other half is being written
        self.nbytes = 0

    def writable(self):
        return True

    def write(self, b):
        n = memoryview(b).nbytes
        return self.write_from(_address(b) if n else 0, n)

    def write_from(self, src, n):
        """write() of the n bytes at address src."""
        done = 0
        while done < n:
            k = min(n - done, self.half - self.fill)
            ctypes.memmove(self.addrs[self.cur] + self.fill, src + done, k)
            self.fill += k
            done += k
            if self.fill == self.half:
                self._drain()
        self.nbytes += n
        return n

    def _drain(self):
        """Send the full half; before that, let the other one finish."""
        if self.pending:
            self.h.wait()
        _checked(self.h.async_pwrite(self.bufs[self.cur], self.path, self.off),
                 "async_pwrite", self.path)
        self.pending = True
        self.off += self.fill
        self.cur ^= 1
        self.fill = 0

    def flush(self):
        pass

    def abort(self):
        """Close without writing what is left or fsyncing (after a failed
        save): only wait for the write in flight, so that the buffer is
        free again."""
        if self.closed:
            return
        try:
            if self.pending:
                self.pending = False
                self.h.wait()
        finally:
            super().close()

    def close(self):
        if self.closed:
            return
        try:
            if self.pending:
                self.h.wait()
                self.pending = False
            if self.fill:
                _whole(self.h, False, self.bufs[self.cur][:self.fill], self.path, self.off)
                self.off += self.fill
                self.fill = 0
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            super().close()


class MemReader(io.RawIOBase):
    """A read-only, seekable file object over the first nbytes of a uint8
    tensor (no copy until read)."""

    def __init__(self, tensor, nbytes):
        super().__init__()
        self.addr, self.size, self.pos = tensor.data_ptr(), nbytes, 0
        self.keep = tensor

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, off, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        if base + off < 0:
            raise OSError(22, f"seek to {base + off}")
        self.pos = base + off
        return self.pos

    def readinto(self, b):
        n = max(0, min(memoryview(b).nbytes, self.size - self.pos))
        if n:
            ctypes.memmove(_address(b), self.addr + self.pos, n)
            self.pos += n
        return n


# torch 1.13's zip layout, as PyTorchStreamWriter (miniz) writes it into a
# file object: each record stored (no compression) under "archive/", its
# local header with general purpose bits 3 (CRC and sizes follow the data,
# in a data descriptor; not for an empty record, which has none) and 11
# (UTF-8 name), CRC and sizes zero, times zero, an extra field "FB" of
# 'Z's that puts the data at a multiple of 64; then "version" ("3\n"),
# the central directory, and always the zip64 end of central directory
# record and locator before the classic one. A size or offset of
# 0xFFFFFFFF or more moves to a zip64 extra field (the local one holds the
# size and a compressed size of 0, and the offset, as miniz has it) and
# the descriptor's sizes become 8 bytes.
_ZIP64_AT = 0xFFFFFFFF  # from this size or offset on, zip64 fields (tests lower it)
_ALIGN = 64  # PyTorchStreamWriter's kFieldAlignment
_UTF8, _DESCRIPTOR = 0x0800, 0x0008  # general purpose bits
_VERSION = b"3\n"  # torch 1.13's kProducedFileFormatVersion
_CRC_THREAD = 1 << 20  # a record this large or larger is checksummed on the worker thread
_CRC_CHUNK = 8 << 20  # in chunks this large


def _zip64_extra(fields):
    return struct.pack("<HH", 1, 8 * len(fields)) + struct.pack(f"<{len(fields)}Q", *fields)


def _local_header(name, offset, nbytes):
    """The local header of record name (bytes), nbytes of data, at offset."""
    fields = ([nbytes, 0] if nbytes >= _ZIP64_AT else []) + ([offset] if offset >= _ZIP64_AT else [])
    extra = _zip64_extra(fields) if fields else b""
    pad = -(offset + 30 + len(name) + len(extra) + 4) % _ALIGN
    extra += b"FB" + struct.pack("<H", pad) + b"Z" * pad
    flags = _UTF8 | (_DESCRIPTOR if nbytes else 0)
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, flags, 0, 0, 0, 0, 0, 0,
                       len(name), len(extra)) + name + extra


def _descriptor(offset, nbytes, crc):
    """The data descriptor after the data of the record at offset."""
    if nbytes == 0:
        return b""
    if nbytes >= _ZIP64_AT or offset >= _ZIP64_AT:
        return struct.pack("<IIQQ", 0x08074B50, crc, nbytes, nbytes)
    return struct.pack("<IIII", 0x08074B50, crc, nbytes, nbytes)


def _central_entry(name, offset, nbytes, crc):
    """The central directory's entry of the record."""
    big, far = nbytes >= _ZIP64_AT, offset >= _ZIP64_AT
    fields = ([nbytes, nbytes] if big else []) + ([offset] if far else [])
    extra = _zip64_extra(fields) if fields else b""
    size32, flags = 0xFFFFFFFF if big else nbytes, _UTF8 | (_DESCRIPTOR if nbytes else 0)
    return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 0, flags, 0, 0, 0, crc, size32, size32,
                       len(name), len(extra), 0, 0, 0, 0, 0xFFFFFFFF if far else offset) + name + extra


def _end_records(count, cd_offset, cd_size):
    """The zip64 end of central directory record and locator, and the end
    of central directory record, after a central directory of count
    entries and cd_size bytes at cd_offset."""
    return (struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 0x2D, 0, 0, count, count,
                        cd_size, cd_offset)
            + struct.pack("<IIQI", 0x07064B50, 0, cd_offset + cd_size, 1)
            + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(count, 0xFFFF), min(count, 0xFFFF),
                          0xFFFFFFFF if cd_size >= _ZIP64_AT else cd_size,
                          0xFFFFFFFF if cd_offset >= _ZIP64_AT else cd_offset, 0))


_isal = []  # [ISA-L's crc32_gzip_refl or None], once looked for


def _isal_crc32():
    """ISA-L's crc32_gzip_refl (libisal, which nvmefs links for crc32c):
    zlib's CRC-32 (the zip one) with carry-less multiplies, 3x zlib's
    speed here; None where the library is not."""
    if not _isal:
        fn = None
        for name in ("libisal.so.2", ctypes.util.find_library("isal")):
            try:
                fn = ctypes.CDLL(name).crc32_gzip_refl
                break
            except (OSError, AttributeError, TypeError):
                continue
        if fn is not None:
            fn.restype = ctypes.c_uint32
            fn.argtypes = (ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint64)
        _isal.append(fn)
    return _isal[0]


def _crc32(addr, n):
    """The CRC-32 of the n bytes at address addr, by ISA-L or else zlib
    (both with the GIL released)."""
    if not n:
        return 0
    isal = _isal_crc32()
    if isal is not None:
        return isal(0, addr, n)
    return zlib.crc32((ctypes.c_char * n).from_address(addr))


def _multmodp(a, b):
    """a times b modulo the CRC-32 polynomial (zlib's crc32.c)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if a & (m - 1) == 0:
                return p
        m >>= 1
        b = (b >> 1) ^ 0xEDB88320 if b & 1 else b >> 1


def _x8nmodp(n):
    """x^(8n) modulo the polynomial: what a CRC moves by past n bytes."""
    p, x2k = 1 << 31, 1 << 30  # x^0, x^1
    for _ in range(3):
        x2k = _multmodp(x2k, x2k)
    while n:
        if n & 1:
            p = _multmodp(x2k, p)
        n >>= 1
        x2k = _multmodp(x2k, x2k)
    return p


class _Crc:
    """The CRC of the n bytes at addr in chunks: run(False) on the worker
    thread takes them from the front, run(True) from the back (the main
    thread once its copy is done, so that both cores checksum); value()
    combines them (zlib's crc32_combine)."""

    def __init__(self, addr, n, chunk):
        self.addr, self.n, self.chunk = addr, n, chunk
        self.crcs = [None] * -(-n // chunk)
        self.front, self.back = 0, len(self.crcs)  # chunks not taken yet: [front, back)
        self.lock, self.stop = threading.Lock(), threading.Event()

    def run(self, from_back):
        while not self.stop.is_set():
            with self.lock:
                if self.front == self.back:
                    return
                if from_back:
                    self.back -= 1
                    i = self.back
                else:
                    i = self.front
                    self.front += 1
            off = i * self.chunk
            self.crcs[i] = _crc32(self.addr + off, min(self.chunk, self.n - off))

    def value(self):
        crc, shift = 0, _x8nmodp(self.chunk)
        for crc_i in self.crcs[:-1]:
            crc = _multmodp(shift, crc) ^ crc_i
        last = self.n - (len(self.crcs) - 1) * self.chunk
        return _multmodp(_x8nmodp(last), crc) ^ self.crcs[-1] if self.crcs else 0


class ZipWriter:
    """What torch 1.13's serialization._save asks of its zip writer
    (write_record), writing into out (a HandleWriter) the bytes
    torch.save writes. A record of crc_thread bytes or more is checksummed
    from its memory on a worker thread while out copies it, the main
    thread helping once its copy is done, and joined before write_record
    returns: torch's layout puts the CRC in a data descriptor after the
    data anyway, so nothing is held back, and the memory may not outlive
    the call (_save hands over the address of a temporary CPU copy of a
    storage that is elsewhere). Call write_end_of_file() once the records
    are written, close() always."""

    def __init__(self, out, archive="archive", crc_thread=None):
        self.out, self.prefix = out, archive + "/"
        self.crc_thread = _CRC_THREAD if crc_thread is None else crc_thread
        self.entries = []
        self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nvmefs-crc")

    def write_record(self, name, data, nbytes):
        """Record name of the nbytes at data (bytes, or an address)."""
        name, offset = (self.prefix + name).encode(), self.out.nbytes
        addr = data if isinstance(data, int) else _address(data) if nbytes else 0
        self.out.write(_local_header(name, offset, nbytes))
        if nbytes < self.crc_thread:
            crc = _crc32(addr, nbytes)
            self.out.write_from(addr, nbytes)
        else:
            job = _Crc(addr, nbytes, _CRC_CHUNK)
            worker = self.pool.submit(job.run, False)
            try:
                self.out.write_from(addr, nbytes)
                job.run(True)
            except BaseException:
                job.stop.set()
                raise
            finally:
                worker.result()  # its error, or none: the memory is left alone after this
            crc = job.value()
        self.out.write(_descriptor(offset, nbytes, crc))
        self.entries.append(_central_entry(name, offset, nbytes, crc))

    def write_end_of_file(self):
        """The version record and the directories."""
        self.write_record("version", _VERSION, len(_VERSION))
        cd_offset, cd = self.out.nbytes, b"".join(self.entries)
        self.out.write(cd)
        self.out.write(_end_records(len(self.entries), cd_offset, len(cd)))

    def close(self):
        self.pool.shutdown()


def _save_fn():
    """torch 1.13's private serialization._save, or None when this torch's
    is not the one known here."""
    import inspect

    from torch import serialization

    fn = getattr(serialization, "_save", None)
    try:
        params = list(inspect.signature(fn).parameters) if fn else []
    except (TypeError, ValueError):
        params = []
    return fn if params == ["obj", "zip_file", "pickle_module", "pickle_protocol"] else None


def _save_zip(obj, out, pickle_module=pickle, pickle_protocol=None,
              _use_new_zipfile_serialization=True):
    """torch.save(obj, out) in the zip format through ZipWriter; False
    (nothing written) when this torch's _save is not the one known here."""
    from torch import serialization

    fn = _save_fn()
    if fn is None or not _use_new_zipfile_serialization:
        return False
    if hasattr(serialization, "_check_dill_version"):
        serialization._check_dill_version(pickle_module)
    if pickle_protocol is None:
        pickle_protocol = serialization.DEFAULT_PROTOCOL
    z = ZipWriter(out)
    try:
        fn(obj, z, pickle_module, pickle_protocol)
        z.write_end_of_file()
    finally:
        z.close()
    return True


def save(obj, path, handle, locked, **save_args):
    """torch.save(obj, **save_args) to path through the handle, fsynced
    (in the zip format by ZipWriter when this torch is 1.13's, else by
    torch.save itself). Returns the file's size. When it fails, path is
    removed: no file that looks saved and is not."""
    import torch

    w = HandleWriter(path, handle, locked)
    try:
        if not _save_zip(obj, w, **save_args):
            torch.save(obj, w, **save_args)
        w.close()
    except BaseException:
        try:
            w.abort()
        except Exception:  # noqa: B902 - the save's own error is the one to report
            pass
        _unlink(path)
        raise
    return w.nbytes


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class StreamReader(MemReader):
    """MemReader over a file the handle is still reading into tensor: a
    thread of this reader reads the file's last chunk first (where a zip's
    directory is), then the rest in order, chunk by chunk; readinto waits
    for the bytes it needs. torch.load copies tensors out of the first
    chunks while the handle brings in the next ones."""

    def __init__(self, path, handle, tensor, nbytes, chunk=64 << 20, tail=4 << 20):
        super().__init__(tensor, nbytes)
        self.path, self.h, self.chunk = path, handle, max(4096, chunk // 4096 * 4096)
        self.tail = max(0, nbytes - tail) // 4096 * 4096  # [tail, nbytes) is read first
        self.head = 0  # [0, head) and, once tail_done, [tail, nbytes) are in memory
        self.tail_done = False
        self.error = None
        self.cv = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="nvmefs-load", daemon=True)
        self.thread.start()

    def _read(self, start, end):
        _whole(self.h, True, self.keep[start:end], self.path, start)

    def _run(self):
        try:
            if self.tail < self.size:
                self._read(self.tail, self.size)
            with self.cv:
                self.tail_done = True
                self.cv.notify_all()
            pos = 0
            while pos < self.tail:
                end = min(pos + self.chunk, self.tail)
                self._read(pos, end)
                with self.cv:
                    self.head = pos = end
                    self.cv.notify_all()
        except BaseException as e:  # noqa: B902 - handed to the reader
            with self.cv:
                self.error = e
                self.cv.notify_all()

    def _ready(self, start, end):
        if end <= self.head:
            return True
        if not self.tail_done:
            return False
        return start >= self.tail or (self.head >= self.tail)

    def readinto(self, b):
        n = max(0, min(memoryview(b).nbytes, self.size - self.pos))
        with self.cv:
            while self.error is None and not self._ready(self.pos, self.pos + n):
                self.cv.wait()
            if self.error is not None:
                raise self.error
        return super().readinto(b)

    def finish(self):
        """Wait for the reading thread; raise what it met."""
        self.thread.join()
        if self.error is not None:
            raise self.error


class _Records:
    """What torch.serialization._load asks of a zip archive (torch 1.13:
    get_record, get_storage_from_record), answered from the archive in
    memory at addr: storages are views of that memory, not copies."""

    def __init__(self, reader):
        import zipfile

        self.reader, self.records = reader, {}
        with zipfile.ZipFile(reader) as z:
            for info in z.infolist():
                if info.compress_type != zipfile.ZIP_STORED:
                    raise ValueError(f"{info.filename}: a compressed record")
                reader.seek(info.header_offset + 26)  # the local header's name and extra lengths
                lengths = reader.read(4)
                start = (info.header_offset + 30 + int.from_bytes(lengths[:2], "little")
                         + int.from_bytes(lengths[2:], "little"))
                # torch names records "ARCHIVE/data.pkl", "ARCHIVE/data/0", ...
                self.records[info.filename.split("/", 1)[-1]] = (start, info.file_size)

    def get_record(self, name):
        start, n = self.records[name]
        return ctypes.string_at(self.reader.addr + start, n)

    def get_storage_from_record(self, name, numel, _storage_type):
        import torch

        start, n = self.records[name]
        if n != numel:
            raise ValueError(f"record {name}: {n} bytes, the pickle says {numel}")
        mem = (ctypes.c_uint8 * n).from_address(self.reader.addr + start)
        mem.keep = self.reader.keep  # the buffer outlives the storage's reference
        return torch.frombuffer(mem, dtype=torch.uint8) if n else torch.empty(0, dtype=torch.uint8)


def _load_views(reader, load_args):
    """torch.load of a zip archive in memory whose tensors are views of it
    (torch 1.13's private serialization._load); None when this torch's
    _load is not the one known here, or the file is not a zip archive."""
    import inspect
    import pickle

    import torch
    from torch import serialization

    fn = getattr(serialization, "_load", None)
    try:
        params = list(inspect.signature(fn).parameters)[:4] if fn else []
    except (TypeError, ValueError):
        params = []
    if params != ["zip_file", "map_location", "pickle_module", "pickle_file"]:
        return None
    reader.seek(0)
    if reader.read(4) != b"PK\x03\x04":
        return None
    args = dict(load_args)
    map_location = args.pop("map_location", None)
    pickle_module = args.pop("pickle_module", pickle)
    args.setdefault("encoding", "utf-8")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        return fn(_Records(reader), map_location, pickle_module, **args)


def load(path, handle, locked, stream=True, zero_copy=False, **load_args):
    """torch.load of path, read by the handle into locked (a uint8 tensor
    of new_cpu_locked_tensor at least as large as the file). stream: begin
    unpickling while the handle still reads (StreamReader); else read all
    first. zero_copy: the tensors are views of locked (no copy, no memory
    of their own, as torch.load(mmap=True) of later torch gives views of
    the file): locked must then be neither freed nor reused while they are
    in use; for torch's zip format with torch 1.13's serialization, else
    ValueError."""
    import torch

    size = os.path.getsize(path)
    if size > locked.numel():
        raise ValueError(f"{path}: {size} bytes do not fit the {locked.numel()}-byte buffer")
    if zero_copy:
        _whole(handle, True, locked[:size], path, 0)
        obj = _load_views(MemReader(locked, size), load_args)
        if obj is None:
            raise ValueError(f"{path}: zero_copy needs torch's zip format and torch 1.13's "
                             f"serialization (this is torch {torch.__version__})")
        return obj
    if not stream:
        _whole(handle, True, locked[:size], path, 0)
        return torch.load(MemReader(locked, size), **load_args)
    r = StreamReader(path, handle, locked, size)
    try:
        return torch.load(r, **load_args)
    finally:
        r.finish()
