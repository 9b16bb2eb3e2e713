#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Store a CPU tensor to a file with plain Python: f.write(t.numpy()),
then fsync so that the bytes reach the devices (DeepSpeedExamples'
py_store_cpu_tensor.py, plus the fsync). The baseline of
aio_store_cpu_tensor.py.

    python3 py_store_cpu_tensor.py --nvme_folder DIR [--mb_size 1024] [--loop 3]

Each loop writes a fresh file (the previous one is deleted, untimed).
"""
import os

from utils import GB, MIB, emit_json, fill_pattern, parse_write_arguments, report, timed


def file_write(out_f, tensor):
    with open(out_f, "wb") as f:
        f.write(tensor.numpy())
        f.flush()
        os.fsync(f.fileno())


def unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def output_file(args):
    return os.path.join(args.nvme_folder, f"test_output_{args.mb_size}MB.pt")


def main():
    import torch

    args = parse_write_arguments(__doc__.splitlines()[0])
    out = output_file(args)
    nbytes = args.mb_size * MIB
    t = torch.empty(nbytes, dtype=torch.uint8)
    fill_pattern(t)
    secs, _ = timed(lambda: file_write(out, t), args.loop, before=lambda: unlink(out),
                    warmup=args.warmup)
    gbs = report("py store_cpu", nbytes, secs)
    unlink(out)
    emit_json(args, {"example": "py_store_cpu_tensor", "bytes": nbytes, "secs": secs,
                     "gbs": gbs, "unit": GB})


if __name__ == "__main__":
    main()
