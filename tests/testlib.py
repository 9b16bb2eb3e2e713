# SPDX-License-Identifier: MIT
"""What the Python unit tests in tests/ share: the tree's folders, the
BUILD_DIR argument that points a test at the build tree's nvmefs package,
and scripts/nvmefs-tune (a program, without .py) loaded as a module.

A test sets sys.dont_write_bytecode before importing this (no __pycache__
in the source tree); python3 finds it because it runs the test from this
folder (sys.path[0]).
"""
import importlib.machinery
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
SCRIPTS = os.path.join(os.path.dirname(HERE), "scripts")
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples", "deepnvme")


def take_build_dir(prog):
    """Take BUILD_DIR, the first argument, out of sys.argv (the rest are
    unittest's) and put its python/ first on sys.path, so that nvmefs is
    the build tree's package. Without it, exit with prog's usage line."""
    if len(sys.argv) < 2 or not os.path.isdir(sys.argv[1]):
        sys.exit(f"usage: {prog} BUILD_DIR [unittest options]")
    build = os.path.realpath(sys.argv.pop(1))
    sys.path.insert(0, os.path.join(build, "python"))


def load_tuner():
    """scripts/nvmefs-tune as the module nvmefs_tune."""
    path = os.path.join(SCRIPTS, "nvmefs-tune")
    loader = importlib.machinery.SourceFileLoader("nvmefs_tune", path)
    spec = importlib.util.spec_from_loader("nvmefs_tune", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod
