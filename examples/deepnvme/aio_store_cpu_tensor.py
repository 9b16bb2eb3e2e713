#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Store a CPU tensor to a file through nvmefs.aio_handle: sync_pwrite of a
locked tensor (new_cpu_locked_tensor), then fsync (DeepSpeedExamples'
aio_store_cpu_tensor.py). On an nvmefs mount the bytes go from the tensor
to the drives with no copy; on any other filesystem the handle uses
O_DIRECT.

    python3 aio_store_cpu_tensor.py --nvme_folder DIR [--mb_size 1024] [--loop 3]
        [--validate] [--bounce] [--no_python] [--block_size 1M] [--queue_depth 128]
        [--threads 1] [--aio_config FILE]

Each loop writes a fresh file (the previous one is deleted, untimed).
--bounce: the data sits in an ordinary tensor and is copied into the
locked one inside the timed loop, as DeepSpeed's example does. Unless
--no_python, py_store_cpu_tensor's way is timed on the same folder and the
speedup over it printed. --validate reads the file back with plain Python
(after dropping the page cache) and compares it with the tensor.
"""
import os

import py_store_cpu_tensor as py
from utils import (GB, MIB, aio_arguments, drop_caches, emit_json, fill_pattern, fsync_path,
                   handle_text, new_handle, parse_write_arguments, python_speedup, report, timed,
                   validation)


def file_write(out_f, tensor, handle, locked=None):
    """Write tensor through the handle (copied into locked first when
    given), then fsync."""
    if locked is not None:
        locked.copy_(tensor)
        tensor = locked
    if handle.sync_pwrite(tensor, out_f) != 1:  # -1: see the handle's line on stderr
        raise SystemExit(f"the handle could not write {out_f}")
    fsync_path(out_f)


def main():
    import torch

    args = parse_write_arguments(__doc__.splitlines()[0], handle=True,
                                 extra=aio_arguments("store"))
    out = py.output_file(args)
    nbytes = args.mb_size * MIB
    handle = new_handle(args)
    print(handle_text(handle), flush=True)
    locked = handle.new_cpu_locked_tensor(nbytes, torch.empty(0, dtype=torch.uint8))
    if args.bounce:
        app = torch.empty(nbytes, dtype=torch.uint8)
        fill_pattern(app)
        locked.fill_(0)  # its pages are not the timed loop's to fault in
        fn = lambda: file_write(out, app, handle, locked)  # noqa: E731
    else:
        app = locked
        fill_pattern(app)
        fn = lambda: file_write(out, app, handle)  # noqa: E731
    secs, _ = timed(fn, args.loop, before=lambda: py.unlink(out), warmup=args.warmup)
    gbs = report("aio store_cpu", nbytes, secs)
    doc = {"example": "aio_store_cpu_tensor", "bytes": nbytes, "secs": secs, "gbs": gbs,
           "unit": GB, "bounce": args.bounce, "handle": handle_text(handle)}
    if args.validate:
        import py_load_cpu_tensor

        drop_caches(out)
        ok = torch.equal(py_load_cpu_tensor.file_read(out), app)
        doc["validated"] = ok
        validation(ok, "the file read back with Python equals the tensor")
    py.unlink(out)
    python_speedup(args, "store", doc, lambda: py.file_write(out, app), lambda: py.unlink(out))
    py.unlink(out)
    handle.free_cpu_locked_tensor(locked)
    emit_json(args, doc)


if __name__ == "__main__":
    main()
