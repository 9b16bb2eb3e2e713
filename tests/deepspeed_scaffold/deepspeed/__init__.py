# SPDX-License-Identifier: MIT
"""Scaffolding (tests/test_deepspeed_aio.py): the `deepspeed` package as
DeepSpeed's tests/unit/v1/nvme tests import it, its ops from nvmefs."""
from . import accelerator, comm, ops  # noqa: F401 - deepspeed.ops.X as attributes
