#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_fsx (random writes, reads, truncates, punches, fallocates and mmap
# I/O checked against a model) on a mounted volume of NDEVS members with
# chunk CHUNK, in the mount mode given; then the file is checked again after
# a remount. ctest runs the default 1 MiB chunk over 4 members and a 4 KiB
# chunk over 3 (where nearly every request crosses members).
# usage: test_fsx.sh BUILD [cached|direct] [NDEVS] [CHUNK] [OPS]
set -euo pipefail
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib_mount.sh"
mnt_time_limit 280 "$0" "$@"
build=$1
mode=${2:-cached}
ndevs=${3:-4}
chunk=${4:-1M}
ops=${5:-5000}
# Direct mode before Linux 6.6: shared mmap is refused (ENODEV), README.
if [ "$mode" = direct ] && ! mnt_direct_mmap; then
	export NVMEFS_TEST_NO_SHARED_MMAP=1
fi
mnt_setup "$build" "$ndevs" 128M -c "$chunk"
mnt_mount "mode=$mode"
check "fsx, $ndevs members, chunk $chunk, $mode mode" "$build/tests/test_fsx" "$MNT/fsx" "$ops"
sum=$(sha256sum <"$MNT/fsx")
mnt_remount "mode=$mode"
check "fsx file intact after a remount" test "$(sha256sum <"$MNT/fsx")" = "$sum"
mnt_result
