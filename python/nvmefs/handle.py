# SPDX-License-Identifier: MIT
"""nvmefs.aio_handle: DeepNVMe's aio_handle (DeepSpeed's csrc/aio) on nvmefs.

The same constructor, method names, argument order and return values:

    h = nvmefs.aio_handle(block_size=1048576, queue_depth=128,
                          single_submit=False, overlap_events=False,
                          num_threads=1)
    t = h.new_cpu_locked_tensor(n, torch.empty(0, dtype=torch.float16))
    h.sync_pwrite(t, "/mnt/vol/x")         # 1: the operations completed
    h.async_pread(t, "/mnt/vol/x")         # 0 at once
    h.wait()                               # 1

An operation (one buffer, one file) is cut into num_threads contiguous
parts, each moved by a thread of the handle in requests of block_size
bytes, queue_depth of them in flight. On a file of an nvmefs mount a part
goes through the native client (libnvmefs): no copy when the buffer is a
locked tensor of new_cpu_locked_tensor (shared with the daemon); other
buffers pass through the library's pinned bounce buffers. On any other
filesystem it uses O_DIRECT where buffer, offset and length allow and the
filesystem takes it, else buffered I/O, with the same results.

Differences from DeepNVMe, on purpose: failures raise OSError naming the
file and the errno (DeepNVMe prints and returns -1 or asserts), also from
wait() for asynchronous operations; the buffer's size need not be a
multiple of num_threads; single_submit and overlap_events are kept and
reported, and do not change how requests are sent (the native client
always batches its submissions and reaps completions as they come).
"""
import errno
import fcntl
import os
import queue
import stat
import threading

from ._buffer import buffer_view
from .client import Client, buf_alloc, buf_free

ALIGN = 4096  # O_DIRECT alignment assumed for the fallback, and part boundaries


class _Op:
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

    def finish(self):
        """After every part: close what the op opened, check, raise. Then
        let go of the buffer: a worker still holds the op (its last task),
        and a bytearray could not grow, nor an mmap close, while the op
        holds an export of it."""
        try:
            if self.own_fd:
                os.close(self.fd)
            if self.error is not None:
                raise self.error
            if self.validate:
                _validate(self)
        finally:
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
    if not op.read and fcntl.fcntl(op.fd, fcntl.F_GETFL) & os.O_APPEND:
        # pwrite(2) on an O_APPEND descriptor (one the caller gave) appends,
        # whatever the offset; the native client writes at the offset.
        plain = os.open(f"/proc/self/fd/{op.fd}", os.O_WRONLY | os.O_CLOEXEC)
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


class aio_handle:  # noqa: N801 - DeepNVMe's name
    """DeepNVMe's aio_handle over nvmefs's native client (module docstring)."""

    def __init__(self, block_size=1048576, queue_depth=128, single_submit=False,
                 overlap_events=False, num_threads=1):
        for name, v in (("block_size", block_size), ("queue_depth", queue_depth),
                        ("num_threads", num_threads)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, not {v!r}")
        self.block_size, self.queue_depth = block_size, queue_depth
        self.single_submit, self.overlap_events = bool(single_submit), bool(overlap_events)
        self.num_threads = num_threads
        self._workers = [_Worker(self) for _ in range(num_threads)]
        # Asynchronous operations not yet collected by a wait(), of every
        # thread: the handle may be shared (ZeRO-Infinity's swappers share
        # theirs). A synchronous call's own operation never enters it, so
        # no other thread's wait() takes it, nor counts it.
        self._pending_lock = threading.Lock()
        self._pending = []
        self._locked = {}  # data_ptr -> nbytes of new_cpu_locked_tensor
        self._empty = {}  # id -> its empty tensors (num_elem 0), kept alive

    # -- getters, as DeepNVMe's --
    def get_block_size(self):
        return self.block_size

    def get_queue_depth(self):
        return self.queue_depth

    def get_single_submit(self):
        return self.single_submit

    def get_overlap_events(self):
        return self.overlap_events

    def get_thread_count(self):
        return self.num_threads

    get_intra_op_parallelism = get_thread_count  # DeepSpeed's older name

    # -- operations --
    def _schedule(self, read, buffer, filename, validate, file_offset, async_op):
        """Start one operation: its parts go to the threads. An async one
        is left to wait(); a synchronous one is returned to its caller."""
        addr, nbytes, keep = buffer_view(buffer, writable=read)
        if file_offset < 0:
            raise OSError(errno.EINVAL, f"file_offset {file_offset} < 0", filename)
        name = _name(filename)
        if isinstance(filename, int):  # DeepNVMe's async_pwrite(buffer, fd, offset)
            fd, own = filename, False
        else:
            fd = os.open(name, (os.O_RDONLY if read else os.O_WRONLY | os.O_CREAT)
                         | os.O_CLOEXEC, 0o600)
            own = True
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", name)
            if read and file_offset + nbytes > st.st_size:
                raise OSError(errno.EINVAL, f"reading {nbytes} bytes at {file_offset} goes "
                              f"past the end of the file ({st.st_size} bytes)", name)
            op = _Op(read, addr, nbytes, keep, name, fd, own, validate, file_offset)
        except BaseException:
            if own:
                os.close(fd)
            raise
        parts = self._parts(nbytes)
        op.left = len(parts)
        if not parts:
            op.done.set()
        if async_op:
            with self._pending_lock:
                self._pending.append(op)
        for w, (start, length) in zip(self._workers, parts):
            w.tasks.put((op, start, length))
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

    def pread(self, buffer, filename, validate, async_op, file_offset=0):
        """Read the file at file_offset into buffer (all of it). async_op
        (DeepNVMe's `async`, a keyword in Python): 0 at once, wait() later;
        else the count of operations completed."""
        return self._run(True, buffer, filename, validate, async_op, file_offset)

    def pwrite(self, buffer, filename, validate, async_op, file_offset=0):
        """Write buffer to the file at file_offset (created 0600, never
        truncated). Returns as pread."""
        return self._run(False, buffer, filename, validate, async_op, file_offset)

    def _run(self, read, buffer, filename, validate, async_op, file_offset):
        """pread/pwrite: 0 for an async operation; for a synchronous one, as
        DeepNVMe's, the count of operations completed: its own (waited for
        by this call alone) and the async ones pending until then."""
        op = self._schedule(read, buffer, filename, validate, file_offset, async_op)
        if async_op:
            return 0
        return self._finish([op]) + self.wait()

    def sync_pread(self, buffer, filename, file_offset=0):
        return self.pread(buffer, filename, False, False, file_offset)

    def sync_pwrite(self, buffer, filename, file_offset=0):
        return self.pwrite(buffer, filename, False, False, file_offset)

    def async_pread(self, buffer, filename, file_offset=0):
        return self.pread(buffer, filename, False, True, file_offset)

    def async_pwrite(self, buffer, filename, file_offset=0):
        return self.pwrite(buffer, filename, False, True, file_offset)

    def read(self, buffer, filename, validate, file_offset=0):
        """DeepNVMe's older synchronous read: the whole file from
        file_offset (its size less file_offset must be the buffer's). 0."""
        _addr, nbytes, _keep = buffer_view(buffer, writable=True)
        size = os.stat(filename).st_size - file_offset
        if size != nbytes:
            raise OSError(errno.EINVAL, f"the buffer holds {nbytes} bytes, the file "
                          f"{size} from offset {file_offset}", _name(filename))
        self.pread(buffer, filename, validate, False, file_offset)
        return 0

    def write(self, buffer, filename, validate, file_offset=0):
        """DeepNVMe's older synchronous write. 0."""
        self.pwrite(buffer, filename, validate, False, file_offset)
        return 0

    # -- locked tensors --
    def new_cpu_locked_tensor(self, num_elem, example_tensor):
        """A tensor of num_elem elements of example_tensor's dtype in
        page-aligned, mlocked memory shared with nvmefs daemons (no copy
        through them). A numpy array as the example gives a numpy array.
        num_elem 0 gives an empty one, which holds no memory."""
        import ctypes

        num_elem = int(num_elem)
        if num_elem < 0:
            raise ValueError(f"num_elem must be 0 or more, not {num_elem}")
        if hasattr(example_tensor, "element_size"):
            import torch as mod
            itemsize = example_tensor.element_size()
        else:
            import numpy as mod
            itemsize = example_tensor.itemsize
        dtype = example_tensor.dtype
        if num_elem == 0:
            # torch.frombuffer takes no count of 0, and an empty tensor's
            # data_ptr() is 0: known by its identity instead.
            t = mod.empty(0, dtype=dtype)
            self._empty[id(t)] = t
            return t
        nbytes = num_elem * itemsize
        addr = buf_alloc(nbytes)
        try:
            t = mod.frombuffer((ctypes.c_uint8 * nbytes).from_address(addr), dtype=dtype,
                               count=num_elem)
        except BaseException:
            buf_free(addr)
            raise
        self._locked[addr] = nbytes
        return t

    def free_cpu_locked_tensor(self, tensor):
        """Free a tensor of new_cpu_locked_tensor: True, or False when it is
        not one (of this handle). The tensor must not be used afterwards."""
        if self._empty.pop(id(tensor), None) is not None:
            return True
        addr = (tensor.data_ptr() if hasattr(tensor, "data_ptr")
                else tensor.__array_interface__["data"][0])
        if not addr or self._locked.pop(addr, None) is None:
            return False
        buf_free(addr)
        return True

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
