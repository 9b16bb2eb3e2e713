# SPDX-License-Identifier: MIT
"""Scaffolding: the markers DeepSpeed's tests/pytest.ini declares. Its
addopts deselect `sequential` tests from the parallel run (DeepSpeed runs
them in a pass of their own): here every test runs, in one pass."""


def pytest_configure(config):
    for marker in ("sequential", "nightly", "world_size", "inference", "inference_ops"):
        config.addinivalue_line("markers", f"{marker}: DeepSpeed's marker")
