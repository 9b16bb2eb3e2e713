# SPDX-License-Identifier: MIT
"""bench_scale.py: bench.sh --only scale, the scale benchmark of issue 23
(item 4): metadata at N files, nvmefs against btrfs raid0 on the same
emulated drives in one run. Never part of the default run; the yardstick
for the on-disk format v2 (incremental metadata, a bounded cache).

Usage: bench.sh --only scale [--files N[,N...]] [--quick] [-b BUILD] [-o DIR]
                [--pool SIZE] [--no-warm] [--check]
  --files LIST  the file counts, run in increasing order (default
                10000,100000,1000000; --quick: 2000,10000)

Devices: 4 sparse image files of 64 GiB (more for over 1,000,000 files:
64 KiB per file) in /dev/shm on loop devices, made once. Before it starts,
the run checks that /dev/shm and MemAvailable hold what the largest N
writes (need() below) and refuses, naming what is missing, if not.

For each N, on btrfs raid0 then nvmefs, each made fresh on the devices
after a blkdiscard of each (the images' tmpfs pages freed: both file
systems write into new pages alike):
 - make: mkfs.btrfs -f -K -d raid0 -m raid0, mount -o nodiscard; or
   mkfs.nvmefs -f -K and the daemon with bench.py's options (-o
   mode=direct,pool=64M: nvmefs's defaults; --pool changes the pool);
 - create: N files of 4 KiB, 1,000 per directory (ROOT/scale/dDDDD/
   fNNNNNNN), each open(O_WRONLY|O_CREAT|O_EXCL), write, close (the
   1-minute load average just before is recorded too); then
   os.sync(), inside the phase (its time is also shown alone). On btrfs
   that commits a transaction; on nvmefs it reaches no daemon (the kernel
   sends FUSE no syncfs), so nvmefs's metadata commits are only those its
   committer makes every 5 s and when the open transaction passes 1 MiB,
   and the rest is written by the unmount that follows;
 - the images' allocated size (tmpfs pages) and, for nvmefs, the
   daemon's peak RSS (VmHWM) so far;
 - unmount with the N files (nvmefs: until the daemon has exited, after
   its final checkpoint), timed;
 - fsck, timed, on the unmounted devices: fsck.nvmefs -n, btrfs check
   --readonly (both must find the volume clean);
 - mount again, timed: nvmefs from starting the daemon, btrfs from
   starting mount(8), until `stat -f` on the mount point has answered
   (the mount table is polled every 10 ms);
 - drop caches (sync -f, echo 3 >/proc/sys/vm/drop_caches), then stat
   every file, cold (its size checked);
 - read every file (open, read, close; its content checked: each file
   begins with its own number);
 - unlink every file, rmdir every directory, os.sync();
 - the daemon's peak RSS since the remount; unmount (empty), timed.
Memory is warmed before create and after dropping caches (N x 8 KiB,
"Cold memory" in bench.py; --no-warm skips it).

The phases run in a helper (scale.py, written into the work directory,
run with /usr/bin/python3) that times each file operation on its own
(time.perf_counter_ns) and keeps only the slowest and the count over
50 ms: the "slowest single operation" is the slowest open+write+close,
stat, open+read+close or unlink (mkdir and rmdir are in the phase's time
but not timed alone). Rates are files per second over the whole phase.

Output (DIR as bench.py's): report.md (per N a table: the phases as rows,
nvmefs and btrfs, their ratio and each one's slowest operation; the
targets), results.tsv (setup "scale", N, fs "direct" for nvmefs or
"btrfs", row, figure), targets.txt, commands.log, logs/.

Targets (issue 23's "must show"), judged at the largest N of the run
(10^6 by default) against the smallest (10^4) and against btrfs in the
same run:
 - nvmefs create+write >= 0.5 x btrfs raid0, and >= 0.8 x its own rate at
   the smallest N (within 20%); no single create above 50 ms;
 - the daemon's peak RSS (the higher of the two) <= the pinned pool + the
   metadata cache limit (-o meta_cache, mounted at its default of
   128 MiB) + 64 MiB, and < 512 MiB with the default settings (a run with
   another --pool fails this line);
 - mount <= 2 s; stat after the remount >= 1.0 x btrfs.
These are the targets of the format redesign that follows: missing them
today is the expected outcome, not a failure of the benchmark (exit 0,
1 with --check).

Time (2 cores, shared): --quick 15 s; 10^4 and 10^5 about 1.5 minutes;
10^4, 10^5 and 10^6 about 11 minutes, 10^6 alone about 10
(docs/PERFORMANCE.md, "Metadata at scale").

Everything that acts goes through bench.py's Bench (its runner, logs,
results, mounts, devices and cleanup); this module holds the plan, the
helper, the room check, the report and the targets.
"""

import json
import os
import time

import nvmefs_emu as emu
from nvmefs_emu import MIB, GIB

SETUP = "scale"
DEFAULT_FILES = (10000, 100000, 1000000)
QUICK_FILES = (2000, 10000)
MAX_FILES = 100000000
NDEV = 4
FILE_SIZE = 4096
PER_DIR = 1000
SLOW_MS = 50
DEV_MIN = 64 * GIB
DEV_PER_FILE = 64 * 1024
# What N files take in /dev/shm (the images' tmpfs pages, data and
# metadata: 4.75 KiB a file on btrfs and 4.25 on nvmefs at 100,000 files,
# "images' allocated size" in the report) and in memory besides (the daemon
# today holds about 1.3 KiB a file; the kernel's caches are reclaimable).
SHM_PER_FILE = 6 * 1024
MEM_PER_FILE = 2 * 1024
SHM_SPARE = GIB
MEM_SPARE = 4 * GIB
# Issue 23's targets.
TARGET_VS_BTRFS = 0.5
TARGET_VS_SMALL = 0.8
TARGET_RSS_OVER_POOL = 64 * MIB
TARGET_RSS_DEFAULT = 512 * MIB
TARGET_MOUNT_S = 2.0
TARGET_STAT_VS_BTRFS = 1.0
DEFAULT_POOL = 64 * MIB
DEFAULT_META_CACHE = 128 * MIB  # nvmefs -o meta_cache=, not given: its default
FS = ("btrfs", "direct")
NAME = {"btrfs": "btrfs raid0", "direct": "nvmefs"}

# (the helper's phase, label) of the timed file phases.
PHASES = (("create", "create+write 4 KiB, 1,000 per directory (+os.sync)"),
          ("stat", "stat, cold after remount"),
          ("read", "read (content checked)"),
          ("delete", "unlink (+os.sync)"))
# results.tsv rows per N and file system, and nvmefs's own.
ROWS = ([p for p, _ in PHASES] + ["%s_max_ms" % p for p, _ in PHASES]
        + ["%s_over50" % p for p, _ in PHASES]
        + ["loadavg", "sync_s", "images_mib", "umount_full_s", "fsck_s", "mount_s", "umount_s"])
NVMEFS_ROWS = ["rss_create", "rss_end"]


# ---------------------------------------------------------------- helper --
# Run with /usr/bin/python3 in its own process, one phase per run.

SCALE_PY = r'''# scale.py PHASE ROOT N SIZE: one phase of bench.sh --only scale over N
# files of SIZE bytes in ROOT/scale/dDDDD/fNNNNNNN, 1,000 per directory.
# create: mkdir each directory, then per file open(O_WRONLY|O_CREAT|O_EXCL),
# write, close; os.sync(). stat: os.stat, size checked. read: open, read,
# close, content checked (each file begins with its number). delete: unlink
# each file, rmdir each directory; os.sync(). Each file operation is timed
# alone; only the slowest and the count over 50 ms are kept. Prints one JSON
# line (files, secs, max_ms, slowest, over_50ms, sync_secs; error if one
# happened, then exit 1).
import json, os, struct, sys, time, traceback

PER_DIR = 1000
SLOW_NS = 50 * 1000 * 1000
phase, root, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
top = os.path.join(root, "scale")
base = bytes((k * 7 + 1) & 0xff for k in range(size))
out = {"phase": phase, "files": n, "max_ms": 0.0, "slowest": "", "over_50ms": 0, "sync_secs": 0.0}
worst = 0


def content(i):
    return struct.pack("<Q", i) + base[8:]


def create(p, i):
    data = content(i)
    t0 = time.perf_counter_ns()
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        w = os.write(fd, data)
    finally:
        os.close(fd)
    dt = time.perf_counter_ns() - t0
    if w != size:
        raise OSError("short write (%d bytes): %s" % (w, p))
    return dt


def stat(p, i):
    t0 = time.perf_counter_ns()
    st = os.stat(p)
    dt = time.perf_counter_ns() - t0
    if st.st_size != size:
        raise OSError("size %d, not %d: %s" % (st.st_size, size, p))
    return dt


def read(p, i):
    t0 = time.perf_counter_ns()
    fd = os.open(p, os.O_RDONLY)
    try:
        b = os.read(fd, size + 1)
    finally:
        os.close(fd)
    dt = time.perf_counter_ns() - t0
    if b != content(i):
        raise OSError("wrong content: " + p)
    return dt


def delete(p, i):
    t0 = time.perf_counter_ns()
    os.unlink(p)
    return time.perf_counter_ns() - t0


def sync():
    t0 = time.perf_counter()
    os.sync()
    out["sync_secs"] = time.perf_counter() - t0


def run(op):
    global worst
    if phase == "create":
        os.mkdir(top)
    for d in range((n + PER_DIR - 1) // PER_DIR):
        dp = os.path.join(top, "d%04d" % d)
        if phase == "create":
            os.mkdir(dp)
        for i in range(d * PER_DIR, min(n, (d + 1) * PER_DIR)):
            p = os.path.join(dp, "f%07d" % i)
            dt = op(p, i)
            if dt > worst:
                worst = dt
                out["slowest"] = p
            if dt > SLOW_NS:
                out["over_50ms"] += 1
        if phase == "delete":
            os.rmdir(dp)
    if phase == "delete":
        os.rmdir(top)
    if phase in ("create", "delete"):
        sync()


rc = 0
t0 = time.perf_counter()
try:
    run({"create": create, "stat": stat, "read": read, "delete": delete}[phase])
except OSError as e:
    out["error"] = str(e)
    traceback.print_exc()
    sys.stderr.flush()
    rc = 1
out["secs"] = time.perf_counter() - t0
out["max_ms"] = worst / 1e6
print(json.dumps(out), flush=True)
sys.exit(rc)
'''


def helper_figures(line, n):
    """{row: figure} from scale.py's last line for a phase over N files
    (rate in files/s, the slowest operation in ms, the count over 50 ms,
    for create the os.sync() in s); None if the line is not a whole
    phase's."""
    try:
        j = json.loads(line)
        if "error" in j or int(j["files"]) != n or float(j["secs"]) <= 0:
            return None
        p = j["phase"]
        out = {p: "%.0f" % (n / float(j["secs"])), p + "_max_ms": "%.3f" % float(j["max_ms"]),
               p + "_over50": str(int(j["over_50ms"]))}
        if p == "create":
            out["sync_s"] = "%.3f" % float(j["sync_secs"])
        return out
    except (ValueError, KeyError, TypeError):
        return None


# --------------------------------------------------------------- options --


def parse_files(text):
    """The file counts of --files 'N[,N...]', increasing, each once;
    ValueError naming what is wrong."""
    out = set()
    for word in text.split(","):
        if not word.isdigit() or not 1 <= int(word) <= MAX_FILES:
            raise ValueError("bad --files '%s' (want counts from 1 to %d, comma-separated)" % (text, MAX_FILES))
        out.add(int(word))
    return tuple(sorted(out))


def dev_size(nmax):
    """Each image's (sparse) size for up to NMAX files: 64 GiB, or 64 KiB
    per file when that is more (nvmefs's metadata area is 1% of member 0,
    and it holds about 2 million files per GiB), in whole GiB."""
    return max(DEV_MIN, (nmax * DEV_PER_FILE + GIB - 1) // GIB * GIB)


def need(nmax):
    """(bytes of /dev/shm, bytes of MemAvailable) a run up to NMAX files
    needs."""
    shm = nmax * SHM_PER_FILE + SHM_SPARE
    return shm, shm + nmax * MEM_PER_FILE + MEM_SPARE


def room_problem(nmax, shm_avail, memav):
    """Why this machine cannot run NMAX files (with SHM_AVAIL bytes free
    in /dev/shm, MEMAV bytes of MemAvailable), or None."""
    shm, mem = need(nmax)
    missing = []
    if shm > shm_avail:
        missing.append("%.1f GiB free in /dev/shm (it has %.1f GiB)" % (shm / GIB, shm_avail / GIB))
    if mem > memav:
        missing.append("%.1f GiB of MemAvailable (there is %.1f GiB)" % (mem / GIB, memav / GIB))
    if not missing:
        return None
    return ("--only scale at %d files needs %s: the images are sparse, but the files' data and metadata "
            "fill them; free memory or run fewer files (--files)" % (nmax, " and ".join(missing)))


# ---------------------------------------------------------------- report --


def isnum(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def fmt(v, unit):
    """A figure as the report prints it, or '-'/ERR."""
    if not isnum(v):
        return v if v else "-"
    x = float(v)
    if unit == "files/s":
        return "{:,.0f}".format(x)
    if unit == "s":
        return "%.2f" % x if x >= 1 else "%.3f" % x
    return "%.1f" % x


def ratio(a, b):
    return "%.2f" % (float(a) / float(b)) if isnum(a) and isnum(b) and float(b) > 0 else "-"


class ScaleReport:
    """The tables and targets of --only scale from RES {(setup, n, fs,
    row): value}, for the file counts FILES, the daemon's POOL (bytes)."""

    def __init__(self, res, files, pool):
        self.res = res
        self.files = tuple(sorted(files))
        self.pool = pool
        self.nfail = 0
        self.head = ""

    def get(self, n, fs, row):
        return self.res.get((SETUP, str(n), fs, row), "")

    def slowest(self, n, fs, phase):
        """'12.3 ms' (with how many ops took over 50 ms), or '-'."""
        m = self.get(n, fs, phase + "_max_ms")
        if not isnum(m):
            return m or "-"
        over = self.get(n, fs, phase + "_over50")
        return "%s ms%s" % (fmt(m, "ms"), " (%s over %d ms)" % (over, SLOW_MS) if over not in ("", "0") else "")

    def table(self, n):
        out = ["| %s files | unit | nvmefs | btrfs raid0 | nvmefs / btrfs | nvmefs slowest op | btrfs slowest op |" % "{:,}".format(n),
               "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]

        def row(label, unit, key, phase=None):
            d, b = self.get(n, "direct", key), self.get(n, "btrfs", key)
            if key.startswith("rss"):
                b = "-"
            cells = [label, unit, fmt(d, unit), fmt(b, unit), ratio(d, b),
                     self.slowest(n, "direct", phase) if phase else "",
                     self.slowest(n, "btrfs", phase) if phase else ""]
            out.append("| " + " | ".join(cells) + " |")
        row("load average (1 min) before create (a shared machine)", "", "loadavg")
        row(PHASES[0][1], "files/s", "create", "create")
        row("of which os.sync() after create", "s", "sync_s")
        row("images' allocated size after create", "MiB", "images_mib")
        row("daemon peak RSS (VmHWM) after create", "MiB", "rss_create")
        row("unmount with the files (nvmefs: until the daemon exits)", "s", "umount_full_s")
        row("fsck (fsck.nvmefs -n / btrfs check --readonly)", "s", "fsck_s")
        row("mount (until stat -f answers)", "s", "mount_s")
        for phase, label in PHASES[1:]:
            row(label, "files/s", phase, phase)
        row("daemon peak RSS (VmHWM) since the mount", "MiB", "rss_end")
        row("unmount, empty", "s", "umount_s")
        return out

    def verdict(self, out, what, figs, ok, said, want):
        """One target line about WHAT: PASS or FAIL as OK(*FIGS' values as
        floats) says, with SAID(*FIGS' values) after WHAT; when a figure is
        missing, FAIL naming FIGS ({label: figure})."""
        vals = list(figs.values())
        if all(isnum(v) for v in vals):
            verdict = "PASS" if ok(*[float(v) for v in vals]) else "FAIL"
            out.append("%s %s %s %s; target %s" % (verdict, self.head, what, said(*vals), want))
        else:
            missing = ", ".join("%s %s" % (k, v or "?") for k, v in figs.items())
            out.append("FAIL %s %s: no figure (%s); target %s" % (self.head, what, missing, want))

    def targets(self):
        """Issue 23's must-show lines, at the largest N of the run against
        the smallest; self.nfail counts the missed ones."""
        out = []
        if not self.files:
            return out
        n, n0 = self.files[-1], self.files[0]
        self.head = "scale %s files:" % "{:,}".format(n)
        get = self.get
        c, s = get(n, "direct", "create"), get(n, "direct", "stat")

        def against(other):
            return lambda a, b: "%s files/s = %s x %s (%s files/s)" % (fmt(a, "files/s"), ratio(a, b), other,
                                                                      fmt(b, "files/s"))
        self.verdict(out, "nvmefs create+write", {"nvmefs": c, "btrfs": get(n, "btrfs", "create")},
                     lambda a, b: a >= TARGET_VS_BTRFS * b, against("btrfs raid0"),
                     ">= %.1f x btrfs raid0" % TARGET_VS_BTRFS)
        own = "its own rate at %s files" % "{:,}".format(n0)
        if n0 == n:
            out.append("FAIL %s nvmefs create+write against its own rate at fewer files: this run has one file count"
                       " (give --files with a smaller one, as 10000); target >= %.1f" % (self.head, TARGET_VS_SMALL))
        else:
            self.verdict(out, "nvmefs create+write", {"nvmefs": c, "at %d files" % n0: get(n0, "direct", "create")},
                         lambda a, b: a >= TARGET_VS_SMALL * b, against(own),
                         ">= %.1f x %s (within 20%%)" % (TARGET_VS_SMALL, own))
        over = get(n, "direct", "create_over50") or "?"
        self.verdict(out, "nvmefs slowest single create", {"nvmefs": get(n, "direct", "create_max_ms")},
                     lambda m: m <= SLOW_MS, lambda m: "%s ms (%s over %d ms)" % (fmt(m, "ms"), over, SLOW_MS),
                     "<= %d ms" % SLOW_MS)
        self.rss_targets(n, out)
        self.verdict(out, "nvmefs mount", {"nvmefs": get(n, "direct", "mount_s")}, lambda t: t <= TARGET_MOUNT_S,
                     lambda t: "%s s (daemon start until stat -f answers)" % fmt(t, "s"), "<= %.0f s" % TARGET_MOUNT_S)
        self.verdict(out, "nvmefs stat after remount, cold,", {"nvmefs": s, "btrfs": get(n, "btrfs", "stat")},
                     lambda a, b: a >= TARGET_STAT_VS_BTRFS * b, against("btrfs raid0"),
                     ">= %.1f x btrfs raid0" % TARGET_STAT_VS_BTRFS)
        self.nfail = sum(1 for line in out if line.startswith("FAIL"))
        return out

    def rss_targets(self, n, out):
        figs = {"after create": self.get(n, "direct", "rss_create"),
                "since the remount": self.get(n, "direct", "rss_end")}
        limit = self.pool + DEFAULT_META_CACHE + TARGET_RSS_OVER_POOL

        def said(a, b):
            return "%.1f MiB (after create %s, since the remount %s)" % (
                max(float(a), float(b)), fmt(a, "MiB"), fmt(b, "MiB"))
        self.verdict(out, "nvmefs daemon peak RSS", figs, lambda a, b: max(a, b) * MIB <= limit, said,
                     "<= pinned pool %d MiB + metadata cache limit %d MiB (meta_cache's default) + %d MiB = %d MiB"
                     % (self.pool // MIB, DEFAULT_META_CACHE // MIB, TARGET_RSS_OVER_POOL // MIB, limit // MIB))
        want = "< %d MiB with the default settings" % (TARGET_RSS_DEFAULT // MIB)
        if self.pool != DEFAULT_POOL:
            want += ": not judged, this run's pool is %d MiB, not %d" % (self.pool // MIB, DEFAULT_POOL // MIB)
        self.verdict(out, "nvmefs daemon peak RSS", figs,
                     lambda a, b: self.pool == DEFAULT_POOL and max(a, b) * MIB < TARGET_RSS_DEFAULT, said, want)


# ------------------------------------------------------------------- run --


class Scale:
    """One --only scale run inside a bench.Bench (its runner, logs,
    results, mounts, devices, cleanup), over the file counts FILES. LOG:
    bench.py's progress printer."""

    def __init__(self, bench, files, log):
        self.b = bench
        self.files = tuple(sorted(files))
        self.log = log
        self.helper = os.path.join(bench.work, "scale.py")
        self.pool = emu.parse_size(bench.a.pool)

    def room_problem(self):
        """Why this machine cannot run the largest N, or None."""
        return room_problem(self.files[-1], emu.fs_avail("/dev/shm"), emu.meminfo_kib("MemAvailable") * 1024)

    def run(self):
        b = self.b
        t0 = time.monotonic()
        with open(self.helper, "w") as f:
            f.write(SCALE_PY)
        size = dev_size(self.files[-1])
        self.log("=== scale: %s files; %d sparse drives of %d GiB" % (
            ", ".join(str(n) for n in self.files), NDEV, size // GIB))
        b.runner.log_line("# setup: scale, %d sparse drives of %d GiB" % (NDEV, size // GIB))
        b.setup_devices(NDEV, size, need(self.files[-1])[0])
        for n in self.files:
            for fs in FS:
                self.run_fs(n, fs)
        b.drives.teardown()
        self.log("=== scale: %d s" % (time.monotonic() - t0))

    def run_fs(self, n, fs):
        """Every step of the top comment for FS at N files; on a failure the
        rest is skipped (ERR) and the file system unmounted."""
        b = self.b
        t0 = time.monotonic()
        self.log("== scale %d files: %s" % (n, NAME[fs]))
        for step in (self.make, self.create, self.umount_full, self.fsck, self.remount,
                     self.stat, self.read, self.delete, self.umount_end):
            b.last_fail = None
            b.runner.timed_out = False
            if not step(n, fs):
                b.error("scale %d files %s: %s failed: %s" % (n, NAME[fs], step.__name__,
                                                               b.last_fail or "see %s/logs" % b.out))
                b.force_umount()
                break
        b.mark_err(SETUP, n, fs, ROWS + (NVMEFS_ROWS if fs == "direct" else []))
        self.log("scale %d files %s: %d s" % (n, NAME[fs], time.monotonic() - t0))

    def record(self, n, fs, row, value):
        self.b.record(SETUP, n, fs, row, value)

    def timed(self, n, fs, row, fn):
        """Run FN; record its time as ROW if it returned True."""
        t0 = time.monotonic()
        ok = fn()
        if ok:
            self.record(n, fs, row, "%.3f" % (time.monotonic() - t0))
        return ok

    def phase(self, n, fs, phase):
        """One run of the helper; its figures recorded."""
        b = self.b
        lg = b.newlog("%s-%d-%s-%s" % (SETUP, n, fs, phase))
        # Generous: 5 ms a file, on top of 10 minutes.
        rc = b.run(600 + n // 200, lg, ["/usr/bin/python3", self.helper, phase, b.mnt, n, FILE_SIZE])
        figs = helper_figures(emu.last_line(lg), n)
        if rc != 0 or figs is None:
            if rc == 0:
                b.last_fail = "%s: no figures in %s" % (phase, lg)
            return False
        for row, v in figs.items():
            self.record(n, fs, row, v)
        return True

    # The steps (n, fs) -> False on a failure.
    def make(self, n, fs):
        b = self.b
        for d in b.drives.devs:
            if b.run(300, b.misc, ["blkdiscard", d]):
                return False
        return b.fs_mount(fs)

    def create(self, n, fs):
        b = self.b
        # The machine is shared: what else ran shows here.
        self.record(n, fs, "loadavg", "%.2f" % os.getloadavg()[0])
        b.warm_memory(n * 2 * FILE_SIZE)
        if not self.phase(n, fs, "create"):
            return False
        used = sum(os.stat(f).st_blocks * 512 for f in b.drives.images)
        self.record(n, fs, "images_mib", "%.1f" % (used / MIB))
        return True

    def umount_full(self, n, fs):
        return self.umount(n, fs, "rss_create", "umount_full_s")

    def umount_end(self, n, fs):
        return self.umount(n, fs, "rss_end", "umount_s")

    def umount(self, n, fs, rss_row, row):
        if not self.b.fs_umount(SETUP, n, rss_row):
            return False
        self.record(n, fs, row, "%.3f" % self.b.umount_secs)
        return True

    def fsck(self, n, fs):
        b = self.b
        if fs == "btrfs":
            argv = ["btrfs", "check", "--readonly", b.drives.devs[0]]
        else:
            argv = [b.a.build + "/fsck.nvmefs", "-n"] + b.drives.devs
        lg = b.newlog("%s-%d-%s-fsck" % (SETUP, n, fs))
        return self.timed(n, fs, "fsck_s", lambda: b.run(600 + n // 1000, lg, argv) == 0)

    def remount(self, n, fs):
        return self.timed(n, fs, "mount_s", lambda: self.b.mount_made(fs))

    def stat(self, n, fs):
        b = self.b
        return b.drop_caches(n * 2 * FILE_SIZE) and self.phase(n, fs, "stat")

    def read(self, n, fs):
        return self.phase(n, fs, "read")

    def delete(self, n, fs):
        return self.phase(n, fs, "delete")

    # ---------------------------------------------------------- report --
    def report(self, header, results):
        """report.md and targets.txt from RESULTS ({(setup, n, fs, row):
        value}); the count of missed targets."""
        b = self.b
        rep = ScaleReport(results, self.files, self.pool)
        targets = rep.targets()
        r = header + [
            "",
            "Metadata at scale (issue 23): N files of %d bytes, %d per directory, created (open O_CREAT|O_EXCL, write,"
            % (FILE_SIZE, PER_DIR),
            "close; then os.sync()), unmounted, checked, mounted again, stat'ed cold, read (content checked) and deleted",
            "(+os.sync()), by one Python process per phase (/usr/bin/python3, os calls). %d sparse image files of %s"
            % (NDEV, emu.human_iec(dev_size(self.files[-1]))),
            "in /dev/shm on loop devices, discarded before each file system is made.",
            "btrfs: mkfs.btrfs -f -K -d raid0 -m raid0, mount -o nodiscard. nvmefs: mkfs.nvmefs -f -K, -o mode=direct,pool=%s"
            % b.a.pool,
            "(%s). Rates: files/s over the whole phase; slowest op: the slowest single file operation, and how"
            % ("nvmefs's defaults" if self.pool == DEFAULT_POOL else "not the default pool"),
            "many took over %d ms. Ratio: nvmefs / btrfs (for times, below 1 is nvmefs faster). One run on a shared"
            % SLOW_MS,
            "2-core machine: compare within a table.",
            "Memory warmed before create and after dropping caches (\"Cold memory\" in bench.py)." if b.a.warm
            else "--no-warm: cold memory.",
            ""]
        for n in self.files:
            r += rep.table(n) + [""]
        r += ["Targets (issue 23, at the largest file count of this run; the issue states them at 1,000,000 files",
              "against 10,000):", "", "```"] + targets + ["```"]
        b.finish_report(r, targets)
        return rep.nfail
