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
	libfuse3-dev fuse3 libaio-dev libnuma-dev libjson-c-dev libisal-dev libblkid-dev uuid-dev
	libxxhash-dev liburing-dev
	# tests and benchmarks
	util-linux fio jq procps gnuplot-nox
	# filesystems for mkfs.nvmefs's refusal test; python3 for the crash test,
	# scripts/bench.py and nvmefs-tune
	e2fsprogs xfsprogs btrfs-progs python3
	# scripts/test.sh checks the shell scripts
	shellcheck
	# libFuzzer's runtime (with clang) for tests/fuzz
	libclang-rt-14-dev
	# programs tests/test_tools.sh runs on a mounted volume
	rsync sqlite3 git attr tar diffutils python3-numpy python3-torch
	# setfacl and getfacl for tests/test_acl.sh (and xfstests' ACL tests)
	acl
	# DeepSpeed's own aio unit tests against nvmefs (tests/test_deepspeed_aio.py)
	python3-pytest
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
# A fresh machine may be installing updates: wait for another apt or dpkg to
# let go of its locks (up to NVMEFS_APT_WAIT seconds, default 20 minutes)
# rather than fail at once. DPkg::Lock::Timeout covers the dpkg frontend
# lock; the lists lock of 'apt-get update' is not covered by it in apt 2.6,
# so that step is retried while its error says the lock is held.
wait=${NVMEFS_APT_WAIT:-1200}
apt_get() {
	local end=$((SECONDS + wait)) out
	while :; do
		if out=$(apt-get -o DPkg::Lock::Timeout="$wait" "$@" 2>&1); then
			return 0
		fi
		if ! grep -q 'Could not get lock\|Unable to lock' <<<"$out" || [ $SECONDS -ge $end ]; then
			printf '%s\n' "$out" >&2
			return 1
		fi
		echo "deps.sh: waiting for another package manager to finish" >&2
		sleep 5
	done
}
apt_get update -qq
apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
