#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Save and load a whole torch state dict: torch.save / torch.load on a
file (the baseline: fsync after the save, the page cache dropped before
each load when root) against the same through nvmefs.aio_handle,
FastPersist-style (fastpersist.py: serialized into locked memory that the
handle writes; read by the handle into locked memory that torch.load
unpickles from).

    python3 save_load_state_dict.py --nvme_folder DIR [--mb_size 1024] [--loop 3]
        [--validate] [--engine both|torch|aio] [--format zip|legacy] [--zero_copy]
        [--io_buffer_mb 64] [--block_size 1M] [--queue_depth 128] [--threads 1]
        [--aio_config FILE]

The state dict holds 16 float32 tensors of mb_size/16 MiB each. Each save
loop writes a fresh file (the previous one is deleted, untimed). With
--engine both the speedups of the handle over torch.save and torch.load
are printed. --validate checks that every load gives back equal tensors,
and that each way reads the other's file. --format: torch's zip format
(its default, which checksums every byte with CRC32 as it saves) or the
legacy one (no checksum; what DeepSpeed's FastPersist examples save by
default); both engines use it, torch.load reads both. --zero_copy also
times the handle's load whose tensors are views of the locked buffer it
read into (no copy, as torch.load(mmap=True) of later torch gives views of
the file; zip format only).
"""
import os

import fastpersist
from utils import (GB, MIB, drop_caches, emit_json, handle_text, new_handle,
                   parse_write_arguments, report, speedup, timed, validation)

COUNT = 16


def state_dict(mb_size):
    import torch

    per = mb_size * MIB // 4 // COUNT
    return {f"layers.{i}.weight": torch.arange(per, dtype=torch.float32) + i for i in range(COUNT)}


def torch_save(sd, path, fmt="zip"):
    import torch

    with open(path, "wb") as f:
        torch.save(sd, f, _use_new_zipfile_serialization=fmt == "zip")
        f.flush()
        os.fsync(f.fileno())


def torch_load(path):
    import torch

    return torch.load(path)


def same(a, b):
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def extra(p):
    p.add_argument("--engine", choices=("both", "torch", "aio"), default="both",
                   help="torch.save/torch.load, the handle, or both (default)")
    p.add_argument("--format", choices=("zip", "legacy"), default="zip",
                   help="torch's serialization format for both engines (default zip)")
    p.add_argument("--zero_copy", action="store_true",
                   help="also time the handle's load into views of the locked buffer (zip only)")
    p.add_argument("--io_buffer_mb", type=int, default=64,
                   help="the locked buffer torch.save writes into, in MiB (two halves; default 64)")


def run_torch(args, sd, nbytes, doc):
    path = os.path.join(args.nvme_folder, f"test_sd_torch_{args.mb_size}MB.pt")
    secs, _ = timed(lambda: torch_save(sd, path, args.format), args.loop,
                    before=lambda: unlink(path), warmup=args.warmup)
    doc["torch_save_gbs"], doc["torch_save_secs"] = report("torch.save", nbytes, secs), secs
    secs, got = timed(lambda: torch_load(path), args.loop, before=lambda: drop_caches(path),
                      warmup=args.warmup)
    doc["torch_load_gbs"], doc["torch_load_secs"] = report("torch.load", nbytes, secs), secs
    return path, got


def run_aio(args, sd, nbytes, doc):
    import torch

    path = os.path.join(args.nvme_folder, f"test_sd_aio_{args.mb_size}MB.pt")
    h = new_handle(args)
    print(handle_text(h), flush=True)
    doc["handle"] = handle_text(h)
    u8 = torch.empty(0, dtype=torch.uint8)
    wbuf = h.new_cpu_locked_tensor(args.io_buffer_mb * MIB, u8)
    zf = args.format == "zip"
    secs, _ = timed(lambda: fastpersist.save(sd, path, h, wbuf, _use_new_zipfile_serialization=zf),
                    args.loop, before=lambda: unlink(path), warmup=args.warmup)
    doc["aio_save_gbs"], doc["aio_save_secs"] = report("aio save", nbytes, secs), secs
    h.free_cpu_locked_tensor(wbuf)
    rbuf = h.new_cpu_locked_tensor(os.path.getsize(path), u8)
    secs, got = timed(lambda: fastpersist.load(path, h, rbuf), args.loop,
                      before=lambda: drop_caches(path), warmup=args.warmup)
    doc["aio_load_gbs"], doc["aio_load_secs"] = report("aio load", nbytes, secs), secs
    if args.zero_copy:
        if args.validate and not same(sd, got):
            validation(False, "the handle's load equals the state dict saved")
        got = None  # rbuf is the views' now
        secs, got = timed(lambda: fastpersist.load(path, h, rbuf, zero_copy=True), args.loop,
                          before=lambda: drop_caches(path), warmup=args.warmup)
        doc["aio_load_zero_copy_gbs"] = report("aio load, zero copy", nbytes, secs)
        doc["aio_load_zero_copy_secs"] = secs
    return path, got, (h, rbuf)


def main():
    args = parse_write_arguments(__doc__.splitlines()[0], handle=True, extra=extra)
    if args.io_buffer_mb < 1:
        raise SystemExit(f"--io_buffer_mb {args.io_buffer_mb}: want 1 or more")
    if args.zero_copy and (args.format != "zip" or args.engine == "torch"):
        raise SystemExit("--zero_copy: the handle's load of the zip format (--format zip, "
                         "--engine aio or both)")
    sd = state_dict(args.mb_size)
    nbytes = sum(t.numel() * t.element_size() for t in sd.values())
    doc = {"example": "save_load_state_dict", "bytes": nbytes, "unit": GB, "engine": args.engine,
           "format": args.format}
    paths, loaded, handle = {}, {}, None
    if args.engine in ("torch", "both"):
        paths["torch"], loaded["torch"] = run_torch(args, sd, nbytes, doc)
    if args.engine in ("aio", "both"):
        paths["aio"], loaded["aio"], handle = run_aio(args, sd, nbytes, doc)
    if args.engine == "both":
        speedup("aio save", doc["aio_save_gbs"], "torch.save", doc["torch_save_gbs"])
        speedup("aio load", doc["aio_load_gbs"], "torch.load", doc["torch_load_gbs"])
        doc["save_speedup"] = doc["aio_save_gbs"] / doc["torch_save_gbs"]
        doc["load_speedup"] = doc["aio_load_gbs"] / doc["torch_load_gbs"]
    ok = True
    if args.validate:
        for engine, got in loaded.items():
            good = same(sd, got)
            ok = ok and good
            print(f"{engine} load equals the state dict saved: {good}", flush=True)
        loaded.clear()
        if "aio" in paths:
            good = same(sd, torch_load(paths["aio"]))
            ok = ok and good
            print(f"torch.load reads the handle's file: {good}", flush=True)
        if "torch" in paths and handle is not None:
            h, rbuf = handle
            if os.path.getsize(paths["torch"]) <= rbuf.numel():
                good = same(sd, fastpersist.load(paths["torch"], h, rbuf))
                ok = ok and good
                print(f"the handle reads torch.save's file: {good}", flush=True)
        doc["validated"] = ok
    loaded.clear()
    if handle is not None:
        handle[0].free_cpu_locked_tensor(handle[1])
    for p in paths.values():
        unlink(p)
    if args.validate:
        validation(ok, "the state dicts loaded equal the one saved")
    emit_json(args, doc)


if __name__ == "__main__":
    main()
