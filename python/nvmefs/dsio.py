# SPDX-License-Identifier: MIT
"""nvmefs.dsio: DeepSpeed's ds_io for nvmefs.aio_handle: sweep block size,
queue depth and thread count, writing and reading one file through the
handle, and print GB/s per setting and the best.

    python3 -m nvmefs.dsio --folder DIR [--io_size 512M]
        [--block_size 256K,1M,4M] [--queue_depth 8,32,128] [--threads 1,2,4]
        [--loops 2] [--warmup 1] [--read | --write] [--validate] [--json FILE]

For each setting (every block size x queue depth x thread count) a handle
aio_handle(block_size, queue_depth, False, False, threads) writes io_size
bytes from one locked buffer to DIR/_nvmefs_dsio.dat (a fresh file each
loop, fsync included: the bytes are on the devices when the clock stops),
then reads them back into it (the page cache dropped first when root);
warmup loops of each run first, untimed, as ds_io's --warmup_loops. GB/s =
1e9 bytes/s over the timed loops. The score ranks the settings: the
harmonic mean of write and read GB/s (a setting fast one way and slow the
other loses), or the one measured. The best is printed as the
aio_handle(...) call and as DeepSpeed's "aio" configuration, which the
examples in examples/deepnvme take with --aio_config. nvmefs-tune --handle
runs this sweep.

On a file of an nvmefs mount the handle goes through the native client
with no copy (the buffer is shared with the daemon); elsewhere through
O_DIRECT, so any folder can be measured.
"""
import argparse
import ctypes
import json
import os
import sys
import time
import zlib

FILE_NAME = "_nvmefs_dsio.dat"
DEFAULT_BLOCK_SIZES = "256K,1M,4M"
DEFAULT_QUEUE_DEPTHS = "8,32,128"
DEFAULT_THREADS = "1,2,4"
GB = 1e9
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


# ---------------------------------------------------------------- pure --

def parse_size(text):
    """'1M' -> 1048576 (K, M, G: 1024-based; a plain number is bytes);
    None when text is not a size."""
    t = str(text).strip().upper()
    unit = t[-1:] if t[-1:] in ("K", "M", "G") else ""
    digits = t[:len(t) - len(unit)]
    if not digits.isdigit():
        return None
    return int(digits) * _UNITS[unit]


def size_text(n):
    """1048576 -> '1M': the largest unit that divides n."""
    for unit in ("G", "M", "K"):
        if n >= _UNITS[unit] and n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]}{unit}"
    return str(n)


def parse_list(text, what, kind):
    """A comma-separated list without repeats. kind 'size': block sizes
    (multiples of 4K from 4K to 1G), 'int': 1 to 4096. ValueError names
    what and the item."""
    out = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        if kind == "size":
            v = parse_size(item)
            if v is None or v % 4096 or not 4096 <= v <= 1 << 30:
                raise ValueError(f"{what}: '{item}' is not a multiple of 4K from 4K to 1G")
        else:
            if not item.isdigit() or not 1 <= int(item) <= 4096:
                raise ValueError(f"{what}: '{item}' is not a number from 1 to 4096")
            v = int(item)
        if v not in out:
            out.append(v)
    if not out:
        raise ValueError(f"{what}: empty list '{text}'")
    return out


def grid(block_sizes, queue_depths, threads):
    """Every setting, block size outermost."""
    return [{"block_size": b, "queue_depth": q, "num_threads": t}
            for b in block_sizes for q in queue_depths for t in threads]


def score(write_gbs, read_gbs, ops):
    """The figure settings are ranked by: the harmonic mean of write and
    read GB/s with ops 'both', else the one measured; None if missing."""
    if ops == "write":
        return write_gbs
    if ops == "read":
        return read_gbs
    if not write_gbs or not read_gbs:
        return None
    return 2 * write_gbs * read_gbs / (write_gbs + read_gbs)


def ranked(results):
    """Indexes of results, best score first (ties: the earlier), those
    without a score (failed) last."""
    return sorted(range(len(results)),
                  key=lambda i: (results[i].get("score") is None, -(results[i].get("score") or 0), i))


def handle_call(setting):
    """The aio_handle(...) call of a setting, as DeepNVMe spells it."""
    return (f"aio_handle(block_size={setting['block_size']}, queue_depth={setting['queue_depth']}, "
            f"single_submit=False, overlap_events=False, num_threads={setting['num_threads']})")


def aio_config(setting):
    """DeepSpeed's "aio" configuration of a setting (ds_nvme_tune prints
    the same keys)."""
    return {"aio": {"block_size": setting["block_size"], "queue_depth": setting["queue_depth"],
                    "single_submit": False, "overlap_events": False,
                    "num_threads": setting["num_threads"]}}


def _fig(v):
    return f"{v:.2f}" if isinstance(v, (int, float)) else "-"


def table(results, ops):
    """The results, best first, as text lines."""
    lines = [f"{'rank':>4}  {'block':>6} {'qd':>5} {'threads':>7} {'write GB/s':>10} "
             f"{'read GB/s':>9} {'score':>6}"]
    rank = 0
    for i in ranked(results):
        r = results[i]
        if r.get("score") is None:
            lines.append(f"{'-':>4}  {size_text(r['block_size']):>6} {r['queue_depth']:>5} "
                         f"{r['num_threads']:>7}  FAILED: {r.get('error') or 'no figure'}")
            continue
        rank += 1
        lines.append(f"{rank:>4}  {size_text(r['block_size']):>6} {r['queue_depth']:>5} "
                     f"{r['num_threads']:>7} {_fig(r.get('write_gbs')):>10} "
                     f"{_fig(r.get('read_gbs')):>9} {_fig(r['score']):>6}")
    return lines


def best(results):
    """The best result, or None when every setting failed."""
    order = ranked(results)
    if not order or results[order[0]].get("score") is None:
        return None
    return results[order[0]]


def report_doc(results, args_doc):
    """The JSON document: the run's parameters, every result, the best
    with its call and its configuration."""
    b = best(results)
    doc = dict(args_doc)
    doc["results"] = results
    doc["best"] = None
    if b is not None:
        doc["best"] = dict(b, aio_handle=handle_call(b))
        doc["aio"] = aio_config(b)["aio"]
    return doc


# ---------------------------------------------------------- measuring --

def _drop_caches(folder):
    """Write back folder's filesystem and, as root, drop the page cache."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syncfs(fd) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), folder)
    finally:
        os.close(fd)
    if os.geteuid() == 0:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")


def _fill(buf, nbytes, checksum=True):
    """Random bytes, each 4 KiB page stamped with its index (a misplaced
    page changes the checksum). Returns the checksum (None unless checksum)."""
    template = os.urandom(1 << 20)
    base = ctypes.addressof(buf)
    for off in range(0, nbytes, 1 << 20):
        n = min(1 << 20, nbytes - off)
        ctypes.memmove(base + off, template, n)
    for page in range(0, nbytes // 4096):
        ctypes.memmove(base + page * 4096, page.to_bytes(8, "little"), 8)
    return zlib.crc32(buf) if checksum else None


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Sweep:
    """One sweep: a locked buffer of io_size bytes shared by every
    setting's handle, the file in folder."""

    def __init__(self, folder, io_size, loops=2, warmup=1, ops="both", validate=False,
                 drop=True, note=None):
        from .client import buf_alloc

        self.folder, self.io_size = folder, io_size
        self.loops, self.warmup, self.ops = loops, warmup, ops
        self.validate, self.drop = validate, drop
        self.note = note or (lambda msg: None)
        self.path = os.path.join(folder, FILE_NAME)
        self.addr = buf_alloc(io_size)
        self.buf = (ctypes.c_uint8 * io_size).from_address(self.addr)
        self.crc = _fill(self.buf, io_size, validate)

    def close(self):
        from .client import buf_free

        _unlink(self.path)
        if self.addr:
            buf_free(self.addr)
            self.addr = 0

    def _loops(self, fn, before):
        secs = []
        for k in range(self.warmup + self.loops):
            before()
            t0 = time.perf_counter()
            fn()
            if k >= self.warmup:
                secs.append(time.perf_counter() - t0)
        return len(secs) * self.io_size / sum(secs) / GB

    def _write(self, h):
        h.sync_pwrite(self.buf, self.path)
        _fsync(self.path)

    def trial(self, setting):
        """Measure one setting: a result dict (write_gbs, read_gbs, score,
        error)."""
        from .handle import aio_handle

        r = dict(setting, write_gbs=None, read_gbs=None, score=None, error=None)
        h = aio_handle(setting["block_size"], setting["queue_depth"], False, False,
                       setting["num_threads"])
        try:
            if self.ops != "read" or not os.path.exists(self.path):
                w = self._loops(lambda: self._write(h), lambda: _unlink(self.path))
                if self.ops != "read":
                    r["write_gbs"] = w
            if self.ops != "write":
                before = (lambda: _drop_caches(self.folder)) if self.drop else (lambda: None)
                r["read_gbs"] = self._loops(lambda: h.sync_pread(self.buf, self.path), before)
                if self.validate and zlib.crc32(self.buf) != self.crc:
                    raise OSError(5, "validation failed: the bytes read differ from those written",
                                  self.path)
        except OSError as e:
            r["error"] = str(e)
        finally:
            h.close()
        if r["error"] is None:
            r["score"] = score(r["write_gbs"], r["read_gbs"], self.ops)
        return r

    def run(self, settings):
        results = []
        for k, s in enumerate(settings, 1):
            r = self.trial(s)
            results.append(r)
            if r["error"]:
                self.note(f"{k}/{len(settings)} {handle_call(s)}: FAILED: {r['error']}")
            else:
                self.note(f"{k}/{len(settings)} block {size_text(s['block_size'])} qd "
                          f"{s['queue_depth']} threads {s['num_threads']}: write "
                          f"{_fig(r['write_gbs'])} GB/s, read {_fig(r['read_gbs'])} GB/s")
        return results


# --------------------------------------------------------------- main --

def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m nvmefs.dsio",
                                description=__doc__.splitlines()[0])
    p.add_argument("--folder", required=True, help="where the file goes (an nvmefs mount or any directory)")
    p.add_argument("--io_size", default="512M", help="bytes written and read per loop (default 512M)")
    p.add_argument("--block_size", default=DEFAULT_BLOCK_SIZES,
                   help=f"block sizes to try (default {DEFAULT_BLOCK_SIZES})")
    p.add_argument("--queue_depth", default=DEFAULT_QUEUE_DEPTHS,
                   help=f"queue depths to try (default {DEFAULT_QUEUE_DEPTHS})")
    p.add_argument("--threads", default=DEFAULT_THREADS,
                   help=f"thread counts to try (default {DEFAULT_THREADS})")
    p.add_argument("--loops", type=int, default=2, help="timed loops per setting and way (default 2)")
    p.add_argument("--warmup", type=int, default=1, help="untimed loops first (default 1)")
    way = p.add_mutually_exclusive_group()
    way.add_argument("--read", action="store_true", help="measure reads only")
    way.add_argument("--write", action="store_true", help="measure writes only")
    p.add_argument("--validate", action="store_true", help="check the bytes read after each setting")
    p.add_argument("--no_drop", action="store_true", help="do not drop the page cache before reads")
    p.add_argument("--json", default=None, help="also write every result to this file")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    a = p.parse_args(argv)
    try:
        a.block_sizes = parse_list(a.block_size, "--block_size", "size")
        a.queue_depths = parse_list(a.queue_depth, "--queue_depth", "int")
        a.thread_counts = parse_list(a.threads, "--threads", "int")
    except ValueError as e:
        p.error(str(e))
    a.io_bytes = parse_size(a.io_size)
    if not a.io_bytes or a.io_bytes % 4096:
        p.error(f"--io_size {a.io_size}: want a multiple of 4K")
    if a.loops < 1 or a.warmup < 0:
        p.error("--loops: want 1 or more; --warmup: 0 or more")
    if not os.path.isdir(a.folder):
        p.error(f"--folder {a.folder}: not a directory")
    a.ops = "read" if a.read else "write" if a.write else "both"
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    settings = grid(a.block_sizes, a.queue_depths, a.thread_counts)
    note = (lambda msg: None) if a.quiet else (
        lambda msg: print(f"nvmefs.dsio: {msg}", file=sys.stderr, flush=True))
    note(f"{len(settings)} settings, {size_text(a.io_bytes)} per loop, {a.warmup} warmup + "
         f"{a.loops} timed loops each, {a.ops}, in {a.folder}")
    sweep = Sweep(a.folder, a.io_bytes, a.loops, a.warmup, a.ops, a.validate, not a.no_drop, note)
    try:
        results = sweep.run(settings)
    finally:
        sweep.close()
    print(f"nvmefs.dsio: {len(settings)} settings, {size_text(a.io_bytes)}, {a.ops}, "
          f"{a.folder}; GB = 1e9 bytes; score = "
          + ("harmonic mean of write and read" if a.ops == "both" else a.ops + " GB/s"))
    print("\n".join(table(results, a.ops)))
    b = best(results)
    if b is None:
        print("No setting succeeded.")
    else:
        print(f"Best: {handle_call(b)}")
        print(json.dumps(aio_config(b), indent=2))
    if a.json:
        doc = report_doc(results, {"tool": "nvmefs.dsio", "folder": os.path.abspath(a.folder),
                                   "io_size": a.io_bytes, "loops": a.loops, "warmup": a.warmup,
                                   "ops": a.ops, "unit": "1e9 bytes per second"})
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return 0 if b is not None and all(r["error"] is None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
