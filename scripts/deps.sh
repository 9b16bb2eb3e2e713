#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian 12 packages nvmefs needs to build, test and benchmark.
# Run as root. Does nothing (and needs no network) when all are installed.
#
# usage: scripts/deps.sh
set -euo pipefail

pkgs=(
	# build
	build-essential cmake pkg-config clang clang-format
	libfuse3-dev fuse3 libaio-dev libnuma-dev libjson-c-dev libisal-dev libblkid-dev
	# tests and benchmarks
	util-linux fio jq procps gnuplot-nox
	# filesystems for mkfs.nvmefs's refusal test; python3 for the crash test
	e2fsprogs xfsprogs btrfs-progs python3
	# libFuzzer's runtime (with clang) for tests/fuzz
	libclang-rt-14-dev
	# programs tests/test_tools.sh runs on a mounted volume
	rsync sqlite3 git attr tar diffutils python3-numpy python3-torch
)

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deps.sh: missing packages (${missing[*]}); run as root to install them" >&2
	exit 1
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
