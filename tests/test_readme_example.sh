#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The user guide's native client example (docs/USER-GUIDE.md, section 8),
# built and run as the guide says
# (test_docs checks that its code block is client/examples/roundtrip.c):
#  - cmake --install into a scratch prefix puts the header, the shared and
#    static library, the .pc and the man page there, and the .pc names that
#    prefix (not the one configured);
#  - the user guide's compile line, taken from the user guide and run as printed
#    with PKG_CONFIG_PATH naming the prefix, builds the example; run against
#    a mounted volume (LD_LIBRARY_PATH standing in for the user guide's
#    ldconfig, which would change the machine), it exits 0, in direct and
#    cached mode; through the mount the file then holds exactly the bytes
#    it wrote (the native write is visible to the mount's readers), and the
#    daemon copied none of them (aligned: zero copy);
#  - the user guide's static line (pkg-config --static: Libs.private -lnuma)
#    links libnvmefs.a into a program that needs no libnvmefs.so and runs;
#  - no argument: usage, exit 2; a path outside nvmefs: exit 1, said so.
# usage: test_readme_example.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

[ $# = 2 ] || {
	echo "usage: test_readme_example.sh BUILD_DIR SOURCE_DIR" >&2
	exit 2
}
mnt_time_limit 240 "$0" "$@"
build=$(realpath "$1")
src=$(realpath "$2")
mnt_need cc gcc
mnt_need pkg-config pkgconf
mnt_need cmake
mnt_need python3
mnt_setup "$build" 2 256M

# The user guide's lines: "$ cc -o roundtrip ..." (shared) and "$ cc -static ..." (static).
readme_line() { # PATTERN: the first user guide line matching it, prompt removed
	grep -m 1 -E "^ *\\\$ $1" "$src/docs/USER-GUIDE.md" | sed -E 's/^ *\$ //'
}
line=$(readme_line 'cc -o roundtrip roundtrip\.c ') || mnt_die "user guide: no '\$ cc -o roundtrip roundtrip.c' line"
static_line=$(readme_line 'cc -static -o roundtrip roundtrip\.c ') || static_line=""
echo "user guide: $line"

prefix=$MNT_TMP/prefix
cmake --install "$build" --prefix "$prefix" >"$MNT_TMP/install.log" 2>&1 ||
	mnt_die "cmake --install failed: $(tail -n 1 "$MNT_TMP/install.log")"
for f in include/libnvmefs.h lib/libnvmefs.so lib/libnvmefs.so.0 lib/libnvmefs.a \
	lib/pkgconfig/libnvmefs.pc share/man/man3/libnvmefs.3; do
	check "cmake --install puts $f" test -e "$prefix/$f"
done
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
check "the .pc names the install prefix" grep -qx "prefix=$prefix" "$prefix/lib/pkgconfig/libnvmefs.pc"

ex=$MNT_TMP/ex
mkdir "$ex"
cp "$src/client/examples/roundtrip.c" "$ex/roundtrip.c"
(cd "$ex" && bash -c "$line") || mnt_die "the user guide's line failed: $line"
check "linked against the installed libnvmefs.so.0" \
	grep -q "libnvmefs.so.0 => $prefix/lib/" <<<"$(LD_LIBRARY_PATH=$prefix/lib ldd "$ex/roundtrip")"

# What roundtrip.c writes: byte i is i * 7 + i / 4096 (mod 256).
python3 -c '
import sys
blocks = [bytes((j * 7 + b) & 255 for j in range(4096)) for b in range(256)]
with open(sys.argv[1], "wb") as f:
    for b in range(16384):
        f.write(blocks[b & 255])
' "$MNT_TMP/expected"

# shellcheck disable=SC2317 # runs through check
native() { # KEY: the daemon's native counter
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["native"][sys.argv[2]])' \
		"$MNT/.nvmefs/stats" "$1"
}

run_example() { # MODE PROGRAM [ENV...]
	local mode=$1 prog=$2 out rc=0
	shift 2
	out=$(env "$@" "$prog" "$MNT/dir/roundtrip.bin" 2>&1) || rc=$?
	echo "$mode: $out"
	check "$mode: $(basename "$prog") exits 0 (got $rc)" test "$rc" = 0
	check "$mode: says identical" grep -q "identical$" <<<"$out"
	check "$mode: through the mount, the bytes it wrote" cmp "$MNT_TMP/expected" "$MNT/dir/roundtrip.bin"
	check "$mode: the daemon copied nothing ($(native copied_bytes) bytes)" test "$(native copied_bytes)" = 0
}

mnt_mount
mkdir "$MNT/dir"
run_example default "$ex/roundtrip" LD_LIBRARY_PATH="$prefix/lib"
check "the daemon counted the example's write" test "$(native writes)" -ge 1
mnt_remount mode=cached
run_example cached "$ex/roundtrip" LD_LIBRARY_PATH="$prefix/lib"

rc=0
out=$(LD_LIBRARY_PATH=$prefix/lib "$ex/roundtrip" 2>&1) || rc=$?
check "no argument: exit 2 (got $rc) and usage" test "$rc:${out:0:6}" = "2:usage:"
rc=0
out=$(LD_LIBRARY_PATH=$prefix/lib "$ex/roundtrip" "$MNT_TMP/elsewhere" 2>&1) || rc=$?
check "outside nvmefs: exit 1 (got $rc), '$out'" test "$rc" = 1
check "outside nvmefs: says so" grep -q "not on an nvmefs mount" <<<"$out"

if [ -z "$static_line" ]; then
	echo "FAIL: user guide: no '\$ cc -static -o roundtrip roundtrip.c' line" >&2
	MNT_FAIL=$((MNT_FAIL + 1))
elif pkg-config --static --libs libnvmefs >/dev/null; then
	echo "user guide: $static_line"
	rm -f "$ex/roundtrip"
	# libnuma.a warns that it uses getaddrinfo; the client never calls it.
	if (cd "$ex" && bash -c "$static_line") >"$MNT_TMP/static.log" 2>&1; then
		check "static: no dynamic section" grep -q "not a dynamic executable" \
			<<<"$(ldd "$ex/roundtrip" 2>&1 || true)"
		run_example static "$ex/roundtrip"
	else
		cat "$MNT_TMP/static.log" >&2
		echo "FAIL: the user guide's static line failed: $static_line" >&2
		MNT_FAIL=$((MNT_FAIL + 1))
	fi
else
	echo "pkg-config --static does not work here: static link not tried"
fi
mnt_result
