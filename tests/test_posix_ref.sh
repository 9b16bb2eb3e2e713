#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs test_posix on a fresh directory of a kernel filesystem (tmpfs in
# /dev/shm by default), so that the expectations test_posix asserts for
# nvmefs stay checked against what Linux itself does. A second argument
# picks another parent directory, e.g. /tmp for ext4.
# usage: test_posix_ref.sh BUILD_DIR [PARENT_DIR]
set -euo pipefail
bin=$1/tests/test_posix
parent=${2:-/dev/shm}
[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
[ -d "$parent" ] || { echo "SKIP: no $parent"; exit 77; }
dir=$(mktemp -d "$parent/test_posix.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$bin" "$dir"
