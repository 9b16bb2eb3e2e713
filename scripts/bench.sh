#!/bin/sh
# SPDX-License-Identifier: MIT
# The issue-5 benchmark: scripts/bench.py (its docstring says what it measures and how).
set -eu
exec /usr/bin/python3 "$(dirname -- "$0")/bench.py" "$@"
