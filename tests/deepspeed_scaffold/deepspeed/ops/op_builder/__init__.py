# SPDX-License-Identifier: MIT
"""Scaffolding: deepspeed.ops.op_builder. DeepSpeed's builders compile an
op and load() returns its module; here load() returns nvmefs, which has
the async_io op's aio_handle, aio_read, aio_write and deepspeed_memcpy,
and the pin_memory op's pin_handle."""


class _NvmefsBuilder:
    NAME = None

    def is_compatible(self, verbose=False):
        return True

    def load(self, verbose=False):
        import nvmefs
        return nvmefs


class AsyncIOBuilder(_NvmefsBuilder):
    NAME = "async_io"


class PinMemoryBuilder(_NvmefsBuilder):
    NAME = "pin_memory"


class GDSBuilder:
    """GPUDirect Storage: not offered (deepspeed.ops.__compatible_ops__
    says so, and test_gds.py skips itself)."""
    NAME = "gds"

    def is_compatible(self, verbose=False):
        return False

    def load(self, verbose=False):
        raise RuntimeError("nvmefs offers no gds op")
