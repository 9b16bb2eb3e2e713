# SPDX-License-Identifier: MIT
"""Scaffolding: deepspeed.ops. Which ops this environment has: the async_io
op and the pin_memory op (nvmefs), not GPUDirect Storage's gds op."""
from . import op_builder  # noqa: F401

__compatible_ops__ = {"async_io": True, "pin_memory": True, "gds": False}
