# SPDX-License-Identifier: MIT
"""ctypes binding of libnvmefs (include/libnvmefs.h), loaded once.

Where the library is found, first that exists:
  1. $NVMEFS_LIBRARY (a path to libnvmefs.so),
  2. the path CMake wrote into _paths.py (the build tree's client/ when
     imported from build/python, the install's libdir when installed),
  3. the dynamic linker's search (libnvmefs.so.0).
ctypes releases the GIL around every call, so a thread waiting in
nvmefs_wait lets the others run.
"""
import ctypes
import ctypes.util
import os

try:
    from . import _paths
except ImportError:  # the source tree, not configured by CMake
    _paths = None


class Io(ctypes.Structure):
    """struct nvmefs_io"""
    _fields_ = [
        ("fd", ctypes.c_int),
        ("op", ctypes.c_int),
        ("buf", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("off", ctypes.c_uint64),
        ("user_data", ctypes.c_uint64),
    ]


class Cqe(ctypes.Structure):
    """struct nvmefs_cqe"""
    _fields_ = [("user_data", ctypes.c_uint64), ("res", ctypes.c_int64)]


class ClientStats(ctypes.Structure):
    """struct nvmefs_client_stats"""
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("requests", "bytes", "bounced", "bounce_bytes", "shared_bytes")]


OP_READ, OP_WRITE, OP_FSYNC = 1, 2, 3

_P = ctypes.c_void_p
_SIGNATURES = {
    "nvmefs_attach": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P)]),
    "nvmefs_detach": (None, [_P]),
    "nvmefs_client_error": (ctypes.c_char_p, [_P]),
    "nvmefs_client_block": (ctypes.c_size_t, [_P]),
    "nvmefs_buf_alloc": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(_P)]),
    "nvmefs_buf_free": (ctypes.c_int, [_P, _P]),
    "nvmefs_reg_fd": (ctypes.c_int, [_P, ctypes.c_int]),
    "nvmefs_unreg_fd": (ctypes.c_int, [_P, ctypes.c_int]),
    "nvmefs_submit": (ctypes.c_int, [_P, ctypes.POINTER(Io), ctypes.c_uint]),
    "nvmefs_wait": (ctypes.c_int, [_P, ctypes.POINTER(Cqe), ctypes.c_uint, ctypes.c_uint,
                                   ctypes.c_int]),
    "nvmefs_client_inflight": (ctypes.c_uint, [_P]),
    "nvmefs_client_max_inflight": (ctypes.c_uint, [_P]),
    "nvmefs_pread": (ctypes.c_ssize_t, [_P, ctypes.c_int, _P, ctypes.c_size_t, ctypes.c_uint64]),
    "nvmefs_pwrite": (ctypes.c_ssize_t, [_P, ctypes.c_int, _P, ctypes.c_size_t, ctypes.c_uint64]),
    "nvmefs_fsync": (ctypes.c_int, [_P, ctypes.c_int]),
    "nvmefs_client_stats": (None, [_P, ctypes.POINTER(ClientStats)]),
}


def _candidates():
    env = os.environ.get("NVMEFS_LIBRARY")
    if env:
        yield env
    if _paths is not None:
        yield _paths.LIBRARY
    yield "libnvmefs.so.0"
    found = ctypes.util.find_library("nvmefs")
    if found:
        yield found


def _load():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path, use_errno=False)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        return lib
    raise ImportError("nvmefs: cannot load libnvmefs (" + "; ".join(errors) +
                      "); build it (cmake --build build) or set NVMEFS_LIBRARY")


lib = _load()


def error_text(client):
    """The library's sentence about the last failure of client (or of this
    thread's calls given no client, when client is None)."""
    text = lib.nvmefs_client_error(client)
    return text.decode(errors="replace") if text else ""
