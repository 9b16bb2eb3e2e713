#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench.py: nvmefs (cached and direct mode, and its native client) against
btrfs raid0 and against the raw devices (fio), on the same emulated drives in
one run (issues 5 and 21); --only transport: /dev/fuse against FUSE over
io_uring (issue 33). Run it as scripts/bench.sh (a wrapper that execs this
program).

Usage: bench.sh [-b BUILD] [-o DIR] [--only ram|capped|deepnvme|scale|transport] [--native-only]
                [--quick] [--check] [--pool SIZE] [--no-warm] [--aio-config FILE]
                [--files N[,N...]] [-h]
  -b BUILD      build directory with nvmefs, mkfs.nvmefs and nvmefs-bench
                (default build/)
  -o DIR        results directory (default bench-results/DATE-TIME in the
                current directory)
  --only SET    run only the RAM setup (ram) or only the capped ones (capped);
                deepnvme: only issue 22's comparison (below; never part of
                the default run); scale: only issue 23's scale benchmark
                (scripts/bench_scale.py; never part of the default run);
                transport: only issue 33's comparison of the FUSE
                transports (below; never part of the default run)
  --native-only only what the native client's targets (issue 21) compare:
                RAM: fio raw, dd and fio through the mount (cached, direct)
                and the native client; capped: fio raw and the native
                client. No btrfs, no other workload, no FUSE ceiling.
  --quick       much smaller sizes and fewer files: a smoke run of the whole
                script (about 2-3 minutes)
  --check       exit 1 when a target below is missed
  --pool SIZE   nvmefs pinned buffer pool, -o pool= (default 64M)
  --no-warm     do not warm free memory before each measured pass (see
                "Cold memory" below)
  --aio-config FILE  --only deepnvme: the handle's settings, from the "aio"
                object of a JSON file (nvmefs-tune --handle --json)
  --files LIST  --only scale: the file counts (default 10000,100000,1000000;
                with --quick 2000,10000)
  -h            print this help
Needs root, fio, btrfs-progs, gnuplot (gnuplot-nox) for the capped runs
and python3-torch (Debian's /usr/bin/python3) for the RAM run.

Setups, each on fresh image files in /dev/shm attached to loop devices,
deleted afterwards:
 - RAM: 4 drives of 3 GiB, no cap. Workloads, each on btrfs, nvmefs
   cached and nvmefs direct (in that order, each freshly made with mkfs):
   1. dd if=/dev/zero bs=1M count=4096 conv=fsync, drop caches, dd read.
   2. fio sequential write then read of one 4 GiB file, bs=1M, libaio,
      iodepth=32, direct=1 (fio's default fallocate=native lays it out).
   3. fio, 4 jobs writing 4 files of 1 GiB, bs=1M, psync, end_fsync=1
      (fio's bandwidth includes the final fsync: checked, 2 GiB on a
      capped drive came out at the cap).
   4. fio --thread, 4 jobs writing one 4 GiB file laid out first with
      fallocate(1), each its own 1 GiB range (offset_increment), bs=1M,
      psync, end_fsync=1.
   5. 10,000 files of 4 KiB (python3, os calls): create+write (+syncfs),
      stat, drop caches, read (content checked), unlink (+syncfs).
   6. torch.save of a 1 GiB state dict (16 float32 tensors) to the mount,
      with fsync; drop caches; torch.load (tensors compared after timing).
   7. the native client (issue 21), on a fresh nvmefs in direct mode (the
      default; its own mount, so the file system is as new as for the
      others): nvmefs-bench --client FILE --write, then, after dropping
      caches, --read, of one 4 GiB file: NATIVE_THREADS threads, each its
      own libnvmefs client, shared pinned buffers and contiguous slice,
      NATIVE_QD requests of NATIVE_BS in flight each. The write is timed
      up to its final nvmefs_fsync (as dd's conv=fsync: fio raw needs
      none and fio through the mount has none; the commit took about
      1 ms of a 4 GiB write). Also recorded: the bytes the daemon copied
      (data.copied_bytes + native.copied_bytes of .nvmefs/stats over both
      passes: aligned native I/O must copy none). On RAM-speed drives the
      read goes over the file NATIVE_READ_LOOPS_RAM times (--loops): one
      pass is half a second, fio raw's reads last seconds, and a hiccup of
      the shared host in half a second moved the ratio by 0.15. Neither
      pass gets warm_memory: they fill no page cache (direct mode, pinned
      buffers allocated before the clock starts, members already backed
      by the setup's fio pass), and fio raw, their baseline, gets none; a
      pass just after one ran slower for a while whatever it was (fio raw
      read 5.5 and 7.9 GB/s right after warm_memory, 9.5 and 9.1 without).
   plus fio on the raw devices (the limit): one job per device, libaio,
   direct=1, bs=1M, iodepth=32, group_reporting, write then read (in RAM
   once more just before workload 7, on the devices as the file systems
   left them: the native client is held to that pass, seconds and not
   minutes away on this shared machine); and
   Rounds: in RAM, that pair (fio raw, then workload 7 on a freshly made
   nvmefs) runs NATIVE_ROUNDS_RAM times, and the native ratio judged is
   the median of the rounds' ratios. One pass of each is a few seconds,
   and on this shared 2-core host two fio raw passes a minute apart
   differed by up to 30%: one pair landed either side of a target that a
   median of interleaved pairs (as A B A B timing tools do) settles. Every
   round's figures are in the report; copies count over all rounds.
   workloads 1 and 2 on tests/fuse_null in its cached and direct modes:
   the same FUSE settings as nvmefs, no data kept, no device touched, so
   what the FUSE transport alone allows here ("The FUSE ceiling" table).
 - capped: 1, 2 and 4 drives of 3 GiB capped at 200 MiB/s each (read and
   write). Only fio raw and workloads 1, 2 and 7, moving 2 GiB per drive per
   pass (dd: 2, 4, 8 GiB; about 10 s per pass whatever the drive count,
   so the throttle's start-up slack weighs the same everywhere; the
   1-drive dd is therefore 2 GiB, not 4).
 --quick: RAM drives of 1 GiB, 512 MiB dd and fio files, 4 x 128 MiB for
 workloads 3 and 4, 1000 small files, a 128 MiB state dict; capped drives
 of 1 GiB moving 256 MiB per drive per pass (short passes read a few %
 over the cap, see below).

Before anything is measured in a setup, one unmeasured fio write pass
covers every device (first writes into tmpfs pay for page allocation, at
about a quarter of the later speed). For the same reason both file
systems are made without discarding: mkfs.btrfs -K, mounted with -o
nodiscard (btrfs 6.2+ discards freed space asynchronously), and
mkfs.nvmefs -K (nvmefs itself never discards). A discard of a loop device
punches holes in its tmpfs image, so the file system would then write
into unallocated pages: 436 against 841 MB/s for nvmefs's dd on 4 capped
drives. Otherwise btrfs is mounted with defaults. Caches are dropped with
"sync -f MNT; echo 3 >/proc/sys/vm/drop_caches".

Daemons in their own session: nvmefs and fuse_null run in the foreground
(-f, our children) but in a session of their own (setsid), as a daemon
runs once it has left its terminal or under a mount unit. In the
workload's session the daemon shares the workload's autogroup, and the
scheduler then hands the CPU between the two faster than between groups,
which no user's mount gets: 10,000 files of 4 KiB made by one process on
direct io_uring ran 17,846-17,990 files/s on fuse_null in the same session
against 10,674-10,882 in its own, nvmefs 11,909-12,447 against
11,640-11,678, and stat went from 80-93k to 58-64k for both (2026-11-30;
docs/PERFORMANCE.md, "The create's FUSE ceiling"). Runs before that date
had the daemon in the workload's session.

Cold memory: this machine is a VM whose free memory goes back to the host
(virtio_balloon free page reporting, /sys/module/page_reporting: order 9,
min_free_ms 0), so the first touch of a page the kernel allocates costs a
fault in the host. Whatever fills the page cache pays it: a 4 GiB dd into
/dev/shm ran at 2.3 GB/s, a second one beside it at 890 MB/s with 83% of
its time in copy_folio_from_iter_atomic. It hit btrfs's buffered writes and reads and nvmefs's cached mode,
not direct mode (whose buffers are one pinned pool): dd in cached mode on
4 capped drives wrote 493 and 645 MB/s, and 821 and 838 MB/s (the cap is
839) when 5 GiB had just been written to /dev/shm and deleted. Real
drives in a real host do not charge this. So before every measured pass,
for every file system alike, warm_memory writes as many bytes as the pass
moves (at most MemAvailable - 2 GiB) to a file in /dev/shm and deletes
it; the pass then gets pages the host has just backed. Reads do it after
dropping caches (the python workloads in their own process, between the
drop and the timed phase). --no-warm measures without it. fio raw and
the native client's passes (workload 7) fill no page cache and get none.

How the cap works, and what was verified (kernel 6.18, cgroup v1 blkio,
loop devices over tmpfs, 200 MiB/s = 209.7 MB/s):
 - blk-throttle charges a bio to the blkio cgroup of the task that
   submits it. fio and the nvmefs daemon submit their own O_DIRECT bios;
   btrfs's buffered writeback is submitted by kworkers, which are in the
   root cgroup. A limit on a child cgroup therefore misses part of btrfs:
   with dd (4 GiB, conv=fsync) run inside a child cgroup capped at 200
   MiB/s, btrfs wrote at 254 MB/s, and the child was charged 2.72 GB of
   the 4.29 GB (the rest went out from root's writeback).
 - So the rules go on the v1 *root* blkio cgroup
   (blkio.throttle.{read,write}_bps_device for our loop devices), which
   this kernel honours: fio (libaio, direct, QD 32, 2 GiB) in the root
   group gave 200.6 MiB/s write and read; btrfs dd 1.5 GiB gave 186 MB/s
   write (with fsync) and 211 MB/s read.
 - Under cgroup v1 blk-throttle is flat, not hierarchical: a group's rules
   apply to its own tasks only. fio in a child group without rules ran at
   963 MiB/s on a device capped in the root group. So the program moves
   itself into the root blkio group first (everything it starts, the
   nvmefs daemon included, is charged there), and removes its rules
   before detaching the loop devices.
 - Every run prints, under "Caps", every capped figure against the cap;
   a btrfs figure above 1.10 x the cap is marked "*" (not capped fairly).
   A full run (2 GiB per drive per pass) gave: fio raw 1.003 x the cap
   (write and read, 1, 2 and 4 drives); btrfs dd read 0.998-1.003, fio
   in the mount 0.993-1.003, dd write 0.64-0.90 (below the cap: btrfs's
   own limit); nvmefs at most 1.016 x. With dd conv=fsync on nvmefs
   (1 GiB, 4 capped drives), the devices' blkio byte counters had all
   1024 MiB when dd exited and nothing more 3 s later: the figures are
   not flattered by data still in flight.
 - Short passes read over the cap: the throttle lets a first slice
   through at once. With --quick (about 1.2 s passes) fio raw reads
   ~1.05 x and nvmefs dd write up to ~1.2 x the cap: --quick capped
   figures are a smoke test, not measurements.

--only deepnvme (issue 22, DeepNVMe's comparison; about 4 minutes, 2 with
--quick): 4 RAM drives of 1 GiB (512 MiB with --quick), fio raw as above
but DN_RAW_LOOPS times over each drive (one pass of 4 GiB lasted under a
second), then on nvmefs (direct) and on btrfs raid0, each freshly made, the
examples of examples/deepnvme run as programs (--json, their last line
read), each after warm_memory: py_store_cpu_tensor and
aio_store_cpu_tensor of a 1 GiB tensor, py_load_cpu_tensor and
aio_load_cpu_tensor of a 1 GiB file (written from /dev/urandom),
save_load_state_dict of a 1 GiB state dict in torch's zip and legacy
formats (--engine aio on nvmefs, with --zero_copy for zip; --engine torch
on btrfs); 1 warmup and 3 timed loops each (2 of 128 MiB with --quick),
every handle run with --validate and the settings DN_HANDLE (or
--aio-config). On nvmefs the handle's tensor store and load run in
DN_ROUNDS rounds, each held to a fio raw pass just before it: for the
store, fio raw's write on the bare devices, then a freshly made nvmefs and
the store; for the load, fio raw's read under the mount (a raw read harms
nothing), then the load. The handle's figure is the median of the rounds,
and its ratio to fio raw the median of the rounds' ratios (as the native
client's, "Rounds" above). The tensor examples also run the other way round for
reference (Python on nvmefs, the handle's O_DIRECT fallback on btrfs).
Targets: the handle on nvmefs stores >= 2 x and loads >= 4 x Python on
btrfs, both >= 0.8 x fio raw; the state dict saves >= 3 x torch.save and
loads >= 2 x torch.load on btrfs: the saves in each format on both sides
(zip, legacy), the load with the zero-copy load of the zip format (tensors
are views of the handle's locked buffer, as DeepNVMe keeps its pinned
buffers); shown, not judged: the loads whose tensors get memory of their
own (bounded by page faults on both sides, DN_EXTRA) and the handle's
legacy save against torch.save's default zip. report.md holds
this comparison's table and targets only.

--only scale (issue 23, item 4; 10^4, 10^5 and 10^6 files about 11
minutes, --quick 15 s): N files of 4 KiB, 1,000 per directory, created,
unmounted, checked with fsck, mounted again, stat'ed cold, read and
deleted, on nvmefs and on btrfs raid0 over the same 4 sparse image files
in /dev/shm, for each N of --files; rates, the slowest single operation,
the daemon's peak RSS, mount, unmount and fsck times, and issue 23's
targets at the largest N. The method, its tables and targets are in
scripts/bench_scale.py's docstring; report.md holds them only.

--only transport (issue 33; --quick 155 s on a loaded 2-core host, a full
run not timed yet: its passes are 8 times longer): /dev/fuse
against FUSE over io_uring, btrfs raid0 beside. One RAM setup as above (4
drives of 3 GiB, 1 GiB with --quick, the unmeasured warm-up pass), fio raw
once, then, each freshly made, in this order: btrfs raid0, nvmefs direct,
direct on io_uring, cached, cached on io_uring (-o mode=MODE,pool=POOL,
plus uring for the io_uring ones: demanded, so a kernel that does not
offer it fails that mount rather than falling back to /dev/fuse). Each
nvmefs mount first records the transport its .nvmefs/config names
(results.tsv row "transport"); one that says otherwise than asked is an
error. Workloads on each: first the round trip (lookup.py: 50,000 stats
of absent names, 5,000 with --quick, one process, the loop timed whole:
on FUSE one LOOKUP answered ENOENT each, so lookups/s in row lookup_rate
is what one synchronous round trip costs; btrfs answers in the kernel),
then 1 (dd), 2 (fio sequential: its read is issue
33's "fio libaio O_DIRECT 1 MiB QD32 read of a 4 GiB file"), a new one,
fio 4 KiB random O_DIRECT reads at QD32 (libaio; a file of 4 GiB, 512 MiB
with --quick, written first with 1 MiB O_DIRECT writes, not measured,
caches dropped, then --runtime 20 s, 5 with --quick, --time_based: IOPS in
row rand4k_read), 5 (small files: one process, each phase timed whole,
nothing per call: issue 33's throughput figure) and 6 (torch); on nvmefs
direct (the default mount) small.py runs a second time under
LD_PRELOAD=BUILD/client/libnvmefs-preload.so, its creates through the
native door (rows small_preload_*), and fio's two reads run again under it,
through its read door, the program reading the member devices itself (a
file of the same size, written first, not measured: rows door_fio_read,
door_fio_read_cpu and door_rand4k_read, recorded only when the daemon
lent the file and fewer than a tenth of the reads were FUSE READs). The kernel
offers the transport only when /sys/module/fuse/parameters/enable_uring
is Y; nvmefs never sets it, the benchmark does, as the administrator: Y
just before each io_uring file system is made and mounted, put back to
the value it found once that file system is unmounted (the kernel checks
it on every ring command, so not earlier), and by the cleanup on every
failure and signal path (after unmounting). Without that file (a kernel
without FUSE over io_uring) the io_uring file systems are skipped and the
report says why. Then the FUSE ceiling on each transport: tests/fuse_null
(no data, no devices) in each mode on /dev/fuse and with -o uring
(nvmefs's own transport, fs/fuse/uring.c), each with lookup, dd, fio
sequential and 4 KiB random reads, and the small files' create+write,
stat and unlink (it keeps no data, so no read), enable_uring handled as
for nvmefs. Then the rounds (TR_ROUNDS, "Rounds" below): every workload
again on btrfs raid0 and each nvmefs mount, twice, round after round,
each made afresh; their rows give the median of the three rounds, their
ratios and targets the median of each round's own ratios, and the
report lists every round's figure. report.md: a table
with a row per figure and a column per file system, the ratios io_uring /
/dev/fuse per mode and each against btrfs raid0, which transport wins
where, the ceiling's table (fuse_null's figures, io_uring / /dev/fuse for
it, and each nvmefs mount against fuse_null on its transport), and issue
33's must-show as PASS/FAIL lines: every nvmefs mount's small-file
create+write >= 0.5 x (each line also gives fuse_null's on the same mode
and transport against btrfs raid0: what a daemon that does nothing gets
there, on io_uring through nvmefs's own transport code, on /dev/fuse
through a loop built as nvmefs's, whose leader polls) and read
>= 0.7 x btrfs raid0 and its 1 MiB QD32
O_DIRECT read >= 1.0 x, the same two small-file targets and the 1 MiB
read for the preload door on nvmefs direct, and its 4 KiB random reads
>= 1.5 x the mount's on /dev/fuse; per mode, io_uring's 4 KiB random reads >= 1.5 x
/dev/fuse and its dd write and read, torch.save and torch.load >= 1.0 x
/dev/fuse (the same run's /dev/fuse loop is "today's"). The native client
(no FUSE in its path) is not run.

Output, in DIR and the report on stdout: report.md (machine, sizes, a
markdown table per setup and workload: fio raw, btrfs, nvmefs cached,
nvmefs direct, the ratios nvmefs/btrfs, nvmefs/fio raw for the
sequential workloads and, capped, nvmefs/(drives x cap); the nvmefs
daemon's peak RSS (VmHWM just before unmounting) with its pool size; the
FUSE ceiling table (fuse_null, and the model 1 / (1 / fuse_null + 1 /
fio raw) that adds one device copy to it, against btrfs and fio raw); the
cap check; PASS/FAIL lines for the targets), results.tsv (every figure),
targets.txt (the PASS/FAIL lines), capped.png (gnuplot: throughput
against drive count, capped runs), commands.log (every command in order)
and logs/ (each step's output). MB = 1e6 bytes, GB = 1e9 bytes.

Targets (issue 5), each a PASS/FAIL line with its figures:
 capped, 4 drives: sequential read and write through the mount (dd and
   fio) >= 0.95 x 4 x 200 MiB/s; and within 5% of linear from 1 drive
   (and from 1 to 2) drives;
 RAM: sequential read and write (dd and fio) >= 1.0 x btrfs and >= 0.5 x
   fio raw; torch.save and torch.load >= 1.0 x btrfs; small files (all
   four phases) >= 0.5 x btrfs.
Both nvmefs modes are checked. (Not with --native-only.)
Targets of the native client (issue 21), in their own table ("Native
client") and PASS/FAIL lines, write and read each:
 RAM: >= 0.85 x fio raw; above every figure of the mount in that run for
   the same direction (dd and fio, cached and direct); >= 1.5 x the
   mount's dd (the better of cached and direct);
 capped: >= 0.97 x the cap at 1, 2 and 4 drives; within 5% of linear
   from 1 to 2 and to 4 drives;
 every setup: the daemon copied no byte for the (aligned) native I/O.

Exit status: 0 when the benchmark ran, even if targets were missed (1 with
--check and a missed target); 1 when the benchmark itself failed (a tool,
a mount, a workload, the nvmefs daemon exiting non-zero), after printing
what it has; 2 for bad arguments; 128+N on signal N.

Cleanup: on exit and on SIGINT, SIGTERM or SIGHUP it stops what is
running, unmounts (a daemon that does not answer is SIGKILLed, which
aborts its FUSE connection), clears the throttle rules, forgets the
devices in btrfs, detaches the loop devices and deletes the images and the
work directory. Every step that touches a mount runs under a time limit;
on expiry the command is stopped, and if it is stuck in a FUSE request the
nvmefs daemon is SIGKILLed. (Environment, for testing that path:
NVMEFS_BENCH_TIME_LIMIT=SECS lowers every step's limit to SECS.) A run
killed with SIGKILL cannot clean up: a later run clears throttle rules it
finds on the loop devices it attaches.

Time (2 cores, shared): --quick about 2 minutes (115 s through ctest);
a full run about 10 minutes (RAM 2 min, each capped drive count 2.5-3);
--native-only: RAM about 3 minutes (its 3 rounds), capped about 2.5 (x1 45 s, x2 48 s,
x4 60 s).
"""

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# No __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import nvmefs_emu as emu  # noqa: E402  (found next to this file)
from nvmefs_emu import MIB, GIB  # noqa: E402
import bench_scale  # noqa: E402  (--only scale)

PROG = "bench.sh"
HERE = os.path.dirname(os.path.realpath(__file__))
TOP = os.path.dirname(HERE)
PY = "/usr/bin/python3"
CAP_MIBPS = 200
CAP_COUNTS = (1, 2, 4)
RAM_NDEV = 4
SMALL_SIZE = 4096
# The native client's run (workload 7): threads, requests in flight per
# thread, bytes per request. As fio raw's 4 jobs x QD 32 x 1 MiB: 128 MiB
# in flight, 1 MiB per device per request (a 4 MiB request is one stripe
# of 4 drives); docs/PERFORMANCE.md, "The native client".
NATIVE_THREADS = 4
NATIVE_QD = 8
NATIVE_BS = 4 * MIB
NATIVE_READ_LOOPS_RAM = 3
# Rounds of (fio raw, then the native client on a fresh nvmefs) on RAM
# drives: the native ratio judged is the median of the rounds' ratios
# (module docstring, "Rounds").
NATIVE_ROUNDS_RAM = 3

# Rows each workload records (for ERR marks when it fails).
WL_ROWS = {
    "dd": ["dd_write", "dd_read"],
    "fioseq": ["fio_write", "fio_read", "fio_write_cpu", "fio_read_cpu"],
    "files4": ["files4_write"],
    "shared": ["shared_write"],
    "small": ["small_create", "small_stat", "small_read", "small_reread", "small_delete", "small_total"],
    # fuse_null keeps no data: its small files are made, stat'ed and removed.
    "small_null": ["small_create", "small_stat", "small_delete"],
    "small_preload": ["small_preload_create", "small_preload_stat", "small_preload_read",
                      "small_preload_delete", "small_preload_total"],
    "door": ["door_fio_read", "door_fio_read_cpu", "door_rand4k_read"],
    "torch": ["torch_save", "torch_load"],
    "native": ["native_write", "native_read", "native_copied"],
    "randread": ["rand4k_read"],
    "lookup": ["lookup_rate"],
    "transport": ["transport"],
}
SEQ = ("dd_write", "dd_read", "fio_write", "fio_read")
NATIVE = ("native_write", "native_read")
ALL_WL = ["dd", "fioseq", "files4", "shared", "small", "torch"]


def ram_plan(native_only):
    """The RAM setup's file systems in order, each with its workloads;
    "fio-again": fio raw once more, just before the native client, whose
    ratio to it is then not a ratio between minutes of a shared machine."""
    native = []
    for k in range(1, NATIVE_ROUNDS_RAM + 1):
        native += [(round_fs("fio-again", k), []), (round_fs("native", k), ["native"])]
    if native_only:
        return [("cached", ["dd", "fioseq"]), ("direct", ["dd", "fioseq"])] + native
    # The FUSE ceiling last: the same transport, no devices (Report.ceiling).
    return ([(fs, ALL_WL) for fs in ("btrfs", "cached", "direct")] + native
            + [(fs, ["dd", "fioseq"]) for fs in ("null-cached", "null-direct")])


# --only transport (issue 33): the file systems in order, the workloads,
# and the kernel's switch for FUSE over io_uring (module docstring).
TR_SETUP = "transport"
TR_FS = ("btrfs", "direct", "direct+uring", "cached", "cached+uring")
TR_WL = ["lookup", "dd", "fioseq", "randread", "small", "torch"]
# The mount whose small files also go through libnvmefs-preload.so (the
# create door for unmodified programs, docs/NATIVE.md), and fio's reads
# through its read door: the default one.
TR_PRELOAD_FS = "direct"
# The FUSE ceiling on each transport: tests/fuse_null (no data, no
# devices) in each mode, on /dev/fuse and with -o uring, after the nvmefs
# mounts; every workload but those that read data back.
TR_NULL_FS = ("null-direct", "null-direct+uring", "null-cached", "null-cached+uring")
TR_NULL_WL = ["lookup", "dd", "fioseq", "randread", "small_null"]
# Rounds. One pass's figures moved by up to 35% between minutes on this
# shared machine (a slow spell slowed every phase of one mount alike, and
# io_uring's 4 KiB random reads went 1.4 to 2.3 x /dev/fuse's), and which
# transport won a row flipped from run to run. So after the first pass,
# every workload of TR_WL runs TR_ROUNDS - 1 more times on every file
# system of TR_FS, round after round (each file system made afresh), and
# the report gives each row's median over the rounds; its ratios (and
# targets) are the medians of each round's own ratios, whose two figures
# were measured a minute or two apart rather than a round apart. The
# preload and read doors and fuse_null run once.
TR_ROUNDS = 3
TR_ROUND_WL = TR_WL
TR_ROUND_ROWS = [r for w in TR_ROUND_WL for r in WL_ROWS[w]]


def tr_round_setup(r):
    """The results' setup name of round R (1: the first pass)."""
    return TR_SETUP if r == 1 else "%s.r%d" % (TR_SETUP, r)
WL_ROWS_NULL = [r for w in TR_NULL_WL for r in WL_ROWS[w]]
ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"


def transport_plan(have_uring):
    """--only transport's file systems in order, each with its workloads;
    the io_uring ones only when HAVE_URING (the kernel has the switch).
    An nvmefs mount first records the transport it reports; the default
    mount (direct, /dev/fuse) also runs the small files through the
    preload door (TR_PRELOAD_FS)."""
    return [(fs, TR_NULL_WL if fs.startswith("null-") else
             TR_WL if fs == "btrfs" else
             ["transport"] + TR_WL + (["small_preload", "door"] if fs == TR_PRELOAD_FS else []))
            for fs in TR_FS + TR_NULL_FS if have_uring or not fs.endswith("+uring")]


def transport_rounds_plan(have_uring):
    """transport_plan as (setup, file system, workloads), then its later
    rounds (TR_ROUNDS): TR_ROUND_WL on each file system of TR_FS."""
    return ([(TR_SETUP, fs, wl) for fs, wl in transport_plan(have_uring)]
            + [(tr_round_setup(r), fs, TR_ROUND_WL) for r in range(2, TR_ROUNDS + 1)
               for fs in TR_FS if have_uring or not fs.endswith("+uring")])


def nvmefs_mode(fs):
    """(mode, uring) of the nvmefs mount FS (cached, direct, direct+uring,
    native.2, ...), or None when FS is not nvmefs (btrfs, fuse_null, fio)."""
    mode, _, extra = base_fs(fs).partition("+")
    if extra not in ("", "uring"):
        return None
    if mode == "native" and not extra:
        # The native client's runs are on the default mode, direct.
        return ("direct", False)
    return (mode, extra == "uring") if mode in ("cached", "direct") else None


def nvmefs_opts(fs, pool):
    """The -o options nvmefs is mounted with for FS: mode=MODE,pool=POOL,
    plus uring (demanded: the mount refuses rather than falling back) for
    MODE+uring, else nouring (direct mode's default is io_uring where the
    kernel offers it with cpu_latency=off: a /dev/fuse figure must not
    depend on enable_uring)."""
    mode, uring = nvmefs_mode(fs)
    return "mode=%s,pool=%s,%s" % (mode, pool, "uring" if uring else "nouring")


def rss_fs(fs):
    """Whether the daemon's peak RSS is recorded for FS: the mount's nvmefs
    (cached, direct, either on io_uring), not the native client's."""
    return nvmefs_mode(fs) is not None and not fs.startswith("native")


def config_transport(text):
    """The transport a mount's .nvmefs/config TEXT names ('io_uring' or
    '/dev/fuse'), or None."""
    m = re.search(r"^transport = (\S+)$", text, re.M)
    return m.group(1) if m else None


def cpu_idle(sysfs="/sys"):
    """How an idle CPU waits, as sysfs under SYSFS tells: the cpuidle driver
    and, where it is haltpoll (a KVM guest), guest_halt_poll_ns. With 0 an
    idle vCPU halts at once, and every wake-up of a task on it goes through
    the host: a FUSE round trip then costs much more (docs/PERFORMANCE.md,
    "Halted vCPUs"), a kernel filesystem's calls hardly. A string for the
    report's header, "" when sysfs says nothing."""
    def read(path):
        try:
            with open(os.path.join(sysfs, path)) as f:
                return f.read().strip()
        except OSError:
            return None
    driver = read("devices/system/cpu/cpuidle/current_driver")
    if not driver:
        return ""
    note = "cpuidle %s" % driver
    poll = read("module/haltpoll/parameters/guest_halt_poll_ns") if driver == "haltpoll" else None
    if poll is not None:
        note += ", guest_halt_poll_ns %s" % poll
    return note


def fio_rand_args(f, size, secs):
    """fio's arguments for the 4 KiB random O_DIRECT reads at QD32 of F
    (its first SIZE bytes) for SECS seconds (rows rand4k_read, door_rand4k_read)."""
    return ["--name=rand", "--filename=" + f, "--size=%d" % size, "--bs=4k", "--rw=randread",
            "--ioengine=libaio", "--direct=1", "--iodepth=32", "--runtime=%d" % secs, "--time_based"]


def fio_iops(text, op):
    """IOPS of OP (rounded to a whole number, as a string) from fio's JSON
    TEXT; emu.ParseError when there is none."""
    job = emu.fio_job(text)
    try:
        iops = float(job[op]["iops"])
        ios = int(job[op]["total_ios"])
    except (KeyError, TypeError, ValueError) as e:
        raise emu.ParseError("fio's JSON has no %s IOPS: %s" % (op, e)) from None
    if iops <= 0 or ios <= 0:
        raise emu.ParseError("fio did no %s I/O" % op)
    return str(emu.round_half_up(iops))


def round_fs(fs, k):
    """The name a round's file system is recorded under: FS for round 1
    (as before rounds existed), FS.K after it."""
    return fs if k == 1 else "%s.%d" % (fs, k)


def base_fs(fs):
    """What is mounted for FS (native.2 -> native)."""
    return fs.split(".", 1)[0]


def median(xs):
    """The median of a non-empty list of numbers (the mean of the middle
    two for an even count)."""
    xs = sorted(xs)
    h = len(xs) // 2
    return xs[h] if len(xs) % 2 else (xs[h - 1] + xs[h]) / 2


def capped_plan(native_only):
    """A capped setup's file systems in order, each with its workloads."""
    if native_only:
        return [("native", ["native"])]
    return [(fs, ["dd", "fioseq"]) for fs in ("btrfs", "cached", "direct")] + [("native", ["native"])]


def log(msg):
    print("%s: %s" % (PROG, msg), file=sys.stderr, flush=True)


class Die(Exception):
    """The benchmark cannot go on: exit 1 after cleaning up."""


class BadArg(Exception):
    """Exit 2."""


# ----------------------------------------------------------------- sizes --


class Sizes:
    """The sizes of a full or a --quick run (see the top comment)."""

    def __init__(self, quick):
        if quick:
            self.ram_dev, self.ram_raw_loops = GIB, 1
            self.ram_dd = self.ram_fio = 512 * MIB
            self.ram_w4, self.small_n, self.torch_mib = 128 * MIB, 1000, 128
            self.cap_dev, self.cap_per_drive = GIB, 256 * MIB
            self.rand_size, self.rand_secs = 512 * MIB, 5
            self.lookup_n = 5000
        else:
            self.ram_dev, self.ram_raw_loops = 3 * GIB, 2
            self.ram_dd = self.ram_fio = 4 * GIB
            self.ram_w4, self.small_n, self.torch_mib = GIB, 10000, 1024
            self.cap_dev, self.cap_per_drive = 3 * GIB, 2 * GIB
            # --only transport's random reads: a file of 4 GiB, 20 s.
            self.rand_size, self.rand_secs = 4 * GIB, 20
            # --only transport's round trips: stats of absent names.
            self.lookup_n = 50000


def tlimit(nbytes):
    """A time limit for moving NBYTES (2 minutes + 10 MiB/s)."""
    return 120 + nbytes // (10 * MIB)


# --------------------------------------------------------- python workloads --
# Run with PY in their own process (torch is imported there only).

SMALL_PY = r'''# small.py ROOT N SIZE WARM_PATH WARM_BYTES [PHASES]: N files of SIZE bytes
# in ROOT/small: create+write (+syncfs), stat, read after dropping caches
# (and writing and deleting WARM_BYTES at WARM_PATH), read again in a
# shuffled order after dropping them again (a data loader's next epoch: the
# files were read since they were written), unlink (+syncfs). PHASES
# (comma-separated) runs only those, in that order. Prints one JSON line of
# seconds per completed phase; exit 1 if one failed. "total" is create,
# stat, read and unlink, when all four ran.
import ctypes, json, os, random, sys, time, traceback

root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
warm_path, warm_bytes = sys.argv[4], int(sys.argv[5])
phases = sys.argv[6].split(",") if len(sys.argv) > 6 else ["create", "stat", "read", "reread", "delete"]
libc = ctypes.CDLL(None, use_errno=True)

def syncfs():
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.syncfs(fd) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), root)
    finally:
        os.close(fd)

d = os.path.join(root, "small")
os.mkdir(d)
names = [os.path.join(d, "f%06d" % i) for i in range(n)]
data = os.urandom(size)
t = {"files": n}

def create():
    for p in names:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            if os.write(fd, data) != size:
                raise OSError("short write: " + p)
        finally:
            os.close(fd)
    syncfs()

def stat():
    for p in names:
        if os.stat(p).st_size != size:
            raise OSError("wrong size: " + p)

def read_all(order):
    for p in order:
        fd = os.open(p, os.O_RDONLY)
        try:
            b = os.read(fd, size + 1)
        finally:
            os.close(fd)
        if b != data:
            raise OSError("wrong content: " + p)

def read():
    read_all(names)

def reread():
    order = names[:]
    random.Random(1).shuffle(order)
    read_all(order)

def delete():
    for p in names:
        os.unlink(p)
    os.rmdir(d)
    syncfs()

def warm():
    block = bytes(1 << 20)
    with open(warm_path, "wb") as f:
        for _ in range(warm_bytes >> 20):
            f.write(block)
    os.unlink(warm_path)

rc = 0
try:
    funcs = {"create": create, "stat": stat, "read": read, "reread": reread, "delete": delete}
    unknown = [p for p in phases if p not in funcs]
    if unknown:
        raise OSError("unknown phase: " + ", ".join(unknown))
    for name in phases:
        phase = funcs[name]
        if name in ("read", "reread"):
            syncfs()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            warm()
        t0 = time.perf_counter()
        phase()
        t[name] = time.perf_counter() - t0
    if all(p in t for p in ("create", "stat", "read", "delete")):
        t["total"] = t["create"] + t["stat"] + t["read"] + t["delete"]
except OSError as e:
    t["error"] = str(e)
    traceback.print_exc()
    sys.stderr.flush()
    rc = 1
# Last line: the phases that completed.
print(json.dumps(t), flush=True)
sys.exit(rc)
'''

LOOKUP_PY = r'''# lookup.py ROOT N: N stats of names that do not exist under ROOT, one
# after another, the loop timed whole. On a FUSE mount each is one LOOKUP
# round trip the daemon answers ENOENT (nothing cached: every name is new),
# so the rate is what one synchronous round trip costs; on a kernel
# filesystem it is the in-kernel lookup. Prints one JSON line.
import json, os, sys, time

root, n = sys.argv[1], int(sys.argv[2])
names = [os.path.join(root, "absent%07d" % i) for i in range(n)]
t0 = time.perf_counter()
for p in names:
    try:
        os.stat(p)
    except FileNotFoundError:
        pass
    else:
        sys.exit("exists: " + p)
print(json.dumps({"lookups": n, "seconds": time.perf_counter() - t0}), flush=True)
'''

TORCH_PY = r'''# torch_io.py PATH MIB WARM_PATH WARM_BYTES: torch.save of a state dict of
# MIB MiB (16 float32 tensors) to PATH with fsync, drop caches, write and
# delete WARM_BYTES at WARM_PATH, torch.load; the tensors are compared after
# timing. Prints one JSON line (bytes, save and load seconds).
import json, os, sys, time
import torch

path, mib = sys.argv[1], int(sys.argv[2])
warm_path, warm_bytes = sys.argv[3], int(sys.argv[4])
count = 16
per = mib * 2**20 // 4 // count
sd = {"layers.%d.weight" % i: torch.arange(per, dtype=torch.float32) + i for i in range(count)}
nbytes = count * per * 4
t0 = time.perf_counter()
with open(path, "wb") as f:
    torch.save(sd, f)
    f.flush()
    os.fsync(f.fileno())
t_save = time.perf_counter() - t0
with open("/proc/sys/vm/drop_caches", "w") as f:
    f.write("3\n")
block = bytes(1 << 20)
with open(warm_path, "wb") as f:
    for _ in range(warm_bytes >> 20):
        f.write(block)
os.unlink(warm_path)
t0 = time.perf_counter()
sd2 = torch.load(path)
t_load = time.perf_counter() - t0
if sd2.keys() != sd.keys() or not all(torch.equal(sd[k], sd2[k]) for k in sd):
    sys.exit("torch.load returned different tensors")
print(json.dumps({"bytes": nbytes, "save": t_save, "load": t_load}))
'''


def lookup_rate(line):
    """Lookups per second (a whole number, as a string) from lookup.py's
    JSON LINE, or None."""
    try:
        d = json.loads(line)
        n, secs = int(d["lookups"]), float(d["seconds"])
    except (TypeError, ValueError, KeyError):
        return None
    if n <= 0 or secs <= 0:
        return None
    return str(emu.round_half_up(n / secs))


def small_rates(line):
    """files/s per phase (create, stat, read, reread, delete, total) from
    small.py's last line: {phase: int} for the phases it completed."""
    try:
        j = json.loads(line)
    except ValueError:
        return {}
    out = {}
    for phase in ("create", "stat", "read", "reread", "delete", "total"):
        try:
            out[phase] = str(emu.round_half_up(j["files"] / j[phase]))
        except (KeyError, TypeError, ZeroDivisionError):
            pass
    return out


def native_figures(line, want):
    """MB/s ('%.1f') and the daemon's copied bytes from nvmefs-bench
    --client --json's last line, which must say WANT bytes; None if it
    does not."""
    try:
        j = json.loads(line)
        if int(j["bytes"]) != want or float(j["seconds"]) <= 0:
            return None
        return {"mbps": "%.1f" % (j["bytes"] / j["seconds"] / 1e6),
                "copied": int(j["daemon_copied_bytes"])}
    except (ValueError, KeyError, TypeError):
        return None


def torch_rates(line):
    """GB/s of save and load (3 decimals, as jq numbers) from torch_io.py's
    last line; None if it is not there."""
    try:
        j = json.loads(line)
        return {op: emu.jq_number(emu.round_half_up(j["bytes"] / j[op] / 1e9, 3))
                for op in ("save", "load")}
    except (ValueError, KeyError, TypeError, ZeroDivisionError):
        return None


# ---------------------------------------------------------------- report --
# Figures are strings as results.tsv holds them (a number or ERR).


def isnum(v):
    return v is not None and re.fullmatch(r"[0-9]+(\.[0-9]+)?", v) is not None


def calc(x):
    """X with 4 decimals, as the shell version's awk arithmetic kept it."""
    return float("%.4f" % x)


def div(a, b, dec):
    """A/B with DEC decimals, or '-'."""
    if isnum(a) and isnum(b) and float(b) > 0:
        return "%.*f" % (dec, float(a) / float(b))
    return "-"


def cpu_busy_seconds():
    """CPU time all CPUs spent busy since boot (/proc/stat: user, nice,
    system, irq and softirq; not idle, iowait, or steal, the time a VM's
    host took), in seconds; None when unreadable."""
    try:
        with open("/proc/stat") as f:
            t = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(t) < 8:
        return None
    return (sum(t[:7]) - t[3] - t[4]) / os.sysconf("SC_CLK_TCK")


def cpu_per_gb(b0, b1, nbytes):
    """CPU milliseconds per GB (10^9 bytes) moved: busy seconds B0 before
    and B1 after NBYTES; None without both figures."""
    if b0 is None or b1 is None or nbytes <= 0:
        return None
    return (b1 - b0) * 1000.0 / (nbytes / 1e9)


def fmt(v, unit):
    """A figure as printed in the table."""
    if not isnum(v):
        return v if v else "-"
    if unit == "GB/s":
        return "%.2f" % float(v)
    if unit == "MiB":
        return "%.1f" % float(v)
    return "%.0f" % float(v)


def num(x):
    """A computed figure as a string isnum() accepts."""
    return "%.4f" % x


def cap_mbps(n):
    """N drives at the cap, in MB/s."""
    return calc(n * CAP_MIBPS * 1.048576)


def setup_name(s, n):
    return "RAM x%d" % n if s == "ram" else "%d MiB/s x%d" % (CAP_MIBPS, n)


def model(null, raw):
    """The throughput of a daemon that costs what fuse_null does plus one
    device copy at fio raw's speed, both on the same CPUs: the times per
    byte add up."""
    if isnum(null) and isnum(raw) and float(null) > 0 and float(raw) > 0:
        return num(calc(1 / (1 / float(null) + 1 / float(raw))))
    return "-"


class Report:
    """Tables, targets and caps from RES {(setup, n, fs, row): value}.
    NATIVE: the native client ran (its table and targets); ISSUE5: the
    whole issue-5 set ran (else --native-only: its targets are left out)."""

    def __init__(self, res, sizes, pool, ran_ram, ran_capped, native=False, issue5=True):
        self.res = res
        self.sz = sizes
        self.pool = pool
        self.ran_ram = ran_ram
        self.ran_capped = ran_capped
        self.native = native
        self.issue5 = issue5
        self.nfail = 0

    def get(self, s, n, fs, row):
        return self.res.get((s, str(n), fs, row), "")

    def table_rows(self, s, n, specs):
        """One markdown line per (key, label, unit, kind); kind w/r: a
        sequential write/read, compared with fio raw."""
        setup = setup_name(s, n)
        cap = cap_mbps(n) if s == "cap" else None
        lines = []
        if not self.issue5:
            specs = [sp for sp in specs if sp[0] in SEQ]
        for key, label, unit, kind in specs:
            raw = "-"
            if kind == "w":
                raw = self.get(s, n, "fio", "raw_write")
            if kind == "r":
                raw = self.get(s, n, "fio", "raw_read")
            b = self.get(s, n, "btrfs", key)
            c = self.get(s, n, "cached", key)
            d = self.get(s, n, "direct", key)
            if key == "rss":
                b = "-"
            bmark = "*" if cap is not None and isnum(b) and float(b) >= calc(cap * 1.10) else ""
            capr1 = capr2 = "-"
            if cap is not None and kind != "-":
                capr1, capr2 = div(c, num(cap), 2), div(d, num(cap), 2)
            if kind == "-":
                rawr1 = rawr2 = "-"
            else:
                rawr1, rawr2 = div(c, raw, 2), div(d, raw, 2)
            cells = [setup, label, unit, fmt(raw, unit), fmt(b, unit) + bmark, fmt(c, unit),
                     fmt(d, unit), div(c, b, 2), div(d, b, 2), rawr1, rawr2, capr1, capr2]
            lines.append("| " + " | ".join(cells) + " |")
        return lines

    def table(self):
        sz = self.sz
        h = emu.human_iec
        pool_label = "nvmefs daemon peak RSS (VmHWM), pool=%s" % self.pool
        out = ["| setup | workload | unit | fio raw | btrfs | nvmefs cached | nvmefs direct | cached / btrfs | direct / btrfs | cached / fio raw | direct / fio raw | cached / cap | direct / cap |",
               "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        if self.ran_ram:
            sm = "%d x 4 KiB files" % sz.small_n
            out += self.table_rows("ram", RAM_NDEV, [
                ("dd_write", "dd write %s, bs=1M conv=fsync" % h(sz.ram_dd), "MB/s", "w"),
                ("dd_read", "dd read, bs=1M, cold cache", "MB/s", "r"),
                ("fio_write", "fio seq write %s, libaio QD32 direct" % h(sz.ram_fio), "MB/s", "w"),
                ("fio_read", "fio seq read, libaio QD32 direct", "MB/s", "r"),
                ("files4_write", "fio 4 writers, 4 files of %s, psync, end_fsync" % h(sz.ram_w4), "MB/s", "w"),
                ("shared_write", "fio 4 threads, 1 file, disjoint %s ranges, end_fsync" % h(sz.ram_w4), "MB/s", "w"),
                ("small_create", "%s: create+write (+syncfs)" % sm, "files/s", "-"),
                ("small_stat", "%s: stat" % sm, "files/s", "-"),
                ("small_read", "%s: read, cold cache" % sm, "files/s", "-"),
                ("small_delete", "%s: unlink (+syncfs)" % sm, "files/s", "-"),
                ("small_total", "%s: all four phases" % sm, "files/s", "-"),
                ("torch_save", "torch.save %d MiB state dict (+fsync)" % sz.torch_mib, "GB/s", "-"),
                ("torch_load", "torch.load, cold cache", "GB/s", "-"),
                ("rss", pool_label, "MiB", "-")])
        if self.ran_capped:
            for n in CAP_COUNTS:
                out += self.table_rows("cap", n, [
                    ("dd_write", "dd write %s, bs=1M conv=fsync" % h(n * sz.cap_per_drive), "MB/s", "w"),
                    ("dd_read", "dd read, bs=1M, cold cache", "MB/s", "r"),
                    ("fio_write", "fio seq write %s, libaio QD32 direct" % h(n * sz.cap_per_drive), "MB/s", "w"),
                    ("fio_read", "fio seq read, libaio QD32 direct", "MB/s", "r"),
                    ("rss", pool_label, "MiB", "-")])
        return out

    def ceiling(self):
        """The sequential RAM workloads against fuse_null, the FUSE
        transport with no device behind it, and against the model built on
        it."""
        n = RAM_NDEV
        out = ["| workload | fio raw | btrfs | FUSE null cached | FUSE null direct | model cached | model direct | nvmefs cached | nvmefs direct | cached / model | direct / model | model cached / btrfs | model direct / btrfs | model cached / fio raw | model direct / fio raw |",
               "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for key, label, kind in (
                ("dd_write", "dd write %s conv=fsync" % emu.human_iec(self.sz.ram_dd), "write"),
                ("dd_read", "dd read, cold cache", "read"),
                ("fio_write", "fio seq write, libaio QD32 direct", "write"),
                ("fio_read", "fio seq read, libaio QD32 direct", "read")):
            raw = self.get("ram", n, "fio", "raw_" + kind)
            b = self.get("ram", n, "btrfs", key)
            nc = self.get("ram", n, "null-cached", key)
            nd = self.get("ram", n, "null-direct", key)
            c = self.get("ram", n, "cached", key)
            d = self.get("ram", n, "direct", key)
            mc, md = model(nc, raw), model(nd, raw)
            cells = [label] + [fmt(v, "MB/s") for v in (raw, b, nc, nd, mc, md, c, d)] + [
                div(c, mc, 2), div(d, md, 2), div(mc, b, 2), div(md, b, 2),
                div(mc, raw, 2), div(md, raw, 2)]
            out.append("| " + " | ".join(cells) + " |")
        return out

    def target(self, ok, line, out):
        if ok:
            out.append("PASS " + line)
        else:
            out.append("FAIL " + line)
            self.nfail += 1

    def targets(self):
        out = []
        if self.ran_capped and self.issue5:
            self.capped_targets(out)
        if self.ran_ram and self.issue5:
            self.ram_targets(out)
        if self.native:
            self.native_targets(out)
        return out

    # ------------------------------------------------- the native client --
    def mount_figures(self, s, n, op):
        """The mount's figures for OP (write, read) in setup S x N: {label:
        value} for dd and fio in cached and direct mode, as recorded."""
        return {"%s %s_%s" % (mode, w, op): self.get(s, n, mode, "%s_%s" % (w, op))
                for mode in ("cached", "direct") for w in ("dd", "fio")}

    def native_rounds(self, s, n, op):
        """[(native, fio raw)] of OP (write, read) in setup S x N, one pair
        per round run (as recorded: a number, ERR or ''). fio raw is the
        pass just before that round's client (fio-again, fio-again.2, ...;
        RAM), else the setup's first pass."""
        out = []
        for k in range(1, NATIVE_ROUNDS_RAM + 1):
            v = self.get(s, n, round_fs("native", k), "native_" + op)
            if k > 1 and not v:
                break
            raw = self.get(s, n, round_fs("fio-again", k), "raw_" + op)
            out.append((v, raw or (self.get(s, n, "fio", "raw_" + op) if k == 1 else "")))
        return out

    def native_figure(self, s, n, op):
        """(native, fio raw, native / fio raw) of OP in setup S x N: with
        several rounds, the median native figure, the median fio raw figure
        and the median of the rounds' own ratios (each round's client held
        to the fio raw pass just before it); the ratio is '-' unless every
        round gave both figures."""
        rounds = self.native_rounds(s, n, op)
        if len(rounds) == 1:
            v, raw = rounds[0]
            return v, raw, div(v, raw, 2)
        if not all(isnum(v) and isnum(raw) and float(raw) > 0 for v, raw in rounds):
            bad = [v for v, raw in rounds if not isnum(v)]
            return (bad[0] if bad else rounds[0][0]), "-", "-"
        return (num(median([float(v) for v, _ in rounds])), num(median([float(r) for _, r in rounds])),
                "%.2f" % median([float(v) / float(r) for v, r in rounds]))

    def native_round_lines(self):
        """One line per setup and direction with several rounds: each
        round's native and fio raw figures and their ratio."""
        out = []
        for s, n in self.native_setups():
            for op in ("write", "read"):
                rounds = self.native_rounds(s, n, op)
                if len(rounds) > 1:
                    out.append("- %s native %s, round by round (native / fio raw MB/s = ratio): %s" % (
                        setup_name(s, n), op, "; ".join("%s / %s = %s" % (fmt(v, "MB/s"), fmt(r, "MB/s"), div(v, r, 2))
                                                         for v, r in rounds)))
        return out

    def native_setups(self):
        return (([("ram", RAM_NDEV)] if self.ran_ram else [])
                + ([("cap", n) for n in CAP_COUNTS] if self.ran_capped else []))

    def native_copied(self, s, n):
        """The bytes the daemon copied over every round's write and read,
        or the first figure that is not a number."""
        total = 0
        for k in range(1, NATIVE_ROUNDS_RAM + 1):
            c = self.get(s, n, round_fs("native", k), "native_copied")
            if k > 1 and not c:
                break
            if not c.isdigit():
                return c
            total += int(c)
        return str(total)

    def native_table(self):
        """One row per setup and direction: the native client against fio
        raw, the best figure of the mount, the mount's dd and the cap."""
        out = ["| setup | native client | MB/s | fio raw | native / fio raw | best of the mount | native / best of the mount | native / mount's dd | native / cap | daemon copies (bytes) |",
               "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
        for s, n in self.native_setups():
            for op in ("write", "read"):
                v, raw, ratio = self.native_figure(s, n, op)
                figs = self.mount_figures(s, n, op)
                best = best_figure(figs)
                dd = best_figure({k: x for k, x in figs.items() if "dd_" in k})
                cap = num(cap_mbps(n)) if s == "cap" else None
                cells = [setup_name(s, n), "seq " + op, fmt(v, "MB/s"), fmt(raw, "MB/s"), ratio,
                         "%s %s" % (best[0], fmt(best[1], "MB/s")) if best else "-",
                         div(v, best[1], 2) if best else "-", div(v, dd[1], 2) if dd else "-",
                         div(v, cap, 3) if cap else "-", self.native_copied(s, n) or "-"]
                out.append("| " + " | ".join(cells) + " |")
        return out

    def native_targets(self, out):
        if self.ran_ram:
            for op in ("write", "read"):
                self.native_ram_targets(RAM_NDEV, op, out)
        if self.ran_capped:
            for op in ("write", "read"):
                self.native_capped_targets(op, out)
        for s, n in self.native_setups():
            c = self.native_copied(s, n)
            self.target(c == "0", "%s native: the daemon copied %s bytes for aligned native I/O; target 0"
                        % (setup_name(s, n), c or "? (no figure)"), out)

    def native_ram_targets(self, n, op, out):
        v, raw, ratio = self.native_figure("ram", n, op)
        rounds = len(self.native_rounds("ram", n, op))
        figs = self.mount_figures("ram", n, op)
        head = "RAM x%d native %s: %s MB/s" % (n, op, fmt(v, "MB/s"))
        if rounds > 1:
            head += " (median of %d rounds)" % rounds
        if isnum(v) and isnum(raw) and ratio != "-":
            self.target(float(v) >= calc(0.85 * float(raw)) if rounds == 1 else float(ratio) >= 0.85,
                        "%s = %s x fio raw (%s%s); target >= 0.85"
                        % (head, ratio, fmt(raw, "MB/s"), ", median of each round's ratio to the pass before it" if rounds > 1 else ""), out)
        else:
            self.target(False, "%s: no figure (fio raw %s); target >= 0.85 x fio raw" % (head, raw or "?"), out)
        missing = [k for k, x in figs.items() if not isnum(x)]
        if isnum(v) and not missing:
            best = best_figure(figs)
            self.target(float(v) > float(best[1]), "%s = %s x the best figure of the mount (%s, %s MB/s); target > 1.0 (dd and fio, cached and direct)"
                        % (head, div(v, best[1], 2), best[0], fmt(best[1], "MB/s")), out)
            dd = best_figure({k: x for k, x in figs.items() if "dd_" in k})
            self.target(float(v) >= calc(1.5 * float(dd[1])), "%s = %s x the mount's dd (%s, %s MB/s); target >= 1.5"
                        % (head, div(v, dd[1], 2), dd[0], fmt(dd[1], "MB/s")), out)
        else:
            why = "no figure of %s" % ", ".join(missing) if missing else "no native figure"
            self.target(False, "%s: %s; target > every figure of the mount" % (head, why), out)
            self.target(False, "%s: %s; target >= 1.5 x the mount's dd" % (head, why), out)

    def native_capped_targets(self, op, out):
        key = "native_" + op
        for n in CAP_COUNTS:
            v = self.get("cap", n, "native", key)
            cap = num(cap_mbps(n))
            if isnum(v):
                self.target(float(v) >= calc(0.97 * float(cap)), "capped x%d native %s: %s MB/s = %s x cap (%s MB/s); target >= 0.97"
                            % (n, op, fmt(v, "MB/s"), div(v, cap, 3), fmt(cap, "MB/s")), out)
            else:
                self.target(False, "capped x%d native %s: no figure (%s); target >= 0.97 x cap" % (n, op, v or "not run"), out)
        v1 = self.get("cap", 1, "native", key)
        for n in (2, 4):
            v = self.get("cap", n, "native", key)
            if isnum(v) and isnum(v1):
                lin = calc(float(v) / (n * float(v1)))
                self.target(0.95 <= lin <= 1.05, "capped x1->x%d native %s: %s -> %s MB/s = %s x linear; target 0.95..1.05"
                            % (n, op, fmt(v1, "MB/s"), fmt(v, "MB/s"), div(v, num(calc(n * float(v1))), 3)), out)
            else:
                self.target(False, "capped x1->x%d native %s: no figure; target 0.95..1.05 x linear" % (n, op), out)

    def capped_targets(self, out):
        cap = cap_mbps(4)
        want = calc(0.95 * cap)
        for mode in ("cached", "direct"):
            for key in SEQ:
                v = self.get("cap", 4, mode, key)
                if isnum(v):
                    self.target(float(v) >= want, "capped x4 %s %s: %s MB/s = %s x cap (%s MB/s); target >= 0.95"
                                % (mode, key, fmt(v, "MB/s"), div(v, num(cap), 3), fmt(num(cap), "MB/s")), out)
                else:
                    self.target(False, "capped x4 %s %s: no figure (%s); target >= 0.95 x cap"
                                % (mode, key, v or "not run"), out)
        for mode in ("cached", "direct"):
            for key in SEQ:
                v1 = self.get("cap", 1, mode, key)
                for n in (2, 4):
                    v = self.get("cap", n, mode, key)
                    if isnum(v) and isnum(v1):
                        lin = calc(float(v) / (n * float(v1)))
                        self.target(0.95 <= lin <= 1.05, "capped x1->x%d %s %s: %s -> %s MB/s = %s x linear; target 0.95..1.05"
                                    % (n, mode, key, fmt(v1, "MB/s"), fmt(v, "MB/s"),
                                       div(v, num(calc(n * float(v1))), 3)), out)
                    else:
                        self.target(False, "capped x1->x%d %s %s: no figure; target 0.95..1.05 x linear"
                                    % (n, mode, key), out)

    def ram_targets(self, out):
        n = RAM_NDEV
        for mode in ("cached", "direct"):
            for key in SEQ:
                op = key.split("_", 1)[1]
                v = self.get("ram", n, mode, key)
                b = self.get("ram", n, "btrfs", key)
                raw = self.get("ram", n, "fio", "raw_" + op)
                if isnum(v) and isnum(b) and isnum(raw):
                    ok = float(v) >= float(b) and float(v) >= calc(0.5 * float(raw))
                    self.target(ok, "RAM x%d %s %s: %s MB/s = %s x btrfs (%s), %s x fio raw (%s); target >= 1.0 x btrfs and >= 0.5 x fio raw"
                                % (n, mode, key, fmt(v, "MB/s"), div(v, b, 2), fmt(b, "MB/s"),
                                   div(v, raw, 2), fmt(raw, "MB/s")), out)
                else:
                    self.target(False, "RAM x%d %s %s: no figure (nvmefs %s, btrfs %s, fio raw %s)"
                                % (n, mode, key, v or "?", b or "?", raw or "?"), out)
            for key in ("torch_save", "torch_load"):
                v = self.get("ram", n, mode, key)
                b = self.get("ram", n, "btrfs", key)
                if isnum(v) and isnum(b):
                    self.target(float(v) >= float(b), "RAM x%d %s %s: %s GB/s = %s x btrfs (%s); target >= 1.0"
                                % (n, mode, key, fmt(v, "GB/s"), div(v, b, 2), fmt(b, "GB/s")), out)
                else:
                    self.target(False, "RAM x%d %s %s: no figure (nvmefs %s, btrfs %s)"
                                % (n, mode, key, v or "?", b or "?"), out)
            v = self.get("ram", n, mode, "small_total")
            b = self.get("ram", n, "btrfs", "small_total")
            if isnum(v) and isnum(b):
                self.target(float(v) >= calc(0.5 * float(b)), "RAM x%d %s small files: %s files/s = %s x btrfs (%s); target >= 0.5"
                            % (n, mode, fmt(v, "files/s"), div(v, b, 2), fmt(b, "files/s")), out)
            else:
                self.target(False, "RAM x%d %s small files: no figure (nvmefs %s, btrfs %s)"
                            % (n, mode, v or "?", b or "?"), out)

    def caps(self):
        out = []
        for n in CAP_COUNTS:
            cap = num(cap_mbps(n))
            line = "x%d (cap %s MB/s):" % (n, fmt(cap, "MB/s"))
            for fs in ("fio", "btrfs", "cached", "direct", "native"):
                for key in ("raw_write", "raw_read") + SEQ + NATIVE:
                    v = self.get("cap", n, fs, key)
                    if isnum(v):
                        line += " %s %s %s;" % (fs, key, div(v, cap, 3))
            out.append(line.rstrip(";"))
        return out

    def plot_data(self):
        """capped.dat: drives, cap, fio raw write, read, then dd write, dd
        read, fio write, fio read for btrfs, nvmefs cached, nvmefs direct."""
        out = ["# drives, MB/s: cap, fio raw write, read, then dd write, dd read, fio write, fio read for btrfs, nvmefs cached, nvmefs direct, then the native client's write, read (- = no figure)"]
        for n in CAP_COUNTS:
            row = [str(n), num(cap_mbps(n)), self.get("cap", n, "fio", "raw_write"),
                   self.get("cap", n, "fio", "raw_read")]
            for fs in ("btrfs", "cached", "direct"):
                row += [self.get("cap", n, fs, key) for key in SEQ]
            row += [self.get("cap", n, "native", key) for key in NATIVE]
            # Anything not a number (ERR, missing) becomes "-".
            out.append(" ".join(v if re.fullmatch(r"[0-9.]+", v or "") else "-" for v in row))
        return out


def best_figure(figs):
    """(label, value) of the highest number in FIGS {label: value}, or
    None when none is a number."""
    nums = [(float(v), k, v) for k, v in figs.items() if isnum(v)]
    if not nums:
        return None
    _, k, v = max(nums)
    return (k, v)


def load_results(path):
    res = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 5:
                res[tuple(parts[:4])] = parts[4]
    return res


GNUPLOT = """set terminal {term}
set output '{out}/capped.png'
set datafile missing '-'
set multiplot layout 1,2 title "nvmefs vs btrfs raid0 vs fio raw, drives capped at {cap} MiB/s each (dd: solid, fio in the mount: dashed)"
set xlabel 'drives'
set ylabel 'MB/s'
set xtics (1, 2, 4)
set xrange [0.8:4.2]
set yrange [0:*]
set key left top
set grid
do for [o=0:1] {{
	set title (o == 0 ? 'sequential write' : 'sequential read')
	plot '{dat}' u 1:2 w l dt 2 lw 2 lc 'black' t 'cap (drives x {cap} MiB/s)', \\
	     '' u 1:(column(3+o)) w lp pt 7 lw 2 lc 'gray50' t 'fio raw', \\
	     '' u 1:(column(5+o)) w lp pt 5 lw 2 lc 'blue' t 'btrfs dd', \\
	     '' u 1:(column(7+o)) w lp pt 4 dt 3 lw 2 lc 'blue' t 'btrfs fio', \\
	     '' u 1:(column(9+o)) w lp pt 9 lw 2 lc 'red' t 'nvmefs cached dd', \\
	     '' u 1:(column(11+o)) w lp pt 8 dt 3 lw 2 lc 'red' t 'nvmefs cached fio', \\
	     '' u 1:(column(13+o)) w lp pt 11 lw 2 lc 'dark-green' t 'nvmefs direct dd', \\
	     '' u 1:(column(15+o)) w lp pt 10 dt 3 lw 2 lc 'dark-green' t 'nvmefs direct fio', \\
	     '' u 1:(column(17+o)) w lp pt 13 lw 2 lc 'orange' t 'nvmefs native client'
}}
unset multiplot
"""


# ----------------------------------------------------------------- bench --


class Bench:
    """One run: devices, file systems, workloads, results."""

    def __init__(self, args, sizes, out):
        self.a = args
        self.sz = sizes
        self.out = out
        self.results = os.path.join(out, "results.tsv")
        self.cmdlog = os.path.join(out, "commands.log")
        self.misc = os.path.join(out, "logs", "misc.log")
        limit = os.environ.get("NVMEFS_BENCH_TIME_LIMIT")
        self.runner = emu.Runner(log, self.cmdlog, int(limit) if limit else None)
        self.work = tempfile.mkdtemp(prefix="nvmefs-bench.", dir="/tmp")
        self.mnt = os.path.join(self.work, "mnt")
        os.mkdir(self.mnt)
        self.drives = emu.Drives(log)
        self.cur_fs = None  # btrfs, cached, direct, native, null-cached or null-direct while mounted
        self.daemon = None  # the FUSE daemon: nvmefs or fuse_null (our child, -f)
        self.errors = 0
        self.last_fail = None  # the last command run() saw fail, with its last line of output
        self.nlog = 0
        self.recorded = set()
        self.sz_dd = self.sz_fio = self.sz_w4 = 0
        self.umount_secs = None  # the last fs_umount's time
        self.uring_found = None  # enable_uring's value before we set it (to put back)

    # ---------------------------------------------------------- running --
    def error(self, msg):
        log("ERROR: " + msg)
        with open(os.path.join(self.out, "errors.txt"), "a") as f:
            f.write(msg + "\n")
        self.errors += 1

    def newlog(self, name):
        """A fresh log file in OUT/logs."""
        self.nlog += 1
        return os.path.join(self.out, "logs", "%03d-%s.log" % (self.nlog, name))

    def on_limit(self):
        """A step that ran out of time on a mount means the mount does not
        answer (and the command may be stuck in a FUSE request that only the
        daemon's death ends)."""
        if self.daemon is not None and self.daemon.running():
            log("the mount did not answer in time: SIGKILL to the nvmefs daemon %d" % self.daemon.pid)
            emu.sigkill(self.daemon.pid)

    def run(self, secs, outf, argv):
        """ARGV's status (124 if its time limit stopped it); logged to
        commands.log, output appended to OUTF."""
        rc = self.runner.run(secs, outf, argv, on_stuck=self.on_limit, after_limit=self.on_limit)
        if rc != 0:
            cmd = " ".join(map(str, argv))
            log("failed (status %d): %s (output in %s)" % (rc, cmd, outf))
            self.last_fail = "%s -> status %d: %s" % (cmd, rc, emu.last_line(outf))
        return rc

    def record(self, setup, n, fs, row, value):
        """One figure (or ERR) into results.tsv."""
        with open(self.results, "a") as f:
            f.write("%s\t%s\t%s\t%s\t%s\n" % (setup, n, fs, row, value))
        self.recorded.add((setup, n, fs, row))
        if value != "ERR":
            log("%s x%s %s %s: %s" % (setup, n, fs, row, value))

    def warm_bytes(self, want):
        """How much warm_memory may write for a pass of WANT bytes; 0 with
        --no-warm."""
        return emu.warm_size(want if self.a.warm else 0)

    def warm_memory(self, nbytes):
        """Write and delete up to NBYTES in /dev/shm, so that the next pass
        allocates pages the host has just backed ("Cold memory" in the top
        comment). Not measured; a failure is logged and ignored."""
        b = self.warm_bytes(nbytes)
        if b <= 0:
            return
        f = os.path.join(self.drives.imgdir, "warm")
        if self.run(tlimit(b), self.misc, ["dd", "if=/dev/zero", "of=" + f, "bs=1M", "count=%d" % (b // MIB)]):
            log("warming %d bytes of memory failed (ignored)" % b)
        try:
            os.unlink(f)
        except OSError:
            pass

    def drop_caches(self, warm=0):
        """Write back the mount, drop clean caches, then warm WARM bytes of
        memory for the read that follows."""
        if emu.drop_caches(self.run, self.mnt, self.misc):
            return False
        self.warm_memory(warm)
        return True

    def remove(self, *paths):
        """Delete from the mount and sync, so that the next workload starts
        with the space free."""
        return (self.run(300, self.misc, ["rm", "-rf", "--"] + list(paths)) == 0
                and self.run(300, self.misc, ["sync", "-f", self.mnt]) == 0)

    # ---------------------------------------------------------- devices --
    def setup_devices(self, n, size, fill=None):
        """N image files of SIZE in /dev/shm on loop devices, then one
        unmeasured fio write pass over all of them (tmpfs allocation).
        FILL: the bytes the run will write into them at most, when that is
        less than N x SIZE (--only scale): the images stay sparse, with no
        warm-up pass."""
        avail = emu.fs_avail("/dev/shm")
        memav = emu.meminfo_kib("MemAvailable") * 1024
        need = n * size if fill is None else fill
        if need + GIB > avail:
            raise Die("not enough room in /dev/shm: need %d bytes of images, %d available" % (need, avail))
        if need + 4 * GIB > memav:
            raise Die("not enough memory: %d bytes of images + 4 GiB for caches, MemAvailable %d"
                      % (need, memav))
        try:
            self.drives.create(n, size, self.cmdlog)
        except (OSError, subprocess.CalledProcessError) as e:
            raise Die("cannot set up the devices: %s" % e) from None
        log("devices: %s (%d x %d MiB in %s)" % (" ".join(self.drives.devs), n, size // MIB,
                                                  self.drives.imgdir))
        if fill is not None:
            return
        lg = self.newlog("warmup-x%d" % n)
        self.runner.log_line("# warm-up (not measured)")
        if self.run(120 + n * size // (20 * MIB), lg, [
                "fio", "--output-format=json", "--output=%s.json" % lg, "--ioengine=libaio",
                "--direct=1", "--bs=1M", "--iodepth=32", "--size=%d" % size, "--rw=write",
                "--group_reporting"] + self.fio_jobs()):
            raise Die("fio warm-up write failed")

    def fio_jobs(self):
        """One --name/--filename pair per device."""
        out = []
        for k, d in enumerate(self.drives.devs):
            out += ["--name=dev%d" % k, "--filename=" + d]
        return out

    def fio_mbps(self, lg, op, want):
        """MB/s from LG.json, or None (the reason appended to LG)."""
        try:
            with open(lg + ".json", errors="replace") as f:
                return emu.fio_mbps_exact(f.read(), op, want)
        except (OSError, emu.ParseError) as e:
            with open(lg, "a") as f:
                f.write("%s: %s\n" % (PROG, e))
            return None

    def fio_raw(self, setup, per, loops, fs="fio", ops=("write", "read")):
        """The limit, write then read (OPS) on the raw devices; recorded as
        FS (fio, or fio-again for the pass before the native client or the
        handle's load)."""
        n = len(self.drives.devs)
        for op in ops:
            lg = self.newlog("%s-x%d-%s-%s" % (setup, n, "raw" if fs == "fio" else fs, op))
            v = None
            if self.run(tlimit(per * loops), lg, [
                    "fio", "--output-format=json", "--output=%s.json" % lg, "--ioengine=libaio",
                    "--direct=1", "--bs=1M", "--iodepth=32", "--size=%d" % per,
                    "--loops=%d" % loops, "--rw=" + op, "--group_reporting"] + self.fio_jobs()) == 0:
                v = self.fio_mbps(lg, op, n * per * loops)
            if v is None:
                self.error("%s x%d: fio raw %s failed (see %s)" % (setup, n, op, lg))
            self.record(setup, n, fs, "raw_" + op, v or "ERR")

    # ------------------------------------------------------ filesystems --
    def fs_mount(self, fs):
        """Make FS (btrfs, cached, direct, native, cached+uring, direct+uring,
        null-cached, null-direct, either null on io_uring: NULL-MODE+uring)
        on the devices and mount it; False on a failure."""
        devs = self.drives.devs
        build = self.a.build
        if fs == "btrfs":
            if self.run(300, self.newlog("mkfs-btrfs"), ["mkfs.btrfs", "-f", "-K", "-d", "raid0", "-m", "raid0"] + devs):
                return False
            return self.mount_made(fs)
        if nvmefs_mode(fs) is not None:
            if self.run(300, self.newlog("mkfs-nvmefs"), [build + "/mkfs.nvmefs", "-f", "-K"] + devs):
                return False
            return self.mount_made(fs)
        mode, _, uring = fs[len("null-"):].partition("+")
        if not self.start_daemon(fs, self.newlog(fs), [
                build + "/tests/fuse_null", self.mnt, "-o",
                "mode=" + mode + (",uring" if uring else ""), "-f"]):
            return False
        # nvmefs's default readahead window, which it sets itself.
        m = emu.mount_at(self.mnt)
        try:
            with open("/sys/class/bdi/%s/read_ahead_kb" % m["devnum"], "w") as f:
                f.write("16384\n")
        except (OSError, TypeError) as e:
            log("cannot set read_ahead_kb of %s: %s" % (self.mnt, e))
            return False
        return self.run(30, self.misc, ["stat", "-f", self.mnt]) == 0

    def mount_made(self, fs):
        """Mount FS (btrfs, cached, direct, native, MODE+uring), already made on the
        devices, and wait until the mount point answers statfs; False on a
        failure. (--only scale times this: its remount.)"""
        devs = self.drives.devs
        if fs == "btrfs":
            opts = "nodiscard" + "".join(",device=" + d for d in devs)
            self.cur_fs = "btrfs"
            if self.run(120, self.newlog("mount-btrfs"), ["mount", "-t", "btrfs", "-o", opts, devs[0], self.mnt]):
                return False
        else:
            if not self.start_daemon(fs, self.newlog("nvmefs-" + fs), [
                    self.a.build + "/nvmefs", ",".join(devs), self.mnt, "-o",
                    nvmefs_opts(fs, self.a.pool), "-f"]):
                return False
        return self.run(30, self.misc, ["stat", "-f", self.mnt]) == 0

    def start_daemon(self, fs, lg, argv):
        """Start the FUSE daemon ARGV (in the foreground, logging to LG, in a
        session of its own: "Daemons in their own session" at the top) and
        wait until the mount is there."""
        self.runner.log_line(emu.shell_line(argv))
        self.cur_fs = fs
        self.daemon, why = emu.start_daemon(argv, lg, self.mnt, new_session=True)
        if why is None:
            return True
        log("%s %s; its log (%s):" % (argv[0], why, lg))
        sys.stderr.writelines(emu.tail(lg, 20))
        if self.daemon is not None and not self.daemon.running():
            self.daemon = None
        return False

    def fs_umount(self, setup, n, rss_row="rss"):
        """Unmount; for nvmefs record the daemon's peak RSS first (as
        RSS_ROW) and check that it exits 0. umount_secs: how long the
        unmount took (for a FUSE daemon, until it had exited: it writes its
        final checkpoint in between)."""
        fs = self.cur_fs
        t0 = time.monotonic()
        if fs == "btrfs":
            if self.run(300, self.newlog("umount-btrfs"), ["umount", self.mnt]):
                return False
            self.umount_secs = time.monotonic() - t0
            for d in self.drives.devs:
                emu.quiet_run(["btrfs", "device", "scan", "--forget", d])
        else:
            if rss_fs(fs):
                hwm = self.daemon.peak_rss_mib() if self.daemon else None
                self.record(setup, n, fs, rss_row, hwm or "ERR")
            lg = self.newlog("umount-" + fs)
            t0 = time.monotonic()
            why = emu.unmount_fuse(self.run, self.mnt, self.daemon, ["fusermount3", "-u"], 120, 120, lg)
            self.umount_secs = time.monotonic() - t0
            if why is not None:
                log("%s: %s; its log:" % (fs, why))
                if self.daemon is not None:
                    sys.stderr.writelines(emu.tail(self.daemon.log, 20))
                    if not self.daemon.running():
                        self.daemon = None
                return False
            self.daemon = None
        self.cur_fs = None
        return True

    def force_umount(self):
        """Unmount whatever is mounted on the mount point, whatever it
        takes."""
        emu.force_unmount(self.mnt, self.cur_fs, self.daemon, self.misc, log)
        self.daemon = None
        if emu.is_mounted(self.mnt):
            log("warning: %s is still mounted" % self.mnt)
        self.cur_fs = None

    # -------------------------------------------------------- workloads --
    # Each: wl_NAME(setup, n, fs); records its figures; False on a failure.
    # Sizes come from sz_dd, sz_fio, sz_w4 set per setup.

    def wl_dd(self, s, n, fs):
        f = self.mnt + "/dd.bin"
        self.warm_memory(self.sz_dd)
        lg = self.newlog("%s-x%d-%s-dd-write" % (s, n, fs))
        if self.run(tlimit(self.sz_dd), lg, ["dd", "if=/dev/zero", "of=" + f, "bs=1M",
                                              "count=%d" % (self.sz_dd // MIB), "conv=fsync"]):
            return False
        v = self.dd_mbps(lg, self.sz_dd)
        if v is None:
            return False
        self.record(s, n, fs, "dd_write", v)
        if not self.drop_caches(self.sz_dd):
            return False
        lg = self.newlog("%s-x%d-%s-dd-read" % (s, n, fs))
        if self.run(tlimit(self.sz_dd), lg, ["dd", "if=" + f, "of=/dev/null", "bs=1M"]):
            return False
        v = self.dd_mbps(lg, self.sz_dd)
        if v is None:
            return False
        self.record(s, n, fs, "dd_read", v)
        return self.remove(f)

    def dd_mbps(self, lg, want):
        try:
            with open(lg, errors="replace") as f:
                return emu.dd_mbps(f.read(), want)
        except (OSError, emu.ParseError):
            return None

    def before_pass(self, op, nbytes):
        """Before a measured sequential pass of NBYTES: a write gets warm
        memory, a read dropped caches (then warm memory); False when the
        caches could not be dropped."""
        if op == "read":
            return self.drop_caches(nbytes)
        self.warm_memory(nbytes)
        return True

    def wl_fioseq(self, s, n, fs):
        f = self.mnt + "/fio-seq.bin"
        for op in ("write", "read"):
            if not self.before_pass(op, self.sz_fio):
                return False
            lg = self.newlog("%s-x%d-%s-fio-%s" % (s, n, fs, op))
            b0 = cpu_busy_seconds()
            if self.run(tlimit(self.sz_fio), lg, [
                    "fio", "--output-format=json", "--output=%s.json" % lg, "--name=seq",
                    "--filename=" + f, "--size=%d" % self.sz_fio, "--bs=1M", "--rw=" + op,
                    "--ioengine=libaio", "--direct=1", "--iodepth=32"]):
                return False
            # What the whole machine spent (fio, the daemon, the loop
            # devices' workers), fio's start and end included: a FUSE
            # mount's extra copy shows here as CPU per byte.
            cpu = cpu_per_gb(b0, cpu_busy_seconds(), self.sz_fio)
            v = self.fio_mbps(lg, op, self.sz_fio)
            if v is None:
                return False
            self.record(s, n, fs, "fio_" + op, v)
            if cpu is not None:
                self.record(s, n, fs, "fio_%s_cpu" % op, num(cpu))
        return self.remove(f)

    def wl_randread(self, s, n, fs):
        """4 KiB random O_DIRECT reads at QD32 (fio, libaio) for rand_secs
        over a file of rand_size written first (1 MiB O_DIRECT, not
        measured), caches dropped in between: IOPS."""
        f = self.mnt + "/fio-rand.bin"
        size, secs = self.sz.rand_size, self.sz.rand_secs
        self.warm_memory(size)
        if self.run(tlimit(size), self.newlog("%s-x%d-%s-rand-layout" % (s, n, fs)), [
                "fio", "--name=layout", "--filename=" + f, "--size=%d" % size, "--bs=1M",
                "--rw=write", "--ioengine=libaio", "--direct=1", "--iodepth=32"]):
            return False
        if not self.drop_caches(0):
            return False
        lg = self.newlog("%s-x%d-%s-rand-read" % (s, n, fs))
        if self.run(120 + 2 * secs, lg, ["fio", "--output-format=json", "--output=%s.json" % lg]
                    + fio_rand_args(f, size, secs)):
            return False
        v = self.fio_iops_of(lg)
        if v is None:
            return False
        self.record(s, n, fs, "rand4k_read", v)
        return self.remove(f)

    def fio_iops_of(self, lg):
        """Read IOPS from LG.json, or None (the reason appended to LG)."""
        try:
            with open(lg + ".json", errors="replace") as j:
                return fio_iops(j.read(), "read")
        except (OSError, emu.ParseError) as e:
            with open(lg, "a") as o:
                o.write("%s: %s\n" % (PROG, e))
            return None

    def wl_lookup(self, s, n, fs):
        """lookup.py: sz.lookup_n stats of absent names, one process: one
        synchronous round trip each on a FUSE mount (lookups/s)."""
        lg = self.newlog("%s-x%d-%s-lookup" % (s, n, fs))
        if self.run(600, lg, [PY, self.work + "/lookup.py", self.mnt, self.sz.lookup_n]):
            return False
        v = lookup_rate(emu.last_line(lg))
        if v is None:
            self.last_fail = "lookup.py printed no rate (see %s)" % lg
            return False
        self.record(s, n, fs, "lookup_rate", v)
        return True

    def wl_transport(self, s, n, fs):
        """Record the transport the mount reports (.nvmefs/config); False
        when it is not the one FS asks for."""
        try:
            with open(self.mnt + "/.nvmefs/config") as f:
                t = config_transport(f.read())
        except OSError as e:
            self.last_fail = "cannot read %s/.nvmefs/config: %s" % (self.mnt, e)
            return False
        if t is None:
            self.last_fail = "no transport line in .nvmefs/config"
            return False
        self.record(s, n, fs, "transport", t)
        if nvmefs_mode(fs)[1] and t != "io_uring":
            self.last_fail = "mounted with uring but .nvmefs/config says transport = %s" % t
            return False
        return True

    def wl_files4(self, s, n, fs):
        d = self.mnt + "/files4"
        if self.run(60, self.misc, ["mkdir", d]):
            return False
        self.warm_memory(4 * self.sz_w4)
        lg = self.newlog("%s-x%d-%s-files4" % (s, n, fs))
        if self.run(tlimit(4 * self.sz_w4), lg, [
                "fio", "--output-format=json", "--output=%s.json" % lg, "--name=files4",
                "--directory=" + d, "--numjobs=4", "--size=%d" % self.sz_w4, "--bs=1M",
                "--rw=write", "--ioengine=psync", "--end_fsync=1", "--group_reporting"]):
            return False
        v = self.fio_mbps(lg, "write", 4 * self.sz_w4)
        if v is None:
            return False
        self.record(s, n, fs, "files4_write", v)
        return self.remove(d)

    def wl_shared(self, s, n, fs):
        f = self.mnt + "/shared.bin"
        # Laid out first, so that the writes do not extend the file.
        if self.run(300, self.misc, ["fallocate", "-l", str(4 * self.sz_w4), f]):
            return False
        self.warm_memory(4 * self.sz_w4)
        lg = self.newlog("%s-x%d-%s-shared" % (s, n, fs))
        if self.run(tlimit(4 * self.sz_w4), lg, [
                "fio", "--output-format=json", "--output=%s.json" % lg, "--name=shared",
                "--thread", "--numjobs=4", "--filename=" + f, "--size=%d" % self.sz_w4,
                "--offset_increment=%d" % self.sz_w4, "--bs=1M", "--rw=write",
                "--ioengine=psync", "--end_fsync=1", "--group_reporting"]):
            return False
        v = self.fio_mbps(lg, "write", 4 * self.sz_w4)
        if v is None:
            return False
        self.record(s, n, fs, "shared_write", v)
        return self.remove(f)

    def wl_small(self, s, n, fs):
        return self.small_pass(s, n, fs, "small", [], self.mnt, None)

    def wl_small_null(self, s, n, fs):
        """small.py's phases that read no data back, on fuse_null: the
        ceiling of the create row (rows small_create, small_stat,
        small_delete, as nvmefs's)."""
        return self.small_pass(s, n, fs, "small", [], self.mnt, None, ("create", "stat", "delete"))

    def wl_small_preload(self, s, n, fs):
        """small.py again, its creates through the preload door
        (LD_PRELOAD=BUILD/client/libnvmefs-preload.so), in a directory of
        its own: rows small_preload_*, recorded only when the door served
        every create (a preload that fell back to libc would measure the
        mount under the door's name)."""
        lib = os.path.join(self.a.build, "client", "libnvmefs-preload.so")
        root = self.mnt + "/door"
        if not os.path.exists(lib):
            self.last_fail = "no %s" % lib
            return False
        try:
            os.mkdir(root)
        except OSError as e:
            self.last_fail = "mkdir %s: %s" % (root, e)
            return False
        c0 = self.door_creates()

        def served():
            c1 = self.door_creates()
            if c0 is None or c1 is None or c1 - c0 < self.sz.small_n:
                return "the preload door served %s of %d creates (.nvmefs/stats native.creates)" % (
                    "?" if c0 is None or c1 is None else c1 - c0, self.sz.small_n)
            return None
        return self.small_pass(s, n, fs, "small_preload", ["env", "LD_PRELOAD=" + lib], root, served)

    def door_counts(self):
        """The mount's (native.layouts, requests.READ) from .nvmefs/stats, or None."""
        try:
            with open(self.mnt + "/.nvmefs/stats") as f:
                st = json.load(f)
            return int(st["native"]["layouts"]), int(st["requests"].get("READ", 0))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def door_pass(self, lg, args, reads, c0):
        """fio ARGS under the read door (LD_PRELOAD), logged to LG; True
        when it ran and the door served it: a loan made since C0
        (door_counts) and fewer than READS / 10 FUSE READs."""
        lib = os.path.join(self.a.build, "client", "libnvmefs-preload.so")
        if self.run(tlimit(self.sz_fio), lg, ["env", "LD_PRELOAD=" + lib, "fio", "--output-format=json",
                                               "--output=%s.json" % lg] + args):
            return False
        c1 = self.door_counts()
        if c0 is None or c1 is None or c1[0] <= c0[0] or (c1[1] - c0[1]) * 10 >= reads:
            self.last_fail = "the read door did not serve %s: loans, FUSE READs %s -> %s (of %d reads)" % (
                lg, c0, c1, reads)
            return False
        return True

    def wl_door(self, s, n, fs):
        """fio's 1 MiB QD32 read and 4 KiB random read again, through
        libnvmefs-preload.so's read door (docs/NATIVE.md, "The read door"):
        rows door_fio_read (and its CPU per GB) and door_rand4k_read."""
        f = self.mnt + "/fio-door.bin"
        size, secs = min(self.sz.rand_size, self.sz_fio), self.sz.rand_secs
        if not os.path.exists(os.path.join(self.a.build, "client", "libnvmefs-preload.so")):
            self.last_fail = "no libnvmefs-preload.so in %s/client" % self.a.build
            return False
        self.warm_memory(self.sz_fio)
        if self.run(tlimit(self.sz_fio), self.newlog("%s-x%d-%s-door-layout" % (s, n, fs)), [
                "fio", "--name=layout", "--filename=" + f, "--size=%d" % self.sz_fio, "--bs=1M",
                "--rw=write", "--ioengine=libaio", "--direct=1", "--iodepth=32"]):
            return False
        if not self.before_pass("read", self.sz_fio):
            return False
        lg = self.newlog("%s-x%d-%s-door-fio-read" % (s, n, fs))
        c0 = self.door_counts()
        b0 = cpu_busy_seconds()
        if not self.door_pass(lg, ["--name=seq", "--filename=" + f, "--size=%d" % self.sz_fio, "--bs=1M",
                                   "--rw=read", "--ioengine=libaio", "--direct=1", "--iodepth=32"],
                              self.sz_fio // MIB, c0):
            return False
        cpu = cpu_per_gb(b0, cpu_busy_seconds(), self.sz_fio)
        v = self.fio_mbps(lg, "read", self.sz_fio)
        if v is None:
            return False
        self.record(s, n, fs, "door_fio_read", v)
        if cpu is not None:
            self.record(s, n, fs, "door_fio_read_cpu", num(cpu))
        if not self.drop_caches(0):
            return False
        lg = self.newlog("%s-x%d-%s-door-rand-read" % (s, n, fs))
        c0 = self.door_counts()
        if not self.door_pass(lg, fio_rand_args(f, size, secs), 1000 * secs, c0):
            return False
        v = self.fio_iops_of(lg)
        if v is None:
            return False
        self.record(s, n, fs, "door_rand4k_read", v)
        return self.remove(f)

    def door_creates(self):
        """The mount's native door's creates (.nvmefs/stats), or None."""
        try:
            with open(self.mnt + "/.nvmefs/stats") as f:
                return int(json.load(f)["native"]["creates"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def small_pass(self, s, n, fs, name, prefix, root, check, phases=None):
        """small.py in ROOT, its command after PREFIX; rows NAME_*. CHECK
        (or None) says afterwards why the figures would be wrong (None:
        they are not): then nothing is recorded. PHASES: small.py's
        (None: all of them)."""
        ok = True
        # The files' pages and the kernel's inodes and dentries for them.
        b = self.warm_bytes(self.sz.small_n * (SMALL_SIZE + 4096))
        self.warm_memory(b)
        lg = self.newlog("%s-x%d-%s-%s" % (s, n, fs, name))
        # On an error it still prints the phases that completed.
        if self.run(1200, lg, prefix + [PY, self.work + "/small.py", root, self.sz.small_n, SMALL_SIZE,
                                        self.drives.imgdir + "/warm", b] + ([",".join(phases)] if phases else [])):
            ok = False
        why = check() if check else None
        if why:
            log("%s: %s" % (name, why))
            self.last_fail = why
            return False
        rates = small_rates(emu.last_line(lg))
        # reread is shown by --only transport alone; recorded wherever it ran.
        if "reread" in rates:
            self.record(s, n, fs, "%s_reread" % name, rates["reread"])
        for phase in phases or ("create", "stat", "read", "delete", "total"):
            if phase in rates:
                self.record(s, n, fs, "%s_%s" % (name, phase), rates[phase])
            else:
                ok = False
        return ok

    def wl_torch(self, s, n, fs):
        b = self.warm_bytes(2 * self.sz.torch_mib * MIB)
        self.warm_memory(b)
        lg = self.newlog("%s-x%d-%s-torch" % (s, n, fs))
        if self.run(1200, lg, [PY, self.work + "/torch_io.py", self.mnt + "/state.pt",
                               self.sz.torch_mib, self.drives.imgdir + "/warm", b]):
            return False
        rates = torch_rates(emu.last_line(lg))
        if rates is None:
            return False
        for op in ("save", "load"):
            self.record(s, n, fs, "torch_" + op, rates[op])
        return self.remove(self.mnt + "/state.pt")

    def wl_native(self, s, n, fs):
        """nvmefs-bench --client: write then read one file of sz_fio bytes
        (workload 7); the daemon's copies over both passes."""
        f = self.mnt + "/native.bin"
        copied = 0
        for op in ("write", "read"):
            # As fio raw, its baseline: no warm_memory (module docstring).
            if op == "read" and not self.drop_caches(0):
                return False
            lg = self.newlog("%s-x%d-%s-%s" % (s, n, fs, op))
            loops = NATIVE_READ_LOOPS_RAM if s == "ram" and op == "read" else 1
            if self.run(tlimit(self.sz_fio * loops), lg, [
                    self.a.build + "/nvmefs-bench", "--client", f, "--" + op, "--size", str(self.sz_fio),
                    "--block-size", str(NATIVE_BS), "--queue-depth", str(NATIVE_QD),
                    "--threads", str(NATIVE_THREADS), "--loops", str(loops), "--json"]):
                return False
            fig = native_figures(emu.last_line(lg), self.sz_fio * loops)
            if fig is None:
                return False
            self.record(s, n, fs, "native_" + op, fig["mbps"])
            copied += fig["copied"]
        self.record(s, n, fs, "native_copied", str(copied))
        return self.remove(f)

    def mark_err(self, s, n, fs, rows):
        """ERR for every row not recorded yet."""
        for row in rows:
            if (s, n, fs, row) not in self.recorded:
                self.record(s, n, fs, row, "ERR")

    def run_fs(self, s, n, fs, workloads):
        """Make, mount, run the workloads, unmount."""
        t0 = time.monotonic()
        rows = [r for w in workloads for r in WL_ROWS[w]]
        if rss_fs(fs):
            rows.append("rss")
        log("== %s x%d: %s (%s)" % (s, n, fs, " ".join(workloads)))
        if not self.fs_mount(fs):
            self.error("%s x%d: mkfs or mount of %s failed (see %s/logs)" % (s, n, fs, self.out))
            self.force_umount()
            self.mark_err(s, n, fs, rows)
            return
        for w in workloads:
            self.last_fail = None
            self.runner.timed_out = False
            if getattr(self, "wl_" + w)(s, n, fs):
                continue
            self.error("%s x%d %s: workload %s failed: %s"
                       % (s, n, fs, w, self.last_fail or "see %s/logs" % self.out))
            self.mark_err(s, n, fs, WL_ROWS[w])
            if self.runner.timed_out:
                self.error("%s x%d %s: a step ran out of time: skipping the rest of %s" % (s, n, fs, fs))
                break
            if fs != "btrfs" and self.daemon is not None and not self.daemon.running():
                self.error("%s x%d %s: the %s daemon died (log: %s)" % (s, n, fs, fs, self.daemon.log))
                break
        if not self.fs_umount(s, n):
            self.error("%s x%d: unmounting %s failed" % (s, n, fs))
            self.force_umount()
        self.mark_err(s, n, fs, rows)
        log("%s x%d %s: %d s" % (s, n, fs, time.monotonic() - t0))

    # ----------------------------------------------------------- setups --
    def run_ram(self):
        t0 = time.monotonic()
        sz = self.sz
        log("=== RAM: %d drives of %d MiB, no cap" % (RAM_NDEV, sz.ram_dev // MIB))
        self.runner.log_line("# setup: RAM, %d drives, no cap" % RAM_NDEV)
        self.setup_devices(RAM_NDEV, sz.ram_dev)
        self.fio_raw("ram", sz.ram_dev, sz.ram_raw_loops)
        self.sz_dd, self.sz_fio, self.sz_w4 = sz.ram_dd, sz.ram_fio, sz.ram_w4
        for fs, workloads in ram_plan(self.a.native_only):
            if base_fs(fs) == "fio-again":
                self.fio_raw("ram", sz.ram_dev, sz.ram_raw_loops, fs)
            else:
                self.run_fs("ram", RAM_NDEV, fs, workloads)
        self.drives.teardown()
        log("=== RAM: %d s" % (time.monotonic() - t0))

    def run_capped(self, n):
        t0 = time.monotonic()
        sz = self.sz
        log("=== capped: %d drive(s) of %d MiB at %d MiB/s each" % (n, sz.cap_dev // MIB, CAP_MIBPS))
        self.runner.log_line("# setup: %d drive(s) capped at %d MiB/s" % (n, CAP_MIBPS))
        self.setup_devices(n, sz.cap_dev)
        try:
            self.drives.cap(CAP_MIBPS * MIB, self.cmdlog)
        except OSError as e:
            raise Die("cannot cap %s: %s" % (" ".join(self.drives.devs), e)) from None
        log("capped %s at %d MiB/s each (root blkio group)" % (" ".join(self.drives.devs), CAP_MIBPS))
        self.fio_raw("cap", sz.cap_per_drive, 1)
        self.sz_dd = self.sz_fio = n * sz.cap_per_drive
        for fs, workloads in capped_plan(self.a.native_only):
            self.run_fs("cap", n, fs, workloads)
        self.drives.teardown()
        log("=== capped x%d: %d s" % (n, time.monotonic() - t0))

    def uring_enable(self):
        """Set the kernel's enable_uring to Y for an io_uring mount,
        remembering what it was (uring_restore puts it back); False (an
        error logged) when it cannot be set."""
        try:
            with open(ENABLE_URING) as f:
                cur = f.read().strip()
            if self.uring_found is None:
                self.uring_found = cur
            if cur != "Y":
                with open(ENABLE_URING, "w") as f:
                    f.write("Y\n")
                log("%s: %s -> Y (put back after the io_uring mount)" % (ENABLE_URING, cur))
                self.runner.log_line("echo Y > %s  # was %s" % (ENABLE_URING, cur))
        except OSError as e:
            self.error("cannot set %s to Y: %s" % (ENABLE_URING, e))
            return False
        return True

    def uring_restore(self):
        """Put enable_uring back as uring_enable found it (after the
        io_uring mount is gone: the kernel checks it on every ring
        command, so it must stay Y while one serves)."""
        if self.uring_found is None:
            return
        try:
            with open(ENABLE_URING) as f:
                cur = f.read().strip()
            if cur != self.uring_found:
                with open(ENABLE_URING, "w") as f:
                    f.write(self.uring_found + "\n")
                log("%s: put back to %s" % (ENABLE_URING, self.uring_found))
                self.runner.log_line("echo %s > %s  # put back" % (self.uring_found, ENABLE_URING))
            self.uring_found = None
        except OSError as e:
            log("warning: cannot put %s back to %s: %s" % (ENABLE_URING, self.uring_found, e))

    def run_transport(self):
        """--only transport (issue 33): 4 RAM drives, fio raw once, then
        btrfs and nvmefs in each mode on both transports (TR_FS), each
        freshly made, with TR_WL; enable_uring is Y only while an io_uring
        mount is made, used and unmounted."""
        t0 = time.monotonic()
        sz = self.sz
        have = os.path.exists(ENABLE_URING)
        if not have:
            log("no %s (kernel without FUSE over io_uring): the io_uring file systems are skipped" % ENABLE_URING)
        log("=== transport: %d drives of %d MiB, no cap" % (RAM_NDEV, sz.ram_dev // MIB))
        self.runner.log_line("# setup: transport, %d drives, no cap" % RAM_NDEV)
        self.setup_devices(RAM_NDEV, sz.ram_dev)
        self.fio_raw(TR_SETUP, sz.ram_dev, sz.ram_raw_loops)
        self.sz_dd, self.sz_fio, self.sz_w4 = sz.ram_dd, sz.ram_fio, sz.ram_w4
        for setup, fs, workloads in transport_rounds_plan(have):
            uring = fs.endswith("+uring")
            if uring and not self.uring_enable():
                self.uring_restore()
                self.mark_err(setup, RAM_NDEV, fs, [r for w in workloads for r in WL_ROWS[w]] + ["rss"])
                continue
            # run_fs returns with FS unmounted; on a signal or an exception
            # cleanup() unmounts first, then puts enable_uring back.
            self.run_fs(setup, RAM_NDEV, fs, workloads)
            if uring:
                self.uring_restore()
        self.drives.teardown()
        log("=== transport: %d s" % (time.monotonic() - t0))

    def cleanup(self):
        """Stop what is running, unmount, put enable_uring back, remove
        devices and the work directory."""
        self.runner.stop_current(on_stuck=self.on_limit)
        self.force_umount()
        self.uring_restore()
        self.drives.teardown()
        if emu.is_mounted(self.mnt):
            log("warning: leaving %s (%s still mounted)" % (self.work, self.mnt))
        else:
            subprocess.run(["rm", "-rf", "--one-file-system", "--", self.work], check=False)

    # ----------------------------------------------------------- report --
    def write_plot(self, rep):
        dat = os.path.join(self.out, "capped.dat")
        gp = os.path.join(self.out, "capped.gp")
        with open(dat, "w") as f:
            f.write("\n".join(rep.plot_data()) + "\n")
        rc = subprocess.run(["gnuplot", "-e", "set terminal pngcairo"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
        if rc == 0:
            term = "pngcairo size 1200,520 noenhanced font ',10'"
        else:
            term = "png size 1200,520 noenhanced"
        with open(gp, "w") as f:
            f.write(GNUPLOT.format(term=term, out=self.out, cap=CAP_MIBPS, dat=dat))
        lg = self.newlog("gnuplot")
        if self.run(120, lg, ["gnuplot", gp]):
            self.error("gnuplot failed (see %s)" % lg)

    def header(self, nvmefs_id, repo_head):
        a = self.a
        fio = self.runner.output(30, ["fio", "--version"])[1].strip()
        btrfs = self.runner.output(30, ["mkfs.btrfs", "--version"], merge=True)[1].splitlines()
        btrfs = "btrfs-progs " + btrfs[0].split()[-1] if btrfs and btrfs[0].split() else ""
        rc, torch = self.runner.output(120, [PY, "-c", "import torch; print(torch.__version__)"])
        torch = torch.strip() if rc == 0 else "?"
        idle = cpu_idle()
        return [
            "# nvmefs vs btrfs raid0 vs fio raw (scripts/bench.sh)",
            "",
            "%s; nproc %d, %.0f GiB RAM, kernel %s%s; %s, %s, torch %s" % (
                datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), len(os.sched_getaffinity(0)),
                emu.meminfo_kib("MemTotal") / 1048576, os.uname().release,
                (" (%s)" % idle) if idle else "", fio, btrfs, torch),
            "nvmefs: %s/nvmefs (%s), mkfs.nvmefs -f -K, -o mode=cached|direct,pool=%s,%s; this script from %s at HEAD %s%s"
            % (a.build, nvmefs_id, a.pool, "uring|nouring" if a.only == "transport" else "nouring", TOP, repo_head,
               "; --quick sizes" if a.quick else ""),
        ]

    def write_report(self, nvmefs_id, repo_head):
        a, sz = self.a, self.sz
        ran_ram, ran_capped = a.only != "capped", a.only != "ram"
        rep = Report(load_results(self.results), sz, a.pool, ran_ram, ran_capped, native=True,
                     issue5=not a.native_only)
        if ran_capped:
            self.write_plot(rep)
        targets = rep.targets()
        h = emu.human_iec
        r = self.header(nvmefs_id, repo_head)
        r += ["",
              "Emulated drives: image files in /dev/shm on loop devices. RAM: %d x %s, no cap." % (RAM_NDEV, h(sz.ram_dev)),
              "Capped: 1, 2, 4 x %s at %d MiB/s each (read and write, blkio throttle" % (h(sz.cap_dev), CAP_MIBPS),
              "rules in the v1 root group, which also hold btrfs's writeback), %s per drive per pass;" % h(sz.cap_per_drive),
              "the capped runs measure only fio raw, the sequential workloads (dd, fio) and the native client.",
              "btrfs: mkfs.btrfs -f -K -d raid0 -m raid0, mount -o nodiscard. MB = 1e6 bytes, GB = 1e9.",
              "fio raw: libaio direct bs=1M iodepth=32, one job per device, group_reporting.",
              "Native client: nvmefs-bench --client on nvmefs direct, %d threads x QD %d x %s requests, write timed with its fsync."
              % (NATIVE_THREADS, NATIVE_QD, emu.human_unit(NATIVE_BS)),
              "Each figure is one run on a shared 2-core machine: compare within a row.",
              "FUSE daemons run in a session of their own, as a mounted daemon does (\"Daemons in their own session\" in bench.py);"
              " while they serve they keep idle CPUs polling (-o cpu_latency=0, their default since 2026-11-30)."]
        if a.native_only:
            r.append("--native-only: btrfs, the other workloads and the FUSE ceiling were not run; nor were the issue-5 targets checked.")
        if a.warm:
            r.append("Memory warmed before every measured pass, for every file system (\"Cold memory\" in bench.py).")
        else:
            r.append("--no-warm: passes ran on cold memory (\"Cold memory\" in bench.py).")
        r += [""] + rep.table() + [""]
        r += ["Native client (issue 21): nvmefs-bench --client, %d threads x QD %d x %s, against fio raw and the"
              % (NATIVE_THREADS, NATIVE_QD, emu.human_unit(NATIVE_BS)),
              "mount's figures of the same run and direction (best of dd and fio, cached and direct). In RAM,",
              "%d rounds of (fio raw, then the client on a fresh nvmefs): each round's client is held to the fio raw"
              % NATIVE_ROUNDS_RAM,
              "pass just before it, and the table gives the medians (native, fio raw, and the rounds' ratios).",
              "Daemon copies = data.copied_bytes + native.copied_bytes of .nvmefs/stats over every write and read.",
              ""] + rep.native_table() + [""]
        rounds = rep.native_round_lines()
        r += rounds + ([""] if rounds else [])
        if ran_ram and not a.native_only:
            r += ["The FUSE ceiling, RAM x%d (MB/s): FUSE null is tests/fuse_null, a daemon on the same" % RAM_NDEV,
                  "FUSE settings as nvmefs that stores nothing (no device); model = 1 / (1 / FUSE null + 1 / fio raw),",
                  "the transport's cost plus one device copy on the same CPUs. A target above model / btrfs",
                  "or model / fio raw is out of reach for any FUSE daemon here (docs/PERFORMANCE.md).",
                  ""] + rep.ceiling() + [""]
        if ran_capped:
            r += ["\"*\" on a capped btrfs figure: above 1.10 x the cap, i.e. btrfs was not held by the cap.",
                  "",
                  "Caps (figure / (drives x %d MiB/s)):" % CAP_MIBPS,
                  "",
                  "```"] + rep.caps() + ["```", ""]
        r += ["Targets (%s):" % ("issue 21" if a.native_only else "issues 5 and 21"), "", "```"] + targets + ["```"]
        self.finish_report(r, targets, ["Plot: %s/capped.png" % self.out] if ran_capped else [])
        return rep.nfail

    def write_transport_report(self, header):
        """--only transport's report.md and targets.txt; the count of missed
        targets."""
        a, sz, h = self.a, self.sz, emu.human_iec
        have = os.path.exists(ENABLE_URING)
        rep = TrReport(load_results(self.results), sz, a.pool, have)
        targets = rep.targets()
        r = header + [
            "",
            "The transports (issue 33): %d RAM drives of %s (image files in /dev/shm on loop devices, no cap);"
            % (RAM_NDEV, h(sz.ram_dev)),
            "fio raw once, then btrfs raid0 (mkfs.btrfs -f -K -d raid0 -m raid0, mount -o nodiscard) and nvmefs",
            "(mkfs.nvmefs -f -K) in direct and cached mode, each on /dev/fuse (-o mode=MODE,pool=%s,nouring) and on FUSE"
            % a.pool,
            "over io_uring (-o mode=MODE,pool=%s,uring: demanded, so a kernel that does not offer it fails the mount"
            % a.pool,
            "instead of falling back), each freshly made, in that order: %s." % ", ".join(TR_NAME[fs] for fs in TR_FS),
            "%s is set to Y only while an io_uring mount is made, used and unmounted, and put back" % ENABLE_URING,
            "to what it was after each (and on every failure or signal).",
            "Small files: one Python process (os calls) per run; each phase (create+write then syncfs; stat; read after",
            "dropping caches; unlink then syncfs) is timed as a whole, nothing is timed per call: files/s = files / phase.",
            "On %s a second time under LD_PRELOAD=%s/client/libnvmefs-preload.so (the create door for unmodified"
            % (TR_NAME[TR_PRELOAD_FS], a.build),
            "programs, docs/NATIVE.md), in a directory of its own after torch, recorded only when the door served every",
            "create (.nvmefs/stats native.creates): rows \"the preload door\", against btrfs raid0's own small files.",
            "4 KiB random reads: the file is written first (1 MiB O_DIRECT, not measured), caches dropped, then fio",
            "randread for a fixed time (--runtime, --time_based; the same seed on every file system).",
            "MB = 1e6 bytes, GB = 1e9. A shared 2-core machine: compare within a row.",
            "Rounds: %s ran %d times on each of these file systems, round after round (each made afresh); their rows"
            % (", ".join(TR_ROUND_WL), TR_ROUNDS),
            "give the median of the rounds, and their ratios and targets the median of each round's own ratios.",
            "FUSE daemons run in a session of their own, as a mounted daemon does (\"Daemons in their own session\" in bench.py);"
              " while they serve they keep idle CPUs polling (-o cpu_latency=0, their default since 2026-11-30).",
            "Memory warmed before every measured pass (\"Cold memory\" in bench.py)." if a.warm else "--no-warm: cold memory.",
            "The FUSE ceiling: then tests/fuse_null (stores nothing, touches no device) in each mode on /dev/fuse",
            "and with -o uring (nvmefs's own io_uring transport, fs/fuse/uring.c), with every workload that reads",
            "no data back (its small files are made, stat'ed and removed): what the transport alone costs, and how",
            "near each nvmefs mount comes to it. Each mount's create+write target also names fuse_null's rate there.",
        ]
        if not have:
            r.append("**No %s**: this kernel has no FUSE over io_uring, so the io_uring file systems were skipped"
                     % ENABLE_URING)
            r.append("(no figures for them, their targets failed as not run).")
        r += ["", "Transport each nvmefs mount reported (.nvmefs/config): %s." % rep.transports(), ""]
        r += rep.table() + ["", "Which transport wins where (io_uring / /dev/fuse, same mode, same run):", ""]
        r += rep.wins()
        rl = rep.round_lines()
        if rl:
            r += ["", "Each round's figures (rounds 1 to %d), of the rows with rounds:" % TR_ROUNDS, ""] + rl
        r += ["", "CPU per byte of the fio 1 MiB O_DIRECT read (the machine's busy time while fio ran):", ""]
        r += rep.cpu_notes()
        r += ["", "The FUSE ceiling on each transport (tests/fuse_null, one pass; nvmefs / null: the same mode and"
              " transport, nvmefs's medians of its rounds):",
              ""] + rep.ceiling()
        r += ["", "Targets (issue 33's must-show; small files at %d files%s):" % (
                  sz.small_n, ", --quick sizes" if a.quick else ""), "", "```"] + targets + ["```", "",
              "Not judged here: the native client (it does not go through FUSE: bench.sh --only ram measures it),",
              "and whether the default transport is the faster one (the lines above say which wins where)."]
        self.finish_report(r, targets)
        return rep.nfail

    def finish_report(self, lines, targets, tail=()):
        """targets.txt (the PASS/FAIL lines TARGETS), and report.md: LINES,
        then this run's own failures, where the commands and logs are, and
        TAIL."""
        with open(os.path.join(self.out, "targets.txt"), "w") as f:
            f.write("".join(t + "\n" for t in targets))
        r = list(lines)
        if self.errors:
            with open(os.path.join(self.out, "errors.txt")) as f:
                errs = f.read().splitlines()
            r += ["", "The benchmark itself failed %d time(s):" % self.errors, "", "```"] + errs + ["```"]
        r += ["", "Commands: %s/commands.log; logs: %s/logs/" % (self.out, self.out)] + list(tail)
        with open(os.path.join(self.out, "report.md"), "w") as f:
            f.write("\n".join(r) + "\n")

    def main(self):
        t_start = time.monotonic()
        # What ran: the binary (it may be a snapshot of another commit than
        # the repository's HEAD, which can also move during a run).
        nv = self.a.build + "/nvmefs"
        first = (self.runner.output(30, [nv, "-V"], merge=True)[1].splitlines() or [""])[0]
        built = datetime.datetime.fromtimestamp(os.stat(nv).st_mtime).strftime("%Y-%m-%d %H:%M")
        nvmefs_id = "%s, built %s" % (first, built)
        rc, head = self.runner.output(30, ["git", "-C", TOP, "rev-parse", "--short", "HEAD"])
        repo_head = head.strip() if rc == 0 and head.strip() else "?"
        with open(self.work + "/small.py", "w") as f:
            f.write(SMALL_PY)
        with open(self.work + "/torch_io.py", "w") as f:
            f.write(TORCH_PY)
        with open(self.work + "/lookup.py", "w") as f:
            f.write(LOOKUP_PY)
        log("results in " + self.out)
        if self.a.only == "deepnvme":
            dn = DeepNVMe(self)
            dn.run()
            nfail = dn.report(self.header(nvmefs_id, repo_head))
        elif self.a.only == "transport":
            self.run_transport()
            nfail = self.write_transport_report(self.header(nvmefs_id, repo_head))
        elif self.a.only == "scale":
            sc = bench_scale.Scale(self, self.a.files, log)
            why = sc.room_problem()
            if why:
                raise Die(why)
            sc.run()
            nfail = sc.report(self.header(nvmefs_id, repo_head), load_results(self.results))
        else:
            if self.a.only != "capped":
                self.run_ram()
            if self.a.only != "ram":
                for n in CAP_COUNTS:
                    self.run_capped(n)
            nfail = self.write_report(nvmefs_id, repo_head)
        with open(os.path.join(self.out, "report.md")) as f:
            sys.stdout.write(f.read())
        sys.stdout.flush()
        log("done in %d s; results in %s" % (time.monotonic() - t_start, self.out))
        if self.errors:
            log("the benchmark itself failed %d time(s): see %s/errors.txt" % (self.errors, self.out))
            return 1
        if self.a.check and nfail:
            log("%d target(s) missed (--check)" % nfail)
            return 1
        return 0


# ------------------------------------------------- DeepNVMe (issue 22) --
# --only deepnvme: the must-show comparison of issue 22, on its own (not in
# the default run). Kept in this section (its sizes, runner and report) so
# that the issue-5 benchmark above is untouched.

DN_EXAMPLES = os.path.join(TOP, "examples", "deepnvme")
DN_SETUP = "deepnvme"
# The handle's settings for every aio_* run (aio_handle(...) arguments);
# --aio-config FILE (nvmefs-tune --handle --json) replaces them. Sweeps on
# these drives (docs/PYTHON.md): blocks of 4-16 MiB read at fio raw's
# speed, 1 MiB ones at 60-80% of it (the native door's cost per request).
DN_HANDLE = {"block_size": 16 << 20, "queue_depth": 128, "num_threads": 1}
# fio raw's passes go over each 1 GiB drive this many times: one pass of
# 4 GiB lasted under a second and moved by 2x between runs.
DN_RAW_LOOPS = 3
# The handle's tensor store and load on nvmefs run in rounds, each held to
# a fio raw pass just before it (the store's on the unmounted devices, then
# a fresh nvmefs); the ratio judged is the median of the rounds' ratios
# (module docstring, "Rounds").
DN_ROUNDS = 3
# (key, label, kind, baseline row on btrfs, handle row on nvmefs, target
# ratio over the baseline, target ratio over fio raw KIND or None)
DN_TARGETS = (
    ("store", "store a CPU tensor (+fsync)", "write", "py_store", "aio_store", 2.0, 0.8),
    ("load", "load a CPU tensor, cold cache", "read", "py_load", "aio_load", 4.0, 0.8),
    ("sd_save", "state dict save, zip format (+fsync)", None, "sd_torch_save", "sd_aio_save", 3.0, None),
    ("sd_load_zero_copy", "state dict load, zip, tensors are views of the locked buffer", None,
     "sd_torch_load", "sd_aio_zc_load", 2.0, None),
    ("sd_save_legacy", "state dict save, legacy format (+fsync)", None, "sd_torch_legacy_save",
     "sd_aio_legacy_save", 3.0, None),
)
# Shown, not judged: FastPersist's format through the handle against
# torch.save's default (what switching from one to the other gives), and
# the loads whose tensors get memory of their own. Those are page faults on
# both sides: a new GiB of memory costs 0.42-0.68 s to touch here (0.56-0.63
# to allocate locked), whoever fills it, so the ratio stays near 1
# (docs/PYTHON.md, "Where the time goes"). The load judged is the one whose
# tensors are views of the handle's locked buffer, kept and reused as
# DeepNVMe keeps its pinned buffers (torch.load(mmap=True)'s contract, with
# the locked buffer for the file).
DN_EXTRA = (("state dict save: handle legacy vs torch.save zip", "sd_torch_save", "sd_aio_legacy_save"),
            ("state dict load, zip, tensors copied out", "sd_torch_load", "sd_aio_load"),
            ("state dict load, legacy, tensors copied out", "sd_torch_legacy_load",
             "sd_aio_legacy_load"))


class DnSizes:
    """--only deepnvme's sizes: 4 RAM drives, the tensors and the state
    dict in MiB, loops per example."""

    def __init__(self, quick):
        if quick:
            self.dev, self.tensor_mib, self.sd_mib, self.loops = 512 * MIB, 128, 128, 2
        else:
            self.dev, self.tensor_mib, self.sd_mib, self.loops = GIB, 1024, 1024, 3


def dn_json(path):
    """The last JSON object line of an example's log, or None."""
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def dn_handle_args(cfg):
    """The examples' options for the handle settings cfg."""
    return ["--block_size", str(cfg["block_size"]), "--queue_depth", str(cfg["queue_depth"]),
            "--threads", str(cfg["num_threads"])]


def dn_handle_config(path):
    """The handle settings of an "aio" JSON file (nvmefs-tune --handle
    --json, or DeepSpeed's configuration); BadArg names what is wrong."""
    try:
        with open(path) as f:
            aio = json.load(f)["aio"]
        cfg = {k: int(aio[k]) for k in ("block_size", "queue_depth", "num_threads")}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadArg("bad --aio-config '%s' (%s)" % (path, e)) from None
    if cfg["block_size"] % 4096 or cfg["block_size"] <= 0 or cfg["queue_depth"] < 1 or cfg["num_threads"] < 1:
        raise BadArg("bad --aio-config '%s' (settings out of range: %s)" % (path, cfg))
    return cfg


class DnReport:
    """The table and the targets of --only deepnvme from RES {(setup, n,
    fs, row): value} (GB/s as results.tsv holds them)."""

    def __init__(self, res):
        self.res = res
        self.nfail = 0

    def get(self, fs, row):
        """A figure in GB/s (fio raw's MB/s converted), or ''/ERR."""
        v = self.res.get((DN_SETUP, str(RAM_NDEV), fs, row), "")
        if base_fs(fs) in ("fio", "fio-again") and isnum(v):
            return num(float(v) / 1000)
        return v

    def rounds(self, kind, mine):
        """[(handle, fio raw)] of the handle's row MINE in KIND (write,
        read), one pair per round (direct, direct.2, ...), each round's
        handle held to the fio raw pass just before it (fio-again,
        fio-again.2, ...; the setup's first pass when a round has none)."""
        out = []
        for k in range(1, DN_ROUNDS + 1):
            d = self.get(round_fs("direct", k), mine)
            if k > 1 and not d:
                break
            raw = self.get(round_fs("fio-again", k), "raw_" + kind)
            out.append((d, raw or (self.get("fio", "raw_" + kind) if k == 1 else "")))
        return out

    def figure(self, kind, mine):
        """(handle, fio raw, handle / fio raw as a float or None) of the
        handle's row MINE: the medians over the rounds, the ratio being
        the median of the rounds' own ratios; without KIND, the handle's
        one figure."""
        if not kind:
            return self.get("direct", mine), "", None
        rounds = self.rounds(kind, mine)
        if not all(isnum(d) and isnum(r) and float(r) > 0 for d, r in rounds):
            bad = [d for d, _ in rounds if not isnum(d)]
            raws = [r for _, r in rounds if not isnum(r)]
            return (bad[0] if bad else rounds[0][0]), (raws[0] if raws else rounds[0][1]), None
        return (num(median([float(d) for d, _ in rounds])), num(median([float(r) for _, r in rounds])),
                median([float(d) / float(r) for d, r in rounds]))

    def round_lines(self):
        """One line per kind run in several rounds: each round's figures."""
        out = []
        for key, _label, kind, _base, mine, _t, _r in DN_TARGETS:
            rounds = self.rounds(kind, mine) if kind else []
            if len(rounds) > 1:
                out.append("- %s, round by round (handle / fio raw %s GB/s = ratio): %s" % (
                    key, kind, "; ".join("%s / %s = %s" % (fmt(d, "GB/s"), fmt(r, "GB/s"), div(d, r, 2))
                                         for d, r in rounds)))
        return out

    def table(self):
        g = self.get
        out = ["| workload | fio raw | Python on btrfs | handle on nvmefs | handle / Python | handle / fio raw | Python on nvmefs | handle on btrfs |",
               "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        rows = [(label, kind, base, mine) for _k, label, kind, base, mine, _t, _r in DN_TARGETS]
        rows += [(label, None, base, mine) for label, base, mine in DN_EXTRA]
        for label, kind, base, mine in rows:
            d, raw, rr = self.figure(kind, mine)
            b = g("btrfs", base)
            cells = [label, fmt(raw, "GB/s") if kind else "-", fmt(b, "GB/s"), fmt(d, "GB/s"), div(d, b, 2),
                     "%.2f" % rr if rr is not None else "-", fmt(g("direct", base), "GB/s"),
                     fmt(g("btrfs", mine), "GB/s")]
            out.append("| " + " | ".join(cells) + " |")
        return out

    def target(self, ok, line, out):
        out.append(("PASS " if ok else "FAIL ") + line)
        if not ok:
            self.nfail += 1

    def targets(self):
        g = self.get
        out = []
        for key, label, kind, base, mine, t_base, t_raw in DN_TARGETS:
            d, raw, rr = self.figure(kind, mine)
            b = g("btrfs", base)
            if not (isnum(b) and isnum(d)) or (t_raw is not None and rr is None):
                self.target(False, "deepnvme %s: no figure (handle %s, baseline %s%s)"
                            % (key, d or "?", b or "?", ", fio raw %s" % (raw or "?") if t_raw else ""), out)
                continue
            r = float(d) / float(b)
            ok = r >= t_base
            line = "deepnvme %s: handle on nvmefs %s GB/s = %.2f x %s on btrfs (%s); target >= %.1f" % (
                key, fmt(d, "GB/s"), r, base, fmt(b, "GB/s"), t_base)
            if t_raw is not None:
                ok = ok and rr >= t_raw
                line += "; %.2f x fio raw %s (%s GB/s%s); target >= %.1f" % (
                    rr, kind, fmt(raw, "GB/s"), ", medians of %d rounds" % DN_ROUNDS if DN_ROUNDS > 1 else "",
                    t_raw)
            self.target(ok, line, out)
        return out


class DeepNVMe:
    """One --only deepnvme run inside a Bench (its devices, mounts, runner,
    results): 4 RAM drives; fio raw; on btrfs raid0 the Python examples
    (py_store, py_load, torch.save/torch.load) and, for reference, the
    handle's fallback; on nvmefs (direct) the handle's examples and, for
    reference, Python through the mount."""

    def __init__(self, bench):
        self.b = bench
        self.sz = DnSizes(bench.a.quick)
        self.handle = bench.a.aio_config or dict(DN_HANDLE)
        self.pypath = os.path.join(bench.a.build, "python")

    def record(self, fs, row, doc, key="gbs"):
        v = doc.get(key) if doc else None
        self.b.record(DN_SETUP, RAM_NDEV, fs, row, "%.3f" % v if isinstance(v, (int, float)) else "ERR")

    def example(self, fs, label, script, args, warm):
        """Run examples/deepnvme/SCRIPT ARGS --json (memory warmed first):
        its JSON line, or None (an error recorded)."""
        b = self.b
        b.warm_memory(warm)
        lg = b.newlog("%s-x%d-%s-%s" % (DN_SETUP, RAM_NDEV, fs, label))
        argv = ["env", "PYTHONPATH=" + self.pypath, PY, os.path.join(DN_EXAMPLES, script)] + \
            [str(x) for x in args] + ["--json"]
        if b.run(1800, lg, argv):
            b.error("%s %s: %s failed (see %s)" % (DN_SETUP, fs, script, lg))
            return None
        doc = dn_json(lg)
        if doc is None:
            b.error("%s %s: %s printed no JSON line (see %s)" % (DN_SETUP, fs, script, lg))
        return doc

    def tensors(self, fs):
        """Store and load a tensor: Python and the handle (on nvmefs the
        handle's store ran in store_rounds; its load runs in rounds here)."""
        sz, mnt = self.sz, self.b.mnt
        t = sz.tensor_mib * MIB
        common = ["--loop", sz.loops]
        doc = self.example(fs, "py-store", "py_store_cpu_tensor.py",
                           ["--nvme_folder", mnt, "--mb_size", sz.tensor_mib] + common, 2 * t)
        self.record(fs, "py_store", doc)
        if fs != "direct":
            self.record(fs, "aio_store", self.aio_store(fs))
        inp = os.path.join(mnt, "input.bin")
        if self.b.run(tlimit(t), self.b.misc, ["dd", "if=/dev/urandom", "of=" + inp, "bs=1M",
                                                "count=%d" % sz.tensor_mib, "conv=fsync"]):
            self.b.error("%s %s: writing the input file failed" % (DN_SETUP, fs))
            self.record(fs, "py_load", None)
            self.record(fs, "aio_load", None)
            return
        doc = self.example(fs, "py-load", "py_load_cpu_tensor.py",
                           ["--input_file", inp] + common, 2 * t)
        self.record(fs, "py_load", doc)
        for k in range(1, DN_ROUNDS + 1 if fs == "direct" else 2):
            if fs == "direct":
                # A raw read under the mount harms nothing.
                self.b.fio_raw(DN_SETUP, sz.dev, DN_RAW_LOOPS, round_fs("fio-again", k), ("read",))
            doc = self.example(round_fs(fs, k), "aio-load", "aio_load_cpu_tensor.py",
                               ["--input_file", inp, "--no_python", "--validate"]
                               + dn_handle_args(self.handle) + common, 2 * t)
            self.record(round_fs(fs, k), "aio_load", doc)
        self.b.remove(inp)

    def aio_store(self, fs):
        """The handle's store example on the mount: its JSON, or None."""
        sz = self.sz
        return self.example(fs, "aio-store", "aio_store_cpu_tensor.py",
                            ["--nvme_folder", self.b.mnt, "--mb_size", sz.tensor_mib, "--no_python",
                             "--validate", "--loop", sz.loops] + dn_handle_args(self.handle),
                            2 * sz.tensor_mib * MIB)

    def store_rounds(self):
        """The handle's store on nvmefs, DN_ROUNDS times: fio raw's write on
        the bare devices, then a fresh nvmefs, the store, unmount."""
        b = self.b
        for k in range(1, DN_ROUNDS + 1):
            b.fio_raw(DN_SETUP, self.sz.dev, DN_RAW_LOOPS, round_fs("fio-again", k), ("write",))
            if not b.fs_mount("direct"):
                b.error("%s: mkfs or mount of nvmefs failed (see %s/logs)" % (DN_SETUP, b.out))
                b.force_umount()
                self.record(round_fs("direct", k), "aio_store", None)
                continue
            self.record(round_fs("direct", k), "aio_store", self.aio_store(round_fs("direct", k)))
            if not b.fs_umount(DN_SETUP, RAM_NDEV, "rss_store"):
                b.error("%s: unmounting nvmefs failed" % DN_SETUP)
                b.force_umount()

    def state_dicts(self, fs):
        """torch.save/torch.load on btrfs; the handle on nvmefs; both
        formats."""
        sz = self.sz
        engine = "torch" if fs == "btrfs" else "aio"
        for form, suffix in (("zip", ""), ("legacy", "_legacy")):
            args = ["--nvme_folder", self.b.mnt, "--mb_size", sz.sd_mib, "--loop", sz.loops,
                    "--engine", engine, "--format", form]
            if engine == "aio":
                args += ["--validate"] + dn_handle_args(self.handle)
                if form == "zip":
                    args.append("--zero_copy")
            doc = self.example(fs, "sd-%s-%s" % (engine, form), "save_load_state_dict.py", args,
                               3 * sz.sd_mib * MIB)
            self.record(fs, "sd_%s%s_save" % (engine, suffix), doc, engine + "_save_gbs")
            self.record(fs, "sd_%s%s_load" % (engine, suffix), doc, engine + "_load_gbs")
            if engine == "aio" and form == "zip":
                self.record(fs, "sd_aio_zc_load", doc, "aio_load_zero_copy_gbs")

    def run(self):
        b, sz = self.b, self.sz
        t0 = time.monotonic()
        need = RAM_NDEV * sz.dev + 3 * sz.sd_mib * MIB + 2 * GIB
        memav = emu.meminfo_kib("MemAvailable") * 1024
        if need > memav:
            raise Die("not enough memory for --only deepnvme: %d MiB of images, tensors and caches, MemAvailable %d MiB"
                      % (need // MIB, memav // MIB))
        log("=== DeepNVMe: %d drives of %d MiB, no cap; tensors of %d MiB, a state dict of %d MiB, %d loops; handle %s"
            % (RAM_NDEV, sz.dev // MIB, sz.tensor_mib, sz.sd_mib, sz.loops, self.handle))
        b.runner.log_line("# setup: DeepNVMe, %d drives, no cap" % RAM_NDEV)
        b.setup_devices(RAM_NDEV, sz.dev)
        b.fio_raw(DN_SETUP, sz.dev, DN_RAW_LOOPS)
        for fs in ("direct", "btrfs"):
            self.run_fs(fs)
        b.drives.teardown()
        log("=== DeepNVMe: %d s" % (time.monotonic() - t0))

    def run_fs(self, fs):
        b = self.b
        log("== %s x%d: %s" % (DN_SETUP, RAM_NDEV, fs))
        if fs == "direct":
            self.store_rounds()
        if not b.fs_mount(fs):
            b.error("%s: mkfs or mount of %s failed (see %s/logs)" % (DN_SETUP, fs, b.out))
            b.force_umount()
            return
        self.tensors(fs)
        self.state_dicts(fs)
        if not b.fs_umount(DN_SETUP, RAM_NDEV):
            b.error("%s: unmounting %s failed" % (DN_SETUP, fs))
            b.force_umount()

    def report(self, header):
        """report.md and targets.txt; the count of missed targets."""
        b = self.b
        rep = DnReport(load_results(b.results))
        targets = rep.targets()
        sz = self.sz
        r = header + [
            "",
            "DeepNVMe's comparison (issue 22): %d RAM drives of %s (image files in /dev/shm on loop devices, no cap)."
            % (RAM_NDEV, emu.human_iec(sz.dev)),
            "Python: examples/deepnvme/py_store_cpu_tensor.py (f.write(t.numpy()) + fsync) and py_load_cpu_tensor.py",
            "(torch.frombuffer(f.read()), caches dropped), %d MiB, --loop %d; torch.save (+fsync) / torch.load of a %d MiB"
            % (sz.tensor_mib, sz.loops, sz.sd_mib),
            "state dict of 16 float32 tensors (save_load_state_dict.py --engine torch). Handle: aio_store/aio_load_cpu_tensor.py",
            "with a locked tensor, save_load_state_dict.py --engine aio --zero_copy (FastPersist-style), all with --validate",
            "and %s (%s)." % (" ".join(dn_handle_args(self.handle)),
                              "--aio-config %s" % b.a.aio_config_path if b.a.aio_config else "bench.py's DN_HANDLE"),
            "btrfs: mkfs.btrfs -f -K -d raid0 -m raid0, mount -o nodiscard; nvmefs: mkfs.nvmefs -f -K, -o mode=direct,pool=%s,nouring."
            % b.a.pool,
            "fio raw: libaio direct bs=1M iodepth=32, one job per device, %d times over each drive. GB = 1e9 bytes;"
            % DN_RAW_LOOPS,
            "one run on a shared 2-core machine. The handle's tensor store and load on nvmefs ran %d rounds, each held"
            % DN_ROUNDS,
            "to fio raw just before it (the store's on the bare devices, then a fresh nvmefs); the table gives medians.",
            "Memory warmed before every example (\"Cold memory\" in bench.py)." if b.a.warm else "--no-warm: cold memory.",
            "",
        ] + rep.table() + [""] + rep.round_lines() + ["", "Targets (issue 22):", "", "```"] + targets + ["```"]
        b.finish_report(r, targets)
        return rep.nfail


# ------------------------------------------ transports (issue 33) --
# --only transport: /dev/fuse against FUSE over io_uring, nvmefs in each
# mode, btrfs raid0 beside (Bench.run_transport runs it).

TR_NAME = {"btrfs": "btrfs raid0", "direct": "direct", "direct+uring": "direct io_uring",
           "cached": "cached", "cached+uring": "cached io_uring",
           "null-direct": "null direct", "null-direct+uring": "null direct io_uring",
           "null-cached": "null cached", "null-cached+uring": "null cached io_uring"}
# What the issue-33 targets compare: (row, label, ratio to btrfs raid0)
# for every nvmefs mount; (row, label, ratio to /dev/fuse in the same mode)
# for each mode's io_uring mount ("no lower than today": the /dev/fuse
# loop measured in the same run).
TR_VS_BTRFS = (("small_create", "small files create+write (+syncfs)", 0.5),
               ("small_read", "small files read, cold cache", 0.7),
               ("fio_read", "fio 1 MiB QD32 O_DIRECT read", 1.0))
TR_VS_FUSE = (("rand4k_read", "fio 4 KiB random O_DIRECT read QD32", 1.5),
              ("dd_write", "dd write", 1.0), ("dd_read", "dd read", 1.0),
              ("torch_save", "torch.save", 1.0), ("torch_load", "torch.load", 1.0))


def tr_ratio(a, b):
    """A / B as a float, or None unless both are numbers and B > 0."""
    if isnum(a) and isnum(b) and float(b) > 0:
        return float(a) / float(b)
    return None


def tr_wins(pairs):
    """Which transport wins where: PAIRS [(row, io_uring / /dev/fuse, or
    None without both figures)] -> (rows io_uring wins, rows /dev/fuse
    wins, rows without both figures), each row as 'ROW RATIO' (2
    decimals); a tie (1.00) counts for neither and is listed with
    io_uring's."""
    uring, fuse, none = [], [], []
    for row, r in pairs:
        if r is None:
            none.append(row)
        elif r >= 1.0:
            uring.append("%s %.2f" % (row, r))
        else:
            fuse.append("%s %.2f" % (row, r))
    return uring, fuse, none


class TrReport:
    """--only transport's table, targets and notes from RES {(setup, n,
    fs, row): value}; SZ the run's Sizes; HAVE_URING whether the kernel
    has the enable_uring switch (else the io_uring mounts were skipped)."""

    def __init__(self, res, sz, pool, have_uring):
        self.res = res
        self.sz = sz
        self.pool = pool
        self.have_uring = have_uring
        self.nfail = 0

    def rounds(self, fs, row):
        """ROW's figures on FS, one per round (TR_ROUNDS for TR_ROUND_ROWS,
        else the first pass alone): a float, or None where it has none."""
        n = TR_ROUNDS if row in TR_ROUND_ROWS else 1
        vs = [self.res.get((tr_round_setup(r), str(RAM_NDEV), fs, row), "") for r in range(1, n + 1)]
        return [float(v) if isnum(v) else None for v in vs]

    def get(self, fs, row):
        """ROW's figure on FS: the median of its rounds that have one (when
        two or more do, or the first pass has none), else the first
        pass's (a number, ERR or "")."""
        xs = [x for x in self.rounds(fs, row) if x is not None]
        first = self.res.get((TR_SETUP, str(RAM_NDEV), fs, row), "")
        if len(xs) > 1 or (xs and not isnum(first)):
            return num(median(xs))
        return first

    def ratio(self, fs, row, base_fs, base_row=None):
        """ROW on FS / BASE_ROW (default ROW) on BASE_FS: the median of the
        rounds' own ratios (the first pass's alone for rows without
        rounds); None without a round that has both figures."""
        b = self.rounds(base_fs, base_row or row)
        rs = [x / y for x, y in zip(self.rounds(fs, row), b) if x is not None and y]
        return median(rs) if rs else None

    def rdiv(self, fs, row, base_fs, base_row=None):
        """self.ratio with 2 decimals, or '-'."""
        r = self.ratio(fs, row, base_fs, base_row)
        return "-" if r is None else "%.2f" % r

    def round_lines(self):
        """A line per row with rounds and file system: each round's figure."""
        units = {row: unit for row, _l, unit, _r in self.specs()}
        out = []
        for row in TR_ROUND_ROWS:
            for fs in TR_FS:
                xs = self.rounds(fs, row)
                if sum(x is not None for x in xs) > 1:
                    out.append("- %s, %s: %s %s" % (row, TR_NAME[fs], " / ".join(
                        "-" if x is None else fmt(num(x), units[row]) for x in xs), units[row]))
        return out

    def specs(self):
        """(row, label, unit, fio raw row or None) per table line."""
        sz, h = self.sz, emu.human_iec
        sm = "%d x 4 KiB files, one process, each phase timed whole" % sz.small_n
        return [
            ("lookup_rate", "stat of %d absent names, one process, timed whole: one LOOKUP "
             "round trip each on FUSE" % sz.lookup_n, "lookups/s", None),
            ("dd_write", "dd write %s, bs=1M conv=fsync" % h(sz.ram_dd), "MB/s", "raw_write"),
            ("dd_read", "dd read, bs=1M, cold cache", "MB/s", "raw_read"),
            ("fio_write", "fio seq write of a %s file, 1 MiB, libaio QD32 O_DIRECT" % h(sz.ram_fio), "MB/s", "raw_write"),
            ("fio_read", "fio seq read of that file, 1 MiB, libaio QD32 O_DIRECT, cold cache", "MB/s", "raw_read"),
            ("fio_write_cpu", "CPU time of the fio write, all CPUs busy (/proc/stat), per GB",
             "ms/GB", None),
            ("fio_read_cpu", "CPU time of the fio read, all CPUs busy (/proc/stat), per GB",
             "ms/GB", None),
            ("rand4k_read", "fio 4 KiB random read, libaio QD32 O_DIRECT, %s file, %d s"
             % (h(sz.rand_size), sz.rand_secs), "IOPS", None),
            ("small_create", "%s: create+write (+syncfs)" % sm, "files/s", None),
            ("small_stat", "%s: stat" % sm, "files/s", None),
            ("small_read", "%s: read, cold cache" % sm, "files/s", None),
            ("small_reread", "%s: read again in a shuffled order, cold cache (a next epoch)" % sm,
             "files/s", None),
            ("small_delete", "%s: unlink (+syncfs)" % sm, "files/s", None),
            ("small_total", "%s: create, stat, read, unlink" % sm, "files/s", None),
            ("small_preload_create", "the same, the creates through the preload door: create+write "
             "(+syncfs)", "files/s", None),
            ("small_preload_read", "the same, the preload door: read, cold cache", "files/s", None),
            ("door_fio_read", "fio seq read as above, through the read door (LD_PRELOAD: the program "
             "reads the members)", "MB/s", "raw_read"),
            ("door_fio_read_cpu", "CPU time of that read, per GB", "ms/GB", None),
            ("door_rand4k_read", "fio 4 KiB random read as above, through the read door", "IOPS", None),
            ("torch_save", "torch.save %d MiB state dict (+fsync)" % sz.torch_mib, "GB/s", None),
            ("torch_load", "torch.load, cold cache", "GB/s", None),
            ("rss", "nvmefs daemon peak RSS (VmHWM), pool=%s" % self.pool, "MiB", None)]

    def table(self):
        g = self.get
        head = ["workload", "unit", "fio raw"] + [TR_NAME[fs] for fs in TR_FS] + [
            "direct: io_uring / /dev/fuse", "cached: io_uring / /dev/fuse"] + [
            "%s / btrfs" % TR_NAME[fs] for fs in TR_FS[1:]]
        out = ["| " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * (len(head) - 2)]
        for row, label, unit, raw in self.specs():
            v = {fs: g(fs, row) for fs in TR_FS}
            # The preload door's rows compare with btrfs's own figures.
            b = "" if row == "rss" else g("btrfs", row.replace("small_preload_", "small_").replace("door_", ""))
            cells = [label, unit, fmt(g("fio", raw), unit) if raw else "-"]
            cells += [fmt(b if fs == "btrfs" else v[fs], unit) for fs in TR_FS]
            cells += [self.rdiv(m + "+uring", row, m) for m in ("direct", "cached")]
            brow = "" if row == "rss" else row.replace("small_preload_", "small_").replace("door_", "")
            cells += [self.rdiv(fs, row, "btrfs", brow) if brow else "-" for fs in TR_FS[1:]]
            out.append("| " + " | ".join(cells) + " |")
        return out

    def ceiling(self):
        """The FUSE ceiling on each transport: fuse_null's figures, io_uring
        / /dev/fuse per mode, and each nvmefs mount / fuse_null on the same
        transport and mode."""
        g = self.get
        rows = [sp for sp in self.specs() if sp[0] in WL_ROWS_NULL]
        head = ["workload", "unit"] + [TR_NAME[fs] for fs in TR_NULL_FS] + [
            "null direct: io_uring / /dev/fuse", "null cached: io_uring / /dev/fuse"] + [
            "%s / null" % TR_NAME[fs] for fs in TR_FS[1:]]
        out = ["| " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * (len(head) - 2)]
        for row, label, unit, _raw in rows:
            cells = [label, unit] + [fmt(g(fs, row), unit) for fs in TR_NULL_FS]
            cells += [div(g("null-%s+uring" % m, row), g("null-" + m, row), 2) for m in ("direct", "cached")]
            cells += [div(g(fs, row), g("null-" + fs, row), 2) for fs in TR_FS[1:]]
            out.append("| " + " | ".join(cells) + " |")
        return out

    def transports(self):
        """What each nvmefs mount reported (.nvmefs/config)."""
        return "; ".join("%s: %s" % (TR_NAME[fs], self.get(fs, "transport") or "not run")
                         for fs in TR_FS[1:])

    def cpu_notes(self):
        """Per nvmefs mount, its fio 1 MiB read's CPU time per GB against
        btrfs raid0's: where the CPUs bound both (a 2-core machine, RAM
        drives), btrfs / nvmefs is about the throughput ratio they allow
        (the FUSE copy to the program's pages is what nvmefs adds)."""
        b = self.get("btrfs", "fio_read_cpu")
        out = []
        for fs in TR_FS[1:]:
            v = self.get(fs, "fio_read_cpu")
            r = tr_ratio(v, b)
            if r is not None:
                out.append("- %s: %s ms of CPU per GB read, %.2f x btrfs raid0's %s (so at most %.2f x "
                           "its throughput when both are bound by the CPUs)"
                           % (TR_NAME[fs], fmt(v, "ms/GB"), r, fmt(b, "ms/GB"), 1.0 / r))
        r = tr_ratio(self.get(TR_PRELOAD_FS, "door_fio_read_cpu"), b)
        if r is not None:
            out.append("- %s through the read door: %s ms per GB, %.2f x btrfs raid0's (no FUSE copy)"
                       % (TR_NAME[TR_PRELOAD_FS], fmt(self.get(TR_PRELOAD_FS, "door_fio_read_cpu"), "ms/GB"), r))
        return out or ["- no CPU figures (fio did not run, or /proc/stat was unreadable)"]

    def wins(self):
        """A line per mode: which transport wins where."""
        out = []
        for mode in ("direct", "cached"):
            # The preload door runs on one mount only: nothing to compare.
            u, f, none = tr_wins([(row, self.ratio(mode + "+uring", row, mode))
                                  for row, _l, unit, _r in self.specs()
                                  if row != "rss" and not row.startswith(("small_preload_", "door_"))
                                  and unit != "ms/GB"])  # CPU time: lower is better
            line = "- %s: io_uring faster or equal in %s; /dev/fuse faster in %s" % (
                mode, ", ".join(u) or "nothing", ", ".join(f) or "nothing")
            if none:
                line += "; no figures for %s" % ", ".join(none)
            out.append(line + " (io_uring / /dev/fuse).")
        return out

    def target(self, ok, line, out):
        out.append(("PASS " if ok else "FAIL ") + line)
        if not ok:
            self.nfail += 1

    def ratio_target(self, what, v, unit, base, b, want, out, note="", rounds=None):
        """A target of V against B; ROUNDS (round_ratio): with several
        rounds, the median of their ratios is judged instead of V / B (the
        medians); with one, that round's own two figures."""
        if rounds and rounds[2]:
            v, b = (num(x) for x in rounds[2])
        r = tr_ratio(v, b)
        if r is None:
            self.target(False, "%s: no figure (%s, %s %s); target >= %s x %s%s"
                        % (what, v or "not run", base, b or "not run", want, base, note), out)
        elif rounds and rounds[1] > 1:
            self.target(rounds[0] >= calc(want), "%s: %s %s = %.2f x %s (%s), medians of %d rounds (their "
                        "ratios' median); target >= %s%s"
                        % (what, fmt(v, unit), unit, rounds[0], base, fmt(b, unit), rounds[1], want, note), out)
        else:
            self.target(float(v) >= calc(want * float(b)), "%s: %s %s = %.2f x %s (%s); target >= %s%s"
                        % (what, fmt(v, unit), unit, r, base, fmt(b, unit), want, note), out)

    def round_ratio(self, fs, row, base_fs, base_row=None):
        """What a target judges: (the median of the rounds' ratios, how
        many rounds had both figures, and with one such round its two
        figures (else None)); None when no round had both."""
        both = [(x, y) for x, y in zip(self.rounds(fs, row), self.rounds(base_fs, base_row or row))
                if x is not None and y]
        if not both:
            return None
        return (self.ratio(fs, row, base_fs, base_row), len(both), both[0] if len(both) == 1 else None)

    def null_note(self, fs, row, unit):
        """What fuse_null got for ROW on FS's mode and transport, against
        btrfs raid0: '; fuse_null there: V UNIT = R x btrfs raid0', or ''
        when it has no figure (the ceiling a target is held beside)."""
        v, b = self.get("null-" + fs, row), self.get("btrfs", row)
        r = tr_ratio(v, b)
        if r is None:
            return ""
        return "; fuse_null there: %s %s = %.2f x btrfs raid0" % (fmt(v, unit), unit, r)

    def targets(self):
        """Issue 33's must-show, as PASS/FAIL lines."""
        units = {row: unit for row, _l, unit, _r in self.specs()}
        out = []
        for fs in TR_FS[1:]:
            for row, label, want in TR_VS_BTRFS:
                # fuse_null's rate beside it: the transport's ceiling, as
                # it runs nvmefs's transport code on io_uring and a loop
                # built as nvmefs's on /dev/fuse (docs/PERFORMANCE.md,
                # "The create's FUSE ceiling").
                note = self.null_note(fs, row, units[row]) if row == "small_create" else ""
                self.ratio_target("transport %s %s" % (TR_NAME[fs], label), self.get(fs, row), units[row],
                                  "btrfs raid0", self.get("btrfs", row), want, out, note,
                                  self.round_ratio(fs, row, "btrfs"))
        # The preload door beside the mount it runs on (btrfs's own rows).
        for row, label, want in TR_VS_BTRFS[:2]:
            pre = row.replace("small_", "small_preload_")
            self.ratio_target("transport %s preload door %s" % (TR_NAME[TR_PRELOAD_FS], label),
                              self.get(TR_PRELOAD_FS, pre), units[pre], "btrfs raid0",
                              self.get("btrfs", row), want, out,
                              rounds=self.round_ratio(TR_PRELOAD_FS, pre, "btrfs", row))
        # The read door: issue 33's 1 MiB read against btrfs raid0, and
        # its 4 KiB random reads against the same mount's on /dev/fuse.
        self.ratio_target("transport %s read door %s" % (TR_NAME[TR_PRELOAD_FS], TR_VS_BTRFS[2][1]),
                          self.get(TR_PRELOAD_FS, "door_fio_read"), "MB/s", "btrfs raid0",
                          self.get("btrfs", "fio_read"), TR_VS_BTRFS[2][2], out,
                          rounds=self.round_ratio(TR_PRELOAD_FS, "door_fio_read", "btrfs", "fio_read"))
        self.ratio_target("transport %s read door %s" % (TR_NAME[TR_PRELOAD_FS], TR_VS_FUSE[0][1]),
                          self.get(TR_PRELOAD_FS, "door_rand4k_read"), "IOPS",
                          "/dev/fuse " + TR_PRELOAD_FS, self.get(TR_PRELOAD_FS, "rand4k_read"),
                          TR_VS_FUSE[0][2], out,
                          rounds=self.round_ratio(TR_PRELOAD_FS, "door_rand4k_read", TR_PRELOAD_FS, "rand4k_read"))
        for mode in ("direct", "cached"):
            for row, label, want in TR_VS_FUSE:
                self.ratio_target("transport %s io_uring %s" % (mode, label), self.get(mode + "+uring", row),
                                  units[row], "/dev/fuse " + mode, self.get(mode, row), want, out,
                                  rounds=self.round_ratio(mode + "+uring", row, mode))
        return out


# ---------------------------------------------------------------- checks --

USAGE = """Usage: {prog} [-b BUILD] [-o DIR] [--only ram|capped|deepnvme|scale|transport] [--native-only] [--quick]
       [--check] [--pool SIZE] [--no-warm] [--aio-config FILE] [--files N[,N...]]
Benchmark nvmefs (cached, direct and its native client) against btrfs raid0
and fio on the raw devices, on 4 RAM drives and on 1, 2 and 4 drives capped
at {cap} MiB/s.
  -b BUILD      build directory with nvmefs, mkfs.nvmefs, nvmefs-bench
                (default {top}/build)
  -o DIR        results directory (default bench-results/DATE-TIME)
  --only SET    ram or capped: run only those setups; deepnvme: only issue 22's
                comparison; scale: only issue 23's scale benchmark (N files
                created, stat'ed cold after a remount, read and deleted, against
                btrfs raid0); transport: only issue 33's /dev/fuse against
                FUSE over io_uring (nvmefs direct and cached on each, btrfs
                raid0 beside; sets enable_uring to Y while an io_uring
                mount is up, then puts it back). None is part of the
                default run.
  --native-only only what the native client's targets compare (RAM: fio raw,
                dd and fio through the mount, the client; capped: fio raw,
                the client)
  --quick       small sizes: a smoke run of the whole script (2-3 minutes)
  --check       exit 1 if a target is missed
  --pool SIZE   nvmefs -o pool=SIZE (default 64M)
  --no-warm     do not warm free memory before each measured pass
  --aio-config FILE  with --only deepnvme: the handle's settings from an "aio"
                JSON file (nvmefs-tune --handle --json writes one)
  --files LIST  with --only scale: the file counts, comma-separated (default
                10000,100000,1000000; with --quick 2000,10000)
  -h            show this help
Needs root, fio, btrfs-progs, gnuplot, python3-torch (--only scale: no
gnuplot, no torch).
"""


class ArgParser(argparse.ArgumentParser):
    def error(self, message):
        m = re.match(r"unrecognized arguments: (\S+)", message)
        if m:
            raise BadArg("unknown argument: '%s'" % m.group(1))
        m = re.match(r"argument (\S+?)(/\S+)?: expected one argument", message)
        if m:
            raise BadArg("option %s needs an argument" % m.group(1))
        raise BadArg(message)


def parse_args(argv):
    p = ArgParser(prog=PROG, add_help=False, allow_abbrev=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("-b", dest="build", default=TOP + "/build")
    p.add_argument("-o", dest="out", default="")
    p.add_argument("--only", default="all")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--native-only", dest="native_only", action="store_true")
    p.add_argument("--check", action="store_true")
    p.add_argument("--pool", default="64M")
    p.add_argument("--no-warm", dest="warm", action="store_false")
    p.add_argument("--aio-config", dest="aio_config", default=None)
    p.add_argument("--files", default=None)
    a = p.parse_args(argv)
    if a.help:
        return a
    if a.only not in ("all", "ram", "capped", "deepnvme", "scale", "transport"):
        raise BadArg("bad --only '%s' (want ram, capped, deepnvme or scale, or transport)" % a.only)
    if a.only == "transport" and a.native_only:
        raise BadArg("--native-only does not go with --only transport")
    if a.files is not None and a.only != "scale":
        raise BadArg("--files goes with --only scale")
    if a.only == "scale":
        if a.native_only:
            raise BadArg("--native-only does not go with --only scale")
        try:
            a.files = bench_scale.parse_files(a.files) if a.files is not None else (
                bench_scale.QUICK_FILES if a.quick else bench_scale.DEFAULT_FILES)
        except ValueError as e:
            raise BadArg(str(e)) from None
    if a.aio_config is not None:
        if a.only != "deepnvme":
            raise BadArg("--aio-config goes with --only deepnvme")
        a.aio_config_path = a.aio_config
        a.aio_config = dn_handle_config(a.aio_config)
    if emu.parse_size(a.pool) is None:
        raise BadArg("bad --pool '%s' (want bytes or a number with K, M or G)" % a.pool)
    lim = os.environ.get("NVMEFS_BENCH_TIME_LIMIT")
    if lim is not None and lim != "" and not re.fullmatch(r"[1-9][0-9]{0,5}", lim):
        raise BadArg("bad NVMEFS_BENCH_TIME_LIMIT '%s' (want seconds)" % lim)
    if not a.out:
        a.out = os.path.join(os.getcwd(), "bench-results", time.strftime("%Y%m%d-%H%M%S"))
    return a


def check_host(a):
    """What the run needs; Die naming what is missing."""
    if os.geteuid() != 0:
        raise Die("must run as root (loop devices, mounts, cgroups, drop_caches)")
    missing = []
    need = [("fio", "fio"), ("losetup", "util-linux"), ("fallocate", "util-linux"),
            ("fusermount3", "fuse3")]
    if not a.native_only:
        need += [("mkfs.btrfs", "btrfs-progs"), ("btrfs", "btrfs-progs")]
    if a.only in ("all", "capped"):
        need.append(("gnuplot", "gnuplot-nox"))
    if a.only == "scale":
        need.append(("blkdiscard", "util-linux"))
    for cmd, pkg in need:
        if shutil.which(cmd) is None:
            missing.append("%s (Debian package %s)" % (cmd, pkg))
    if a.only not in ("capped", "scale") and not a.native_only:
        if not os.access(PY, os.X_OK):
            missing.append("%s (Debian package python3)" % PY)
        elif subprocess.run([PY, "-c", "import torch"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, check=False).returncode:
            missing.append("torch for %s (Debian package python3-torch)" % PY)
    if missing:
        raise Die("missing: " + " ".join(missing))
    for b in ("nvmefs", "mkfs.nvmefs", "fsck.nvmefs", "nvmefs-bench", "tests/fuse_null"):
        if not os.access(os.path.join(a.build, b), os.X_OK):
            raise Die("%s/%s not found (build it, e.g. scripts/build.sh, or give -b BUILD)" % (a.build, b))
    if a.only == "deepnvme" and not os.path.isfile(os.path.join(a.build, "python", "nvmefs", "handle.py")):
        raise Die("%s/python/nvmefs not found (the Python package: build it, or give -b BUILD)" % a.build)
    a.build = os.path.realpath(a.build)
    if not os.path.exists("/dev/fuse"):
        raise Die("no /dev/fuse")
    blkio = emu.BLKIO
    if a.only in ("all", "capped") and not (os.access(blkio + "/blkio.throttle.read_bps_device", os.W_OK)
                                and os.access(blkio + "/cgroup.procs", os.W_OK)):
        raise Die("no cgroup v1 blkio throttling at %s (needed for the capped runs; try --only ram)" % blkio)
    # Throttling under v1 is flat (see the top comment): everything we start
    # must be charged to the root group, where the rules go.
    try:
        emu.move_to_blkio_root(log)
    except OSError as e:
        raise Die("cannot move into %s: %s" % (blkio, e)) from None


def make_out(a):
    if os.path.exists(os.path.join(a.out, "results.tsv")):
        raise BadArg("bad -o '%s' (already holds results)" % a.out)
    try:
        os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    except OSError:
        raise Die("cannot create " + a.out) from None
    out = os.path.realpath(a.out)
    for name in ("results.tsv", "commands.log"):
        open(os.path.join(out, name), "w").close()
    return out


def main(argv):
    emu.raise_on_signals()
    bench = None
    try:
        a = parse_args(argv)
        if a.help:
            sys.stdout.write(USAGE.format(prog=PROG, cap=CAP_MIBPS, top=TOP))
            return 0
        check_host(a)
        out = make_out(a)
        bench = Bench(a, Sizes(a.quick), out)
        return bench.main()
    except BadArg as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        print("Try '%s -h' for help." % PROG, file=sys.stderr)
        return 2
    except Die as e:
        log(str(e))
        return 1
    except emu.Stopped as e:
        log("got %s: cleaning up" % e)
        return e.code
    finally:
        if bench is not None:
            emu.ignore_signals()
            bench.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
