# SPDX-License-Identifier: MIT
"""Locked tensors, process-wide: DeepSpeed's pinned-tensor manager and its
pin_memory op's pin_handle.

Since DeepSpeed 0.19.4 one manager per process holds every locked tensor
(csrc/pin_memory/deepspeed_pin_tensor.h, "process-wide shared manager"):
a tensor allocated through one aio_handle (or pin_handle) is known to
every other, is_pinned() says so for it and for any view inside it, and
any of them frees it. nvmefs does the same with buf_alloc's memory, which
nvmefs daemons share (no copy through them).
"""
import ctypes
import threading

from .client import buf_alloc, buf_free


def _addr_and_size(buffer):
    """(address, nbytes) of a CPU tensor or an array, or None."""
    if hasattr(buffer, "data_ptr") and hasattr(buffer, "element_size"):
        if buffer.device.type != "cpu":
            return None
        return buffer.data_ptr(), buffer.numel() * buffer.element_size()
    if hasattr(buffer, "__array_interface__"):
        return buffer.__array_interface__["data"][0], buffer.nbytes
    return None


class _Manager:
    """The registry of locked allocations: base address -> bytes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._locked = {}  # address -> nbytes /* protected by _lock */
        self._empty = {}  # id -> an empty tensor (num_elem 0), kept alive /* _lock */

    def alloc(self, num_elem, example):
        """A 1-D tensor (numpy array for a numpy example) of num_elem
        elements of example's dtype in page-aligned mlocked memory shared
        with nvmefs daemons. num_elem 0: an empty one, holding no memory."""
        num_elem = int(num_elem)
        if num_elem < 0:
            raise ValueError(f"num_elem must be 0 or more, not {num_elem}")
        if hasattr(example, "element_size"):
            import torch as mod
            itemsize = example.element_size()
        else:
            import numpy as mod
            itemsize = example.itemsize
        dtype = example.dtype
        if num_elem == 0:
            # torch.frombuffer takes no count of 0, and an empty tensor's
            # data_ptr() is 0: known by its identity instead.
            t = mod.empty(0, dtype=dtype)
            with self._lock:
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
        with self._lock:
            self._locked[addr] = nbytes
        return t

    def free(self, tensor):
        """Free a tensor of alloc() by its first byte: True, or False when
        that is no allocation's start."""
        with self._lock:
            if self._empty.pop(id(tensor), None) is not None:
                return True
        got = _addr_and_size(tensor)
        return got is not None and self.free_ptr(got[0])

    def free_ptr(self, addr):
        """Free the allocation that starts at addr: True, or False."""
        with self._lock:
            if not addr or self._locked.pop(addr, None) is None:
                return False
        buf_free(addr)
        return True

    def is_managed(self, buffer):
        """Whether all of buffer's bytes lie inside one locked allocation
        (a view or slice of a locked tensor is locked too)."""
        got = _addr_and_size(buffer)
        if got is None:
            return False
        ptr, n = got
        with self._lock:
            if id(buffer) in self._empty:
                return True
            return any(base <= ptr and ptr + n <= base + size
                       for base, size in self._locked.items())


MANAGER = _Manager()


def is_pinned(buffer):
    """DeepSpeed's is_pinned: torch-pinned (CUDA's page-locked memory) or
    locked by the manager."""
    try:
        if hasattr(buffer, "is_pinned") and buffer.is_pinned():
            return True
    except RuntimeError:  # a torch without CUDA may refuse to say
        pass
    return MANAGER.is_managed(buffer)


class pin_handle:  # noqa: N801 - DeepSpeed's name
    """DeepSpeed's pin_memory op (PinMemoryBuilder().load().pin_handle()):
    locked tensors without an I/O handle, from the same process-wide
    manager as aio_handle's."""

    def new_cpu_locked_tensor(self, num_elem, example_tensor):
        return MANAGER.alloc(num_elem, example_tensor)

    def free_cpu_locked_tensor(self, locked_tensor):
        return MANAGER.free(locked_tensor)

    def free_cpu_locked_tensor_by_ptr(self, address):
        return MANAGER.free_ptr(int(address))

    def is_pinned(self, buffer):
        return is_pinned(buffer)
