# SPDX-License-Identifier: MIT
"""The memory behind a buffer argument: torch CPU tensors, numpy arrays and
anything with the buffer protocol, as (address, bytes, keep-alive)."""
import ctypes


def _torch_view(t):
    if t.device.type != "cpu":
        raise ValueError(f"a {t.device.type} tensor: nvmefs moves CPU memory only")
    if not t.is_contiguous():
        raise ValueError("the tensor is not contiguous")
    return t.data_ptr(), t.numel() * t.element_size(), t


def _numpy_view(a, writable):
    if not (a.flags["C_CONTIGUOUS"] or a.flags["F_CONTIGUOUS"]):
        raise ValueError("the array is not contiguous")
    addr, readonly = a.__array_interface__["data"]
    if writable and readonly:
        raise ValueError("the array is read-only")
    return addr, a.nbytes, a


def buffer_view(obj, writable):
    """(address, nbytes, keep) of obj's bytes; keep must stay referenced
    while the address is used. writable: the bytes will be written."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "is_contiguous"):
        return _torch_view(obj)
    if hasattr(obj, "__array_interface__") and hasattr(obj, "flags"):
        return _numpy_view(obj, writable)
    mv = memoryview(obj)
    if not mv.contiguous:
        raise ValueError("the buffer is not contiguous")
    mv = mv.cast("B")
    n = mv.nbytes
    if not mv.readonly:
        arr = (ctypes.c_char * n).from_buffer(mv)
        return ctypes.addressof(arr), n, (arr, mv)
    if writable:
        raise TypeError("a read-only buffer cannot be read into")
    if isinstance(obj, bytes):
        return ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value or 0, n, obj
    copy = bytearray(mv)  # a read-only buffer of another kind: a copy
    arr = (ctypes.c_char * n).from_buffer(copy)
    return ctypes.addressof(arr), n, (arr, copy)
