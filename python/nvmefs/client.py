# SPDX-License-Identifier: MIT
"""A Python face of one libnvmefs client (one connection to a daemon).

Like the C client it is not thread-safe: use one per thread. Errors are
OSError with the errno and the library's sentence, naming the file.
"""
import ctypes
import errno
import os

from . import _lib
from ._buffer import buffer_view

lib = _lib.lib


def _raise(ret, client, filename=None, what=""):
    text = _lib.error_text(client) or what or os.strerror(-ret)
    raise OSError(-ret, text, filename)


class Client:
    """A connection to the daemon of the nvmefs mount that holds path."""

    def __init__(self, path):
        handle = ctypes.c_void_p()
        ret = lib.nvmefs_attach(os.fsencode(path), ctypes.byref(handle))
        if ret:
            _raise(ret, None, path)
        self._c = handle
        self._names = {}  # fd -> filename, for errors
        self.block = lib.nvmefs_client_block(self._c)
        self.max_inflight = lib.nvmefs_client_max_inflight(self._c)

    _c = None  # until attached

    def close(self):
        if self._c:
            lib.nvmefs_detach(self._c)
            self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def reg_fd(self, fd, filename=None):
        ret = lib.nvmefs_reg_fd(self._c, fd)
        if ret:
            _raise(ret, self._c, filename)
        self._names[fd] = filename

    def unreg_fd(self, fd):
        ret = lib.nvmefs_unreg_fd(self._c, fd)
        name = self._names.pop(fd, None)
        if ret:
            _raise(ret, self._c, name)

    def _rw(self, fn, fd, addr, length, offset):
        n = fn(self._c, fd, addr, length, offset)
        if n < 0:
            _raise(n, self._c, self._names.get(fd))
        return n

    def pread(self, fd, buffer, offset=0):
        """Read into buffer (its whole length) at offset: bytes read."""
        addr, nbytes, _keep = buffer_view(buffer, writable=True)
        return self._rw(lib.nvmefs_pread, fd, addr, nbytes, offset)

    def pwrite(self, fd, buffer, offset=0):
        """Write buffer at offset: bytes written."""
        addr, nbytes, _keep = buffer_view(buffer, writable=False)
        return self._rw(lib.nvmefs_pwrite, fd, addr, nbytes, offset)

    def fsync(self, fd):
        ret = lib.nvmefs_fsync(self._c, fd)
        if ret:
            _raise(ret, self._c, self._names.get(fd))

    def transfer(self, read, fd, addr, length, offset, block, depth):
        """Move length bytes between memory at addr and the file at offset
        in requests of block bytes, depth of them in flight. Raises OSError
        when one fails or a read comes back short."""
        if length <= 0:
            return
        nreq = (length + block - 1) // block
        depth = max(1, min(depth, nreq, self.max_inflight))
        ios = (_lib.Io * depth)()
        cqes = (_lib.Cqe * depth)()
        op = _lib.OP_READ if read else _lib.OP_WRITE
        name = self._names.get(fd)
        nxt = inflight = 0
        err = None  # the first failure: nothing more is sent, the rest drains
        while inflight or (err is None and nxt < nreq):
            batch = 0
            while err is None and inflight + batch < depth and nxt + batch < nreq:
                k = nxt + batch
                io = ios[batch]
                io.fd, io.op, io.user_data = fd, op, k
                io.buf = addr + k * block
                io.len = min(block, length - k * block)
                io.off = offset + k * block
                batch += 1
            if batch:
                taken = lib.nvmefs_submit(self._c, ios, batch)
                if taken == -errno.EAGAIN:
                    taken = 0  # the client is full: sent again after a completion
                elif taken < 0:
                    _raise(taken, self._c, name)
                nxt += taken
                inflight += taken
            if not inflight:
                continue
            n = lib.nvmefs_wait(self._c, cqes, depth, 1, -1)
            if n < 0:
                _raise(n, self._c, name)  # the connection is gone: nothing in flight
            for cqe in cqes[:n]:
                want = min(block, length - cqe.user_data * block)
                if cqe.res != want and err is None:
                    err = (OSError(-cqe.res, os.strerror(-cqe.res), name) if cqe.res < 0
                           else OSError(errno.EIO, f"short {'read' if read else 'write'}: "
                                        f"{cqe.res} of {want} bytes at "
                                        f"{offset + cqe.user_data * block}", name))
            inflight -= n
        if err is not None:
            raise err

    def stats(self):
        st = _lib.ClientStats()
        lib.nvmefs_client_stats(self._c, ctypes.byref(st))
        return {name: getattr(st, name) for name, _ in _lib.ClientStats._fields_}


def buf_alloc(nbytes, numa_node=-1):
    """Pinned, page-aligned memory every client of this process can use with
    no copy: its address (free it with buf_free)."""
    addr = ctypes.c_void_p()
    ret = lib.nvmefs_buf_alloc(None, nbytes, numa_node, ctypes.byref(addr))
    if ret:
        _raise(ret, None)
    return addr.value


def buf_free(addr):
    ret = lib.nvmefs_buf_free(None, ctypes.c_void_p(addr))
    if ret:
        _raise(ret, None)
