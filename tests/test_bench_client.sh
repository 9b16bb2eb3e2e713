#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nvmefs-bench --client (client/bench_client.c) on a mounted volume:
#  - --write creates the file at --size and --read reads it, with 2 threads
#    and 2 loops; the last stdout line is the JSON of the engine mode
#    (op, bytes = size x loops, seconds, gbps = bytes/seconds/1e9,
#    block_size, queue_depth, loops) plus threads, fsync_seconds and the
#    daemon's counters over the measured loops;
#  - aligned native I/O: the daemon copied nothing, no bounce copy, and
#    every read asked the kernel to drop its pages of the range once;
#  - a block size that is not a multiple of 4096 is copied by the daemon,
#    and the counter says so (the figure scripts/bench.py checks is real);
#  - a read of more than the file holds is refused, naming the file.
# usage: test_bench_client.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

[ $# = 1 ] || {
	echo "usage: test_bench_client.sh BUILD_DIR" >&2
	exit 2
}
build=$1
bench=$build/nvmefs-bench
mnt_time_limit 240 "$0" "$@"
mnt_need jq
[ -x "$bench" ] || mnt_skip "$bench not built"
mnt_setup "$build" 4 256M
mnt_mount mode=direct
f=$MNT/bench.bin

json=""
# shellcheck disable=SC2317 # called through check
jqok() { # FILTER: true of $json
	jq -e "$1" <<<"$json" >/dev/null
}

run() { # OP BLOCK-SIZE: the JSON line
	"$bench" --client "$f" "--$1" --size 64M --block-size "$2" --queue-depth 4 \
		--threads 2 --loops 2 --json | tail -n 1
}

for op in write read; do
	json=$(run "$op" 1M)
	check "$op: op" test "$(jq -r .op <<<"$json")" = "$op"
	check "$op: bytes = size x loops" test "$(jq -r .bytes <<<"$json")" = $((128 << 20))
	check "$op: gbps = bytes/seconds/1e9" \
		jqok '.seconds > 0 and ((.gbps - .bytes / .seconds / 1e9) | fabs < 1e-6)'
	check "$op: the options" \
		jqok '.block_size == 1048576 and .queue_depth == 4 and .loops == 2 and .threads == 2'
	check "$op: no daemon copy ($json)" jqok '.daemon_copied_bytes == 0'
	check "$op: no bounce copy" jqok '.client_bounce_bytes == 0'
	check "$op: fsync timed only for writes" \
		jqok 'if .op == "write" then .fsync_seconds > 0 else .fsync_seconds == 0 end'
	check "$op: file size" test "$(stat -c %s "$f")" = $((64 << 20))
done
# The reads of one SUBMIT message invalidate once per file (fs/native/server.c
# before_reads): at least one per thread, at most one per request.
check "read: invalidations per SUBMIT, not per request (2..128)" \
	jqok '.daemon_invalidations >= 2 and .daemon_invalidations <= 128'
check "the write wrote no zeros" test "$(head -c 4096 "$f" | tr -d '\0' | wc -c)" = 4096

json=$(run write 6K)
check "6K blocks: the daemon copies ($json)" jqok '.daemon_copied_bytes > 0'

err=$("$bench" --client "$f" --read --size 128M 2>&1 >/dev/null) && rc=0 || rc=$?
check "read beyond the file: exit status $rc" test "$rc" -ne 0
check "read beyond the file: message '$err'" grep -q "$f holds .* fewer than --size" <<<"$err"

mnt_umount
mnt_result
