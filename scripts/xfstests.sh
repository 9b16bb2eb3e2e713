#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run xfstests (the fstests project, kdave/xfstests) on nvmefs, as root on
# Debian 12: install xfstests' build dependencies, build the given checkout,
# create its users, install nvmefs (mount -t fuse.nvmefs runs mount.fuse3,
# which runs `nvmefs` from mount(8)'s fixed PATH, so it must be in
# /usr/local/sbin or /usr/sbin: `cmake --install` into WORKDIR/prefix, bound
# over /usr/local/sbin in a private mount namespace, so that the machine's
# own /usr/local/sbin is not touched and a run of each mode can go side by
# side), make a test and a scratch volume of 4 image files each, write the
# configuration with the hooks xfstests lacks for a FUSE filesystem, run
# ./check there and always unmount.
#
# usage: scripts/xfstests.sh [-m MODE] [-w WORKDIR] [-s SIZE] [-x XFSTESTS_DIR]
#                            [-B] BUILD_DIR [CHECK_ARGS...]
#   -m MODE        direct (default) or cached: the volumes' -o mode=
#   -w WORKDIR     image files, mount points, configuration and results
#                  (default /var/tmp/nvmefs-xfstests-MODE; removed first)
#   -s SIZE        size of each image file (default 2G; sparse)
#   -x DIR         the xfstests checkout (default $XFSTESTS_DIR); this script
#                  downloads nothing
#   -B             do not install packages nor run make (already done)
#   CHECK_ARGS     passed to ./check (default: -g quick)
# Results: WORKDIR/results (check.log, one .out.bad/.full per failure) and
# WORKDIR/check.out (./check's output). The exit status is ./check's.
set -eu
PROG=xfstests.sh
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$top/scripts/lib.sh"

usage() {
	sed -n '14,25s/^# \{0,1\}//p' "$0"
}

mode=direct
work=""
size=2G
xfs=${XFSTESTS_DIR:-}
prepare=1
while getopts m:w:s:x:Bh o; do
	case $o in
	m) mode=$OPTARG ;;
	w) work=$OPTARG ;;
	s) size=$OPTARG ;;
	x) xfs=$OPTARG ;;
	B) prepare=0 ;;
	h)
		usage
		exit 0
		;;
	*) bad_arg "unknown option" ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || bad_arg "BUILD_DIR missing"
build=$(cd "$1" && pwd) || die "no build directory $1"
shift
case $mode in direct | cached) ;; *) bad_arg "mode must be direct or cached, not $mode" ;; esac
parse_size "$size" >/dev/null || bad_arg "bad size $size"
[ -n "$xfs" ] || bad_arg "no xfstests checkout: give -x DIR or set XFSTESTS_DIR"
[ -f "$xfs/check" ] || die "$xfs is not an xfstests checkout (no ./check)"
xfs=$(cd "$xfs" && pwd)
[ "$(id -u)" = 0 ] || die "must run as root (packages, users, mounts)"
for p in nvmefs mkfs.nvmefs fsck.nvmefs; do
	[ -x "$build/$p" ] || die "$build/$p not built (scripts/build.sh $build)"
done
work=${work:-/var/tmp/nvmefs-xfstests-$mode}
[ $# -gt 0 ] || set -- -g quick

# Debian's packages for xfstests' build and its tests (xfstests' README,
# less lvm2 and the kernel headers; acl's chacl and xfsdump are used by
# tests of the generic group).
xfs_pkgs=(xfslibs-dev uuid-dev libtool-bin e2fsprogs automake gcc libuuid1 quota attr make
	libacl1-dev libaio-dev xfsprogs libgdbm-dev gawk fio dbench uuid-runtime python3
	sqlite3 libcap-dev bc psmisc acl dump indent libtool liburing-dev libgdbm-compat-dev
	xfsdump)

prepare_xfstests() {
	local missing=() p
	for p in "${xfs_pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing ${missing[*]}"
		# A fresh machine may be installing updates: wait for the dpkg lock.
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=1200 \
			install -y -q "${missing[@]}" >/dev/null
	fi
	log "building xfstests in $xfs"
	make -C "$xfs" -j "$(nproc)" >"$work/make.log" 2>&1 ||
		die "make failed in $xfs (see $work/make.log)"
	# The users and groups the tests switch to (xfstests' README, step 6).
	getent group fsgqa >/dev/null || groupadd fsgqa
	getent passwd fsgqa >/dev/null || useradd -m -g fsgqa fsgqa
	getent passwd fsgqa2 >/dev/null || useradd -m fsgqa2
	getent passwd 123456-fsgqa >/dev/null || useradd -m 123456-fsgqa
}

# pids of processes with a file open under the work directory: the daemons
# of our volumes (mkfs and fsck are not left running).
holders() {
	find /proc/[0-9]*/fd -maxdepth 1 -lname "$work/*" 2>/dev/null | cut -d/ -f3 | sort -u
}

cleanup() {
	local i pids
	set +e
	# The mounts were in the namespace, gone with it; a daemon finishes its
	# last commit after the unmount: wait for it, then kill it (one whose
	# mount the namespace's end left behind too) so that nothing is left.
	for ((i = 0; i < 60; i++)); do
		pids=$(holders)
		[ -n "$pids" ] || break
		sleep 0.5
	done
	pids=$(holders)
	if [ -n "$pids" ]; then
		log "killing what still holds $work: $(echo "$pids" | tr '\n' ' ')"
		# shellcheck disable=SC2086 # one pid a word
		kill -9 $pids
	fi
	rm -f "$work"/test/*.img "$work"/scratch/*.img
}

mkdir -p "$work"
[ "$prepare" = 0 ] || prepare_xfstests
[ -x "$xfs/ltp/fsstress" ] || die "xfstests in $xfs is not built (run without -B)"

log "installing nvmefs from $build into $work/prefix"
rm -rf "${work:?}/prefix"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
sbin=$work/prefix/sbin
[ -x "$sbin/nvmefs" ] || die "cmake --install put no nvmefs in $sbin"

trap cleanup EXIT
cleanup
rm -rf "${work:?}/results"
mkdir -p "$work/test" "$work/scratch" "$work/mnt/test" "$work/mnt/scratch"
# Labels unique per mode, so that runs of both modes can go side by side.
for v in test scratch; do
	members=()
	for i in 0 1 2 3; do
		truncate -s "$size" "$work/$v/m$i.img"
		members+=("$work/$v/m$i.img")
	done
	"$sbin/mkfs.nvmefs" -f -q -L "xfs-$mode-$v" "${members[@]}" >/dev/null
done

# The configuration. TEST_DEV and SCRATCH_DEV are label=... with -o search=
# (a member list has commas, which some of xfstests' sed expressions take
# apart); nvmefs gives the mount that source as its fsname, which xfstests
# compares with /proc/mounts.
#
# xfstests has no mkfs nor fsck for FSTYP=fuse: its _scratch_mkfs only
# removes the scratch files and _check_*_fs do nothing. Our versions must
# replace common/rc's, which is sourced after this file (common/rc sources
# common/config, which sources it), so a RETURN trap installs them once a
# source of common/rc has finished (init_rc is then defined); functions
# without the trace attribute do not run it.
cat >"$work/local.config" <<EOF
# Written by nvmefs's scripts/xfstests.sh for mode=$mode.
export FSTYP=fuse
export FUSE_SUBTYP=.nvmefs
export TEST_DEV=label=xfs-$mode-test
export TEST_DIR=$work/mnt/test
export SCRATCH_DEV=label=xfs-$mode-scratch
export SCRATCH_MNT=$work/mnt/scratch
export TEST_FS_MOUNT_OPTS="-o search=$work/test,mode=$mode"
export MOUNT_OPTIONS="-o search=$work/scratch,mode=$mode"
export RESULT_BASE=$work/results
export NVMEFS_SBIN=$sbin
export NVMEFS_TEST_MEMBERS="$(echo "$work"/test/m?.img)"
export NVMEFS_SCRATCH_MEMBERS="$(echo "$work"/scratch/m?.img)"
export NVMEFS_SCRATCH_LABEL=xfs-$mode-scratch
export NVMEFS_MEMBER_SIZE=$(parse_size "$size")
. $top/scripts/xfstests-hooks.sh
trap 'if declare -F init_rc >/dev/null; then _nvmefs_install_hooks; fi' RETURN
EOF

# Inside the namespace: nvmefs where mount(8) looks, ./check, and the
# unmounts (the namespace's mounts are seen nowhere else).
inner() { # SBIN XFSTESTS_DIR WORKDIR CHECK_ARGS...
	inner_work=$3 # global: the EXIT trap runs after inner returns
	mount --bind "$1" /usr/local/sbin
	inner_umount() {
		local m
		for m in "$inner_work/mnt/scratch" "$inner_work/mnt/test"; do
			! mountpoint -q "$m" || umount "$m" || umount -l "$m"
		done
	}
	trap inner_umount EXIT
	cd "$2"
	shift 3
	HOST_OPTIONS=$inner_work/local.config ./check "$@"
}

log "running ./check $* in mode $mode (output in $work/check.out)"
unshare -m --propagation private "$BASH" -c "$(declare -f inner); inner \"\$@\"" inner \
	"$sbin" "$xfs" "$work" "$@" 2>&1 | tee "$work/check.out"
rc=${PIPESTATUS[0]}
exit "$rc"
