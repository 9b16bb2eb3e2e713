# SPDX-License-Identifier: MIT
"""Scaffolding: unit.common.DistributedTest of DeepSpeed's tests/unit. There
it launches world_size processes and runs each test in them, after
setting up a process group (and skips a class that requires_cuda_env on
a machine without an accelerator). Here world_size is 1 and there is
nothing to set up: the class is a plain pytest class whose tests run in
this process, requires_cuda_env or not (its CUDA cases skip themselves)."""


class DistributedTest:
    world_size = 1
    backend = "gloo"
    init_distributed = False
    set_dist_env = False
    requires_cuda_env = True
    reuse_dist_env = False
