#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Unit tests (no root, nothing mounted) for the pure logic of the Python
programs in scripts/: nvmefs_emu.py (sizes, fio JSON, dd output, mountinfo,
/proc parsing, timed commands), bench.py (figures, ratios, tables, the
issue-5 and issue-21 targets, against a golden run of the shell version it replaced:
tests/bench_golden/) and nvmefs-tune (options, scores, ranking).

usage: test_benchlib.py [unittest options]
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True
import testlib  # noqa: E402

GOLDEN = os.path.join(testlib.HERE, "bench_golden")
sys.path.insert(0, testlib.SCRIPTS)

import bench  # noqa: E402
import bench_builds  # noqa: E402
import nvmefs_emu as emu  # noqa: E402

tune = testlib.load_tuner()


def fio_json(op, io_bytes, bw_bytes, error=0):
    return json.dumps({"fio version": "fio-3.33", "jobs": [
        {"jobname": "x", "error": error, op: {"io_bytes": io_bytes, "bw_bytes": bw_bytes}}]})


class Sizes(unittest.TestCase):
    def test_parse_size(self):
        for text, want in (("0", 0), ("4096", 4096), ("64K", 65536), ("64k", 65536), ("1M", 1 << 20),
                           ("3m", 3 << 20), ("2G", 2 << 30), ("007", 7)):
            self.assertEqual(emu.parse_size(text), want, text)
        for bad in ("", "x", "1T", "-1", "1.5M", "1MB", " 1M", "M"):
            self.assertIsNone(emu.parse_size(bad), bad)

    def test_human(self):
        self.assertEqual(emu.human_unit(262144), "256K")
        self.assertEqual(emu.human_unit(1024 * 1024), "1M")
        self.assertEqual(emu.human_unit(3 << 30), "3G")
        self.assertEqual(emu.human_unit(1536), "1536")
        self.assertEqual(emu.human_iec(4 << 30), "4 GiB")
        self.assertEqual(emu.human_iec(512 << 20), "512 MiB")

    def test_jq_numbers(self):
        self.assertEqual(emu.jq_number(1234.0), "1234")
        self.assertEqual(emu.jq_number(1234.5), "1234.5")
        self.assertEqual(emu.jq_number(0.457), "0.457")
        self.assertEqual(emu.round_half_up(2.5), 3)
        self.assertEqual(emu.round_half_up(1234.45, 1), 1234.5)
        self.assertEqual(emu.round_half_up(0.4567, 3), 0.457)

    def test_shell_words_read_back(self):
        argv = ["nvmefs", "/a/b.img,/c/d.img", "/mnt/with space", "-o", "mode=direct", "it's", ""]
        self.assertEqual(shlex.split(emu.shell_line(argv)), argv)
        self.assertEqual(emu.shell_word("/a,b:c=d"), "/a,b:c=d")


class FioDd(unittest.TestCase):
    def test_fio_notes_before_json(self):
        text = "fio: note: something\n" + fio_json("write", 1 << 30, 2.5e9)
        self.assertEqual(emu.fio_bytes_bw(text, "write"), (1 << 30, 2.5e9))

    def test_fio_errors(self):
        with self.assertRaisesRegex(emu.ParseError, "no JSON"):
            emu.fio_job("fio: engine libaio not loadable\n")
        with self.assertRaisesRegex(emu.ParseError, "job error 5"):
            emu.fio_job(fio_json("read", 0, 0, error=5))
        with self.assertRaisesRegex(emu.ParseError, "no read figures"):
            emu.fio_bytes_bw(fio_json("write", 1, 1), "read")
        with self.assertRaises(emu.ParseError):
            emu.fio_job('{"jobs": []}')

    def test_fio_exact(self):
        text = fio_json("read", 4 << 30, 4431987654.0)
        self.assertEqual(emu.fio_mbps_exact(text, "read", 4 << 30), "4432")
        text = fio_json("read", 4 << 30, 4431940000.0)
        self.assertEqual(emu.fio_mbps_exact(text, "read", 4 << 30), "4431.9")
        with self.assertRaisesRegex(emu.ParseError, "moved 1024 bytes, expected 2048"):
            emu.fio_mbps_exact(fio_json("write", 1024, 1e6), "write", 2048)
        with self.assertRaises(emu.ParseError):
            emu.fio_mbps_exact(fio_json("write", 2048, 0), "write", 2048)

    def test_dd(self):
        out = ("512+0 records in\n512+0 records out\n"
               "536870912 bytes (537 MB, 512 MiB) copied, 0.289094 s, 1.9 GB/s\n")
        self.assertEqual(emu.dd_mbps(out, 536870912), "%.1f" % (536870912 / 0.289094 / 1e6))
        with self.assertRaises(emu.ParseError):
            emu.dd_mbps(out, 1 << 30)
        with self.assertRaises(emu.ParseError):
            emu.dd_mbps("dd: error writing: No space left on device\n", 1)
        two = ("1 bytes copied, 1 s, 1 B/s\n" + out)
        self.assertEqual(emu.dd_mbps(two, 536870912), emu.dd_mbps(out, 536870912))


class ProcParsing(unittest.TestCase):
    MOUNTINFO = (
        "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/root rw\n"
        "90 22 0:52 / /tmp/x\\040y/mnt rw,nosuid,nodev,relatime shared:5 master:1 - fuse.nvmefs "
        "/dev/shm/d0.img,/dev/shm/d1.img rw,user_id=0,group_id=0\n"
        "91 22 7:0 / /mnt/b rw,relatime - btrfs /dev/loop0 rw,nodiscard\n")

    def test_mountinfo(self):
        m = emu.parse_mountinfo(self.MOUNTINFO)
        self.assertEqual(len(m), 3)
        self.assertEqual(m[1]["target"], "/tmp/x y/mnt")
        self.assertEqual(m[1]["fstype"], "fuse.nvmefs")
        self.assertEqual(m[1]["source"], "/dev/shm/d0.img,/dev/shm/d1.img")
        self.assertEqual(m[1]["devnum"], "0:52")
        self.assertEqual(m[2]["fstype"], "btrfs")
        self.assertEqual(emu.mi_unescape("a\\011b\\012c\\134d"), "a\tb\nc\\d")

    def test_mounts(self):
        t = emu.parse_mounts("nvmefs:/dev/shm/a\\040b.img /srv/da\\040ta fuse.nvmefs rw 0 0\n")
        self.assertEqual(t, [("nvmefs:/dev/shm/a b.img", "/srv/da ta", "fuse.nvmefs")])

    def test_real_mountinfo(self):
        self.assertTrue(any(m["target"] == "/" for m in emu.mounts()))
        self.assertTrue(emu.is_mounted("/"))
        self.assertFalse(emu.is_mounted("/nonexistent/nvmefs"))

    def test_stat_state(self):
        self.assertEqual(emu.stat_state("1234 (nvmefs) S 1 1234 1234 0 -1"), "S")
        self.assertEqual(emu.stat_state("1234 (a) b) Z 1 1234"), "Z")
        self.assertTrue(emu.alive(os.getpid()))
        self.assertFalse(emu.stopped(os.getpid()))

    def test_cgroup(self):
        text = "12:cpu,blkio:/user.slice\n11:memory:/\n0::/init.scope\n"
        self.assertEqual(emu.cgroup_v1_path(text, "blkio"), "/user.slice")
        self.assertEqual(emu.cgroup_v1_path("0::/init.scope\n", "blkio"), None)
        self.assertEqual(emu.throttle_rules("7:0 209715200\n7:1 0\n\n"), {"7:0", "7:1"})

    def test_warm_clamp(self):
        mib = emu.MIB
        self.assertEqual(emu.clamp_warm(10 * mib + 5, 100 * mib, 100 * mib), 10 * mib)
        self.assertEqual(emu.clamp_warm(10 * mib, 3 * mib + 1, 100 * mib), 3 * mib)
        self.assertEqual(emu.clamp_warm(10 * mib, 100 * mib, -5), 0)
        self.assertEqual(emu.clamp_warm(mib - 1, 100 * mib, 100 * mib), 0)


class Commands(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.notes = []
        self.cmdlog = os.path.join(self.dir, "commands.log")
        self.runner = emu.Runner(self.notes.append, self.cmdlog)
        self.log = os.path.join(self.dir, "out.log")

    def tearDown(self):
        for f in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, f))
        os.rmdir(self.dir)

    def test_status_and_log(self):
        self.assertEqual(self.runner.run(10, self.log, ["sh", "-c", "echo hello; exit 3"]), 3)
        self.assertEqual(emu.last_line(self.log), "hello")
        self.assertEqual(self.runner.run(10, self.log, ["true"]), 0)
        with open(self.cmdlog) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], "sh -c 'echo hello; exit 3'")
        self.assertRegex(lines[1], r"^#   -> status 3, [0-9.]+ s$")
        self.assertEqual(self.runner.run(10, self.log, ["/nonexistent/prog"]), 127)
        self.assertEqual(self.runner.run(10, self.log, ["sh", "-c", "kill -KILL $$"]), 137)

    def test_time_limit(self):
        called = []
        t0 = time.monotonic()
        rc = self.runner.run(1, self.log, ["sleep", "30"], on_stuck=lambda: called.append("stuck"),
                             after_limit=lambda: called.append("after"))
        self.assertEqual(rc, 124)
        self.assertTrue(self.runner.timed_out)
        self.assertEqual(called, ["after"])  # sleep dies of SIGTERM
        self.assertLess(time.monotonic() - t0, 10)
        self.assertIn("time limit of 1 s", self.notes[0])

    def test_stuck_command(self):
        called = []
        rc = self.runner.run(1, self.log, ["sh", "-c", "trap '' TERM; exec sleep 30"],
                             on_stuck=lambda: called.append("stuck"))
        self.assertEqual(rc, 124)
        self.assertEqual(called, ["stuck"])

    def test_limit_cap(self):
        r = emu.Runner(self.notes.append, limit_cap=1)
        self.assertEqual(r.run(600, self.log, ["sleep", "30"]), 124)


class BenchFigures(unittest.TestCase):
    def test_helpers(self):
        self.assertTrue(bench.isnum("12") and bench.isnum("12.5"))
        for v in ("ERR", "", None, "-", "1e5", "-3", "1."):
            self.assertFalse(bench.isnum(v), v)
        self.assertEqual(bench.div("3", "2", 2), "1.50")
        self.assertEqual(bench.div("3", "0", 2), "-")
        self.assertEqual(bench.div("ERR", "2", 2), "-")
        self.assertEqual(bench.fmt("0.4567", "GB/s"), "0.46")
        self.assertEqual(bench.fmt("47.84", "MiB"), "47.8")
        self.assertEqual(bench.fmt("4121.7", "MB/s"), "4122")
        self.assertEqual(bench.fmt("ERR", "MB/s"), "ERR")
        self.assertEqual(bench.fmt("", "MB/s"), "-")
        self.assertEqual(bench.cap_mbps(4), 838.8608)
        self.assertEqual(bench.model("7030", "4122"), "2598.4272")
        self.assertEqual(bench.model("0", "4122"), "-")
        self.assertEqual(bench.tlimit(1 << 30), 120 + 102)

    def test_python_workload_lines(self):
        line = json.dumps({"files": 1000, "create": 0.5, "stat": 0.002, "read": 0.1, "delete": 0.04,
                           "total": 0.642})
        self.assertEqual(bench.small_rates(line), {"create": "2000", "stat": "500000", "read": "10000",
                                                   "delete": "25000", "total": "1558"})
        # The shuffled second read, when it ran.
        line = json.dumps({"files": 1000, "create": 0.5, "stat": 0.002, "read": 0.1, "reread": 0.08,
                           "delete": 0.04, "total": 0.642})
        self.assertEqual(bench.small_rates(line)["reread"], "12500")
        partial = json.dumps({"files": 10, "create": 1.0, "error": "wrong size"})
        self.assertEqual(bench.small_rates(partial), {"create": "10"})
        self.assertEqual(bench.small_rates("Traceback"), {})
        t = bench.torch_rates(json.dumps({"bytes": 134217728, "save": 0.25, "load": 0.5}))
        self.assertEqual(t, {"save": "0.537", "load": "0.268"})
        self.assertIsNone(bench.torch_rates("{}"))

    def test_golden_report(self):
        """The shell bench.sh's own --quick run (results.tsv, and its
        targets.txt and report tables): the same lines from the same
        figures, so --check fails exactly when it did."""
        res = bench.load_results(os.path.join(GOLDEN, "results.tsv"))
        rep = bench.Report(res, bench.Sizes(True), "64M", True, True)
        lines = rep.table() + rep.ceiling() + rep.caps()
        with open(os.path.join(GOLDEN, "tables.md")) as f:
            self.assertEqual(lines, f.read().splitlines())
        with open(os.path.join(GOLDEN, "targets.txt")) as f:
            want = f.read().splitlines()
        got = rep.targets()
        self.assertEqual(got, want)
        self.assertEqual(rep.nfail, sum(1 for l in want if l.startswith("FAIL")))

    def report(self, res, ram=True, capped=True):
        return bench.Report(res, bench.Sizes(False), "64M", ram, capped)

    def test_targets(self):
        res = {}
        for mode, v in (("cached", "900"), ("direct", "700")):
            for key in bench.SEQ:
                res[("cap", "1", mode, key)] = "210"
                res[("cap", "2", mode, key)] = "420"
                res[("cap", "4", mode, key)] = v
        rep = self.report(res, ram=False)
        out = rep.targets()
        self.assertEqual(len(out), 2 * 4 + 2 * 4 * 2)
        self.assertIn("PASS capped x4 cached dd_write: 900 MB/s = 1.073 x cap (839 MB/s); target >= 0.95", out)
        self.assertIn("FAIL capped x4 direct dd_write: 700 MB/s = 0.834 x cap (839 MB/s); target >= 0.95", out)
        self.assertIn("FAIL capped x1->x4 cached fio_read: 210 -> 900 MB/s = 1.071 x linear; target 0.95..1.05", out)
        self.assertIn("PASS capped x1->x2 direct fio_read: 210 -> 420 MB/s = 1.000 x linear; target 0.95..1.05", out)
        # The boundary: 0.95 x cap passes.
        res[("cap", "4", "direct", "dd_read")] = "%.4f" % (0.95 * bench.cap_mbps(4))
        self.assertTrue(any(l.startswith("PASS capped x4 direct dd_read") for l in self.report(res, ram=False).targets()))

    def test_ram_targets_and_missing(self):
        n = str(bench.RAM_NDEV)
        res = {("ram", n, "fio", "raw_write"): "4000", ("ram", n, "fio", "raw_read"): "4000",
               ("ram", n, "btrfs", "dd_write"): "600", ("ram", n, "cached", "dd_write"): "2000",
               ("ram", n, "direct", "dd_write"): "1900", ("ram", n, "btrfs", "torch_save"): "0.45",
               ("ram", n, "cached", "torch_save"): "0.5", ("ram", n, "cached", "small_total"): "ERR",
               ("ram", n, "btrfs", "small_total"): "7000"}
        out = self.report(res, capped=False).targets()
        self.assertIn("PASS RAM x4 cached dd_write: 2000 MB/s = 3.33 x btrfs (600), 0.50 x fio raw (4000); "
                      "target >= 1.0 x btrfs and >= 0.5 x fio raw", out)
        self.assertIn("FAIL RAM x4 direct dd_write: 1900 MB/s = 3.17 x btrfs (600), 0.47 x fio raw (4000); "
                      "target >= 1.0 x btrfs and >= 0.5 x fio raw", out)
        self.assertIn("PASS RAM x4 cached torch_save: 0.50 GB/s = 1.11 x btrfs (0.45); target >= 1.0", out)
        self.assertIn("FAIL RAM x4 cached small files: no figure (nvmefs ERR, btrfs 7000)", out)
        self.assertIn("FAIL RAM x4 direct dd_read: no figure (nvmefs ?, btrfs ?, fio raw 4000)", out)
        self.assertEqual(len(out), 2 * (4 + 2 + 1))

    def test_table_shape(self):
        n = str(bench.RAM_NDEV)
        res = {("cap", "1", "btrfs", "dd_read"): "240", ("cap", "1", "fio", "raw_read"): "221",
               ("cap", "1", "cached", "dd_read"): "220", ("ram", n, "cached", "rss"): "47.84"}
        rep = self.report(res)
        table = rep.table()
        self.assertEqual(len(table), 2 + 14 + 3 * 5)
        for line in table + rep.ceiling():
            self.assertTrue(line.startswith("| ") and line.endswith(" |"), line)
        self.assertTrue(all(l.count(" | ") == 12 for l in table))
        self.assertTrue(all(l.count(" | ") == 14 for l in rep.ceiling()))
        row = [l for l in table if l.startswith("| 200 MiB/s x1 | dd read")][0]
        # btrfs above 1.10 x the cap is marked; ratios against cap and fio raw.
        self.assertEqual(row, "| 200 MiB/s x1 | dd read, bs=1M, cold cache | MB/s | 221 | 240* | 220 | - | "
                              "0.92 | - | 1.00 | - | 1.05 | - |")
        rss = [l for l in table if "RAM x4 | nvmefs daemon peak RSS" in l][0]
        self.assertIn("| MiB | - | - | 47.8 | - |", rss)
        self.assertEqual(rep.plot_data()[1].split()[:4], ["1", "209.7152", "-", "221"])

    def test_load_results(self):
        with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
            f.write("ram\t4\tfio\traw_write\t4121.7\nram\t4\tcached\trss\tERR\nbroken line\n")
        try:
            self.assertEqual(bench.load_results(f.name), {("ram", "4", "fio", "raw_write"): "4121.7",
                                                          ("ram", "4", "cached", "rss"): "ERR"})
        finally:
            os.unlink(f.name)

    def test_native_figures(self):
        line = json.dumps({"op": "write", "bytes": 4 << 30, "seconds": 1.25, "gbps": 3.436,
                           "daemon_copied_bytes": 0, "threads": 2})
        self.assertEqual(bench.native_figures(line, 4 << 30), {"mbps": "3436.0", "copied": 0})
        self.assertIsNone(bench.native_figures(line, 2 << 30), "another size")
        no_stats = json.dumps({"bytes": 4 << 30, "seconds": 1.25})
        for bad in (no_stats, "nvmefs-bench: failed", json.dumps({"bytes": 4 << 30, "seconds": 0,
                                                                  "daemon_copied_bytes": 0})):
            self.assertIsNone(bench.native_figures(bad, 4 << 30), bad)

    def test_best_figure(self):
        self.assertEqual(bench.best_figure({"a": "900", "b": "ERR", "c": "1200.5", "d": ""}), ("c", "1200.5"))
        self.assertIsNone(bench.best_figure({"a": "ERR", "b": ""}))

    def test_plans(self):
        full = bench.ram_plan(False)
        rounds = ["fio-again", "native", "fio-again.2", "native.2", "fio-again.3", "native.3"]
        self.assertEqual(bench.NATIVE_ROUNDS_RAM, 3)
        self.assertEqual([fs for fs, _ in full], ["btrfs", "cached", "direct"] + rounds
                         + ["null-cached", "null-direct"])
        self.assertEqual(dict(full)["native"], ["native"])
        self.assertEqual(dict(full)["native.3"], ["native"])
        self.assertEqual(bench.ram_plan(True), [("cached", ["dd", "fioseq"]), ("direct", ["dd", "fioseq"])]
                         + [(fs, ["native"] if fs.startswith("native") else []) for fs in rounds])
        self.assertEqual([bench.base_fs(fs) for fs in rounds], ["fio-again", "native"] * 3)
        self.assertEqual([fs for fs, _ in bench.capped_plan(False)], ["btrfs", "cached", "direct", "native"])
        self.assertEqual(bench.capped_plan(True), [("native", ["native"])])
        for fs, wls in full + bench.capped_plan(False):
            self.assertTrue(all(w in bench.WL_ROWS for w in wls), fs)

    def test_median(self):
        self.assertEqual(bench.median([3.0]), 3.0)
        self.assertEqual(bench.median([0.9, 0.7, 0.8]), 0.8)
        self.assertEqual(bench.median([4.0, 1.0, 2.0, 3.0]), 2.5)

    def test_native_rounds(self):
        """In RAM each round's client is held to the fio raw pass just
        before it; the ratio judged is the median of the rounds' ratios,
        not the ratio of the medians."""
        res = self.native_res("3400", "4000")
        rounds = {1: ("4000", "9000", "2000"), 2: ("4000", "5000", "1000"), 3: ("4000", "4600", "5000")}
        for k, (raw_w, raw_r, read) in rounds.items():
            fio = "fio-again" if k == 1 else "fio-again.%d" % k
            nat = "native" if k == 1 else "native.%d" % k
            res[("ram", "4", fio, "raw_write")] = raw_w
            res[("ram", "4", fio, "raw_read")] = raw_r
            res[("ram", "4", nat, "native_write")] = "3600"
            res[("ram", "4", nat, "native_read")] = read
            res[("ram", "4", nat, "native_copied")] = "0"
        rep = bench.Report(res, bench.Sizes(False), "64M", True, False, native=True, issue5=False)
        # Read ratios 0.22, 0.20, 1.09: median 0.22; median native 2000, median fio raw 5000.
        self.assertEqual(rep.native_figure("ram", 4, "read"), ("2000.0000", "5000.0000", "0.22"))
        out = rep.targets()
        self.assertIn("FAIL RAM x4 native read: 2000 MB/s (median of 3 rounds) = 0.22 x fio raw (5000, "
                      "median of each round's ratio to the pass before it); target >= 0.85", out)
        self.assertIn("PASS RAM x4 native write: 3600 MB/s (median of 3 rounds) = 0.90 x fio raw (4000, "
                      "median of each round's ratio to the pass before it); target >= 0.85", out)
        self.assertEqual(rep.native_round_lines()[1], "- RAM x4 native read, round by round (native / fio raw "
                         "MB/s = ratio): 2000 / 9000 = 0.22; 1000 / 5000 = 0.20; 5000 / 4600 = 1.09")
        self.assertIn("PASS RAM x4 native: the daemon copied 0 bytes for aligned native I/O; target 0", out)
        # A copy in any round counts; a round without a figure fails the ratio.
        res[("ram", "4", "native.2", "native_copied")] = "4096"
        res[("ram", "4", "native.3", "native_read")] = "ERR"
        out = bench.Report(res, bench.Sizes(False), "64M", True, False, native=True, issue5=False).targets()
        self.assertIn("FAIL RAM x4 native: the daemon copied 4096 bytes for aligned native I/O; target 0", out)
        self.assertTrue(any(l.startswith("FAIL RAM x4 native read: ") and "no figure" in l for l in out), out)

    def native_res(self, write, read):
        n = str(bench.RAM_NDEV)
        res = {("ram", n, "fio", "raw_write"): "4000", ("ram", n, "fio", "raw_read"): "5000",
               ("ram", n, "native", "native_write"): write, ("ram", n, "native", "native_read"): read,
               ("ram", n, "native", "native_copied"): "0"}
        for mode, f in (("cached", 0.5), ("direct", 0.6)):
            for w, g in (("dd", 1.0), ("fio", 1.2)):
                res[("ram", n, mode, "%s_write" % w)] = "%.1f" % (4000 * f * g)
                res[("ram", n, mode, "%s_read" % w)] = "%.1f" % (5000 * f * g)
        for k, c in ((1, 1.0), (2, 1.98), (4, 3.7)):
            res[("cap", str(k), "native", "native_write")] = "%.1f" % (bench.cap_mbps(1) * c)
            res[("cap", str(k), "native", "native_read")] = "%.1f" % (bench.cap_mbps(1) * c)
            res[("cap", str(k), "native", "native_copied")] = "0" if k < 4 else "4096"
        return res

    def test_native_targets(self):
        res = self.native_res("3400", "ERR")
        rep = bench.Report(res, bench.Sizes(False), "64M", True, True, native=True, issue5=False)
        out = rep.targets()
        # RAM: 3 per direction; capped: 3 caps + 2 linearity per direction; copies: 4 setups.
        self.assertEqual(len(out), 2 * 3 + 2 * 5 + 4)
        self.assertIn("PASS RAM x4 native write: 3400 MB/s = 0.85 x fio raw (4000); target >= 0.85", out)
        self.assertIn("PASS RAM x4 native write: 3400 MB/s = 1.18 x the best figure of the mount "
                      "(direct fio_write, 2880 MB/s); target > 1.0 (dd and fio, cached and direct)", out)
        self.assertIn("FAIL RAM x4 native write: 3400 MB/s = 1.42 x the mount's dd (direct dd_write, 2400 MB/s); "
                      "target >= 1.5", out)
        self.assertIn("FAIL RAM x4 native read: ERR MB/s: no figure (fio raw 5000); target >= 0.85 x fio raw", out)
        self.assertIn("FAIL RAM x4 native read: ERR MB/s: no native figure; target > every figure of the mount", out)
        self.assertIn("PASS capped x2 native read: 415 MB/s = 0.990 x cap (419 MB/s); target >= 0.97", out)
        self.assertIn("FAIL capped x4 native write: 776 MB/s = 0.925 x cap (839 MB/s); target >= 0.97", out)
        self.assertIn("FAIL capped x1->x4 native write: 210 -> 776 MB/s = 0.925 x linear; target 0.95..1.05", out)
        self.assertIn("PASS RAM x4 native: the daemon copied 0 bytes for aligned native I/O; target 0", out)
        self.assertIn("FAIL 200 MiB/s x4 native: the daemon copied 4096 bytes for aligned native I/O; target 0", out)
        self.assertFalse(any("dd_write: " in l and "btrfs" in l for l in out), "no issue-5 target")
        # fio raw run again just before the client is the one it is held to.
        res[("ram", "4", "fio-again", "raw_write")] = "3700"
        out = bench.Report(res, bench.Sizes(False), "64M", True, False, native=True, issue5=False).targets()
        self.assertIn("PASS RAM x4 native write: 3400 MB/s = 0.92 x fio raw (3700); target >= 0.85", out)
        self.assertIn("FAIL RAM x4 native read: ERR MB/s: no figure (fio raw 5000); target >= 0.85 x fio raw", out)
        # A mount figure missing: "above every figure" cannot be said.
        del res[("ram", "4", "cached", "dd_write")]
        out = bench.Report(res, bench.Sizes(False), "64M", True, False, native=True, issue5=False).targets()
        self.assertIn("FAIL RAM x4 native write: 3400 MB/s: no figure of cached dd_write; "
                      "target > every figure of the mount", out)

    def test_native_table(self):
        rep = bench.Report(self.native_res("3400", "5100"), bench.Sizes(False), "64M", True, True,
                           native=True, issue5=False)
        t = rep.native_table()
        self.assertEqual(len(t), 2 + 2 * 4)
        self.assertTrue(all(l.count(" | ") == 9 for l in t))
        self.assertEqual(t[2], "| RAM x4 | seq write | 3400 | 4000 | 0.85 | direct fio_write 2880 | 1.18 | 1.42 | - | 0 |")
        self.assertEqual(t[3], "| RAM x4 | seq read | 5100 | 5000 | 1.02 | direct fio_read 3600 | 1.42 | 1.70 | - | 0 |")
        self.assertEqual(t[-1], "| 200 MiB/s x4 | seq read | 776 | - | - | - | - | - | 0.925 | 4096 |")
        # --native-only: the main table keeps the sequential rows only.
        self.assertEqual(len(rep.table()), 2 + 4 + 3 * 4)

    def test_transport_helpers(self):
        self.assertEqual([fs for fs, _ in bench.transport_plan(True)],
                         ["btrfs", "direct", "direct+uring", "cached", "cached+uring",
                          "null-direct", "null-direct+uring", "null-cached", "null-cached+uring"])
        self.assertEqual([fs for fs, _ in bench.transport_plan(False)],
                         ["btrfs", "direct", "cached", "null-direct", "null-cached"])
        plan = dict(bench.transport_plan(True))
        # fuse_null: no .nvmefs/config, and no data to read back: its small files
        # are made, stat'ed and removed.
        self.assertEqual(plan["null-cached+uring"], ["lookup", "dd", "fioseq", "randread", "small_null"])
        self.assertEqual(bench.WL_ROWS["small_null"], ["small_create", "small_stat", "small_delete"])
        self.assertEqual(plan["btrfs"], ["lookup", "dd", "fioseq", "randread", "small", "torch"])
        self.assertEqual(plan["cached+uring"], ["transport", "lookup", "dd", "fioseq", "randread", "small",
                                                "torch"])
        # The default mount alone also runs the small files through the preload door,
        # and fio's reads through its read door.
        self.assertEqual(plan["direct"], ["transport", "lookup", "dd", "fioseq", "randread", "small",
                                          "torch", "small_preload", "door"])
        self.assertNotIn("small_preload", plan["direct+uring"])
        self.assertNotIn("door", plan["direct+uring"])
        for fs, wls in bench.transport_plan(True):
            self.assertTrue(all(w in bench.WL_ROWS for w in wls), fs)
        for fs, want in (("direct", ("direct", False)), ("cached+uring", ("cached", True)),
                         ("direct+uring", ("direct", True)), ("native", ("direct", False)),
                         ("native.3", ("direct", False)), ("btrfs", None), ("null-cached", None),
                         ("fio-again.2", None), ("direct+bogus", None), ("native+uring", None),
                         ("null-direct+uring", None)):
            self.assertEqual(bench.nvmefs_mode(fs), want, fs)
        self.assertEqual(bench.nvmefs_opts("direct", "64M"), "mode=direct,pool=64M,nouring")
        self.assertEqual(bench.nvmefs_opts("cached+uring", "1G"), "mode=cached,pool=1G,uring")
        self.assertEqual(bench.nvmefs_opts("native.2", "64M"), "mode=direct,pool=64M,nouring")
        self.assertEqual([fs for fs in bench.TR_FS + bench.TR_NULL_FS + ("native", "native.2", "btrfs")
                          if bench.rss_fs(fs)],
                         ["direct", "direct+uring", "cached", "cached+uring"])
        self.assertEqual(bench.config_transport("mode = direct\ntransport = io_uring\nuring_queues = 2\n"),
                         "io_uring")
        self.assertEqual(bench.config_transport("transport = /dev/fuse\n"), "/dev/fuse")
        self.assertIsNone(bench.config_transport("mode = direct\n"))
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(bench.cpu_idle(d), "")
            os.makedirs(d + "/devices/system/cpu/cpuidle")
            with open(d + "/devices/system/cpu/cpuidle/current_driver", "w") as f:
                f.write("haltpoll\n")
            self.assertEqual(bench.cpu_idle(d), "cpuidle haltpoll")
            os.makedirs(d + "/module/haltpoll/parameters")
            with open(d + "/module/haltpoll/parameters/guest_halt_poll_ns", "w") as f:
                f.write("0\n")
            self.assertEqual(bench.cpu_idle(d), "cpuidle haltpoll, guest_halt_poll_ns 0")
            with open(d + "/devices/system/cpu/cpuidle/current_driver", "w") as f:
                f.write("intel_idle\n")
            self.assertEqual(bench.cpu_idle(d), "cpuidle intel_idle")
        self.assertEqual(bench.lookup_rate(json.dumps({"lookups": 50000, "seconds": 1.25})), "40000")
        for bad in ("", "nothing", json.dumps({"lookups": 0, "seconds": 1.0}),
                    json.dumps({"lookups": 10, "seconds": 0}), json.dumps({"seconds": 1.0})):
            self.assertIsNone(bench.lookup_rate(bad), bad)
        rand = json.dumps({"jobs": [{"jobname": "rand", "error": 0,
                                     "read": {"iops": 21345.6, "total_ios": 106728, "io_bytes": 437157888}}]})
        self.assertEqual(bench.fio_iops("note: x\n" + rand, "read"), "21346")
        for bad in (fio_json("read", 4096, 1000), fio_json("read", 4096, 1000, error=5),
                    json.dumps({"jobs": [{"error": 0, "read": {"iops": 0, "total_ios": 0}}]}), "nothing"):
            with self.assertRaises(emu.ParseError):
                bench.fio_iops(bad, "read")
        self.assertEqual(bench.tr_wins([("a", 1.1), ("b", 0.9), ("c", 1.0), ("d", None), ("e", None)]),
                         (["a 1.10", "c 1.00"], ["b 0.90"], ["d", "e"]))

    def test_enable_uring(self):
        """Bench.uring_enable sets the switch to Y and remembers what it
        found once; uring_restore puts that back (on a file standing in for
        /sys/module/fuse/parameters/enable_uring)."""
        class Stub:
            uring_found = None
            errors = []
            lines = []

            def error(self, msg):
                self.errors.append(msg)

        stub = Stub()
        stub.runner = type("R", (), {"log_line": lambda _self, line: stub.lines.append(line)})()
        saved_path, saved_log = bench.ENABLE_URING, bench.log
        with tempfile.TemporaryDirectory() as d:
            try:
                bench.ENABLE_URING = os.path.join(d, "enable_uring")
                bench.log = lambda msg: None
                with open(bench.ENABLE_URING, "w") as f:
                    f.write("N\n")
                self.assertTrue(bench.Bench.uring_enable(stub))
                self.assertTrue(bench.Bench.uring_enable(stub))  # a second io_uring mount
                self.assertEqual(open(bench.ENABLE_URING).read(), "Y\n")
                self.assertEqual(stub.uring_found, "N")
                bench.Bench.uring_restore(stub)
                self.assertEqual(open(bench.ENABLE_URING).read(), "N\n")
                self.assertIsNone(stub.uring_found)
                bench.Bench.uring_restore(stub)  # cleanup after a normal end: nothing to do
                self.assertEqual(open(bench.ENABLE_URING).read(), "N\n")
                # Found Y: left alone, nothing written.
                with open(bench.ENABLE_URING, "w") as f:
                    f.write("Y\n")
                n = len(stub.lines)
                self.assertTrue(bench.Bench.uring_enable(stub))
                bench.Bench.uring_restore(stub)
                self.assertEqual((open(bench.ENABLE_URING).read(), len(stub.lines)), ("Y\n", n))
                # No switch: an error, no value remembered.
                os.unlink(bench.ENABLE_URING)
                self.assertFalse(bench.Bench.uring_enable(stub))
                self.assertEqual(len(stub.errors), 1)
                self.assertIsNone(stub.uring_found)
            finally:
                bench.ENABLE_URING, bench.log = saved_path, saved_log

    def transport_res(self):
        n = str(bench.RAM_NDEV)
        res = {("transport", n, "fio", "raw_write"): "4000", ("transport", n, "fio", "raw_read"): "5000"}
        figs = {"lookup_rate": 50000, "dd_write": 1000, "dd_read": 1200, "fio_write": 900, "fio_read": 1000, "rand4k_read": 20000,
                "small_create": 20000, "small_stat": 100000, "small_read": 20000, "small_reread": 18000,
                "small_delete": 30000, "small_total": 5000, "torch_save": 1.0, "torch_load": 1.5,
                "fio_write_cpu": 300, "fio_read_cpu": 250}
        for fs, f in (("btrfs", 1.0), ("direct", 0.5), ("direct+uring", 0.8), ("cached", 0.4),
                      ("cached+uring", 0.35)):
            for row, v in figs.items():
                res[("transport", n, fs, row)] = "%.3f" % (v * f) if row.startswith("torch") else "%.1f" % (v * f)
        for fs, f in (("null-direct", 2.0), ("null-direct+uring", 2.5), ("null-cached", 1.6),
                      ("null-cached+uring", 1.2)):
            for row in bench.WL_ROWS_NULL:
                res[("transport", n, fs, row)] = "%.1f" % (figs[row] * f)
        res[("transport", n, "direct", "fio_read_cpu")] = "400.0"  # 1.6 x btrfs's 250
        res[("transport", n, "direct", "small_preload_create")] = "16000.0"
        res[("transport", n, "direct", "small_preload_read")] = "9000.0"
        res[("transport", n, "direct", "door_fio_read")] = "1100.0"  # 1.10 x btrfs's 1000
        res[("transport", n, "direct", "door_fio_read_cpu")] = "200.0"
        res[("transport", n, "direct", "door_rand4k_read")] = "14000.0"  # 1.40 x direct's 10000
        for fs in bench.TR_FS:
            if fs != "btrfs":
                res[("transport", n, fs, "rss")] = "80.5"
                res[("transport", n, fs, "transport")] = "io_uring" if "+" in fs else "/dev/fuse"
        return res

    def test_transport_report(self):
        res = self.transport_res()
        rep = bench.TrReport(res, bench.Sizes(True), "64M", True)
        t = rep.table()
        self.assertEqual(len(t), 2 + 22)
        reread = [l for l in t if "read again in a shuffled order" in l]
        self.assertEqual(len(reread), 1, t)
        self.assertEqual(reread[0].split(" | ")[1:4], ["files/s", "-", "18000"])
        self.assertTrue(all(l.count(" | ") == 13 for l in t), t)
        self.assertEqual(t[2].split(" | ")[1:4], ["lookups/s", "-", "50000"])
        self.assertEqual(t[6], "| fio seq read of that file, 1 MiB, libaio QD32 O_DIRECT, cold cache | MB/s | 5000 "
                         "| 1000 | 500 | 800 | 400 | 350 | 1.60 | 0.88 | 0.50 | 0.80 | 0.40 | 0.35 |")
        self.assertEqual(t[7], "| CPU time of the fio write, all CPUs busy (/proc/stat), per GB | ms/GB | - "
                         "| 300 | 150 | 240 | 120 | 105 | 1.60 | 0.88 | 0.50 | 0.80 | 0.40 | 0.35 |")
        self.assertEqual(t[9].split(" | ")[1:3], ["IOPS", "-"])
        self.assertTrue(t[-1].startswith("| nvmefs daemon peak RSS (VmHWM), pool=64M | MiB | - | - | 80.5 |"), t[-1])
        c = rep.ceiling()
        # lookup, dd x 2, fio x 2 and their CPU x 2, random 4 KiB, small files' create, stat
        # and unlink: 11 rows; 2 + 4 nulls + 2 ratios + 4 nvmefs / null.
        self.assertEqual(len(c), 2 + 11)
        create = [l for l in c if "create+write" in l]
        self.assertEqual(len(create), 1, c)
        self.assertEqual(create[0].split(" | ")[1:], ["files/s", "40000", "50000", "32000", "24000", "1.25",
                                                     "0.75", "0.25", "0.32", "0.25", "0.29 |"], create[0])
        self.assertTrue(all(l.count(" | ") == 11 for l in c), c)
        self.assertEqual(c[6], "| fio seq read of that file, 1 MiB, libaio QD32 O_DIRECT, cold cache | MB/s "
                         "| 2000 | 2500 | 1600 | 1200 | 1.25 | 0.75 | 0.25 | 0.32 | 0.25 | 0.29 |")
        self.assertEqual(rep.transports(), "direct: /dev/fuse; direct io_uring: io_uring; cached: /dev/fuse; "
                         "cached io_uring: io_uring")
        # CPU per GB: lower is better, so it is no row of the wins; the notes compare it.
        self.assertEqual(rep.cpu_notes()[0], "- direct: 400 ms of CPU per GB read, 1.60 x btrfs raid0's 250 "
                         "(so at most 0.62 x its throughput when both are bound by the CPUs)")
        # and the read door's, beside btrfs's.
        self.assertEqual(len(rep.cpu_notes()), 5)
        self.assertEqual(rep.cpu_notes()[-1], "- direct through the read door: 200 ms per GB, 0.80 x btrfs "
                         "raid0's (no FUSE copy)")
        self.assertEqual(bench.TrReport({}, bench.Sizes(True), "64M", True).cpu_notes(),
                         ["- no CPU figures (fio did not run, or /proc/stat was unreadable)"])
        self.assertEqual(bench.cpu_per_gb(10.0, 12.5, 5 * 10**9), 500.0)
        self.assertIsNone(bench.cpu_per_gb(None, 12.5, 10**9))
        self.assertGreater(bench.cpu_busy_seconds(), 0)
        w = rep.wins()
        self.assertFalse(any("_cpu" in l for l in w), w)
        self.assertTrue(w[0].startswith("- direct: io_uring faster or equal in lookup_rate 1.60, dd_write 1.60, "),
                        w[0])
        self.assertIn("/dev/fuse faster in nothing", w[0])
        # The preload door runs on direct alone: not a missing figure of io_uring's.
        self.assertFalse(any("small_preload" in l or "door_" in l for l in w), w)
        self.assertIn("- cached: io_uring faster or equal in nothing; /dev/fuse faster in lookup_rate 0.88, "
                      "dd_write 0.88", w[1])
        out = rep.targets()
        # 3 per nvmefs mount, 5 per mode, 2 for the preload door, 2 for its read door.
        self.assertEqual(len(out), 4 * 3 + 2 * 5 + 2 + 2)
        self.assertIn("PASS transport direct read door fio 1 MiB QD32 O_DIRECT read: 1100 MB/s = 1.10 x "
                      "btrfs raid0 (1000); target >= 1.0", out)
        self.assertIn("FAIL transport direct read door fio 4 KiB random O_DIRECT read QD32: 14000 IOPS = "
                      "1.40 x /dev/fuse direct (10000); target >= 1.5", out)
        door = [l for l in t if l.startswith("| fio seq read as above, through the read door")]
        self.assertEqual(len(door), 1)
        # btrfs's own fio read beside it, and the ratio to it.
        self.assertEqual(door[0].split(" | ")[2:5], ["5000", "1000", "1100"], door[0])
        self.assertTrue(door[0].endswith("| - | - | 1.10 | - | - | - |"), door[0])
        self.assertIn("PASS transport direct preload door small files create+write (+syncfs): 16000 files/s = "
                      "0.80 x btrfs raid0 (20000); target >= 0.5", out)
        self.assertIn("FAIL transport direct preload door small files read, cold cache: 9000 files/s = 0.45 x "
                      "btrfs raid0 (20000); target >= 0.7", out)
        pre = [l for l in t if l.startswith("| the same, the creates through the preload door")]
        self.assertEqual(len(pre), 1)
        self.assertEqual(pre[0].split(" | ")[3:6], ["20000", "16000", "-"], pre[0])
        self.assertTrue(pre[0].endswith("| - | - | 0.80 | - | - | - |"), pre[0])
        # The create's line also gives fuse_null's rate on the same mode and transport.
        self.assertIn("PASS transport direct small files create+write (+syncfs): 10000 files/s = 0.50 x "
                      "btrfs raid0 (20000); target >= 0.5; fuse_null there: 40000 files/s = 2.00 x btrfs raid0",
                      out)
        self.assertIn("FAIL transport cached io_uring small files create+write (+syncfs): 7000 files/s = 0.35 x "
                      "btrfs raid0 (20000); target >= 0.5; fuse_null there: 24000 files/s = 1.20 x btrfs raid0",
                      out)
        # and no other line does.
        self.assertEqual(sum("fuse_null there" in l for l in out), 4, out)
        self.assertIn("FAIL transport direct small files read, cold cache: 10000 files/s = 0.50 x "
                      "btrfs raid0 (20000); target >= 0.7", out)
        self.assertIn("PASS transport direct io_uring small files read, cold cache: 16000 files/s = 0.80 x "
                      "btrfs raid0 (20000); target >= 0.7", out)
        self.assertIn("PASS transport direct io_uring fio 4 KiB random O_DIRECT read QD32: 16000 IOPS = 1.60 x "
                      "/dev/fuse direct (10000); target >= 1.5", out)
        self.assertIn("FAIL transport cached io_uring torch.load: 0.53 GB/s = 0.88 x /dev/fuse cached (0.60); "
                      "target >= 1.0", out)
        self.assertEqual(rep.nfail, sum(l.startswith("FAIL ") for l in out))
        # No io_uring mounts (a kernel without the switch): their targets fail as not run.
        for k in [k for k in res if k[2].endswith("+uring")]:
            del res[k]
        rep = bench.TrReport(res, bench.Sizes(True), "64M", False)
        out = rep.targets()
        self.assertIn("FAIL transport cached io_uring dd write: no figure (not run, /dev/fuse cached 400.0); "
                      "target >= 1.0 x /dev/fuse cached", out)
        self.assertIn("cached io_uring: not run", rep.transports())
        self.assertTrue(rep.table()[3].endswith("| 1000 | 500 | - | 400 | - | - | - | 0.50 | - | 0.40 | - |"),
                        rep.table()[3])

    def test_transport_rounds(self):
        """The rounds: the plan runs TR_ROUND_WL again on every file system,
        round after round; the report gives the medians, and judges the
        median of each round's own ratios."""
        plan = bench.transport_rounds_plan(True)
        self.assertEqual(plan[:len(bench.transport_plan(True))],
                         [("transport", fs, wl) for fs, wl in bench.transport_plan(True)])
        extra = plan[len(bench.transport_plan(True)):]
        self.assertEqual(len(extra), (bench.TR_ROUNDS - 1) * len(bench.TR_FS))
        self.assertEqual(extra[0], ("transport.r2", "btrfs", bench.TR_ROUND_WL))
        self.assertEqual([fs for _s, fs, _w in extra[:5]], list(bench.TR_FS))
        self.assertEqual(extra[-1][:2], ("transport.r%d" % bench.TR_ROUNDS, "cached+uring"))
        self.assertFalse(any(fs.endswith("+uring") for _s, fs, _w in bench.transport_rounds_plan(False)))
        self.assertEqual(bench.TR_ROUNDS, 3)
        res = self.transport_res()
        n = str(bench.RAM_NDEV)
        # Round 1 (transport_res): direct 10000, direct io_uring 16000 files/s (1.60).
        # Round 2: a slow spell on io_uring (0.50); round 3: 1.10. Median of the
        # ratios 1.10, of the figures 16000 / 10000.
        for r, d, u in ((2, 20000, 10000), (3, 10000, 11000)):
            res[("transport.r%d" % r, n, "direct", "small_create")] = str(d)
            res[("transport.r%d" % r, n, "direct+uring", "small_create")] = str(u)
            res[("transport.r%d" % r, n, "btrfs", "small_create")] = "20000"
        rep = bench.TrReport(res, bench.Sizes(True), "64M", True)
        self.assertEqual(rep.rounds("direct+uring", "small_create"), [16000.0, 10000.0, 11000.0])
        self.assertEqual(rep.rounds("direct", "fio_read"), [500.0, None, None])  # rounds 2, 3 not run
        self.assertEqual(rep.get("direct", "fio_read"), "500.0")
        self.assertEqual(rep.rounds("direct", "small_preload_create"), [16000.0])  # the door: once
        self.assertEqual(rep.get("direct+uring", "small_create"), "11000.0000")
        self.assertEqual(rep.get("cached", "small_create"), "8000.0")  # one round: as recorded
        self.assertAlmostEqual(rep.ratio("direct+uring", "small_create", "direct"), 1.1)
        create = [l for l in rep.table() if "create+write" in l and "preload" not in l][0]
        cells = create.split(" | ")
        self.assertEqual(cells[3:6], ["20000", "10000", "11000"], create)
        self.assertEqual(cells[8], "1.10", create)  # direct: io_uring / /dev/fuse
        self.assertEqual(cells[10:12], ["0.50", "0.55"], create)  # x btrfs: medians of 0.5, 1.0, 0.5 / 0.8, 0.5, 0.55
        out = rep.targets()
        self.assertIn("PASS transport direct io_uring small files create+write (+syncfs): 11000 files/s = 0.55 x "
                      "btrfs raid0 (20000), medians of 3 rounds (their ratios' median); target >= 0.5; "
                      "fuse_null there: 50000 files/s = 2.50 x btrfs raid0", out)
        w = rep.wins()
        self.assertIn("small_create 1.10", w[0].split("; /dev/fuse faster")[0])
        rl = rep.round_lines()
        self.assertIn("- small_create, direct io_uring: 16000 / 10000 / 11000 files/s", rl)
        self.assertEqual(len(rl), 3)  # btrfs, direct, direct io_uring
        # A round that failed (ERR) counts for nothing.
        res[("transport.r3", n, "direct+uring", "small_create")] = "ERR"
        rep = bench.TrReport(res, bench.Sizes(True), "64M", True)
        self.assertEqual(rep.rounds("direct+uring", "small_create"), [16000.0, 10000.0, None])
        self.assertAlmostEqual(rep.ratio("direct+uring", "small_create", "direct"), (1.6 + 0.5) / 2)
        self.assertIn("- small_create, direct io_uring: 16000 / 10000 / - files/s", rep.round_lines())
        self.assertTrue(any("medians of 2 rounds" in l for l in rep.targets()))
        # The first pass failed, a later round did not: that round's figure.
        res[("transport", n, "cached", "dd_read")] = "ERR"
        res[("transport.r2", n, "cached", "dd_read")] = "1234"
        rep = bench.TrReport(res, bench.Sizes(True), "64M", True)
        self.assertEqual(rep.get("cached", "dd_read"), "1234.0000")
        # The read door runs once: its targets hold it to the first pass's
        # figures, as its table row does, not to btrfs's median of rounds.
        for r, v in ((2, "2000"), (3, "2000")):
            res[("transport.r%d" % r, n, "btrfs", "fio_read")] = v
        rep = bench.TrReport(res, bench.Sizes(True), "64M", True)
        self.assertEqual(rep.get("btrfs", "fio_read"), "2000.0000")
        self.assertIn("PASS transport direct read door fio 1 MiB QD32 O_DIRECT read: 1100 MB/s = 1.10 x "
                      "btrfs raid0 (1000); target >= 1.0", rep.targets())
        door = [l for l in rep.table() if l.startswith("| fio seq read as above, through the read door")][0]
        self.assertTrue(door.endswith("| - | - | 1.10 | - | - | - |"), door)
        # One round with both figures, not the first: that round's own two.
        res[("transport", n, "direct+uring", "dd_write")] = "ERR"
        res[("transport.r2", n, "direct+uring", "dd_write")] = "900"
        res[("transport.r2", n, "direct", "dd_write")] = "600"
        rep = bench.TrReport(res, bench.Sizes(True), "64M", True)
        self.assertIn("PASS transport direct io_uring dd write: 900 MB/s = 1.50 x /dev/fuse direct (600); "
                      "target >= 1.0", rep.targets())

    def test_daemon_own_session(self):
        """The bench starts its FUSE daemons in a session of their own (as a
        mounted daemon runs: its own autogroup), and emu.Daemon does that."""
        calls = []

        class Runner:
            def log_line(self, text):
                pass

        stub = bench.Bench.__new__(bench.Bench)
        stub.runner, stub.mnt, stub.cur_fs, stub.daemon = Runner(), "/nonexistent", None, None
        saved = bench.emu.start_daemon
        try:
            bench.emu.start_daemon = lambda argv, lg, mnt, **kw: (calls.append(kw), ("daemon", None))[1]
            self.assertTrue(stub.start_daemon("direct", "/dev/null", ["nvmefs"]))
        finally:
            bench.emu.start_daemon = saved
        self.assertEqual(calls, [{"new_session": True}])
        with tempfile.TemporaryDirectory() as d:
            dm = emu.Daemon(["sleep", "30"], os.path.join(d, "log"), True)
            try:
                with open("/proc/%d/stat" % dm.pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                self.assertEqual(int(fields[3]), dm.pid)  # its session: its own
                self.assertNotEqual(int(fields[3]), os.getsid(0))
            finally:
                dm.kill()

    def test_small_py_phases(self):
        """small.py with PHASES runs those alone (fuse_null's pass: no read,
        so no drop_caches and no root), and gives no total then."""
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "small.py")
            with open(script, "w") as f:
                f.write(bench.SMALL_PY)
            p = subprocess.run([sys.executable, script, d, "5", "4096", os.path.join(d, "warm"), "0",
                                "create,stat,delete"], capture_output=True, text=True, check=False)
            self.assertEqual(p.returncode, 0, p.stderr)
            t = json.loads(p.stdout.strip().splitlines()[-1])
            self.assertEqual(sorted(t), ["create", "delete", "files", "stat"])
            self.assertEqual(t["files"], 5)
            self.assertFalse(os.path.exists(os.path.join(d, "small")))
            self.assertEqual(sorted(bench.small_rates(json.dumps(t))), ["create", "delete", "stat"])
            # A phase it does not know: exit 1, still one JSON line, naming it.
            p = subprocess.run([sys.executable, script, d, "5", "4096", os.path.join(d, "warm"), "0",
                                "create,bogus"], capture_output=True, text=True, check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            t = json.loads(p.stdout.strip().splitlines()[-1])
            self.assertIn("unknown phase: bogus", t["error"])
            self.assertNotIn("create", t)

    def test_args(self):
        self.assertEqual(bench.parse_args(["--quick", "--only", "ram", "-o", "/x"]).only, "ram")
        self.assertEqual(bench.parse_args(["--only", "transport", "-o", "/x"]).only, "transport")
        with self.assertRaisesRegex(bench.BadArg, "--native-only does not go with --only transport"):
            bench.parse_args(["--only", "transport", "--native-only"])
        self.assertTrue(bench.parse_args(["--native-only", "-o", "/x"]).native_only)
        self.assertFalse(bench.parse_args(["-o", "/x"]).native_only)
        for argv, msg in ((["--only", "x"], "bad --only 'x'"), (["--pool", "1T"], "bad --pool '1T'"),
                          (["--bogus"], "unknown argument: '--bogus'"), (["-b"], "option -b needs an argument")):
            with self.assertRaisesRegex(bench.BadArg, msg):
                bench.parse_args(argv)


class Builds(unittest.TestCase):
    """scripts/bench_builds.py: the order, the summary, the options."""

    def test_round_order(self):
        self.assertEqual(bench_builds.round_order(1), ("old", "new"))
        self.assertEqual(bench_builds.round_order(2), ("new", "old"))
        self.assertEqual(bench_builds.round_order(3), ("old", "new"))

    def test_summary(self):
        rounds = [{"old": {"dd_write": 1000.0, "torch_save": 1.0}, "new": {"dd_write": 2000.0, "torch_save": 0.5}},
                  {"old": {"dd_write": 2000.0}, "new": {"dd_write": 2100.0, "torch_save": 2.0}},
                  {"old": {"dd_write": 500.0, "torch_save": 2.0}, "new": {"dd_write": 600.0, "torch_save": 3.0}}]
        out = bench_builds.summary(rounds)
        self.assertEqual(len(out), len(bench_builds.FIGURES))
        # Each build's median (1000, 2000) and the median of the rounds'
        # own ratios (2.00, 1.05, 1.20): 1.20, where the ratio of the
        # medians would say 2.00 and their mean 1.42.
        self.assertIn("old  1000.00  new  2000.00 MB/s  new/old 1.20 (rounds: 2.00 1.05 1.20)", out[0])
        # Only rounds where both builds have the figure count, in the
        # medians too (not round 2's new 2.0).
        self.assertIn("old     1.50  new     1.75 GB/s  new/old 1.00 (rounds: 0.50 1.50)", out[2])
        self.assertTrue(out[1].startswith("dd read") and out[1].endswith("no round with both figures"))

    def test_parse(self):
        script = os.path.join(testlib.SCRIPTS, "bench_builds.py")
        with tempfile.TemporaryDirectory() as d:
            for exe in ("mkfs.nvmefs", "nvmefs", "nvmefs-bench"):
                path = os.path.join(d, exe)
                with open(path, "w") as f:
                    f.write("#!/bin/sh\n")
                os.chmod(path, 0o755)
            a = bench_builds.parse([d, d, "--size", "512M", "-r", "3"])
            self.assertEqual((a.size, a.rounds, a.opts, a.torch_mib), (512 << 20, 3, "mode=direct", 1024))
            used = os.path.join(d, "used")
            os.mkdir(used)
            open(os.path.join(used, "commands.log"), "w").close()
            for argv, why in (([d, d, "--size", "3X"], "--size: not a size: '3X'"),
                              ([d, d, "--size", "1536K"], "--size 1536K: must be whole MiB, from 1 to 6144 MiB"),
                              ([d, d, "--size", "0"], "--size 0: must be whole MiB, from 1 to 6144 MiB"),
                              ([d, d, "--size", "7G"], "from 1 to 6144 MiB"),
                              ([d, d, "-r", "0"], "-r 0: must be at least 1"),
                              ([d, d, "--torch-mib", "8"], "--torch-mib 8: must be from 16 to 4096"),
                              ([d, d, "--torch-mib", "8192"], "--torch-mib 8192: must be from 16 to 4096"),
                              ([d, d, "-o", used], "-o %s: exists and is not an empty directory" % used),
                              ([os.path.join(d, "none"), d], "none: no mkfs.nvmefs there")):
                r = subprocess.run([sys.executable, script] + argv, capture_output=True, text=True,
                                   env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
                self.assertEqual(r.returncode, 2, argv)
                self.assertIn(why, r.stderr, argv)


class Tuner(unittest.TestCase):
    def args(self, *argv):
        return tune.parse_args(list(argv))

    def test_defaults(self):
        a = self.args("d0.img", "-y", "d1.img")
        self.assertEqual(a.devs, ["d0.img", "d1.img"])
        self.assertEqual((a.chunks, a.modes, a.qd, a.threads, a.secs, a.workload),
                         (["64K", "256K", "1M"], ["cached", "direct"], ["8", "32", "128"], ["4", "8", "16"], 5, "both"))
        self.assertTrue(a.yes)

    def test_forms(self):
        a = self.args("--chunks=1024K,64k,,1024K", "-opool=256M", "-t3", "--", "-odd-name.img")
        self.assertEqual(a.chunks, ["1M", "64K"])
        self.assertEqual((a.extra, a.secs, a.devs), ("pool=256M", 3, ["-odd-name.img"]))

    def test_refusals(self):
        cases = (([], "no devices given"), (["--qd", "0", "d"], "--qd: '0' is not a number from 1 to 4096"),
                 (["--chunks", "3K", "d"], "not a power of two from 4K to 1G"),
                 (["--chunks", "2G", "d"], "not a power of two"), (["--chunks", "x", "d"], "'x' is not a size"),
                 (["--modes", "fast", "d"], "'fast' is not cached or direct"),
                 (["--threads", "2000", "d"], "from 1 to 1024"), (["-t", "0", "d"], "-t: '0'"),
                 (["-w", "rw", "d"], "-w: 'rw'"), (["-s", "512K", "d"], "less than 1M"),
                 (["-o", "pool=1M,queue_depth=8", "d"], "-o queue_depth=8: swept"),
                 (["-o", "ro", "d"], "-o ro: the trials write"), (["--modes", ",", "d"], "empty list ','"),
                 (["--bogus", "d"], "unknown option '--bogus'"), (["--chunk", "1M", "d"], "unknown option '--chunk'"),
                 (["d", "-o"], "-o needs a value"), (["--bin", "/nonexistent", "d"], "not a directory"),
                 (["--json", "/nonexistent/x.json", "d"], "cannot write in /nonexistent"),
                 (["d"] * 33, "33 devices given"))
        for argv, msg in cases:
            with self.assertRaisesRegex(tune.BadArg, msg, msg=str(argv)):
                tune.parse_args(argv)

    def test_scores(self):
        self.assertEqual(tune.harmonic("849.5", "1109.2"), "962.1")
        trials = [{"score": s} for s in ("500.0", "-", "962.1", "962.1", "12.0")]
        self.assertEqual(tune.ranked(trials), [2, 3, 0, 4, 1])
        self.assertEqual([tune.fmt_eta(s) for s in (45, 89, 90, 3599, 3600, 3900)],
                         ["45s", "1m", "2m", "60m", "1h00m", "1h05m"])

    def test_check_devs(self):
        with tempfile.TemporaryDirectory() as d:
            img = os.path.join(d, "a.img")
            with open(img, "w") as f:
                f.truncate(1 << 20)
            os.symlink(img, os.path.join(d, "alias.img"))
            with self.assertRaisesRegex(tune.Die, "alias.img: given twice"):
                tune.check_devs([img, os.path.join(d, "alias.img")])
            with self.assertRaisesRegex(tune.Die, "missing.img: no such file"):
                tune.check_devs([img, os.path.join(d, "missing.img")])
            with self.assertRaisesRegex(tune.Die, "not a block device or a regular file"):
                tune.check_devs([d])
            self.assertEqual(tune.check_devs([img])[0], [os.path.realpath(img)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
