#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Coverage-guided fuzzing (libFuzzer + ASan + UBSan) of the on-disk metadata
# parsers, of replay and of the native protocol's checks (tests/fuzz/, see
# its README.md): build the fuzz
# project with clang, copy the committed seed corpus to a scratch directory
# (runs never write into the repository), run each target in turn for
# SECONDS, and fail if any found a crash, a leak, a timeout or a broken
# oracle, printing the reproducer and the command that replays it.
#
# usage: scripts/fuzz.sh [-h] [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  fuzzing time per target (default 30); 0 only replays
#                       the committed corpus (seeds and the regression inputs
#                       of fixed findings), each input once (fast: for CI)
#   TARGET              label, journal, load, wire, sorted, manifest, runr, values
#                       (default: all of them)
# environment: NVMEFS_FUZZ_BUILD  build directory (default build-fuzz at the
#                                 top of the repository)
#              NVMEFS_FUZZ_WORK   scratch directory (default: a new one under
#                                 ${TMPDIR:-/tmp}); kept when something was
#                                 found, removed otherwise
#              NVMEFS_FUZZ_ARGS   more libFuzzer flags for every run
# exit: 0 nothing found, 1 something found (or the build failed), 2 usage,
#       77 no clang or no libFuzzer (skip)
set -euo pipefail
PROG=fuzz.sh
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. scripts/lib.sh

all_targets=(label journal load wire sorted manifest runr values)
# -max_len per target: what its harness reads (tests/fuzz/fuzz_vol.h):
# one block; a mode byte and an 8-block ring; the 168 KiB metadata area
# (2 superblocks, a 32-block run area, an 8-block journal); a registration table
# (35 bytes, tests/fuzz/fuzz_wire.h) and the largest native message; the
# largest run block of format v2 (17 blocks, fs/store/sorted_i.h); a manifest
# slot of the harness's run area (4 blocks, fs/store/runs_i.h); a run's meta
# (16 bytes) and its index and filter (8 blocks, tests/fuzz/fuzz_runr.c); a
# key's length (2 bytes), the longest key (273) and the largest value
# (64 KiB, fs/store/store.h).
declare -A max_len=([label]=4096 [journal]=32769 [load]=172032 [wire]=12355
	[sorted]=69632 [manifest]=16384 [runr]=32784 [values]=65811)

usage() {
	sed -n '/^# usage:/,/^# exit:/p' "$0" | sed 's/^# \{0,1\}//'
	sed -n '/^# exit:/{n;p}' "$0" | sed 's/^# \{0,1\}//'
}

secs=30
if [ $# -gt 0 ]; then
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	[0-9]*)
		[[ $1 =~ ^[0-9]+$ ]] || bad_arg "$1: not a number of seconds"
		secs=$1
		shift
		;;
	esac
fi
targets=()
for t in "$@"; do
	t=${t#fuzz_}
	[[ -v "max_len[$t]" ]] || bad_arg "$t: no such target (${all_targets[*]})"
	targets+=("$t")
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

# clang and its libFuzzer runtime, else skip.
if ! command -v clang >/dev/null; then
	echo "$PROG: SKIP: clang not installed (Debian: apt-get install clang)" >&2
	exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }' >"$probe/p.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
	cat "$probe/err" >&2
	echo "$PROG: SKIP: clang cannot link libFuzzer (-fsanitize=fuzzer): its compiler-rt" \
		"runtime is missing" >&2
	exit 77
fi
rm -rf "$probe"
trap - EXIT

build=${NVMEFS_FUZZ_BUILD:-$top/build-fuzz}
echo "== build (clang, libFuzzer + ASan + UBSan) in $build"
CC=clang cmake -S "$top/tests/fuzz" -B "$build" >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null

work=${NVMEFS_FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/nvmefs-fuzz.XXXXXX")}
mkdir -p "$work"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
read -r -a extra <<<"${NVMEFS_FUZZ_ARGS:-}"
found=0
for t in "${targets[@]}"; do
	bin=$build/fuzz_$t
	dir=$work/$t
	rm -rf "$dir"
	mkdir -p "$dir/corpus" "$dir/artifacts"
	cp "$top/tests/fuzz/corpus/$t/"* "$dir/corpus/"
	args=(-rss_limit_mb=2048 -timeout=10 -max_len="${max_len[$t]}"
		-dict="$top/tests/fuzz/nvmefs.dict" -artifact_prefix="$dir/artifacts/")
	if [ "$secs" -eq 0 ]; then
		echo "== fuzz_$t: replaying $(find "$dir/corpus" -type f | wc -l) inputs"
		args+=(-runs=0)
	else
		echo "== fuzz_$t: ${secs}s"
		args+=(-max_total_time="$secs" -print_final_stats=1)
	fi
	rc=0
	"$bin" "${args[@]}" "${extra[@]}" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
	grep -E '^#[0-9]+.*(INITED|DONE)' "$dir/log" | tail -n 1 || true
	if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$dir/artifacts")" ]; then
		found=1
		echo "!! fuzz_$t failed (exit $rc); its log: $dir/log" >&2
		grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz: BUG|.*runtime error)' "$dir/log" | head -n 5 >&2 || true
		for a in "$dir/artifacts/"*; do
			[ -e "$a" ] || continue
			echo "   reproducer: $a" >&2
			echo "   replay:     $bin $a" >&2
		done
	fi
done

if [ "$found" -ne 0 ]; then
	echo "$PROG: something was found; scratch directory kept: $work" >&2
	echo "  Minimize the reproducer, fix fs/, then add it to tests/fuzz/corpus/<target>/" \
		"as a regression input (see tests/fuzz/README.md)." >&2
	exit 1
fi
[ -n "${NVMEFS_FUZZ_WORK:-}" ] || rm -rf "$work"
echo "== fuzz: nothing found"
