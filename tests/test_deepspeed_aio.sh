#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# DeepSpeed's own aio unit tests (tests/test_deepspeed_aio.py) on a freshly
# formatted volume mounted -o mode=MODE: their files go through nvmefs's
# native client. Then fsck -n is clean. Skipped (exit 77) without a
# DeepSpeed checkout: DEEPSPEED_SRC=DIR (a work tree or a bare git
# directory).
# usage: test_deepspeed_aio.sh BUILD_DIR cached|direct
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# != 2 ]; then
	echo "usage: test_deepspeed_aio.sh BUILD_DIR cached|direct" >&2
	exit 2
fi
build=$1
mode=$2
case $mode in
cached | direct) ;;
*) mnt_die "unknown mode $mode" ;;
esac
[ -n "${DEEPSPEED_SRC:-}" ] || mnt_skip "no DeepSpeed checkout: set DEEPSPEED_SRC=DIR"
[ -d "$DEEPSPEED_SRC" ] || mnt_skip "no directory $DEEPSPEED_SRC"
[ -x /usr/bin/python3 ] || mnt_skip "no /usr/bin/python3"
/usr/bin/python3 -c 'import pytest, torch' 2>/dev/null ||
	mnt_skip "no pytest or torch for /usr/bin/python3 (python3-pytest, python3-torch)"
[ -f "$build/python/nvmefs/_paths.py" ] || mnt_skip "$build/python/nvmefs not built"
mnt_time_limit 600 "$0" "$@"
mnt_setup "$build" 4 256M
mnt_mount "mode=$mode"
check "DeepSpeed's aio unit tests on a $mode mount" \
	/usr/bin/python3 "$here/test_deepspeed_aio.py" "$build" --deepspeed "$DEEPSPEED_SRC" --dir "$MNT"
check "nothing left behind by the run" test -z "$(find "$MNT" -mindepth 1 -maxdepth 1 ! -name .nvmefs)"
mnt_umount
check "fsck -n clean after the run" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
mnt_result
