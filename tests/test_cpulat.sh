#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# -o cpu_latency (fs/fuse/cpulat.c): while requests come, the daemon asks
# the kernel's PM QoS for idle CPUs quick to wake, and gives it back after a
# quiet spell.
#  - default (0): right after a request /dev/cpu_dma_latency reads 0 (the
#    kernel's aggregate of every process's requests), .nvmefs/config says
#    cpu_latency = 0 and .nvmefs/stats says it is held; after half a second
#    without a request the kernel's limit is what it was before the mount,
#    and the next request took the hold again (a new busy spell in
#    cpu_latency_holds);
#  - cpu_latency=7: the aggregate is 7 us while busy (at most 7 where
#    something else asks for less);
#  - cpu_latency=off: nothing asked (held is null, no spell);
#  - a bad value is refused, naming the option, before anything is mounted.
# Exit 77 (skip) without root, /dev/fuse, the nvmefs binaries or
# /dev/cpu_dma_latency.
# usage: test_cpulat.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -ne 1 ]; then
	echo "usage: test_cpulat.sh BUILD_DIR" >&2
	exit 2
fi
build=$1
mnt_time_limit 120 "$0" "$@"
[ -c /dev/cpu_dma_latency ] || mnt_skip "no /dev/cpu_dma_latency (CONFIG_CPU_IDLE's PM QoS)"
mnt_setup "$build" 2 256M

# The kernel's current CPU latency limit, in us (every process's requests).
latency() {
	od -An -t d4 -N4 /dev/cpu_dma_latency | tr -d ' '
}

# FIELD of .nvmefs/stats' transport object, as JSON (true, false, null, N).
stat_of() {
	/usr/bin/python3 -c 'import json, sys
print(json.dumps(json.load(open(sys.argv[1]))["transport"].get(sys.argv[2], "absent")))' \
		"$MNT/.nvmefs/stats" "$1"
}

before=$(latency)
mnt_mount
ls "$MNT" >/dev/null
check "busy: the kernel's CPU latency limit is 0 (read $(latency))" test "$(latency)" = 0
check "config says cpu_latency = 0" grep -qx 'cpu_latency = 0' "$MNT/.nvmefs/config"
check "stats say it is held ($(stat_of cpu_latency_held))" test "$(stat_of cpu_latency_held)" = true
h1=$(stat_of cpu_latency_holds)
sleep 0.5
lat=$(latency) # the device's, not the mount's: no request
check "after 0.5 s without a request the limit is back to $before (read $lat)" \
	test "$lat" = "$before"
h2=$(stat_of cpu_latency_holds)
if [[ $h1 =~ ^[0-9]+$ ]]; then
	check "after 0.5 s without a request it was given back and taken again ($h1 -> $h2 spells)" \
		test "$h2" = $((h1 + 1))
else
	check "stats count busy spells (cpu_latency_holds: $h1)" false
fi
mnt_umount

mnt_mount cpu_latency=7
ls "$MNT" >/dev/null
lat=$(latency)
if [ "$before" -gt 7 ]; then
	check "cpu_latency=7: the limit is 7 us while busy (read $lat)" test "$lat" = 7
else
	check "cpu_latency=7: the limit is at most 7 us while busy (read $lat)" test "$lat" -le 7
fi
check "config says cpu_latency = 7" grep -qx 'cpu_latency = 7' "$MNT/.nvmefs/config"
mnt_umount

mnt_mount cpu_latency=off
ls "$MNT" >/dev/null
check "cpu_latency=off: config says off" grep -qx 'cpu_latency = off' "$MNT/.nvmefs/config"
check "cpu_latency=off: nothing held ($(stat_of cpu_latency_held))" \
	test "$(stat_of cpu_latency_held)" = null
check "cpu_latency=off: no busy spell ($(stat_of cpu_latency_holds))" \
	test "$(stat_of cpu_latency_holds)" = 0
mnt_umount

for bad in abc -1 1000001; do
	out=$(timeout 30 "$build/nvmefs" "$MNT_DEVS" "$MNT" -o "cpu_latency=$bad" 2>&1) && rc=0 || rc=$?
	check "cpu_latency=$bad is refused (exit $rc)" test "$rc" != 0
	check "naming the option ($out)" grep -q "cpu_latency '$bad'" <<<"$out"
	check "and nothing is mounted" test "$(mountpoint -q "$MNT" && echo yes || echo no)" = no
done
mnt_result
