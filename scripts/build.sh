#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configure and build nvmefs into a build directory (default build/).
#
# usage: scripts/build.sh [BUILD_DIR [CMAKE_ARGS...]]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/build}
shift || true
cmake -S "$top" -B "$dir" -DNVMEFS_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
