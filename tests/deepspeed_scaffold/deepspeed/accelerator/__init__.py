# SPDX-License-Identifier: MIT
"""Scaffolding: deepspeed.accelerator.get_accelerator() for a machine
without one. DeepSpeed's CPU accelerator names the device "cpu" and has
no device to offer; its tensors are torch's CPU ones."""
import torch


class _Cpu:
    def device_name(self, device_index=None):
        return "cpu"

    def is_available(self):
        return False

    def device_count(self):
        return 0

    def pin_memory(self, tensor, align_bytes=1):
        return tensor.pin_memory()  # needs CUDA: the tests call it only for their CUDA cases

    def is_pinned(self, tensor):
        return tensor.is_pinned()

    ByteTensor = torch.ByteTensor
    FloatTensor = torch.FloatTensor


_ACCELERATOR = _Cpu()


def get_accelerator():
    return _ACCELERATOR
