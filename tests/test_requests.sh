#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The FUSE requests common file operations cost (issue 33 item 3), counted
# by tests/count_requests.py from .nvmefs/stats, on 200 files of 4 KiB:
#  - direct mode: a read-only open of a small file goes through the page
#    cache (-o cache_small, default 1M), so Python's open().read() costs
#    one READ, not two (the second found EOF). The open of a file the
#    kernel holds no pages of, when a read would leave its atime (relatime:
#    read since it changed), stores the data there before it replies (an
#    open's push, fs/fuse/ops_file.c): every cold read after the first
#    (os.read, cp, tar) sends no READ. The first read after the files were
#    written moves their atime, with a READ or through statahead's push
#    (how many it pushed ahead of the walk is timing: only the bound of one
#    READ asserted; tests/test_statahead.sh measures it). A second read of
#    the same files sends none; a create costs LOOKUP, CREATE, GETATTR,
#    WRITE and RELEASE and nothing more; an unlink GETATTR and UNLINK (a
#    cold stat's LOOKUP depends on how far statahead got: not asserted);
#  - direct mode with cache_small=0: two READs per read to the end again
#    (the option is what makes the difference), no push;
#  - cached mode: as direct mode without statahead; with the write-back
#    cache no push (its dirty pages outlive their handles): one READ.
# Exit 77 (skip) without root, /dev/fuse, the nvmefs binaries or python3.
# usage: test_requests.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -ne 1 ]; then
	echo "usage: test_requests.sh BUILD_DIR" >&2
	exit 2
fi
build=$1
mnt_time_limit 240 "$0" "$@"
py=/usr/bin/python3
mnt_need "$py" python3
mnt_need tar
mnt_setup "$build" 4 256M

# expect WHAT SEQUENCE OPCODE OP VALUE: the count per file of OPCODE in
# SEQUENCE (a prefix of its name) compared with VALUE (OP: eq, le), +-0.1.
expect() {
	check "$1: $3 per file in \"$2\" $4 $5" "$py" - "$MNT_TMP/counts" "$2" "$3" "$4" "$5" <<'PY'
import json, sys
counts, seq, op, cmp, want = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
table = json.load(open(counts))
rows = [v for k, v in table.items() if k.startswith(seq)]
if len(rows) != 1:
    sys.exit("no single sequence named %r in %s" % (seq, list(table)))
got = rows[0].get(op, 0.0) if op != "total" else sum(rows[0].values())
ok = abs(got - want) <= 0.1 if cmp == "eq" else got <= want + 0.1
if not ok:
    print("got %.2f; the sequence's requests: %s" % (got, rows[0]), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}

# counts OPTS: mount with OPTS, count, unmount; the JSON in $MNT_TMP/counts,
# the opens that pushed their data (.nvmefs/stats data.open_pushes) in
# $MNT_TMP/pushes.
counts() {
	mnt_mount "$1"
	"$py" "$here/count_requests.py" "$MNT" 200 >"$MNT_TMP/counts"
	"$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"]["open_pushes"])' \
		"$MNT/.nvmefs/stats" >"$MNT_TMP/pushes"
	mnt_umount
}
# pushes WHAT N SEQS: N or more opens pushed their data in SEQS cold
# sequences, less 20 a sequence (the 0.1 a file expect allows): a file
# whose FORGET the daemon had not had when the walk's LOOKUP came (the
# kernel sends FORGETs in the background; on io_uring they come on
# /dev/fuse) reads with a READ.
pushes() {
	check "$1: $2 or more opens pushed their data (got $(cat "$MNT_TMP/pushes"))" \
		test "$(cat "$MNT_TMP/pushes")" -ge $(($2 - 20 * $3))
}

counts mode=direct
expect direct "read (open(p, 'rb').read()), cold" READ le 1
expect direct "read again" READ eq 0
expect direct "read (os.open" READ eq 0
expect direct "create" total le 5
expect direct "create" WRITE eq 1
expect direct "unlink" total le 2
expect direct "tar c" READ eq 0
expect direct "cp -r" READ eq 0
# cp and tar read the directory first (READDIRPLUS, no LOOKUP for
# statahead to follow): their 400 files are pushed by their opens.
pushes direct 400 2

counts mode=direct,statahead=0
expect "direct, statahead=0" "read (open(p, 'rb').read()), cold" READ eq 1
expect "direct, statahead=0" "read again" READ eq 0
expect "direct, statahead=0" "read (os.open" READ eq 0
expect "direct, statahead=0" "tar c" READ eq 0
pushes "direct, statahead=0" 600 3

counts mode=direct,cache_small=0
expect "direct, cache_small=0" "read (open(p, 'rb').read()), cold" READ eq 2
expect "direct, cache_small=0" "read again" READ eq 2
expect "direct, cache_small=0" "read (os.open" READ eq 1
check "direct, cache_small=0: no open pushed its data" test "$(cat "$MNT_TMP/pushes")" -eq 0

counts mode=cached
expect cached "read (open(p, 'rb').read()), cold" READ eq 1
expect cached "read again" READ eq 0
expect cached "read (os.open" READ eq 0
expect cached "cp -r" READ eq 0
expect cached "create" total le 5
pushes cached 600 3

counts mode=cached,writeback
expect "cached, writeback" "read (open(p, 'rb').read()), cold" READ eq 1
expect "cached, writeback" "read (os.open" READ eq 1
check "cached, writeback: no open pushed its data" test "$(cat "$MNT_TMP/pushes")" -eq 0
mnt_result
