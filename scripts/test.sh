#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole default test suite, from a fresh Debian 12 machine (as root):
# install packages, build with -Werror, run every test that is not labelled
# stress, bench or xfstests, then rebuild with ASan+UBSan and with TSan and
# run the unit tests under each (and, under ASan+UBSan, a few mounted
# workloads with the daemon instrumented), fuzz the metadata parsers briefly,
# and check the C sources' formatting and the shell scripts with shellcheck.
#
# usage: scripts/test.sh            (CI runs exactly this, from .ci/run)
# Long runs are separate: ctest --test-dir build -L stress, scripts/bench*.sh,
# and xfstests (XFSTESTS_DIR=CHECKOUT ctest --test-dir build -L xfstests).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

bash scripts/deps.sh

echo "== format check (clang-format, .clang-format)"
bad=$(git ls-files '*.c' '*.h' | xargs -r clang-format --dry-run --Werror 2>&1 | grep -o '^[^:]*\.[ch]' | sort -u || true)
if [ -n "$bad" ]; then
	echo "not formatted per .clang-format (run clang-format -i): $bad" >&2
	exit 1
fi

# Shell is glue and must stay shellcheck-clean (warnings and errors): every
# *.sh, and every other tracked file whose first line names sh or bash.
echo "== shellcheck"
mapfile -t shell_files < <({
	git ls-files '*.sh'
	git ls-files -z | xargs -0 awk 'FNR == 1 && /^#!.*[\/ ](ba)?sh( |$)/ { print FILENAME } { nextfile }'
} | sort -u)
shellcheck -x -S warning "${shell_files[@]}"

echo "== build (gcc, -Werror)"
bash scripts/build.sh "$top/build"
echo "== tests"
# The mounts on /dev/fuse (nouring), whatever enable_uring says: direct
# mode's default takes io_uring where the kernel offers it with
# cpu_latency=off.
NVMEFS_TEST_TRANSPORT=fuse ctest --test-dir build --output-on-failure --timeout 600 \
	-LE 'stress|bench|xfstests'

# The mounted tests again on FUSE over io_uring (fs/fuse/uring.c) where the
# kernel has it (Linux 6.14+): its module parameter on for this pass, as an
# administrator would set it, then back to what it was.
uring_param=/sys/module/fuse/parameters/enable_uring
if [ -w "$uring_param" ]; then
	uring_was=$(cat "$uring_param")
	echo "== mounted tests on FUSE over io_uring"
	echo Y >"$uring_param"
	uring_rc=0
	NVMEFS_TEST_TRANSPORT=uring ctest --test-dir build --output-on-failure --timeout 600 \
		-L fuse -LE 'stress|bench|xfstests' -E '^test_uring$' || uring_rc=$?
	echo "$uring_was" >"$uring_param"
	[ "$uring_rc" = 0 ] || exit "$uring_rc"
else
	echo "== no FUSE over io_uring in this kernel ($uring_param): its pass is skipped"
fi

echo "== build (ASan + UBSan)"
bash scripts/build.sh "$top/build-asan" -DNVMEFS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
echo "== unit tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	ctest --test-dir build-asan --output-on-failure --timeout 600 -L unit

# The daemon under ASan+UBSan on a few mounted workloads: it runs in the
# background with stderr closed, so reports go to files, and any file fails.
# test_read_door_direct also runs the preload library's read door and its
# test program under them.
echo "== mounted tests with the daemon under ASan + UBSan"
asan_logs=$(mktemp -d)
ASAN_OPTIONS=detect_leaks=1:log_path=$asan_logs/asan UBSAN_OPTIONS=print_stacktrace=1 \
	ctest --test-dir build-asan --output-on-failure --timeout 600 -L fuse \
	-R 'test_posix_cached|test_fsx|test_crash|test_faults|test_layout_xattr|test_datapath|test_native_(cached|direct)|test_open_push_direct|test_write_behind_direct|test_read_door_direct|test_tool_(cp|sqlite|git)$'
if [ -n "$(ls -A "$asan_logs")" ]; then
	cat "$asan_logs"/* >&2
	echo "ASan/UBSan reports above" >&2
	exit 1
fi
rm -rf "$asan_logs"

# The metadata parsers under libFuzzer (clang): the committed corpus, which
# holds every past finding, then a short run per target. The long runs
# (10 minutes each) are scripts/fuzz.sh 600, docs/RELIABILITY.md.
echo "== fuzzing (libFuzzer, 20 s per target)"
bash scripts/fuzz.sh 0
bash scripts/fuzz.sh 20

echo "== build (TSan)"
bash scripts/build.sh "$top/build-tsan" -DNVMEFS_TSAN=ON -DCMAKE_BUILD_TYPE=Debug
echo "== unit tests under TSan"
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure --timeout 600 -L unit
