# SPDX-License-Identifier: MIT
"""nvmefs.aio_handle: DeepNVMe's aio_handle (DeepSpeed's csrc/aio) on nvmefs.

The same constructor, method names, argument order and return values as
DeepSpeed 0.19's async_io op (csrc/aio/py_lib/py_ds_aio.cpp):

    h = nvmefs.aio_handle(block_size=1048576, queue_depth=128,
                          single_submit=False, overlap_events=False,
                          intra_op_parallelism=1)
    t = h.new_cpu_locked_tensor(n, torch.empty(0, dtype=torch.float16))
    h.sync_pwrite(t, "/mnt/vol/x")         # 1: the operations completed
    h.async_pread(t, "/mnt/vol/x")         # 0 at once
    h.wait()                               # 1

(num_threads, DeepNVMe's older name of intra_op_parallelism, is taken as
a keyword too.) An operation (one buffer, one file) is cut into
intra_op_parallelism contiguous parts, each moved by a thread of the
handle in requests of block_size bytes, queue_depth of them in flight. On
a file of an nvmefs mount a part goes through the native client
(libnvmefs): no copy when the buffer is a locked tensor of
new_cpu_locked_tensor (shared with the daemon); other buffers pass
through the library's pinned bounce buffers. On any other filesystem it
uses O_DIRECT where buffer, offset and length allow and the filesystem
takes it, else buffered I/O, with the same results. A CUDA tensor goes
through locked host memory in chunks, its copies to or from the GPU
overlapping the file I/O (_bounce.py).

Return codes as DeepSpeed's: -1 (and a line on stderr) when the file
cannot be found, stat'ed or opened, and when a parallel operation's
buffer size does not divide by intra_op_parallelism. Where DeepSpeed
asserts, crashes, hangs or does nothing, OSError naming the file and the
errno instead (also from wait() for asynchronous operations): a read past
the end of the file or at a negative offset, read() into a buffer of
another size than the file's, a file that is not a regular one, failed
I/O, a failed validation. single_submit and overlap_events are kept and
reported, and do not change how requests are sent (the native client
always batches its submissions and reaps completions as they come).
docs/PYTHON.md has the table of every difference.
"""
import errno
import fcntl
import os
import queue
import stat
import sys
import threading

from . import _bounce
from ._op import Finishing
from ._buffer import buffer_view
from ._pinned import MANAGER, is_pinned
from .client import Client

ALIGN = 4096  # O_DIRECT alignment assumed for the fallback, and part boundaries


class _Op(Finishing):
    """One pread or pwrite of a buffer: its parts, their outcome, its file."""

    def __init__(self, read, addr, nbytes, keep, filename, fd, own_fd, validate, offset):
        self.read, self.addr, self.nbytes, self.keep = read, addr, nbytes, keep
        self.filename, self.fd, self.own_fd = filename, fd, own_fd
        self.validate, self.offset = validate, offset
        self.dev = os.fstat(fd).st_dev
        self.left = 0
        self.error = None
        self.lock = threading.Lock()
        self.done = threading.Event()

    def part_done(self, err):
        with self.lock:
            if err is not None and self.error is None:
                self.error = err
            self.left -= 1
            last = self.left == 0
        if last:
            self.done.set()

    def check(self):
        _validate(self)

    def release(self):
        """Let go of the buffer after finish(): a worker still holds the op
        (its last task), and a bytearray could not grow, nor an mmap
        close, while the op holds an export of it."""
        self.keep = None


def _validate(op):
    """Compare the buffer with the file through ordinary reads."""
    import ctypes

    mine = ctypes.string_at(op.addr, op.nbytes)
    with open(op.filename, "rb") as f:
        f.seek(op.offset)
        theirs = f.read(op.nbytes)
    if mine != theirs:
        at = next((i for i in range(min(len(mine), len(theirs))) if mine[i] != theirs[i]),
                  min(len(mine), len(theirs)))
        raise OSError(errno.EIO, f"validation failed: the {'read' if op.read else 'written'} "
                      f"bytes differ from the file's at offset {op.offset + at}", op.filename)


class _Worker(threading.Thread):
    """A thread of the handle with its own native clients (one per mount)."""

    def __init__(self, handle):
        super().__init__(daemon=True, name="nvmefs-aio")
        self.h = handle
        self.tasks = queue.SimpleQueue()
        self.clients = {}  # st_dev -> Client, or None when not nvmefs
        self.start()

    def run(self):
        while True:
            task = self.tasks.get()
            if task is None:
                break
            op, start, length = task
            try:
                self.move(op, start, length)
                op.part_done(None)
            except OSError as e:
                op.part_done(e)
            except Exception as e:  # never lose a part: wait() would hang
                op.part_done(OSError(errno.EIO, f"{type(e).__name__}: {e}", op.filename))
        for c in self.clients.values():
            if c is not None:
                c.close()

    def client(self, op):
        if op.dev not in self.clients:
            try:
                self.clients[op.dev] = Client(op.filename)
            except OSError as e:
                if e.errno not in (errno.ENOTSUP, errno.EPROTONOSUPPORT):
                    raise
                self.clients[op.dev] = None
        return self.clients[op.dev]

    def registered(self, op):
        """This thread's client with op.fd registered, or None when the
        part goes through the filesystem: not nvmefs, or a writer on a
        mount with -o writeback, whose kernel owns sizes and times (the
        daemon takes no native writes; the mount takes them as from any
        program)."""
        for again in (False, True):
            c = self.client(op)
            if c is None:
                return None
            try:
                c.reg_fd(op.fd, op.filename)
                return c
            except OSError as e:
                if e.errno == errno.EOPNOTSUPP:
                    return None
                # The daemon this thread connected to is gone, and the
                # filesystem mounted since has its st_dev (an unmount frees
                # the number): look again, once.
                if e.errno not in (errno.ENOTCONN, errno.EXDEV) or again:
                    raise
                self.clients.pop(op.dev).close()

    def move(self, op, start, length):
        c = self.registered(op)
        if c is None:
            _fallback(op, start, length, self.h.block_size, self.h.queue_depth)
            return
        try:
            c.transfer(op.read, op.fd, op.addr + start, length, op.offset + start,
                       self.h.block_size, self.h.queue_depth)
        finally:
            c.unreg_fd(op.fd)


def _fallback(op, start, length, block, depth):
    """Any other filesystem: O_DIRECT for aligned blocks when the filesystem
    takes it, buffered otherwise. One system call moves up to depth blocks:
    the kernel splits a large O_DIRECT request into that many in flight,
    where calls of one block each would keep one in flight."""
    import ctypes

    mem = memoryview((ctypes.c_char * length).from_address(op.addr + start)).cast("B")
    plain = op.fd
    flags = fcntl.fcntl(op.fd, fcntl.F_GETFL)
    if flags & os.O_DIRECT or (not op.read and flags & os.O_APPEND):
        # A descriptor the caller gave: pwrite(2) on an O_APPEND one appends,
        # whatever the offset (the native client writes at the offset), and
        # an O_DIRECT one refuses unaligned pieces (DeepSpeed's tests open
        # theirs O_DIRECT and write 1 KiB pieces).
        plain = os.open(f"/proc/self/fd/{op.fd}",
                        (os.O_RDONLY if op.read else os.O_WRONLY) | os.O_CLOEXEC)
    direct = _direct_fd(op)
    try:
        pos = 0
        while pos < length:
            # At most 1 GiB: the kernel moves at most 2 GiB - 4 KiB a call.
            n = min(block * depth, 1 << 30, length - pos)
            off = op.offset + start + pos
            if n > ALIGN and n % ALIGN and not ((op.addr + start + pos) | off) % ALIGN:
                n -= n % ALIGN  # the aligned part directly, the tail next round
            aligned = not ((op.addr + start + pos) | off | n) % ALIGN
            fd = direct if (direct is not None and aligned) else plain
            got = (os.preadv(fd, [mem[pos:pos + n]], off) if op.read
                   else os.pwrite(fd, mem[pos:pos + n], off))
            if got != n:
                raise OSError(errno.EIO, f"short {'read' if op.read else 'write'}: "
                              f"{got} of {n} bytes at {off}", op.filename)
            pos += n
    finally:
        if direct is not None:
            os.close(direct)
        if plain != op.fd:
            os.close(plain)


def _direct_fd(op):
    """The op's file opened again with O_DIRECT, or None where refused."""
    flags = (os.O_RDONLY if op.read else os.O_WRONLY) | os.O_DIRECT | os.O_CLOEXEC
    try:
        return os.open(f"/proc/self/fd/{op.fd}", flags)
    except OSError:
        return None


def _name(filename):
    """The name errors give for a file argument: a path or a descriptor."""
    return f"/proc/self/fd/{filename}" if isinstance(filename, int) else os.fsdecode(filename)


def _report(what, name, err):
    """DeepSpeed's report_file_error: a line on stderr, then -1."""
    print(f"nvmefs.aio_handle: {what} failed on {name}: {err.strerror} (errno {err.errno})",
          file=sys.stderr, flush=True)
    return -1


def _nbytes(buffer, writable):
    """(address, nbytes, keep) of a host buffer; (None, nbytes, copier) of
    a device tensor (_bounce.py moves it)."""
    copier = _bounce.device_copier(buffer)
    if copier is None:
        return buffer_view(buffer, writable=writable)
    flat = _bounce.byte_view(buffer)
    return None, flat.numel(), copier


class aio_handle:  # noqa: N801 - DeepNVMe's name
    """DeepNVMe's aio_handle over nvmefs's native client (module docstring)."""

    def __init__(self, block_size=1048576, queue_depth=128, single_submit=False,
                 overlap_events=False, intra_op_parallelism=1, *, num_threads=None):
        if num_threads is not None:  # DeepNVMe's older keyword
            if intra_op_parallelism not in (1, num_threads):
                raise TypeError(f"num_threads={num_threads} and intra_op_parallelism="
                                f"{intra_op_parallelism}: num_threads is the older name of "
                                "intra_op_parallelism, give one")
            intra_op_parallelism = num_threads
        name = "num_threads" if num_threads is not None else "intra_op_parallelism"
        for what, v in (("block_size", block_size), ("queue_depth", queue_depth),
                        (name, intra_op_parallelism)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{what} must be a positive integer, not {v!r}")
        self.block_size, self.queue_depth = block_size, queue_depth
        self.single_submit, self.overlap_events = bool(single_submit), bool(overlap_events)
        self.num_threads = intra_op_parallelism
        self._workers = [_Worker(self) for _ in range(intra_op_parallelism)]
        # Asynchronous operations not yet collected by a wait(), of every
        # thread: the handle may be shared (ZeRO-Infinity's swappers share
        # theirs). A synchronous call's own operation never enters it, so
        # no other thread's wait() takes it, nor counts it.
        self._pending_lock = threading.Lock()
        self._pending = []

    # -- getters, as DeepSpeed's --
    def get_block_size(self):
        return self.block_size

    def get_queue_depth(self):
        return self.queue_depth

    def get_single_submit(self):
        return self.single_submit

    def get_overlap_events(self):
        return self.overlap_events

    def get_intra_op_parallelism(self):
        return self.num_threads

    get_thread_count = get_intra_op_parallelism  # DeepNVMe's older name

    def get_alignment(self):
        """The unit a parallel operation's size should be a multiple of:
        intra_op_parallelism parts of whole 4096-byte pages (DeepSpeed's:
        of 512 bytes, its O_DIRECT_ALIGNMENT). Every multiple of it is one
        of DeepSpeed's, and gives each thread page-aligned parts (zero
        copy on nvmefs, O_DIRECT elsewhere)."""
        return self.num_threads * ALIGN

    def is_pinned(self, buffer):
        """Whether buffer needs no bounce copy: torch-pinned, or inside a
        locked tensor of new_cpu_locked_tensor (of any handle)."""
        return is_pinned(buffer)

    # -- operations --
    def _open(self, read, filename, nbytes, file_offset, parallel):
        """DeepSpeed's checks before an operation, in its order: the file
        (-1 when it cannot be stat'ed or opened), the range read, the
        split over the threads (-1). (fd, own) or -1."""
        name = _name(filename)
        if file_offset < 0:
            raise OSError(errno.EINVAL, f"file_offset {file_offset} < 0", name)
        by_fd = isinstance(filename, int)  # DeepSpeed's async_pwrite(buffer, fd, offset)
        if read and not by_fd:
            try:
                st = os.stat(name)
            except OSError as e:
                return _report("stat for read", name, e)
            _check_range(read, st, nbytes, file_offset, name)
        if parallel and nbytes % self.num_threads:
            print(f"nvmefs.aio_handle: parallel {'read' if read else 'write'} of {name}: "
                  f"{nbytes} bytes do not divide by intra_op_parallelism {self.num_threads}",
                  file=sys.stderr, flush=True)
            return -1
        if by_fd:
            return filename, False
        try:
            fd = os.open(name, (os.O_RDONLY if read else os.O_WRONLY | os.O_CREAT)
                         | os.O_CLOEXEC, 0o600)
        except OSError as e:
            return _report(f"open for {'read' if read else 'write'}", name, e)
        return fd, True

    def _schedule(self, read, buffer, filename, validate, file_offset, async_op, parallel=True):
        """Start one operation: its parts go to the threads, a device
        tensor's chunks to a thread of its own. An async one is left to
        wait(); a synchronous one is returned to its caller. -1 where
        DeepSpeed returns it."""
        addr, nbytes, keep = _nbytes(buffer, read)
        got = self._open(read, filename, nbytes, file_offset, parallel)
        if got == -1:
            return -1
        fd, own = got
        name = _name(filename)
        try:
            _check_range(read, os.fstat(fd), nbytes, file_offset, name)
            if addr is None:  # a device tensor; keep is its copier
                op = _bounce.DeviceOp(self, keep, read, buffer, name, fd, own, validate,
                                      file_offset)
            else:
                op = _Op(read, addr, nbytes, keep, name, fd, own, validate, file_offset)
        except BaseException:
            if own:
                os.close(fd)
            raise
        if async_op:
            with self._pending_lock:
                self._pending.append(op)
        if addr is not None:
            self._submit(op)
        return op

    def _submit(self, op):
        parts = self._parts(op.nbytes)
        op.left = len(parts)
        if not parts:
            op.done.set()
        for w, (start, length) in zip(self._workers, parts):
            w.tasks.put((op, start, length))

    def _start_part(self, read, tensor, fd, name, offset):
        """A chunk of a device tensor's operation: locked host memory from
        or to fd, on the handle's threads; the caller _finish()es it."""
        addr, nbytes, keep = buffer_view(tensor, writable=read)
        op = _Op(read, addr, nbytes, keep, name, fd, False, False, offset)
        self._submit(op)
        return op

    def _parts(self, nbytes):
        """num_threads contiguous parts, cut at ALIGN boundaries."""
        per = -(-nbytes // self.num_threads)
        per = -(-per // ALIGN) * ALIGN
        return [(s, min(per, nbytes - s)) for s in range(0, nbytes, per)] if nbytes else []

    def wait(self):
        """Block until every pending asynchronous operation (of any thread)
        is done: how many were. Each is counted by the one wait() that
        took it. Raises the first failure after all of them have finished."""
        with self._pending_lock:
            ops, self._pending = self._pending, []
        return self._finish(ops)

    @staticmethod
    def _finish(ops):
        """Wait for ops and finish each: their count, or the first failure."""
        err = None
        for op in ops:
            op.done.wait()
            try:
                op.finish()
            except OSError as e:
                err = err or e
        if err is not None:
            raise err
        return len(ops)

    def pread(self, buffer, filename, validate, async_op=None, file_offset=0, **kw):
        """Read the file at file_offset into buffer (all of it). async_op
        (DeepSpeed's keyword `async`, a reserved word in Python: taken as
        **{"async": ...} too): 0 at once, wait() later; else the count of
        operations completed. -1 as DeepSpeed's."""
        async_op = _async_keyword(async_op, kw)
        return self._run(True, buffer, filename, validate, async_op, file_offset)

    def pwrite(self, buffer, filename, validate, async_op=None, file_offset=0, **kw):
        """Write buffer to the file at file_offset (created 0600, never
        truncated). Returns as pread."""
        async_op = _async_keyword(async_op, kw)
        return self._run(False, buffer, filename, validate, async_op, file_offset)

    def _run(self, read, buffer, filename, validate, async_op, file_offset, parallel=True):
        """pread/pwrite: 0 for an async operation; for a synchronous one, as
        DeepNVMe's, the count of operations completed: its own (waited for
        by this call alone) and the async ones pending until then."""
        op = self._schedule(read, buffer, filename, validate, file_offset, async_op, parallel)
        if op == -1:
            return -1
        if async_op:
            return 0
        return self._finish([op]) + self.wait()

    def sync_pread(self, buffer, filename, file_offset=0):
        return self.pread(buffer, filename, False, False, file_offset)

    def sync_pwrite(self, buffer, filename, file_offset=0):
        return self.pwrite(buffer, filename, False, False, file_offset)

    def async_pread(self, buffer, filename, file_offset=0):
        return self.pread(buffer, filename, False, True, file_offset)

    def async_pwrite(self, buffer, filename=None, file_offset=0, *, fd=None):
        """DeepSpeed's two overloads: (buffer, filename, file_offset) and
        (buffer, fd, file_offset), the descriptor by position or as fd=;
        it is used, never closed."""
        if (filename is None) == (fd is None):
            raise TypeError("async_pwrite() takes a filename or an fd")
        return self.pwrite(buffer, fd if fd is not None else filename, False, True, file_offset)

    def read(self, buffer, filename, validate, file_offset=0):
        """DeepNVMe's non-parallel synchronous read: the whole file from
        file_offset (its size less file_offset must be the buffer's). 0,
        or -1 when the file cannot be stat'ed or opened."""
        _addr, nbytes, _keep = _nbytes(buffer, True)
        name = _name(filename)
        try:
            size = os.stat(name).st_size - file_offset
        except OSError as e:
            return _report("stat for read", name, e)
        if size != nbytes:
            raise OSError(errno.EINVAL, f"the buffer holds {nbytes} bytes, the file "
                          f"{size} from offset {file_offset}", name)
        if self._run(True, buffer, filename, validate, False, file_offset, False) == -1:
            return -1
        return 0

    def write(self, buffer, filename, validate, file_offset=0):
        """DeepNVMe's non-parallel synchronous write. 0, or -1 when the file
        cannot be opened."""
        if self._run(False, buffer, filename, validate, False, file_offset, False) == -1:
            return -1
        return 0

    # -- locked tensors, of the process-wide manager (_pinned.py) --
    def new_cpu_locked_tensor(self, num_elem, example_tensor=None, **kw):
        """A tensor of num_elem elements of example_tensor's dtype in
        page-aligned, mlocked memory shared with nvmefs daemons (no copy
        through them). A numpy array as the example gives a numpy array.
        num_elem 0 gives an empty one, which holds no memory. (DeepSpeed's
        binding spells the keyword example_tenosr: taken too.)"""
        if "example_tenosr" in kw and example_tensor is None:
            example_tensor = kw.pop("example_tenosr")
        if kw or example_tensor is None:
            raise TypeError(f"new_cpu_locked_tensor(num_elem, example_tensor): {sorted(kw)}")
        return MANAGER.alloc(num_elem, example_tensor)

    def free_cpu_locked_tensor(self, tensor):
        """Free a tensor of new_cpu_locked_tensor (of this handle or any
        other, as DeepSpeed's process-wide manager): True, or False when it
        is not one. The tensor must not be used afterwards."""
        return MANAGER.free(tensor)

    def close(self):
        """Stop the handle's threads (after wait())."""
        for w in self._workers:
            w.tasks.put(None)
        for w in self._workers:
            w.join()
        self._workers = []

    def __del__(self):
        try:
            if self._workers:
                self.close()
        except Exception:
            pass


def _async_keyword(async_op, kw):
    """pread/pwrite's fourth argument, also by DeepSpeed's keyword async."""
    if "async" in kw:
        if async_op is not None:
            raise TypeError("async and async_op are one argument: give one")
        async_op = kw.pop("async")
    if kw:
        raise TypeError(f"unexpected keyword arguments {sorted(kw)}")
    if async_op is None:
        raise TypeError("missing the argument async_op (DeepSpeed's async)")
    return bool(async_op)


def _check_range(read, st, nbytes, file_offset, name):
    """A regular file, and a read inside it: else OSError (DeepSpeed
    asserts on a read past the end, and reads a directory as a file)."""
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", name)
    if read and file_offset + nbytes > st.st_size:
        raise OSError(errno.EINVAL, f"reading {nbytes} bytes at {file_offset} goes "
                      f"past the end of the file ({st.st_size} bytes)", name)


def aio_read(buffer, filename, block_size, queue_depth, single_submit, overlap_events,
             validate):
    """DeepSpeed's module-level aio_read: the whole file into buffer (its
    size must be the file's) by a handle of one thread. 0, or -1 when the
    file cannot be stat'ed or opened."""
    h = aio_handle(block_size, queue_depth, single_submit, overlap_events, 1)
    try:
        return h.read(buffer, filename, validate)
    finally:
        h.close()


def aio_write(buffer, filename, block_size, queue_depth, single_submit, overlap_events,
              validate):
    """DeepSpeed's module-level aio_write: buffer to the file at offset 0
    (created 0600, not truncated). 0, or -1 when it cannot be opened."""
    h = aio_handle(block_size, queue_depth, single_submit, overlap_events, 1)
    try:
        return h.write(buffer, filename, validate)
    finally:
        h.close()


def deepspeed_memcpy(dest, src):
    """DeepSpeed's deepspeed_memcpy: dest.size(0) float32 elements (4 bytes
    each, whatever the dtypes) from src's contiguous bytes into dest. 0.
    ValueError where DeepSpeed would copy past either tensor's memory or,
    for a non-contiguous dest, into a temporary copy of it (nothing)."""
    import ctypes

    n = 4 * dest.shape[0]
    if hasattr(src, "contiguous"):
        src = src.contiguous()
    daddr, dn, _dkeep = buffer_view(dest, writable=True)
    saddr, sn, _skeep = buffer_view(src, writable=False)
    if n > dn or n > sn:
        raise ValueError(f"deepspeed_memcpy copies dest.size(0) = {dest.shape[0]} float32s "
                         f"({n} bytes): dest holds {dn} bytes, src {sn}")
    ctypes.memmove(daddr, saddr, n)
    return 0
