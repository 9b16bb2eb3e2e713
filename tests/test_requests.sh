#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The FUSE requests common file operations cost (issue 33 item 3), counted
# by tests/count_requests.py from .nvmefs/stats, on 200 files of 4 KiB:
#  - direct mode: a read-only open of a small file goes through the page
#    cache (-o cache_small, default 1M), and statahead pushed the data of
#    the files a cold walk reads: almost no READ; with -o statahead=0,
#    Python's open().read() costs one READ, not two (the second found
#    EOF); a second read of the same files none; a create costs LOOKUP, CREATE, GETATTR, WRITE and RELEASE
#    and nothing more; an unlink GETATTR and UNLINK (a cold stat's LOOKUP
#    depends on how far statahead got: not asserted);
#  - direct mode with cache_small=0: two READs per read to the end again
#    (the option is what makes the difference);
#  - cached mode: as direct mode with cache_small.
# Each bound fails on a regression by one request per file (tolerance 0.1
# for the directory's own requests, spread over the files).
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

# counts OPTS: mount with OPTS, count, unmount; the JSON in $MNT_TMP/counts.
counts() {
	mnt_mount "$1"
	"$py" "$here/count_requests.py" "$MNT" 200 >"$MNT_TMP/counts"
	mnt_umount
}

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

counts mode=direct
# Statahead pushed most files' data ahead of the cold walk: no READ.
expect direct "read (open(p, 'rb').read()), cold" READ le 0.15
expect direct "read again" READ eq 0
expect direct "read (os.open" READ le 0.15
expect direct "create" total le 5
expect direct "create" WRITE eq 1
expect direct "unlink" total le 2
expect direct "tar c" READ eq 1
expect direct "cp -r" READ eq 1

counts mode=direct,statahead=0
expect "direct, statahead=0" "read (open(p, 'rb').read()), cold" READ eq 1
expect "direct, statahead=0" "read (os.open" READ eq 1

counts mode=direct,cache_small=0
expect "direct, cache_small=0" "read (open(p, 'rb').read()), cold" READ eq 2
expect "direct, cache_small=0" "read again" READ eq 2

counts mode=cached
expect cached "read (open(p, 'rb').read()), cold" READ eq 1
expect cached "read again" READ eq 0
expect cached "create" total le 5
mnt_result
