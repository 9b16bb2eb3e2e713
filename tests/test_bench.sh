#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nvmefs-bench's command line contract, on 3 small image files:
#  - --write --validate and --read --random --validate round-trip a pattern;
#  - with --json the last stdout line is one JSON object with op, bytes,
#    seconds, gbps and one entry per device whose bytes add up;
#  - bad input (unknown option, bad size, no device, missing device, both
#    --read and --write; with --client, devices or device options, a path
#    off nvmefs) exits non-zero with a message naming the input
#    (tests/test_bench_client.sh runs --client on a mounted volume).
# usage: test_bench.sh BUILD_DIR
set -euo pipefail
bench=$1/nvmefs-bench
command -v jq >/dev/null || { echo "SKIP: jq not installed"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/test_bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for i in 0 1 2; do truncate -s 16M "$dir/d$i.img"; done
devs=("$dir/d0.img" "$dir/d1.img" "$dir/d2.img")
fail=0
check() { # MESSAGE CONDITION...
	local msg=$1
	shift
	if ! "$@"; then
		echo "FAIL: $msg" >&2
		fail=1
	fi
}

out=$("$bench" --write --validate --block-size 64K --size 24M --loops 2 --json "${devs[@]}")
check "validate message" grep -q "validate: wrote and read back 25165824 bytes: OK" <<<"$out"
json=$(tail -n 1 <<<"$out")
check "json op" test "$(jq -r .op <<<"$json")" = write
check "json bytes = size x loops" test "$(jq -r .bytes <<<"$json")" = $((24 << 21))
check "json seconds > 0" jq -e '.seconds > 0' <<<"$json" >/dev/null
check "json gbps = bytes/seconds/1e9" jq -e '(.gbps - .bytes / .seconds / 1e9) | fabs < 1e-6' <<<"$json" >/dev/null
check "json one entry per device" test "$(jq '.devices | length' <<<"$json")" = 3
check "json device bytes add up" jq -e '([.devices[].bytes] | add) == .bytes' <<<"$json" >/dev/null
check "json device path" test "$(jq -r '.devices[1].path' <<<"$json")" = "$dir/d1.img"

out=$("$bench" --read --random --validate --block-size 4K --chunk 16K --size 8M --loops 1 "${devs[@]}")
check "random read validate" grep -q "validate: .*OK" <<<"$out"

expect_error() { # WHAT PATTERN ARGS...: exit non-zero, stderr matches PATTERN
	local what=$1 pat=$2 rc=0 err
	shift 2
	err=$("$bench" "$@" 2>&1 >/dev/null) || rc=$?
	check "$what: exit status $rc" test "$rc" -ne 0
	check "$what: message '$err' lacks '$pat'" grep -q -- "$pat" <<<"$err"
}
expect_error "unknown option" "unrecognized option" --write --bogus "${devs[@]}"
expect_error "bad size" "'12X'" --write --size 12X "${devs[@]}"
expect_error "no device" "no devices" --write
expect_error "no op" "give --read or --write" "${devs[@]}"
expect_error "both ops" "one of --read and --write" --read --write "${devs[@]}"
expect_error "missing device" "$dir/nope.img: no such file" --read --size 8M "${devs[0]}" "$dir/nope.img"
expect_error "too small" "too small" --read --size 1G "${devs[@]}"
# --client: the file is the target; what only devices mean is refused.
expect_error "client and devices" "device arguments: with devices only" --client "$dir/f" --write "${devs[@]}"
expect_error "client --chunk" "chunk: with devices only" --client "$dir/f" --write --chunk 64K
expect_error "client not on nvmefs" "$dir/f: not on an nvmefs mount" --client "$dir/f" --write --size 1M
expect_error "threads without client" "threads goes with --client" --write --threads 2 "${devs[@]}"
expect_error "threads 0" "at least 1" --client "$dir/f" --write --threads 0

[ "$fail" = 0 ] && echo "all checks passed"
exit "$fail"
