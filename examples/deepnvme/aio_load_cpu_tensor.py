#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Load a CPU tensor from a file through nvmefs.aio_handle: sync_pread into
a locked tensor (new_cpu_locked_tensor), the page cache dropped before each
loop when run as root (DeepSpeedExamples' aio_load_cpu_tensor.py). On an
nvmefs mount the bytes go from the drives into the tensor with no copy; on
any other filesystem the handle uses O_DIRECT.

    python3 aio_load_cpu_tensor.py --input_file FILE [--loop 3] [--validate]
        [--bounce] [--no_python] [--block_size 1M] [--queue_depth 128]
        [--threads 1] [--aio_config FILE]

--bounce: the bytes are then copied into an ordinary tensor inside the
timed loop. Unless --no_python, py_load_cpu_tensor's way is timed on the
same file and the speedup over it printed. --validate compares the tensor
with the file read with plain Python.
"""
import os

import py_load_cpu_tensor as py
from utils import (GB, aio_arguments, drop_caches, emit_json, handle_text, new_handle,
                   parse_read_arguments, python_speedup, report, timed, validation)


def file_read(inp_f, handle, locked, app=None):
    """Read the file through the handle into locked (then copied into app
    when given); the tensor holding the bytes."""
    if handle.sync_pread(locked, inp_f) != 1:  # -1: see the handle's line on stderr
        raise SystemExit(f"the handle could not read {inp_f}")
    if app is not None:
        return app.copy_(locked)
    return locked


def main():
    import torch

    args = parse_read_arguments(__doc__.splitlines()[0], handle=True,
                                extra=aio_arguments("load"))
    path = args.input_file
    nbytes = os.path.getsize(path)
    handle = new_handle(args)
    print(handle_text(handle), flush=True)
    locked = handle.new_cpu_locked_tensor(nbytes, torch.empty(0, dtype=torch.uint8))
    app = None
    if args.bounce:
        app = torch.empty(nbytes, dtype=torch.uint8)
        app.fill_(0)  # its pages are not the timed loop's to fault in
    secs, got = timed(lambda: file_read(path, handle, locked, app), args.loop,
                      before=lambda: drop_caches(path), warmup=args.warmup)
    gbs = report("aio load_cpu", nbytes, secs)
    doc = {"example": "aio_load_cpu_tensor", "bytes": nbytes, "secs": secs, "gbs": gbs,
           "unit": GB, "bounce": args.bounce, "handle": handle_text(handle)}
    if args.validate:
        drop_caches(path)
        ok = torch.equal(got, py.file_read(path))
        doc["validated"] = ok
        validation(ok, "the tensor equals the file read with Python")
    del got
    python_speedup(args, "load", doc, lambda: py.file_read(path), lambda: drop_caches(path))
    handle.free_cpu_locked_tensor(locked)
    emit_json(args, doc)


if __name__ == "__main__":
    main()
