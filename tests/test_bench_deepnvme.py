#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Unit tests (no root, nothing mounted) of scripts/bench.py's --only
deepnvme section (issue 22): its options, the examples' JSON lines, the
handle's settings from an "aio" file, the table and the targets (fio raw's
MB/s turned into GB/s, ratios against the baseline and fio raw, a missing
figure failing its target).

usage: test_bench_deepnvme.py [unittest options]   (exit 0 pass, 1 fail)
"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))

import bench  # noqa: E402

N = str(bench.RAM_NDEV)


def results(**rows):
    """{(setup, n, fs, row): value} from fs__row=value keywords."""
    out = {}
    for key, v in rows.items():
        fs, row = key.split("__", 1)
        out[(bench.DN_SETUP, N, fs, row)] = v
    return out


class Options(unittest.TestCase):
    def test_only_and_config(self):
        with tempfile.TemporaryDirectory() as d:
            a = bench.parse_args(["--only", "deepnvme", "-o", d + "/out"])
            self.assertEqual((a.only, a.aio_config), ("deepnvme", None))
            cfg = os.path.join(d, "aio.json")
            with open(cfg, "w") as f:
                json.dump({"aio": {"block_size": 4 << 20, "queue_depth": 32, "num_threads": 2,
                                   "single_submit": False, "overlap_events": False}}, f)
            a = bench.parse_args(["--only", "deepnvme", "--aio-config", cfg, "-o", d + "/out"])
            self.assertEqual(a.aio_config, {"block_size": 4 << 20, "queue_depth": 32, "num_threads": 2})
            self.assertEqual(bench.dn_handle_args(a.aio_config),
                             ["--block_size", str(4 << 20), "--queue_depth", "32", "--threads", "2"])
            with self.assertRaisesRegex(bench.BadArg, "--aio-config goes with --only deepnvme"):
                bench.parse_args(["--aio-config", cfg])
            with open(cfg, "w") as f:
                json.dump({"aio": {"block_size": 1000, "queue_depth": 32, "num_threads": 2}}, f)
            with self.assertRaisesRegex(bench.BadArg, "out of range"):
                bench.parse_args(["--only", "deepnvme", "--aio-config", cfg])
            with open(cfg, "w") as f:
                f.write("{}")
            with self.assertRaisesRegex(bench.BadArg, "bad --aio-config"):
                bench.parse_args(["--only", "deepnvme", "--aio-config", cfg])
        with self.assertRaisesRegex(bench.BadArg, "want ram, capped, deepnvme or scale"):
            bench.parse_args(["--only", "dn"])

    def test_sizes(self):
        q, full = bench.DnSizes(True), bench.DnSizes(False)
        self.assertEqual((full.dev, full.tensor_mib, full.sd_mib, full.loops), (bench.GIB, 1024, 1024, 3))
        self.assertLess(q.tensor_mib * bench.MIB * 2, q.dev * bench.RAM_NDEV)


class JsonLine(unittest.TestCase):
    def test_last_object_line(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "log")
            with open(p, "w") as f:
                f.write('noise\n{"gbs": 1.0}\nmore\n{"gbs": 2.5, "x": [1]}\ntrailing text\n')
            self.assertEqual(bench.dn_json(p), {"gbs": 2.5, "x": [1]})
            with open(p, "w") as f:
                f.write("no json here\n")
            self.assertIsNone(bench.dn_json(p))
            with open(p, "w") as f:
                f.write("{broken\n")
            self.assertIsNone(bench.dn_json(p))
            self.assertIsNone(bench.dn_json(os.path.join(d, "missing")))


class Report(unittest.TestCase):
    def full(self):
        return results(fio__raw_write="4000", fio__raw_read="6000",
                       btrfs__py_store="1.000", direct__aio_store="3.500",
                       btrfs__py_load="1.000", direct__aio_load="4.500",
                       btrfs__sd_torch_save="0.500", direct__sd_aio_save="1.000",
                       btrfs__sd_torch_load="1.000", direct__sd_aio_load="1.100",
                       direct__sd_aio_zc_load="4.000",
                       btrfs__sd_torch_legacy_save="0.600", direct__sd_aio_legacy_save="2.400",
                       btrfs__sd_torch_legacy_load="0.800", direct__sd_aio_legacy_load="0.900",
                       direct__py_store="1.200", btrfs__aio_store="0.800")

    def test_targets(self):
        rep = bench.DnReport(self.full())
        t = rep.targets()
        self.assertEqual(len(t), len(bench.DN_TARGETS))
        by = {line.split()[2].rstrip(":"): line for line in t}
        # store: 3.5 x Python and 3.5 / 4.0 = 0.875 x fio raw: both met
        self.assertTrue(by["store"].startswith("PASS"), by["store"])
        self.assertIn("3.50 x py_store", by["store"])
        self.assertIn("0.88 x fio raw write (4.00 GB/s, medians of 3 rounds)", by["store"])
        # load: 4.5 x Python but 4.5 / 6.0 = 0.75 x fio raw: missed
        self.assertTrue(by["load"].startswith("FAIL"), by["load"])
        self.assertTrue(by["sd_save"].startswith("FAIL"))  # 2.0 x < 3
        self.assertTrue(by["sd_load_zero_copy"].startswith("PASS"))  # 4.0 x
        self.assertTrue(by["sd_save_legacy"].startswith("PASS"))  # 4.0 x
        # The copying loads (1.1 x, 1.125 x) are shown, not judged.
        self.assertNotIn("sd_load", by)
        self.assertNotIn("sd_load_legacy", by)
        self.assertEqual(rep.nfail, 2)

    def test_read_again(self):
        """The load is held to fio raw's read just before it (fio-again)
        when the run made one; the store to the setup's write pass."""
        res = self.full()
        res[(bench.DN_SETUP, N, "fio-again", "raw_read")] = "5000"
        rep = bench.DnReport(res)
        by = {line.split()[2].rstrip(":"): line for line in rep.targets()}
        # load: 4.5 / 5.0 = 0.90 x the pass just before it: met now
        self.assertTrue(by["load"].startswith("PASS"), by["load"])
        self.assertIn("0.90 x fio raw read (5.00 GB/s, medians of 3 rounds)", by["load"])
        self.assertIn("0.88 x fio raw write (4.00 GB/s, medians of 3 rounds)", by["store"])
        self.assertEqual(bench.DnReport(res).table()[3].strip("| ").split(" | ")[1], "5.00")
        self.assertEqual(bench.DN_RAW_LOOPS, 3)

    def test_rounds(self):
        """Several rounds: the handle's figure is the median, and its ratio
        the median of each round's ratio to the fio raw pass before it."""
        res = self.full()
        for k, (raw, d) in {1: ("8000", "4.0"), 2: ("4000", "3.0"), 3: ("5000", "4.5")}.items():
            res[(bench.DN_SETUP, N, bench.round_fs("fio-again", k), "raw_write")] = raw
            res[(bench.DN_SETUP, N, bench.round_fs("direct", k), "aio_store")] = d
        rep = bench.DnReport(res)
        d, raw, rr = rep.figure("write", "aio_store")
        # ratios 0.50, 0.75, 0.90: median 0.75; handle median 4.0; fio raw median 5.0
        self.assertEqual((d, raw, round(rr, 2)), ("4.0000", "5.0000", 0.75))
        by = {line.split()[2].rstrip(":"): line for line in rep.targets()}
        self.assertRegex(by["store"], r"^FAIL .* 0\.75 x fio raw write \(5\.00 GB/s, medians of 3 rounds\)")
        self.assertEqual(rep.round_lines()[0], "- store, round by round (handle / fio raw write GB/s = ratio): "
                         "4.00 / 8.00 = 0.50; 3.00 / 4.00 = 0.75; 4.50 / 5.00 = 0.90")
        # A round without its figure fails the target rather than being left out.
        res[(bench.DN_SETUP, N, "direct.3", "aio_store")] = "ERR"
        by = {line.split()[2].rstrip(":"): line for line in bench.DnReport(res).targets()}
        self.assertRegex(by["store"], r"^FAIL .*no figure \(handle ERR")

    def test_missing_figure(self):
        res = self.full()
        res[(bench.DN_SETUP, N, "direct", "aio_load")] = "ERR"
        del res[(bench.DN_SETUP, N, "fio", "raw_write")]
        rep = bench.DnReport(res)
        by = {line.split()[2].rstrip(":"): line for line in rep.targets()}
        self.assertRegex(by["load"], r"^FAIL .*no figure \(handle ERR")
        self.assertRegex(by["store"], r"^FAIL .*no figure .*fio raw \?")

    def test_table(self):
        rows = bench.DnReport(self.full()).table()
        self.assertEqual(len(rows), 2 + len(bench.DN_TARGETS) + len(bench.DN_EXTRA))
        store = rows[2].strip("| ").split(" | ")
        self.assertEqual(store[1:8], ["4.00", "1.00", "3.50", "3.50", "0.88", "1.20", "0.80"])
        extra = {r.strip("| ").split(" | ")[0]: r.strip("| ").split(" | ") for r in rows[2:]}
        self.assertEqual(extra["state dict save: handle legacy vs torch.save zip"][2:5],
                         ["0.50", "2.40", "4.80"])
        self.assertEqual(extra["state dict load, zip, tensors copied out"][2:5],
                         ["1.00", "1.10", "1.10"])


if __name__ == "__main__":
    unittest.main()
