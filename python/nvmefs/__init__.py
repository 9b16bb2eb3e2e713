# SPDX-License-Identifier: MIT
"""nvmefs: Python access to an nvmefs volume's native client.

- aio_handle: DeepNVMe's aio_handle (DeepSpeed's async_io op), fastest on
  nvmefs (zero copy for locked tensors), the same on any other filesystem;
  with the op's module-level aio_read, aio_write and deepspeed_memcpy.
- pin_handle: DeepSpeed's pin_memory op (locked tensors, process-wide).
- Client: one libnvmefs client (attach, reg_fd, pread, pwrite, fsync).
- buf_alloc / buf_free: memory shared with the daemons, pinned.
So `AsyncIOBuilder().load()` may return this module. See docs/PYTHON.md.
"""
from ._pinned import pin_handle
from .client import Client, buf_alloc, buf_free
from .handle import aio_handle, aio_read, aio_write, deepspeed_memcpy

__all__ = ["aio_handle", "aio_read", "aio_write", "deepspeed_memcpy", "pin_handle", "Client",
           "buf_alloc", "buf_free"]
