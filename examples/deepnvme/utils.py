# SPDX-License-Identifier: MIT
"""What the tensor examples share: their command lines (DeepSpeedExamples'
deepnvme/file_access interface: --nvme_folder or --input_file, --mb_size,
--loop, --validate, plus the handle's settings; the aio_* examples'
--bounce and --no_python), dropping the page cache, the timing loop, the
lines they print and the aio_* examples' comparison with plain Python.

GB/s here is 1e9 bytes per second (the project's unit); DeepSpeed's own
examples divide by 1024**3.
"""
import argparse
import ctypes
import json
import os
import sys
import time

MIB = 1 << 20
GB = 1e9
# aio_handle()'s own defaults (DeepNVMe's)
HANDLE_DEFAULTS = {"block_size": 1 << 20, "queue_depth": 128, "num_threads": 1,
                   "single_submit": False, "overlap_events": False}


def import_nvmefs():
    """The nvmefs package, or exit naming how to make it importable."""
    try:
        import nvmefs
    except ImportError as e:
        sys.exit(f"cannot import nvmefs ({e}): run with PYTHONPATH=build/python "
                 "(the build tree) or install it with cmake --install")
    return nvmefs


def _handle_args(p):
    g = p.add_argument_group("the handle (nvmefs.aio_handle; nvmefs-tune --handle finds good values)")
    g.add_argument("--block_size", default=None,
                   help="bytes per request, K/M/G suffixes (default 1M)")
    g.add_argument("--queue_depth", type=int, default=None,
                   help="requests in flight per thread (default 128)")
    g.add_argument("--threads", type=int, default=None,
                   help="threads an operation is split over (default 1)")
    g.add_argument("--single_submit", action="store_true", default=None,
                   help="DeepNVMe's flag (kept, reported)")
    g.add_argument("--overlap_events", action="store_true", default=None,
                   help="DeepNVMe's flag (kept, reported)")
    g.add_argument("--aio_config", default=None,
                   help="a JSON file with an \"aio\" object of these settings "
                        "(nvmefs-tune --handle --json writes one); options given win")


def _common(p):
    p.add_argument("--loop", type=int, default=3,
                   help="the number of times to repeat the operation (default 3)")
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed repetitions first (default 1): the handle's clients connect "
                        "and share the locked tensor with the daemon")
    p.add_argument("--validate", action="store_true",
                   help="check the result against a plain Python file read")
    p.add_argument("--json", action="store_true",
                   help="also print the figures as one JSON line (last line)")


def parse_size(text):
    """'1M' -> 1048576; None when it is not a size."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = str(text).strip().upper()
    unit = t[-1:] if t[-1:] in "KMG" else ""
    digits = t[:len(t) - len(unit)]
    if not digits.isdigit():
        return None
    return int(digits) * units[unit]


def _check(p, args):
    if args.loop < 1:
        p.error(f"--loop {args.loop}: want 1 or more")
    if args.warmup < 0:
        p.error(f"--warmup {args.warmup}: want 0 or more")
    if hasattr(args, "block_size"):
        cfg = {}
        if args.aio_config:
            try:
                with open(args.aio_config) as f:
                    cfg = json.load(f)["aio"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                p.error(f"--aio_config {args.aio_config}: {e!r}")
            if "num_threads" not in cfg and "intra_op_parallelism" in cfg:
                # DeepSpeed's own "aio" configuration names it so
                cfg["num_threads"] = cfg["intra_op_parallelism"]
        for dest, key in (("block_size", "block_size"), ("queue_depth", "queue_depth"),
                          ("threads", "num_threads"), ("single_submit", "single_submit"),
                          ("overlap_events", "overlap_events")):
            if getattr(args, dest) is None:
                setattr(args, dest, cfg.get(key, HANDLE_DEFAULTS[key]))
        bs = parse_size(args.block_size)
        if not bs or bs % 4096:
            p.error(f"--block_size {args.block_size}: want a multiple of 4K")
        args.block_size = bs
        if args.queue_depth < 1 or args.threads < 1:
            p.error("--queue_depth and --threads: want 1 or more")
        args.single_submit, args.overlap_events = bool(args.single_submit), bool(args.overlap_events)


def _parse(p, handle, extra):
    """p's own options, then the common ones, the handle's settings when
    handle and extra(p)'s: parsed and checked."""
    _common(p)
    if handle:
        _handle_args(p)
    if extra:
        extra(p)
    args = p.parse_args()
    _check(p, args)
    return args


def parse_write_arguments(description, handle=False, extra=None):
    """--nvme_folder (must exist), --mb_size, --loop, --validate, --json
    (and the handle's settings when handle)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--nvme_folder", required=True,
                   help="folder for the file written (an nvmefs mount or any directory)")
    p.add_argument("--mb_size", type=int, default=1024,
                   help="size of the tensor in MiB (default 1024)")
    args = _parse(p, handle, extra)
    if args.mb_size < 1:
        p.error(f"--mb_size {args.mb_size}: want 1 or more")
    if not os.path.isdir(args.nvme_folder):
        p.error(f"--nvme_folder {args.nvme_folder}: not a directory")
    return args


def parse_read_arguments(description, handle=False, extra=None):
    """--input_file (must exist), --loop, --validate, --json (and the
    handle's settings when handle)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--input_file", required=True, help="the file to read")
    args = _parse(p, handle, extra)
    if not os.path.isfile(args.input_file):
        p.error(f"--input_file {args.input_file}: no such file")
    return args


_BOUNCE = {"load": "copy the locked tensor into an ordinary one",
           "store": "copy an ordinary tensor into the locked one"}


def aio_arguments(way):
    """extra= of aio_load_cpu_tensor (way 'load') and aio_store_cpu_tensor
    ('store'): --bounce and --no_python."""
    def extra(p):
        p.add_argument("--bounce", action="store_true",
                       help=f"{_BOUNCE[way]} in each loop (timed)")
        p.add_argument("--no_python", action="store_true",
                       help=f"do not time the plain Python {way} for the speedup")
    return extra


def new_handle(args):
    """nvmefs.aio_handle with the command line's settings."""
    nvmefs = import_nvmefs()
    return nvmefs.aio_handle(block_size=args.block_size, queue_depth=args.queue_depth,
                             single_submit=args.single_submit,
                             overlap_events=args.overlap_events, num_threads=args.threads)


def handle_text(h):
    return (f"aio_handle(block_size={h.get_block_size()}, queue_depth={h.get_queue_depth()}, "
            f"single_submit={h.get_single_submit()}, overlap_events={h.get_overlap_events()}, "
            f"num_threads={h.get_thread_count()})")


_libc = ctypes.CDLL(None, use_errno=True)
_noted = False


def drop_caches(path):
    """Write back the filesystem holding path and drop the clean page
    cache, so that the next read comes from the devices. Needs root: without
    it, say once that reads may come from the cache."""
    global _noted
    fd = os.open(path if os.path.isdir(path) else os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        if _libc.syncfs(fd) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), path)
    finally:
        os.close(fd)
    if os.geteuid() != 0:
        if not _noted:
            print("note: not root: the page cache is not dropped; buffered reads may come from it",
                  file=sys.stderr)
            _noted = True
        return
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def fsync_path(path):
    """fsync(2) of the file at path (its data and size on the devices)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def timed(fn, loops, before=None, warmup=0):
    """Seconds of each of loops calls of fn(), after warmup untimed ones;
    before() runs untimed ahead of each. Returns (seconds list, fn's last
    result)."""
    secs, out = [], None
    for k in range(warmup + loops):
        if before is not None:
            before()
        out = None  # the previous result is freed before the next call
        t0 = time.perf_counter()
        out = fn()
        if k >= warmup:
            secs.append(time.perf_counter() - t0)
    return secs, out


def report(name, nbytes, secs):
    """One line, as DeepNVMe's examples print it: size, mean seconds, GB/s
    of the whole run. Returns the GB/s."""
    gbs = len(secs) * nbytes / sum(secs) / GB
    print(f"{name}: {nbytes / GB:.3f} GB, {sum(secs) / len(secs):.4f} secs, {gbs:5.2f} GB/sec",
          flush=True)
    return gbs


def speedup(name, gbs, py_name, py_gbs):
    print(f"{name} speedup over {py_name}: {gbs / py_gbs:.2f}x ({gbs:.2f} / {py_gbs:.2f} GB/sec)",
          flush=True)


def python_speedup(args, way, doc, fn, before):
    """Unless --no_python: time py_{way}_cpu_tensor's way, fn() with
    before() ahead of each call, as the handle's was; print its line and
    the handle's speedup over it (doc's bytes and gbs: the handle's run)
    and add py_gbs and speedup to doc."""
    if args.no_python:
        return
    secs, _ = timed(fn, args.loop, before=before, warmup=args.warmup)
    py_gbs = report(f"py {way}_cpu", doc["bytes"], secs)
    speedup(f"aio {way}_cpu", doc["gbs"], f"py {way}_cpu", py_gbs)
    doc.update(py_gbs=py_gbs, speedup=doc["gbs"] / py_gbs)


def fill_pattern(t):
    """Fill a uint8 tensor with a pattern no two 8-byte words share (a
    misplaced block shows in a comparison)."""
    import torch

    n8 = t.numel() // 8
    if n8:
        t[:n8 * 8].view(torch.int64).copy_(torch.arange(n8, dtype=torch.int64).mul_(2654435761))
    if t.numel() % 8:
        t[n8 * 8:].fill_(0x5a)


def emit_json(args, doc):
    if args.json:
        print(json.dumps(doc), flush=True)


def validation(ok, what):
    """Print the outcome; exit 1 on a failure."""
    print(f"Validation success = {bool(ok)} ({what})", flush=True)
    if not ok:
        sys.exit(1)
