#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Load a CPU tensor from a file with plain Python:
torch.frombuffer(f.read(), dtype=torch.uint8), with the page cache dropped
before each loop when run as root (DeepSpeedExamples' py_load_cpu_tensor.py).
The baseline of aio_load_cpu_tensor.py.

    python3 py_load_cpu_tensor.py --input_file FILE [--loop 3]
"""
import os
import warnings

from utils import GB, drop_caches, emit_json, parse_read_arguments, report, timed


def file_read(inp_f):
    import torch

    with open(inp_f, "rb") as f:
        return torch.frombuffer(f.read(), dtype=torch.uint8)


# torch.frombuffer of bytes warns that they are read-only: they are never
# written here.
warnings.filterwarnings("ignore", message="The given buffer is not writable")


def main():
    args = parse_read_arguments(__doc__.splitlines()[0])
    path = args.input_file
    nbytes = os.path.getsize(path)
    secs, _ = timed(lambda: file_read(path), args.loop, before=lambda: drop_caches(path),
                    warmup=args.warmup)
    gbs = report("py load_cpu", nbytes, secs)
    emit_json(args, {"example": "py_load_cpu_tensor", "bytes": nbytes, "secs": secs,
                     "gbs": gbs, "unit": GB})


if __name__ == "__main__":
    main()
