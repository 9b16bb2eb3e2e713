#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""DeepSpeed's own unit tests of its async_io op (tests/unit/v1/nvme of a
DeepSpeed checkout) against nvmefs (issue 32), in this process, with
pytest: their files copied unchanged (checked byte for byte), every
assertion kept; tests/deepspeed_scaffold stands in for what they import
from DeepSpeed (an AsyncIOBuilder whose load() returns nvmefs, a CPU
accelerator, an in-process DistributedTest). Their CUDA cases skip
themselves: the scaffolding's accelerator is the CPU.

The checkout: --deepspeed DIR or $DEEPSPEED_SRC, a work tree or a bare git
directory (its HEAD's tests/unit/v1/nvme are extracted with git archive;
the fetch tool's /work/.mirror/deepspeedai+DeepSpeed/repo is one). Without
one the test is skipped (exit 77). pytest's temporary directories, where
the tests' files go, are made under --dir (default /var/tmp): an nvmefs
mount there runs them through the native client
(tests/test_deepspeed_aio.sh).

usage: test_deepspeed_aio.py BUILD [--deepspeed DIR] [--dir DIR] [-k EXPR]
Exit 0 when pytest ran them with no failure, 1 otherwise, 77 skipped.
"""
import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCAFFOLD = os.path.join(HERE, "deepspeed_scaffold")
NVME = "tests/unit/v1/nvme"
# What runs: the op's tests (test_aio.py), its pinned-tensor manager's and
# its GIL release's. test_gds.py is collected to show its skip (no gds op).
# test_fast_file_writer_fd_close.py tests DeepSpeed's Python FastFileWriter
# (deepspeed.io), not the op, and needs CUDA: left out (docs/PYTHON.md).
FILES = ("test_aio.py", "test_pinned_manager.py", "test_aio_gil.py", "test_gds.py")


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def is_bare_git(path):
    return os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(
        os.path.join(path, "objects"))


def copy_tests(src, dest):
    """The test files of src (a work tree or a bare git directory) into
    dest, unchanged; the names copied."""
    if is_bare_git(src):
        extract = os.path.join(dest, ".extract")
        os.mkdir(extract)
        archive = subprocess.run(["git", "--git-dir", src, "archive", "HEAD", NVME],
                                 capture_output=True, check=True, timeout=120).stdout
        subprocess.run(["tar", "-x", "-C", extract], input=archive, check=True, timeout=60)
        src = extract
    nvme = os.path.join(src, NVME)
    if not os.path.isdir(nvme):
        skip(f"{src} has no {NVME}: not a DeepSpeed checkout")
    copied = []
    for f in FILES:
        s = os.path.join(nvme, f)
        if not os.path.isfile(s):
            print(f"note: {src} has no {NVME}/{f}")
            continue
        shutil.copyfile(s, os.path.join(dest, f))
        if not filecmp.cmp(s, os.path.join(dest, f), shallow=False):
            raise SystemExit(f"{f}: the copy differs from {s}")
        copied.append(f)
    return copied


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", help="the build directory (its python/ has nvmefs)")
    ap.add_argument("--deepspeed", default=os.environ.get("DEEPSPEED_SRC"),
                    help="a DeepSpeed checkout (default: $DEEPSPEED_SRC)")
    ap.add_argument("--dir", default="/var/tmp", help="where pytest's temporary directories go")
    ap.add_argument("-k", dest="expr", help="pytest's -k EXPR")
    args = ap.parse_args()
    if not args.deepspeed:
        skip("no DeepSpeed checkout: give --deepspeed DIR or DEEPSPEED_SRC=DIR")
    if not os.path.isdir(args.deepspeed):
        skip(f"no directory {args.deepspeed}")
    pkg = os.path.join(os.path.abspath(args.build), "python")
    if not os.path.isfile(os.path.join(pkg, "nvmefs", "handle.py")):
        skip(f"{pkg}/nvmefs not built")
    try:
        import pytest  # noqa: F401
    except ImportError:
        skip("no pytest (Debian's python3-pytest)")
    work = tempfile.mkdtemp(prefix="ds_aio.", dir=args.dir)
    try:
        root = os.path.join(work, "root")
        tests = os.path.join(root, "nvme")  # not unit/...: the scaffold's unit package
        os.makedirs(tests)
        files = copy_tests(os.path.abspath(args.deepspeed), tests)
        if "test_aio.py" not in files:
            print(f"FAIL: no test_aio.py in {args.deepspeed}/{NVME}")
            return 1
        shutil.copyfile(os.path.join(SCAFFOLD, "conftest.py"), os.path.join(root, "conftest.py"))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([SCAFFOLD, pkg]),
                   PYTHONDONTWRITEBYTECODE="1")
        cmd = [sys.executable, "-m", "pytest", "-v", "-rs", "-p", "no:cacheprovider",
               "--rootdir", root, "--basetemp", os.path.join(work, "tmp")]
        if args.expr:
            cmd += ["-k", args.expr]
        cmd += [os.path.join(tests, f) for f in files]
        print(f"DeepSpeed's {', '.join(files)} from {args.deepspeed}; nvmefs from {pkg}; "
              f"files under {work}", flush=True)
        rc = subprocess.run(cmd, cwd=root, env=env, timeout=1500).returncode
        print(f"pytest exit status {rc}")
        return 0 if rc == 0 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
