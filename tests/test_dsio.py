#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Unit tests (no root, nothing mounted) of nvmefs.dsio, the ds_io-style
sweep of the handle's settings (sizes, lists, the grid, scores, ranking,
the table, the aio_handle call and DeepSpeed's "aio" configuration, and a
tiny sweep through the handle's fallback in a temporary directory), and of
nvmefs-tune --handle's options.

usage: test_dsio.py BUILD_DIR [unittest options]   (exit 0 pass, 1 fail)
"""
import json
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
import testlib  # noqa: E402

testlib.take_build_dir("test_dsio.py")
sys.path.insert(0, testlib.SCRIPTS)

from nvmefs import dsio  # noqa: E402

tune = testlib.load_tuner()
K, M, G = 1 << 10, 1 << 20, 1 << 30


class Pure(unittest.TestCase):
    def test_sizes(self):
        for text, n in (("4096", 4096), ("4K", 4 * K), ("1m", M), ("2G", 2 * G), (" 8M ", 8 * M)):
            self.assertEqual(dsio.parse_size(text), n, text)
        for text in ("", "K", "1.5M", "-1M", "1T", "x"):
            self.assertIsNone(dsio.parse_size(text), text)
        for n, text in ((4 * K, "4K"), (M, "1M"), (1536 * K, "1536K"), (G, "1G"), (100, "100")):
            self.assertEqual(dsio.size_text(n), text)

    def test_lists(self):
        self.assertEqual(dsio.parse_list("1M,256K,,1M,1024K", "--block_size", "size"), [M, 256 * K])
        self.assertEqual(dsio.parse_list("8,32,8", "--queue_depth", "int"), [8, 32])
        for text, kind, msg in (("3K", "size", "'3K' is not a multiple of 4K"),
                                ("2G", "size", "from 4K to 1G"), ("0", "int", "'0' is not a number"),
                                ("4097", "int", "from 1 to 4096"), ("x", "int", "'x'"),
                                (",", "int", "empty list")):
            with self.assertRaisesRegex(ValueError, msg):
                dsio.parse_list(text, "--x", kind)

    def test_grid(self):
        g = dsio.grid([M, 4 * M], [8, 32], [1, 2])
        self.assertEqual(len(g), 8)
        self.assertEqual(g[0], {"block_size": M, "queue_depth": 8, "num_threads": 1})
        self.assertEqual(g[-1], {"block_size": 4 * M, "queue_depth": 32, "num_threads": 2})
        self.assertEqual(len({tuple(s.values()) for s in g}), 8)

    def test_score_and_rank(self):
        self.assertAlmostEqual(dsio.score(2.0, 4.0, "both"), 8 / 3)
        self.assertEqual(dsio.score(2.0, None, "write"), 2.0)
        self.assertEqual(dsio.score(None, 3.0, "read"), 3.0)
        self.assertIsNone(dsio.score(None, 3.0, "both"))
        res = [{"score": 1.0}, {"score": None}, {"score": 3.0}, {"score": 1.0}, {"score": 2.5}]
        self.assertEqual(dsio.ranked(res), [2, 4, 0, 3, 1])
        self.assertIsNone(dsio.best([{"score": None}]))
        self.assertIsNone(dsio.best([]))

    def test_call_and_config(self):
        s = {"block_size": 4 * M, "queue_depth": 32, "num_threads": 2}
        self.assertEqual(dsio.handle_call(s), "aio_handle(block_size=4194304, queue_depth=32, "
                         "single_submit=False, overlap_events=False, num_threads=2)")
        self.assertEqual(dsio.aio_config(s), {"aio": {
            "block_size": 4 * M, "queue_depth": 32, "single_submit": False,
            "overlap_events": False, "num_threads": 2}})

    def test_table_and_doc(self):
        res = [dict(block_size=M, queue_depth=8, num_threads=1, write_gbs=1.0, read_gbs=2.0,
                    score=dsio.score(1.0, 2.0, "both"), error=None),
               dict(block_size=4 * M, queue_depth=8, num_threads=1, write_gbs=None, read_gbs=None,
                    score=None, error="boom"),
               dict(block_size=4 * M, queue_depth=32, num_threads=2, write_gbs=3.0, read_gbs=3.0,
                    score=3.0, error=None)]
        lines = dsio.table(res, "both")
        self.assertEqual(len(lines), 4)
        self.assertRegex(lines[1], r"^ +1 +4M +32 +2 +3\.00 +3\.00 +3\.00$")
        self.assertRegex(lines[2], r"^ +2 +1M +8 +1 +1\.00 +2\.00 +1\.33$")
        self.assertRegex(lines[3], r"^ +- +4M +8 +1 +FAILED: boom$")
        doc = dsio.report_doc(res, {"tool": "t"})
        self.assertEqual(doc["tool"], "t")
        self.assertEqual(doc["aio"]["num_threads"], 2)
        self.assertEqual(doc["best"]["aio_handle"], dsio.handle_call(res[2]))
        json.dumps(doc)  # serializable
        self.assertIsNone(dsio.report_doc(res[1:2], {})["best"])


class Sweep(unittest.TestCase):
    def test_tiny_sweep(self):
        """Two settings on a plain directory (the handle's fallback),
        validated; the file and the buffer are gone afterwards."""
        with tempfile.TemporaryDirectory() as d:
            s = dsio.Sweep(d, M, loops=1, warmup=0, ops="both", validate=True, drop=False)
            try:
                res = s.run(dsio.grid([256 * K], [4], [1, 2]))
            finally:
                s.close()
            for r in res:
                self.assertIsNone(r["error"], r)
                self.assertGreater(r["write_gbs"], 0)
                self.assertGreater(r["read_gbs"], 0)
                self.assertAlmostEqual(r["score"], dsio.score(r["write_gbs"], r["read_gbs"], "both"))
            self.assertEqual(os.listdir(d), [])

    def test_main_json(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            work = os.path.join(d, "w")
            os.mkdir(work)
            rc = dsio.main(["--folder", work, "--io_size", "1M", "--block_size", "256K",
                            "--queue_depth", "4", "--threads", "1", "--loops", "1", "--warmup", "0",
                            "--write", "--json", out, "-q"])
            self.assertEqual(rc, 0)
            with open(out) as f:
                doc = json.load(f)
            self.assertEqual(doc["ops"], "write")
            self.assertIsNone(doc["results"][0]["read_gbs"])
            self.assertEqual(doc["aio"]["block_size"], 256 * K)


class TunerHandle(unittest.TestCase):
    def test_defaults(self):
        with tempfile.TemporaryDirectory() as d:
            a = tune.parse_args(["--handle", d])
            self.assertEqual((a.block_sizes, a.qd, a.threads, a.size, a.workload),
                             ([256 * K, M, 4 * M], [8, 32, 128], [1, 2, 4], 512 * M, "both"))
            a = tune.parse_args(["--handle", d, "--block-sizes", "1M,64K,1M", "--qd", "16",
                                 "--threads", "3", "-s", "64M", "-w", "read"])
            self.assertEqual((a.block_sizes, a.qd, a.threads, a.size, a.workload),
                             ([M, 64 * K], [16], [3], 64 * M, "read"))
            self.assertTrue(tune.parse_args(["--handle", d, "-y"]).yes)  # harmless: nothing asked

    def test_refusals(self):
        with tempfile.TemporaryDirectory() as d:
            cases = ((["d0.img"], "--handle takes no DEV"), (["-t", "3"], "-t does not go with --handle"),
                     (["--chunks", "1M"], "--chunks does not go"), (["-o", "pool=1M"], "-o does not go"),
                     (["--modes", "direct"], "--modes does not go"), (["--dd"], "--dd does not go"),
                     (["--block-sizes", "3K"], "'3K' is not a multiple of 4K"),
                     (["--qd", "0"], "--qd: '0'"), (["--threads", "65"], "from 1 to 64"),
                     (["-s", "100K"], "-s: '100K'"), (["-w", "rw"], "-w: 'rw'"))
            for extra, msg in cases:
                with self.assertRaisesRegex(tune.BadArg, msg, msg=str(extra)):
                    tune.parse_args(["--handle", d] + extra)
            with self.assertRaisesRegex(tune.BadArg, "not a directory"):
                tune.parse_args(["--handle", os.path.join(d, "missing")])
        with self.assertRaisesRegex(tune.BadArg, "--block-sizes goes with --handle"):
            tune.parse_args(["--block-sizes", "1M", "d0.img"])

    def test_device_defaults_kept(self):
        a = tune.parse_args(["d0.img", "-y"])
        self.assertEqual((a.chunks, a.modes, a.threads, a.extra, a.secs, a.dd, a.yes, a.handle),
                         (["64K", "256K", "1M"], ["cached", "direct"], ["4", "8", "16"], "", 5, False,
                          True, None))


if __name__ == "__main__":
    unittest.main()
