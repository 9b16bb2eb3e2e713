# SPDX-License-Identifier: MIT
"""nvmefs: Python access to an nvmefs volume's native client.

- aio_handle: DeepNVMe's aio_handle (DeepSpeed), fastest on nvmefs
  (zero copy for locked tensors), the same on any other filesystem.
- Client: one libnvmefs client (attach, reg_fd, pread, pwrite, fsync).
- buf_alloc / buf_free: memory shared with the daemons, pinned.
See docs/PYTHON.md.
"""
from .client import Client, buf_alloc, buf_free
from .handle import aio_handle

__all__ = ["aio_handle", "Client", "buf_alloc", "buf_free"]
