#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# emu-drives.sh: run a command against N emulated drives.
#
# Creates N image files in DIR (tmpfs by default, so the "drives" are RAM),
# attaches each to a loop device, optionally caps every device at MIBPS MiB/s
# for reads and for writes (block-cgroup throttling), runs CMD with
# EMU_DEVS="/dev/loopA /dev/loopB ..." in its environment, then tears
# everything down and exits with CMD's exit status.
#
# Usage: emu-drives.sh [-n N] [-s SIZE] [-d DIR] [-c MIBPS] [--] CMD [ARGS...]
#   -n N      number of drives (default 4)
#   -s SIZE   size of each drive, bytes or with a K/M/G suffix (1024-based;
#             default 2G); must be a multiple of 512
#   -d DIR    where the image files go (default /dev/shm)
#   -c MIBPS  cap every device at MIBPS MiB/s for reads and for writes
#             (default: no cap)
#   -h        print this help
# Needs root (losetup, cgroups). Example:
#   sudo scripts/emu-drives.sh -n 4 -s 1G -c 200 -- sh -c 'echo $EMU_DEVS'
#
# Cleanup: an EXIT/INT/TERM/HUP trap always removes what was set up: processes
# that CMD left running (found through the cgroup and through the variable
# EMU_DRIVES_TAG that all of CMD's processes inherit) are terminated, the
# cgroup is removed, every loop device attached to one of our image files is
# detached and the files are deleted. On INT/TERM/HUP the signal is first
# forwarded to all of CMD's processes (5 s to exit, then SIGTERM, 5 s more,
# then SIGKILL) and the script exits with 128+signal. The "+io" that may have been written to the
# cgroup v2 root's cgroup.subtree_control is left enabled (other cgroups may
# use it).
#
# How the cap works: the subshell that becomes CMD writes itself into the
# new cgroup's cgroup.procs and then execs CMD, so CMD and all its threads and
# children are in the cgroup. With O_DIRECT (and libaio) the bios for the loop
# device are submitted by the task that calls io_submit()/pwrite(), i.e. by
# CMD itself, so blk-throttle charges them to CMD's cgroup at the loop
# device's queue. This was measured on this machine (kernel 6.18, cgroup v1
# blkio): fio --ioengine=libaio --direct=1 --bs=1M --iodepth=32 on one loop
# device capped at 200 MiB/s gave 200.1 MiB/s write and 200.4 MiB/s read
# (1 GiB each, ~5.1 s). The loop worker that then copies the data to the
# backing file is not throttled (the file is on tmpfs, no block device).
# Buffered (non-O_DIRECT) writes are not reliably capped under cgroup v1
# (known v1 limitation, not measured here): writeback issues them later,
# outside CMD's cgroup.
#
# Loop direct I/O: loop devices are attached WITHOUT --direct-io=on. The
# backing files are in tmpfs, where O_DIRECT (accepted by this kernel:
# loop/dio reads 1) is still a copy to/from the same shmem pages as buffered
# I/O, so it cannot save a copy. Measured with fio (libaio, direct=1, 1 MiB,
# QD 32, 4 loop devices of 2 GiB, 2 loops, after a warm-up write; 3 x 3 runs
# each, with load from other jobs on the 2-core box): direct-io=off write
# 3.9-5.7 GB/s, read 4.5-6.4 GB/s; direct-io=on write 3.5-5.5 GB/s, read
# 4.3-6.5 GB/s. No difference beyond noise, so we keep the simpler default,
# which also works on kernels whose tmpfs rejects O_DIRECT.
#
# Environment (for tests): EMU_CGROUP_V1_ROOT (default /sys/fs/cgroup/blkio)
# and EMU_CGROUP_V2_ROOT (default: /sys/fs/cgroup or /sys/fs/cgroup/unified,
# whichever is a cgroup2 root) say where to make the cgroup. v1 is used when
# its blkio throttle files exist, else v2 when its root offers "io".

set -euo pipefail

PROG=${0##*/}
# shellcheck source=scripts/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
EMU_CGROUP_V1_ROOT=${EMU_CGROUP_V1_ROOT:-/sys/fs/cgroup/blkio}
# Empty: auto-detect (/sys/fs/cgroup or /sys/fs/cgroup/unified).
EMU_CGROUP_V2_ROOT=${EMU_CGROUP_V2_ROOT:-}

usage() {
	cat <<EOF
Usage: $PROG [-n N] [-s SIZE] [-d DIR] [-c MIBPS] [--] CMD [ARGS...]
Set up N emulated drives (image files in DIR on loop devices), optionally
capped at MIBPS MiB/s per device for reads and writes, run CMD with
EMU_DEVS="/dev/loopA /dev/loopB ..." set, tear down, exit with CMD's status.
  -n N      number of drives (default 4)
  -s SIZE   size of each drive: bytes or K/M/G suffix, 1024-based (default 2G)
  -d DIR    directory for the image files (default /dev/shm)
  -c MIBPS  cap each device at MIBPS MiB/s, read and write (default: no cap)
  -h        show this help
EOF
}

human() { # bytes -> short 1024-based string
	local b=$1
	if ((b % (1 << 30) == 0)); then
		printf '%d GiB' $((b >> 30))
	elif ((b % (1 << 20) == 0)); then
		printf '%d MiB' $((b >> 20))
	else
		printf '%d bytes' "$b"
	fi
}

ndev=4
size_arg=2G
dir=/dev/shm
cap_mibps=

while getopts ':hn:s:d:c:' opt; do
	case $opt in
	h)
		usage
		exit 0
		;;
	n) ndev=$OPTARG ;;
	s) size_arg=$OPTARG ;;
	d) dir=$OPTARG ;;
	c) cap_mibps=$OPTARG ;;
	:) bad_arg "option -$OPTARG needs an argument" ;;
	*) bad_arg "unknown option: -$OPTARG" ;;
	esac
done
shift $((OPTIND - 1))

if ! [[ $ndev =~ ^[0-9]+$ ]] || ((10#$ndev < 1 || 10#$ndev > 64)); then
	bad_arg "bad drive count -n '$ndev' (want an integer 1..64)"
fi
ndev=$((10#$ndev))
size=$(parse_size "$size_arg") ||
	bad_arg "bad size -s '$size_arg' (want bytes or a number with K, M or G)"
((size > 0 && size % 512 == 0)) ||
	bad_arg "bad size -s '$size_arg' (must be > 0 and a multiple of 512 bytes)"
if [[ -n $cap_mibps ]]; then
	if ! [[ $cap_mibps =~ ^[0-9]+$ ]] || ((10#$cap_mibps < 1)); then
		bad_arg "bad cap -c '$cap_mibps' (want a positive integer, MiB/s)"
	fi
	cap_mibps=$((10#$cap_mibps))
fi
[[ -d $dir ]] || bad_arg "bad directory -d '$dir' (not a directory)"
(($# >= 1)) || bad_arg "missing CMD"

((EUID == 0)) || die "must run as root (losetup, cgroups)"
for tool in losetup truncate df; do
	command -v "$tool" >/dev/null || die "required tool '$tool' not found"
done

need=$((ndev * size))
avail=$(df -B1 --output=avail "$dir" | tail -n 1 | tr -d ' ')
[[ $avail =~ ^[0-9]+$ ]] || die "cannot read free space of '$dir' from df"
((need <= avail)) ||
	die "not enough room in '$dir': need $ndev x $(human "$size") = $need bytes, df says $avail bytes available"

# ---------------------------------------------------------------- cleanup --
MAIN_PID=$BASHPID
images=()    # image files we created (or were about to create)
devs=()      # loop devices we attached
cg=          # cgroup directory we created
cg_back=     # cgroup.procs to move leftover tasks to
child=       # PID of CMD

# Every process started by CMD inherits EMU_DRIVES_TAG=$TAG, so leftovers
# (a daemon CMD left running that still holds a device) can be found even
# without a cgroup.
TAG="$$.$RANDOM$RANDOM"

# The functions below run from traps; shellcheck cannot see that.
# shellcheck disable=SC2317
leftovers() { # pids of CMD's processes that are still alive
	local f
	if [[ -n $cg && -r $cg/cgroup.procs ]]; then
		cat "$cg/cgroup.procs" 2>/dev/null
	fi
	# One grep over all environments (cheap enough to poll).
	grep -lsxzF "EMU_DRIVES_TAG=$TAG" /proc/[0-9]*/environ |
		while read -r f; do
			f=${f#/proc/}
			echo "${f%/environ}"
		done
	return 0
}

# shellcheck disable=SC2317
loop_bound_to() { # DEV FILE: is DEV still attached to FILE?
	local bf
	bf=$(cat "/sys/block/${1##*/}/loop/backing_file" 2>/dev/null) || return 1
	[[ ${bf% (deleted)} == "$(realpath -m -- "$2")" ]]
}

# shellcheck disable=SC2317
cleanup() {
	[[ $BASHPID == "$MAIN_PID" ]] || return 0
	set +e
	# Finish even if signalled again (e.g. a second ^C).
	trap "" INT TERM HUP
	trap - EXIT
	local f d i pids
	# Normally nothing is left: CMD has exited. Anything left would keep
	# the cgroup and maybe the devices busy.
	pids=$(leftovers | sort -u)
	if [[ -n $pids ]]; then
		printf '%s: terminating processes CMD left behind: %s\n' "$PROG" "${pids//$'\n'/ }" >&2
		# shellcheck disable=SC2086 # word splitting wanted
		kill -TERM $pids 2>/dev/null
		for ((i = 0; i < 50; i++)); do
			[[ -z $(leftovers) ]] && break
			sleep 0.1
		done
		pids=$(leftovers | sort -u)
		# shellcheck disable=SC2086
		[[ -n $pids ]] && kill -KILL $pids 2>/dev/null && sleep 0.5
	fi
	if [[ -n $cg && -d $cg ]]; then
		# Whatever survives (e.g. stuck in D state) goes back out of the
		# cgroup so that the cgroup can be removed.
		while read -r d; do
			echo "$d" >"$cg_back" 2>/dev/null
		done < <(cat "$cg/cgroup.procs" 2>/dev/null)
		for ((i = 0; i < 50; i++)); do
			rmdir "$cg" 2>/dev/null && break
			sleep 0.1
		done
		[[ -d $cg ]] && printf '%s: warning: could not remove cgroup %s\n' "$PROG" "$cg" >&2
	fi
	for d in "${devs[@]}"; do
		losetup -d "$d" 2>/dev/null
	done
	# Also catches a device attached just before an interrupt, before we
	# could record it.
	for f in "${images[@]}"; do
		[[ -e $f ]] || continue
		while read -r d; do
			[[ -n $d ]] && losetup -d "$d" 2>/dev/null && devs+=("$d")
		done < <(losetup -n -O NAME -j "$f" 2>/dev/null)
	done
	# A device still open (e.g. by udev probing it) is only marked for
	# autoclear and goes away on last close: give that a moment.
	for f in "${images[@]}"; do
		for d in "${devs[@]}"; do
			for ((i = 0; i < 30; i++)); do
				loop_bound_to "$d" "$f" || break
				sleep 0.1
			done
			loop_bound_to "$d" "$f" &&
				printf '%s: warning: %s is still open, it will be detached on last close\n' "$PROG" "$d" >&2
		done
		rm -f -- "$f"
		[[ -e $f ]] && printf '%s: warning: could not remove %s\n' "$PROG" "$f" >&2
	done
	return 0
}

# shellcheck disable=SC2317
on_signal() {
	local sig=$1 num=$2 i pids pass
	set +e
	trap "" INT TERM HUP # once is enough
	if [[ -n $child ]]; then
		# Like a terminal's ^C: the signal goes to all of CMD's processes
		# and they get 5 s to exit; then SIGTERM (in case they ignore
		# SIGINT), 5 s more, then SIGKILL. Waiting for all of them here
		# (not just CMD) lets cleanup find none left.
		for pass in "$sig" TERM KILL; do
			pids=$(leftovers | sort -u)
			[[ -z $pids && $pass != "$sig" ]] && break
			# shellcheck disable=SC2086 # word splitting wanted
			kill "-$pass" "$child" $pids 2>/dev/null
			for ((i = 0; i < 50; i++)); do
				[[ -z $(leftovers) ]] && ! kill -0 "$child" 2>/dev/null && break
				sleep 0.1
			done
		done
		wait "$child" 2>/dev/null
	fi
	exit $((128 + num))
}

trap cleanup EXIT
trap 'on_signal INT 2' INT
trap 'on_signal TERM 15' TERM
trap 'on_signal HUP 1' HUP

# ------------------------------------------------------------------ setup --
for ((k = 0; k < ndev; k++)); do
	f="${dir%/}/emu-drives.$$.$k.img"
	images+=("$f")
	truncate -s "$size" -- "$f"
	# No --direct-io=on: see the comment at the top.
	d=$(losetup -f --show -- "$f")
	devs+=("$d")
done

majmin() { # /dev/loopN -> MAJ:MIN
	cat "/sys/block/${1##*/}/dev"
}

cg_desc="no cap"
if [[ -n $cap_mibps ]]; then
	bps=$((cap_mibps * 1024 * 1024))
	v2root=$EMU_CGROUP_V2_ROOT
	if [[ -z $v2root ]]; then
		for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do
			if [[ -f $r/cgroup.controllers ]]; then
				v2root=$r
				break
			fi
		done
	fi
	if [[ -f $EMU_CGROUP_V1_ROOT/blkio.throttle.read_bps_device ]]; then
		# cgroup v1, blkio controller.
		own=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}blkio\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' /proc/self/cgroup)
		cg_back=$EMU_CGROUP_V1_ROOT${own%/}/cgroup.procs
		[[ -w $cg_back ]] || cg_back=$EMU_CGROUP_V1_ROOT/cgroup.procs
		cg=$EMU_CGROUP_V1_ROOT/emu-drives.$$
		mkdir "$cg" || die "cannot create cgroup $cg"
		for d in "${devs[@]}"; do
			mm=$(majmin "$d")
			echo "$mm $bps" >"$cg/blkio.throttle.read_bps_device" ||
				die "cannot set read cap on $d ($mm) in $cg"
			echo "$mm $bps" >"$cg/blkio.throttle.write_bps_device" ||
				die "cannot set write cap on $d ($mm) in $cg"
		done
		cg_desc="cap $cap_mibps MiB/s read+write per device via cgroup v1 $cg"
	elif [[ -n $v2root ]] && grep -qw io "$v2root/cgroup.controllers" 2>/dev/null; then
		# cgroup v2, io controller available in the root.
		cg_back=$v2root/cgroup.procs
		if ! grep -qw io "$v2root/cgroup.subtree_control"; then
			echo "+io" >"$v2root/cgroup.subtree_control" ||
				die "cannot enable the io controller in $v2root/cgroup.subtree_control"
		fi
		cg=$v2root/emu-drives.$$
		mkdir "$cg" || die "cannot create cgroup $cg"
		for d in "${devs[@]}"; do
			mm=$(majmin "$d")
			echo "$mm rbps=$bps wbps=$bps" >"$cg/io.max" ||
				die "cannot set io.max for $d ($mm) in $cg"
		done
		cg_desc="cap $cap_mibps MiB/s read+write per device via cgroup v2 $cg"
	else
		die "cannot cap at $cap_mibps MiB/s: no cgroup v1 blkio throttling under $EMU_CGROUP_V1_ROOT and no cgroup v2 io controller${v2root:+ in $v2root}"
	fi
fi

EMU_DEVS="${devs[*]}"
export EMU_DEVS
printf '%s: %d x %s loop devices (direct-io off), images in %s: %s; %s\n' \
	"$PROG" "$ndev" "$(human "$size")" "$dir" "$EMU_DEVS" "$cg_desc" >&2

# -------------------------------------------------------------------- run --
# Bash gives background jobs /dev/null as stdin; hand CMD our real stdin.
# A "( ... ) &" subshell, unlike "cmd &", does not make bash ignore SIGINT
# and SIGQUIT in CMD (bash 5.2), and "trap -" undoes our own traps, so CMD
# gets a terminal's ^C as usual (unless we ourselves were started ignoring
# it, e.g. by "emu-drives.sh ... &" from a script).
exec 3<&0
(
	trap - INT TERM HUP QUIT
	export EMU_DRIVES_TAG=$TAG
	if [[ -n $cg ]]; then
		echo "$BASHPID" >"$cg/cgroup.procs"
	fi
	exec "$@" <&3 3<&-
) &
child=$!
exec 3<&-
rc=0
wait "$child" || rc=$?
child=
exit "$rc"
