#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# xfstests' generic quick group on nvmefs in one mount mode, through
# scripts/xfstests.sh, when XFSTESTS_DIR names a checkout of xfstests
# (kdave/xfstests; the script builds it); else a skip. Hours long: ctest
# label xfstests, outside the default suite (scripts/test.sh). The results
# stay in /var/tmp/nvmefs-xfstests-MODE/results (docs/RELIABILITY.md).
# usage: test_xfstests.sh BUILD [direct|cached]   (exit 0 pass, 1 fail, 77 skip)
set -eu
build=$1
mode=${2:-direct}
if [ -z "${XFSTESTS_DIR:-}" ]; then
	echo "SKIP: XFSTESTS_DIR is not set (a checkout of xfstests)"
	exit 77
fi
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: xfstests needs root"
	exit 77
fi
rc=0
bash "$(dirname "$0")/../scripts/xfstests.sh" -m "$mode" -x "$XFSTESTS_DIR" "$build" -g quick || rc=$?
[ "$rc" = 0 ] || echo "FAIL: xfstests -g quick in $mode mode (exit status $rc)"
[ "$rc" = 0 ]
