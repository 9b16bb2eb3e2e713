#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench.sh: nvmefs (cached and direct mode) against btrfs raid0 and against
# the raw devices (fio), on the same emulated drives in one run (issue 5).
#
# Usage: bench.sh [-b BUILD] [-o DIR] [--only ram|capped] [--quick] [--check]
#                 [--pool SIZE] [--no-warm] [-h]
#   -b BUILD      build directory with nvmefs and mkfs.nvmefs (default build/)
#   -o DIR        results directory (default bench-results/DATE-TIME in the
#                 current directory)
#   --only SET    run only the RAM setup (ram) or only the capped ones (capped)
#   --quick       much smaller sizes and fewer files: a smoke run of the whole
#                 script (about 2-3 minutes)
#   --check       exit 1 when a target below is missed
#   --pool SIZE   nvmefs pinned buffer pool, -o pool= (default 64M)
#   --no-warm     do not warm free memory before each measured pass (see
#                 "Cold memory" below)
#   -h            print this help
# Needs root, fio, jq, btrfs-progs, gnuplot (gnuplot-nox) for the capped
# runs and python3-torch (Debian's /usr/bin/python3) for the RAM run.
#
# Setups, each on fresh image files in /dev/shm attached to loop devices,
# deleted afterwards:
#  - RAM: 4 drives of 3 GiB, no cap. Workloads, each on btrfs, nvmefs
#    cached and nvmefs direct (in that order, each freshly made with mkfs):
#    1. dd if=/dev/zero bs=1M count=4096 conv=fsync, drop caches, dd read.
#    2. fio sequential write then read of one 4 GiB file, bs=1M, libaio,
#       iodepth=32, direct=1 (fio's default fallocate=native lays it out).
#    3. fio, 4 jobs writing 4 files of 1 GiB, bs=1M, psync, end_fsync=1
#       (fio's bandwidth includes the final fsync: checked, 2 GiB on a
#       capped drive came out at the cap).
#    4. fio --thread, 4 jobs writing one 4 GiB file laid out first with
#       fallocate(1), each its own 1 GiB range (offset_increment), bs=1M,
#       psync, end_fsync=1.
#    5. 10,000 files of 4 KiB (python3, os calls): create+write (+syncfs),
#       stat, drop caches, read (content checked), unlink (+syncfs).
#    6. torch.save of a 1 GiB state dict (16 float32 tensors) to the mount,
#       with fsync; drop caches; torch.load (tensors compared after timing).
#    plus fio on the raw devices (the limit): one job per device, libaio,
#    direct=1, bs=1M, iodepth=32, group_reporting, write then read; and
#    workloads 1 and 2 on tests/fuse_null in its cached and direct modes:
#    the same FUSE settings as nvmefs, no data kept, no device touched, so
#    what the FUSE transport alone allows here ("The FUSE ceiling" table).
#  - capped: 1, 2 and 4 drives of 3 GiB capped at 200 MiB/s each (read and
#    write). Only fio raw and workloads 1 and 2, moving 2 GiB per drive per
#    pass (dd: 2, 4, 8 GiB; about 10 s per pass whatever the drive count,
#    so the throttle's start-up slack weighs the same everywhere; the
#    1-drive dd is therefore 2 GiB, not 4).
#  --quick: RAM drives of 1 GiB, 512 MiB dd and fio files, 4 x 128 MiB for
#  workloads 3 and 4, 1000 small files, a 128 MiB state dict; capped drives
#  of 1 GiB moving 256 MiB per drive per pass (short passes read a few %
#  over the cap, see below).
#
# Before anything is measured in a setup, one unmeasured fio write pass
# covers every device (first writes into tmpfs pay for page allocation, at
# about a quarter of the later speed). For the same reason both file
# systems are made without discarding: mkfs.btrfs -K, mounted with -o
# nodiscard (btrfs 6.2+ discards freed space asynchronously), and
# mkfs.nvmefs -K (nvmefs itself never discards). A discard of a loop device
# punches holes in its tmpfs image, so the file system would then write
# into unallocated pages: 436 against 841 MB/s for nvmefs's dd on 4 capped
# drives. Otherwise btrfs is mounted with defaults. Caches are dropped with
# "sync -f MNT; echo 3 >/proc/sys/vm/drop_caches".
#
# Cold memory: this machine is a VM whose free memory goes back to the host
# (virtio_balloon free page reporting, /sys/module/page_reporting: order 9,
# min_free_ms 0), so the first touch of a page the kernel allocates costs a
# fault in the host. Whatever fills the page cache pays it: a 4 GiB dd into
# /dev/shm ran at 2.3 GB/s, a second one beside it at 890 MB/s with 83% of
# its time in copy_folio_from_iter_atomic. It hit btrfs's buffered writes and reads and nvmefs's cached mode,
# not direct mode (whose buffers are one pinned pool): dd in cached mode on
# 4 capped drives wrote 493 and 645 MB/s, and 821 and 838 MB/s (the cap is
# 839) when 5 GiB had just been written to /dev/shm and deleted. Real
# drives in a real host do not charge this. So before every measured pass,
# for every file system alike, warm_memory writes as many bytes as the pass
# moves (at most MemAvailable - 2 GiB) to a file in /dev/shm and deletes
# it; the pass then gets pages the host has just backed. Reads do it after
# dropping caches (the python workloads in their own process, between the
# drop and the timed phase). --no-warm measures without it.
#
# How the cap works, and what was verified (kernel 6.18, cgroup v1 blkio,
# loop devices over tmpfs, 200 MiB/s = 209.7 MB/s):
#  - blk-throttle charges a bio to the blkio cgroup of the task that
#    submits it. fio and the nvmefs daemon submit their own O_DIRECT bios;
#    btrfs's buffered writeback is submitted by kworkers, which are in the
#    root cgroup. A limit on a child cgroup therefore misses part of btrfs:
#    with dd (4 GiB, conv=fsync) run inside a child cgroup capped at 200
#    MiB/s, btrfs wrote at 254 MB/s, and the child was charged 2.72 GB of
#    the 4.29 GB (the rest went out from root's writeback).
#  - So the rules go on the v1 *root* blkio cgroup
#    (blkio.throttle.{read,write}_bps_device for our loop devices), which
#    this kernel honours: fio (libaio, direct, QD 32, 2 GiB) in the root
#    group gave 200.6 MiB/s write and read; btrfs dd 1.5 GiB gave 186 MB/s
#    write (with fsync) and 211 MB/s read.
#  - Under cgroup v1 blk-throttle is flat, not hierarchical: a group's rules
#    apply to its own tasks only. fio in a child group without rules ran at
#    963 MiB/s on a device capped in the root group. So the script moves
#    itself into the root blkio group first (everything it starts, the
#    nvmefs daemon included, is charged there), and removes its rules
#    before detaching the loop devices.
#  - Every run prints, under "Caps", every capped figure against the cap;
#    a btrfs figure above 1.10 x the cap is marked "*" (not capped fairly).
#    A full run (2 GiB per drive per pass) gave: fio raw 1.003 x the cap
#    (write and read, 1, 2 and 4 drives); btrfs dd read 0.998-1.003, fio
#    in the mount 0.993-1.003, dd write 0.64-0.90 (below the cap: btrfs's
#    own limit); nvmefs at most 1.016 x. With dd conv=fsync on nvmefs
#    (1 GiB, 4 capped drives), the devices' blkio byte counters had all
#    1024 MiB when dd exited and nothing more 3 s later: the figures are
#    not flattered by data still in flight.
#  - Short passes read over the cap: the throttle lets a first slice
#    through at once. With --quick (about 1.2 s passes) fio raw reads
#    ~1.05 x and nvmefs dd write up to ~1.2 x the cap: --quick capped
#    figures are a smoke test, not measurements.
#
# Output, in DIR and the report on stdout: report.md (machine, sizes, a
# markdown table per setup and workload: fio raw, btrfs, nvmefs cached,
# nvmefs direct, the ratios nvmefs/btrfs, nvmefs/fio raw for the
# sequential workloads and, capped, nvmefs/(drives x cap); the nvmefs
# daemon's peak RSS (VmHWM just before unmounting) with its pool size; the
# FUSE ceiling table (fuse_null, and the model 1 / (1 / fuse_null + 1 /
# fio raw) that adds one device copy to it, against btrfs and fio raw); the
# cap check; PASS/FAIL lines for the targets), results.tsv (every figure),
# capped.png (gnuplot: throughput against drive count, capped runs),
# commands.log (every command in order) and logs/ (each step's output).
# MB = 1e6 bytes, GB = 1e9 bytes.
#
# Targets (issue 5), each a PASS/FAIL line with its figures:
#  capped, 4 drives: sequential read and write through the mount (dd and
#    fio) >= 0.95 x 4 x 200 MiB/s; and within 5% of linear from 1 drive
#    (and from 1 to 2) drives;
#  RAM: sequential read and write (dd and fio) >= 1.0 x btrfs and >= 0.5 x
#    fio raw; torch.save and torch.load >= 1.0 x btrfs; small files (all
#    four phases) >= 0.5 x btrfs.
# Both nvmefs modes are checked.
#
# Exit status: 0 when the benchmark ran, even if targets were missed (1 with
# --check and a missed target); 1 when the benchmark itself failed (a tool,
# a mount, a workload, the nvmefs daemon exiting non-zero), after printing
# what it has; 2 for bad arguments.
#
# Cleanup: an EXIT/INT/TERM/HUP trap stops what is running, unmounts (a
# daemon that does not answer is SIGKILLed, which aborts its FUSE
# connection), clears the throttle rules, forgets the devices in btrfs,
# detaches the loop devices and deletes the images and the work directory.
# Every step that touches a mount runs under a time limit; on expiry the
# command is stopped, and if it is stuck in a FUSE request the nvmefs daemon
# is SIGKILLed. (Environment, for testing that path:
# NVMEFS_BENCH_TIME_LIMIT=SECS lowers every step's limit to SECS.) A run
# killed with SIGKILL cannot clean up: a later run clears throttle rules
# it finds on the loop devices it attaches.
#
# Time (2 cores, shared): --quick about 2 minutes (115 s through ctest);
# a full run about 10 minutes (RAM 2 min, each capped drive count 2.5-3).

set -euo pipefail
export LC_ALL=C

PROG=${0##*/}
# shellcheck source=scripts/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
SELF=$(realpath -- "${BASH_SOURCE[0]}")
HERE=$(dirname -- "$SELF")
TOP=$(dirname -- "$HERE")
PY=/usr/bin/python3
BLKIO=/sys/fs/cgroup/blkio
CAP_MIBPS=200
CAP_COUNTS=(1 2 4)
RAM_NDEV=4
MIB=$((1 << 20))
GIB=$((1 << 30))

usage() {
	cat <<EOF
Usage: $PROG [-b BUILD] [-o DIR] [--only ram|capped] [--quick] [--check] [--pool SIZE]
Benchmark nvmefs (cached and direct) against btrfs raid0 and fio on the raw
devices, on 4 RAM drives and on 1, 2 and 4 drives capped at $CAP_MIBPS MiB/s.
  -b BUILD      build directory with nvmefs, mkfs.nvmefs (default $TOP/build)
  -o DIR        results directory (default bench-results/DATE-TIME)
  --only SET    ram or capped: run only those setups
  --quick       small sizes: a smoke run of the whole script (2-3 minutes)
  --check       exit 1 if a target is missed
  --pool SIZE   nvmefs -o pool=SIZE (default 64M)
  --no-warm     do not warm free memory before each measured pass
  -h            show this help
Needs root, fio, jq, btrfs-progs, gnuplot, python3-torch.
EOF
}

# ------------------------------------------------------------- arguments --
build=$TOP/build
out=
only=all
quick=0
check=0
pool=64M
warm=1

while (($#)); do
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	-b | -o | --only | --pool)
		(($# >= 2)) || bad_arg "option $1 needs an argument"
		case $1 in
		-b) build=$2 ;;
		-o) out=$2 ;;
		--only) only=$2 ;;
		--pool) pool=$2 ;;
		esac
		shift 2
		;;
	--quick)
		quick=1
		shift
		;;
	--check)
		check=1
		shift
		;;
	--no-warm)
		warm=0
		shift
		;;
	*) bad_arg "unknown argument: '$1'" ;;
	esac
done
case $only in
all | ram | capped) ;;
*) bad_arg "bad --only '$only' (want ram or capped)" ;;
esac
parse_size "$pool" >/dev/null || bad_arg "bad --pool '$pool' (want bytes or a number with K, M or G)"
if [[ -n ${NVMEFS_BENCH_TIME_LIMIT-} && ! $NVMEFS_BENCH_TIME_LIMIT =~ ^[1-9][0-9]{0,5}$ ]]; then
	bad_arg "bad NVMEFS_BENCH_TIME_LIMIT '$NVMEFS_BENCH_TIME_LIMIT' (want seconds)"
fi
[[ -z $out ]] && out=$PWD/bench-results/$(date +%Y%m%d-%H%M%S)

# Sizes (see the top comment).
if ((quick)); then
	RAM_DEV=$GIB RAM_RAW_LOOPS=1 RAM_DD=$((512 * MIB)) RAM_FIO=$((512 * MIB))
	RAM_W4=$((128 * MIB)) SMALL_N=1000 TORCH_MIB=128
	CAP_DEV=$GIB CAP_PER_DRIVE=$((256 * MIB))
else
	RAM_DEV=$((3 * GIB)) RAM_RAW_LOOPS=2 RAM_DD=$((4 * GIB)) RAM_FIO=$((4 * GIB))
	RAM_W4=$GIB SMALL_N=10000 TORCH_MIB=1024
	CAP_DEV=$((3 * GIB)) CAP_PER_DRIVE=$((2 * GIB))
fi
SMALL_SIZE=4096

# ---------------------------------------------------------------- checks --
((EUID == 0)) || die "must run as root (loop devices, mounts, cgroups, drop_caches)"
missing=()
need() { # CMD PACKAGE
	command -v "$1" >/dev/null 2>&1 || missing+=("$1 (Debian package $2)")
}
need fio fio
need jq jq
need losetup util-linux
need fallocate util-linux
need fusermount3 fuse3
need mkfs.btrfs btrfs-progs
need btrfs btrfs-progs
[[ $only == ram ]] || need gnuplot gnuplot-nox
if [[ $only != capped ]]; then
	if [[ ! -x $PY ]]; then
		missing+=("$PY (Debian package python3)")
	elif ! "$PY" -c 'import torch' >/dev/null 2>&1; then
		missing+=("torch for $PY (Debian package python3-torch)")
	fi
fi
((${#missing[@]} == 0)) || die "missing: ${missing[*]}"
for b in nvmefs mkfs.nvmefs tests/fuse_null; do
	[[ -x $build/$b ]] || die "$build/$b not found (build it, e.g. scripts/build.sh, or give -b BUILD)"
done
build=$(realpath -- "$build")
[[ -c /dev/fuse ]] || die "no /dev/fuse"
if [[ $only != ram ]]; then
	[[ -w $BLKIO/blkio.throttle.read_bps_device && -w $BLKIO/cgroup.procs ]] ||
		die "no cgroup v1 blkio throttling at $BLKIO (needed for the capped runs; try --only ram)"
fi
# Throttling under v1 is flat (see the top comment): everything we start must
# be charged to the root group, where the rules go.
if [[ -w $BLKIO/cgroup.procs ]]; then
	own=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}blkio\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' /proc/self/cgroup)
	if [[ $own != / ]]; then
		log "moving myself from blkio cgroup $own to the root group (the caps are set there)"
		echo "$BASHPID" >"$BLKIO/cgroup.procs" || die "cannot move into $BLKIO"
	fi
fi

if [[ -e $out/results.tsv ]]; then
	bad_arg "bad -o '$out' (already holds results)"
fi
mkdir -p -- "$out/logs" || die "cannot create $out"
out=$(realpath -- "$out")
RESULTS=$out/results.tsv
CMDLOG=$out/commands.log
MISC=$out/logs/misc.log
: >"$RESULTS"
: >"$CMDLOG"

# ------------------------------------------------------- state, cleanup --
MAIN_PID=$BASHPID
work=$(mktemp -d /tmp/nvmefs-bench.XXXXXX)
mnt=$work/mnt
mkdir "$mnt"
mkfifo "$work/never" # never written: pause() reads it with a timeout
imgdir=      # directory of the current setup's images
images=()    # image files
devs=()      # loop devices attached to them
rules=()     # MAJ:MIN with a throttle rule in the root blkio group
cur_fs=      # btrfs, cached, direct, null-cached or null-direct while mounted
daemon_pid=  # the FUSE daemon: nvmefs or fuse_null (our child, -f)
daemon_log=  # its output
cur_pid=     # the command run() is waiting for
wd_pid=      # its watchdog
errors=0
last_fail=   # the last command run() saw fail, with its last line of output
timed_out=0  # run() stopped a command at its time limit
declare -A RECORDED=()

# pause SECS: sleep without a child process. A sleep(1) left behind by a
# killed watchdog would hold our stdout (and ctest waiting on it) open.
pause() {
	read -r -t "$1" <>"$work/never" || true
}

# alive PID: the process exists and some thread of it is not a zombie.
alive() {
	local t st
	for t in /proc/"$1"/task/*/stat; do
		read -r st 2>/dev/null <"$t" || continue
		st=${st##*) }
		case ${st%% *} in Z | X) ;; *) return 0 ;; esac
	done
	return 1
}

# mounted: $mnt is in the mount table (no access to it: the daemon may hang).
mounted() {
	awk -v m="$mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# bg_wait SECS CMD...: run CMD for at most SECS, polling; its status or 124
# (then it is left running: a process stuck in a FUSE request cannot die
# until the daemon does). Used where run()'s watchdog would be too much.
bg_wait() {
	local end=$((SECONDS + $1)) pid
	shift
	"$@" </dev/null >>"$MISC" 2>&1 &
	pid=$!
	while alive "$pid"; do
		((SECONDS < end)) || return 124
		pause 0.2
	done
	wait "$pid"
}

# stop_daemon WHY: SIGKILL the nvmefs daemon (aborts its FUSE connection, so
# whatever waits on it gets ENOTCONN) and reap it.
stop_daemon() {
	local i
	[[ -n $daemon_pid ]] || return 0
	if alive "$daemon_pid"; then
		log "$1: SIGKILL to the FUSE daemon $daemon_pid"
		kill -KILL "$daemon_pid" 2>/dev/null
		for ((i = 0; i < 100; i++)); do
			alive "$daemon_pid" || break
			pause 0.1
		done
	fi
	wait "$daemon_pid" 2>/dev/null
	daemon_pid=
	return 0
}

# force_umount: unmount whatever is mounted on $mnt, whatever it takes.
force_umount() {
	local i
	if mounted; then
		case $cur_fs in
		btrfs)
			bg_wait 120 umount "$mnt" || bg_wait 30 umount -l "$mnt"
			;;
		*)
			bg_wait 5 stat -f "$mnt" || stop_daemon "no answer to statfs"
			if ! bg_wait 30 fusermount3 -u "$mnt"; then
				stop_daemon "fusermount3 -u failed"
				bg_wait 10 fusermount3 -u -z "$mnt" || bg_wait 10 umount -l "$mnt"
			fi
			;;
		esac
	fi
	if [[ -n $daemon_pid ]]; then
		for ((i = 0; i < 300; i++)); do
			alive "$daemon_pid" || break
			pause 0.1
		done
		if alive "$daemon_pid"; then
			kill -TERM "$daemon_pid" 2>/dev/null
			pause 5
		fi
		stop_daemon "still running after unmount"
	fi
	mounted && log "warning: $mnt is still mounted"
	cur_fs=
	return 0
}

# clear_rule MAJ:MIN: no throttle rule for the device in the root group.
clear_rule() {
	echo "$1 0" >"$BLKIO/blkio.throttle.read_bps_device" 2>/dev/null
	echo "$1 0" >"$BLKIO/blkio.throttle.write_bps_device" 2>/dev/null
	return 0
}

# teardown_devices: remove the throttle rules, the loop devices and images.
teardown_devices() {
	local mm d f i
	for mm in "${rules[@]}"; do
		clear_rule "$mm"
	done
	rules=()
	for d in "${devs[@]}"; do
		btrfs device scan --forget "$d" >/dev/null 2>&1
		losetup -d "$d" 2>/dev/null
	done
	# Also a device attached just before an interrupt, not yet recorded.
	for f in "${images[@]}"; do
		[[ -e $f ]] || continue
		while read -r d; do
			[[ -n $d ]] && losetup -d "$d" 2>/dev/null
		done < <(losetup -n -O NAME -j "$f" 2>/dev/null)
		for ((i = 0; i < 30; i++)); do
			[[ -z $(losetup -n -O NAME -j "$f" 2>/dev/null) ]] && break
			pause 0.1
		done
		rm -f -- "$f"
	done
	devs=()
	images=()
	[[ -n $imgdir ]] && rm -rf -- "$imgdir"
	imgdir=
	return 0
}

# shellcheck disable=SC2317 # runs from a trap
cleanup() {
	local rc=$? i
	# Not in a background subshell (the watchdog).
	[[ $BASHPID == "$MAIN_PID" ]] || return 0
	set +e
	trap "" INT TERM HUP
	trap - EXIT
	[[ -n $wd_pid ]] && kill -KILL "$wd_pid" 2>/dev/null
	if [[ -n $cur_pid ]] && alive "$cur_pid"; then
		kill -TERM "$cur_pid" 2>/dev/null
		for ((i = 0; i < 50; i++)); do
			alive "$cur_pid" || break
			pause 0.1
		done
		kill -KILL "$cur_pid" 2>/dev/null
	fi
	force_umount
	teardown_devices
	if mounted; then
		log "warning: leaving $work ($mnt still mounted)"
	else
		rm -rf --one-file-system -- "$work"
	fi
	exit "$rc"
}

# shellcheck disable=SC2317 # runs from a trap
on_signal() {
	log "got SIG$1: cleaning up"
	exit $((128 + $2))
}
trap cleanup EXIT
trap 'on_signal INT 2' INT
trap 'on_signal TERM 15' TERM
trap 'on_signal HUP 1' HUP

# ------------------------------------------------------------- running --
error() {
	log "ERROR: $*"
	echo "$*" >>"$out/errors.txt"
	errors=$((errors + 1))
}

# newlog NAME: LOG = a fresh log file in $out/logs.
nlog=0
newlog() {
	nlog=$((nlog + 1))
	LOG=$(printf '%s/logs/%03d-%s.log' "$out" "$nlog" "$1")
}

# watchdog SECS PID WHAT: after SECS stop PID (TERM, then KILL), and SIGKILL
# the nvmefs daemon if one is mounted: a step that ran out of time on it
# means the mount does not answer (and PID may be stuck in a FUSE request
# that only the daemon's death ends).
# shellcheck disable=SC2317 # runs in the background
watchdog() {
	local secs=$1 pid=$2 what=$3
	set +e
	# run() ends it with SIGKILL; it has no children and nothing to undo.
	pause "$secs"
	log "time limit of $secs s reached, stopping: $what"
	: >"$work/timed-out"
	kill -TERM "$pid" 2>/dev/null
	pause 5
	kill -KILL "$pid" 2>/dev/null
	pause 2
	if [[ -n $daemon_pid ]] && alive "$daemon_pid"; then
		log "the mount did not answer in time: SIGKILL to the nvmefs daemon $daemon_pid"
		kill -KILL "$daemon_pid" 2>/dev/null
	fi
	exit 0
}

# run SECS OUT CMD...: log CMD to commands.log, run it (stdin /dev/null,
# stdout and stderr appended to OUT) for at most SECS seconds; CMD's status,
# 124 if the time limit stopped it.
run() {
	local secs=$1 outf=$2 rc=0 t0
	shift 2
	if [[ -n ${NVMEFS_BENCH_TIME_LIMIT-} ]] && ((secs > NVMEFS_BENCH_TIME_LIMIT)); then
		secs=$NVMEFS_BENCH_TIME_LIMIT
	fi
	quote "$@" >>"$CMDLOG"
	rm -f "$work/timed-out"
	t0=$EPOCHREALTIME
	"$@" </dev/null >>"$outf" 2>&1 &
	cur_pid=$!
	watchdog "$secs" "$cur_pid" "$*" &
	wd_pid=$!
	wait "$cur_pid" || rc=$?
	cur_pid=
	# SIGKILL: a trapped TERM arriving while the watchdog starts up could
	# be acted on only after its pause, and we would wait for it that long.
	kill -KILL "$wd_pid" 2>/dev/null || true
	wait "$wd_pid" 2>/dev/null || true
	wd_pid=
	if [[ -e $work/timed-out ]]; then
		rm -f "$work/timed-out"
		rc=124
		timed_out=1
	fi
	awk -v a="$t0" -v b="$EPOCHREALTIME" -v rc="$rc" \
		'BEGIN { printf "#   -> status %d, %.2f s\n", rc, b - a }' >>"$CMDLOG"
	if ((rc != 0)); then
		log "failed (status $rc): $* (output in $outf)"
		last_fail="$* -> status $rc: $(tail -n 1 "$outf" 2>/dev/null)"
	fi
	return "$rc"
}

# tlimit BYTES: a time limit for moving BYTES (2 minutes + 10 MiB/s).
tlimit() {
	echo $((120 + $1 / (10 * MIB)))
}

# record SETUP N FS ROW VALUE: one figure (or ERR) into results.tsv.
record() {
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$RESULTS"
	RECORDED["$1:$2:$3:$4"]=1
	[[ $5 == ERR ]] || log "$1 x$2 $3 $4: $5"
}

# dd_mbps LOG BYTES: MB/s from dd's last summary line (which must say BYTES).
dd_mbps() {
	awk -v want="$2" '
	/ copied, / { b = $1; s = $0; sub(/.* copied, /, "", s); sub(/ s,.*/, "", s); f = 1 }
	END { if (!f || b + 0 != want + 0 || s + 0 <= 0) exit 1; printf "%.1f\n", b / s / 1e6 }' "$1"
}

# fio_mbps JSON OP BYTES: aggregate MB/s of OP from fio's JSON (group
# reporting), which must have moved exactly BYTES.
fio_mbps() {
	jq -er --arg op "$2" --argjson want "$3" '
		.jobs[0][$op] | if .io_bytes == $want and .bw_bytes > 0
		then .bw_bytes / 1e6 | . * 10 | round / 10
		else error("moved \(.io_bytes) bytes, expected \($want)") end' "$1"
}

# warm_bytes BYTES: how much warm_memory may write for a pass of BYTES: at
# most MemAvailable - 2 GiB, and what /dev/shm has room for; 0 with --no-warm.
warm_bytes() {
	local want=$1 mem room
	((warm)) || want=0
	mem=$(($(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo) * 1024 - 2 * GIB))
	room=$(($(df -B1 --output=avail /dev/shm | tail -n 1 | tr -d ' ') - GIB))
	((want > mem)) && want=$mem
	((want > room)) && want=$room
	((want < MIB)) && want=0
	echo $((want / MIB * MIB))
}

# warm_memory BYTES: write and delete up to BYTES in /dev/shm, so that the
# next pass allocates pages the host has just backed ("Cold memory" in the
# top comment). Not measured; a failure is logged and ignored.
warm_memory() {
	local b f
	b=$(warm_bytes "$1")
	((b > 0)) || return 0
	f=$imgdir/warm
	run "$(tlimit "$b")" "$MISC" dd if=/dev/zero of="$f" bs=1M count=$((b / MIB)) ||
		log "warming $b bytes of memory failed (ignored)"
	rm -f -- "$f"
	return 0
}

# drop_caches [BYTES]: write back the mount, drop clean caches, then warm
# BYTES of memory for the read that follows.
drop_caches() {
	run 300 "$MISC" sync -f "$mnt" &&
		run 60 "$MISC" sh -c 'echo 3 >/proc/sys/vm/drop_caches' &&
		warm_memory "${1:-0}"
}

# remove PATH...: delete from the mount and sync, so that the next workload
# starts with the space free.
remove() {
	run 300 "$MISC" rm -rf -- "$@" && run 300 "$MISC" sync -f "$mnt"
}

# ------------------------------------------------------------- devices --
# setup_devices N SIZE: N image files of SIZE in /dev/shm on loop devices,
# then one unmeasured fio write pass over all of them (tmpfs allocation).
setup_devices() {
	local n=$1 size=$2 k f d mm avail memav
	avail=$(df -B1 --output=avail /dev/shm | tail -n 1 | tr -d ' ')
	memav=$(($(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo) * 1024))
	((n * size + GIB <= avail)) ||
		die "not enough room in /dev/shm: need $n x $size bytes, $avail available"
	((n * size + 4 * GIB <= memav)) ||
		die "not enough memory: $n x $size bytes of images + 4 GiB for caches, MemAvailable $memav"
	imgdir=$(mktemp -d /dev/shm/nvmefs-bench.XXXXXX)
	for ((k = 0; k < n; k++)); do
		f=$imgdir/d$k.img
		images+=("$f")
		truncate -s "$size" -- "$f"
		quote losetup -f --show -- "$f" >>"$CMDLOG"
		d=$(losetup -f --show -- "$f")
		devs+=("$d")
		# A rule left on this device number (by a run that was killed)
		# would cap the uncapped setup.
		mm=$(cat "/sys/block/${d##*/}/dev")
		if grep -q "^$mm " "$BLKIO/blkio.throttle.read_bps_device" "$BLKIO/blkio.throttle.write_bps_device" 2>/dev/null; then
			log "clearing a stale throttle rule on $d ($mm)"
			clear_rule "$mm"
		fi
	done
	log "devices: ${devs[*]} ($n x $((size / MIB)) MiB in $imgdir)"
	newlog "warmup-x$n"
	echo "# warm-up (not measured)" >>"$CMDLOG"
	fio_jobs
	run $((120 + n * size / (20 * MIB))) "$LOG" fio --output-format=json --output="$LOG.json" \
		--ioengine=libaio --direct=1 --bs=1M --iodepth=32 --size="$size" --rw=write \
		--group_reporting "${FIO_JOBS[@]}" || die "fio warm-up write failed"
}

# fio_jobs: FIO_JOBS = one --name/--filename pair per device.
fio_jobs() {
	local k
	FIO_JOBS=()
	for ((k = 0; k < ${#devs[@]}; k++)); do
		FIO_JOBS+=(--name="dev$k" --filename="${devs[k]}")
	done
}

# cap_devices MIBPS: throttle every device, read and write, in the root group.
cap_devices() {
	local bps=$(($1 * MIB)) d mm
	for d in "${devs[@]}"; do
		mm=$(cat "/sys/block/${d##*/}/dev")
		rules+=("$mm")
		echo "$mm $bps" >"$BLKIO/blkio.throttle.read_bps_device" || die "cannot cap reads of $d ($mm)"
		echo "$mm $bps" >"$BLKIO/blkio.throttle.write_bps_device" || die "cannot cap writes of $d ($mm)"
		echo "echo '$mm $bps' >$BLKIO/blkio.throttle.{read,write}_bps_device" >>"$CMDLOG"
	done
	log "capped ${devs[*]} at $1 MiB/s each (root blkio group)"
}

# fio_raw SETUP PER_DEV LOOPS: the limit, write then read on the raw devices.
fio_raw() {
	local setup=$1 per=$2 loops=$3 n=${#devs[@]} op v
	fio_jobs
	for op in write read; do
		newlog "$setup-x$n-raw-$op"
		v=ERR
		if run "$(tlimit $((per * loops)))" "$LOG" fio --output-format=json --output="$LOG.json" \
			--ioengine=libaio --direct=1 --bs=1M --iodepth=32 --size="$per" --loops="$loops" \
			--rw="$op" --group_reporting "${FIO_JOBS[@]}"; then
			v=$(fio_mbps "$LOG.json" "$op" $((n * per * loops)) 2>>"$LOG") || v=ERR
		fi
		[[ $v == ERR ]] && error "$setup x$n: fio raw $op failed (see $LOG)"
		record "$setup" "$n" fio "raw_$op" "$v"
	done
}

# --------------------------------------------------------- filesystems --
# fs_mount FS: make FS (btrfs, cached or direct) on the devices and mount it.
fs_mount() {
	local fs=$1 opts d list
	case $fs in
	btrfs)
		newlog mkfs-btrfs
		run 300 "$LOG" mkfs.btrfs -f -K -d raid0 -m raid0 "${devs[@]}" || return 1
		opts=nodiscard
		for d in "${devs[@]}"; do
			opts+=",device=$d"
		done
		newlog mount-btrfs
		cur_fs=btrfs
		run 120 "$LOG" mount -t btrfs -o "$opts" "${devs[0]}" "$mnt" || return 1
		;;
	cached | direct)
		newlog mkfs-nvmefs
		run 300 "$LOG" "$build/mkfs.nvmefs" -f -K "${devs[@]}" || return 1
		list=$(
			IFS=,
			echo "${devs[*]}"
		)
		newlog "nvmefs-$fs"
		start_daemon "$fs" "$build/nvmefs" "$list" "$mnt" -o "mode=$fs,pool=$pool" -f || return 1
		;;
	null-cached | null-direct)
		newlog "$fs"
		start_daemon "$fs" "$build/tests/fuse_null" "$mnt" -o "mode=${fs#null-}" -f || return 1
		# nvmefs's default readahead window, which it sets itself.
		echo 16384 >"/sys/class/bdi/$(mountpoint -d "$mnt")/read_ahead_kb" || return 1
		;;
	esac
	run 30 "$MISC" stat -f "$mnt"
}

# start_daemon FS CMD...: start the FUSE daemon CMD (in the foreground, logging
# to $LOG) and wait until $mnt is mounted.
start_daemon() {
	local fs=$1 end
	shift
	daemon_log=$LOG
	quote "$@" >>"$CMDLOG"
	cur_fs=$fs
	"$@" </dev/null >>"$LOG" 2>&1 &
	daemon_pid=$!
	end=$((SECONDS + 30))
	until mounted; do
		if ! alive "$daemon_pid"; then
			wait "$daemon_pid" 2>/dev/null || true
			daemon_pid=
			log "$1 exited before mounting; its log ($LOG):"
			tail -n 20 "$LOG" >&2
			return 1
		fi
		if ((SECONDS >= end)); then
			log "$mnt not mounted 30 s after starting $1"
			return 1
		fi
		pause 0.1
	done
}

# fs_umount SETUP N: unmount; for nvmefs record the daemon's peak RSS first
# and check that it exits 0.
fs_umount() {
	local setup=$1 n=$2 fs=$cur_fs hwm end st=0 d
	case $fs in
	btrfs)
		newlog umount-btrfs
		run 300 "$LOG" umount "$mnt" || return 1
		for d in "${devs[@]}"; do
			btrfs device scan --forget "$d" >/dev/null 2>&1 || true
		done
		;;
	*)
		if [[ $fs == cached || $fs == direct ]]; then
			hwm=$(awk '$1 == "VmHWM:" { printf "%.1f\n", $2 / 1024 }' "/proc/$daemon_pid/status" 2>/dev/null) || hwm=
			record "$setup" "$n" "$fs" rss "${hwm:-ERR}"
		fi
		newlog "umount-$fs"
		run 120 "$LOG" fusermount3 -u "$mnt" || return 1
		# It writes a final checkpoint before exiting.
		end=$((SECONDS + 120))
		while alive "$daemon_pid"; do
			if ((SECONDS >= end)); then
				log "$fs daemon $daemon_pid still running 120 s after unmounting"
				return 1
			fi
			pause 0.1
		done
		wait "$daemon_pid" || st=$?
		daemon_pid=
		if ((st != 0)); then
			log "$fs daemon exited with status $st; its log:"
			tail -n 20 "$daemon_log" >&2
			return 1
		fi
		;;
	esac
	cur_fs=
}

# ----------------------------------------------------------- workloads --
# Each: wl_NAME SETUP N FS; records its figures; returns 1 on a failure.
# Sizes come from the globals SZ_DD, SZ_FIO, SZ_W4 set per setup.

wl_dd() {
	local f=$mnt/dd.bin v
	warm_memory "$SZ_DD"
	newlog "$1-x$2-$3-dd-write"
	run "$(tlimit "$SZ_DD")" "$LOG" dd if=/dev/zero of="$f" bs=1M count=$((SZ_DD / MIB)) conv=fsync || return 1
	v=$(dd_mbps "$LOG" "$SZ_DD") || return 1
	record "$1" "$2" "$3" dd_write "$v"
	drop_caches "$SZ_DD" || return 1
	newlog "$1-x$2-$3-dd-read"
	run "$(tlimit "$SZ_DD")" "$LOG" dd if="$f" of=/dev/null bs=1M || return 1
	v=$(dd_mbps "$LOG" "$SZ_DD") || return 1
	record "$1" "$2" "$3" dd_read "$v"
	remove "$f"
}

wl_fioseq() {
	local f=$mnt/fio-seq.bin op v
	for op in write read; do
		if [[ $op == read ]]; then
			drop_caches "$SZ_FIO" || return 1
		else
			warm_memory "$SZ_FIO"
		fi
		newlog "$1-x$2-$3-fio-$op"
		run "$(tlimit "$SZ_FIO")" "$LOG" fio --output-format=json --output="$LOG.json" \
			--name=seq --filename="$f" --size="$SZ_FIO" --bs=1M --rw="$op" \
			--ioengine=libaio --direct=1 --iodepth=32 || return 1
		v=$(fio_mbps "$LOG.json" "$op" "$SZ_FIO" 2>>"$LOG") || return 1
		record "$1" "$2" "$3" "fio_$op" "$v"
	done
	remove "$f"
}

wl_files4() {
	local d=$mnt/files4 v
	run 60 "$MISC" mkdir "$d" || return 1
	warm_memory $((4 * SZ_W4))
	newlog "$1-x$2-$3-files4"
	run "$(tlimit $((4 * SZ_W4)))" "$LOG" fio --output-format=json --output="$LOG.json" \
		--name=files4 --directory="$d" --numjobs=4 --size="$SZ_W4" --bs=1M --rw=write \
		--ioengine=psync --end_fsync=1 --group_reporting || return 1
	v=$(fio_mbps "$LOG.json" write $((4 * SZ_W4)) 2>>"$LOG") || return 1
	record "$1" "$2" "$3" files4_write "$v"
	remove "$d"
}

wl_shared() {
	local f=$mnt/shared.bin v
	# Laid out first, so that the writes do not extend the file.
	run 300 "$MISC" fallocate -l $((4 * SZ_W4)) "$f" || return 1
	warm_memory $((4 * SZ_W4))
	newlog "$1-x$2-$3-shared"
	run "$(tlimit $((4 * SZ_W4)))" "$LOG" fio --output-format=json --output="$LOG.json" \
		--name=shared --thread --numjobs=4 --filename="$f" --size="$SZ_W4" \
		--offset_increment="$SZ_W4" --bs=1M --rw=write --ioengine=psync --end_fsync=1 \
		--group_reporting || return 1
	v=$(fio_mbps "$LOG.json" write $((4 * SZ_W4)) 2>>"$LOG") || return 1
	record "$1" "$2" "$3" shared_write "$v"
	remove "$f"
}

wl_small() {
	local j phase v rc=0 b
	# The files' pages and the kernel's inodes and dentries for them.
	b=$(warm_bytes $((SMALL_N * (SMALL_SIZE + 4096))))
	warm_memory "$b"
	newlog "$1-x$2-$3-small"
	# On an error it still prints the phases that completed.
	run 1200 "$LOG" "$PY" "$work/small.py" "$mnt" "$SMALL_N" "$SMALL_SIZE" "$imgdir/warm" "$b" || rc=1
	j=$(tail -n 1 "$LOG")
	for phase in create stat read delete total; do
		if v=$(jq -er --arg p "$phase" '.files / .[$p] | round' <<<"$j" 2>/dev/null); then
			record "$1" "$2" "$3" "small_$phase" "$v"
		else
			rc=1
		fi
	done
	return "$rc"
}

wl_torch() {
	local j op v b
	b=$(warm_bytes $((2 * TORCH_MIB * MIB)))
	warm_memory "$b"
	newlog "$1-x$2-$3-torch"
	run 1200 "$LOG" "$PY" "$work/torch_io.py" "$mnt/state.pt" "$TORCH_MIB" "$imgdir/warm" "$b" || return 1
	j=$(tail -n 1 "$LOG")
	for op in save load; do
		v=$(jq -er --arg p "$op" '.bytes / .[$p] / 1e9 | . * 1000 | round / 1000' <<<"$j") || return 1
		record "$1" "$2" "$3" "torch_$op" "$v"
	done
	remove "$mnt/state.pt"
}

# workload NAME SETUP N FS: run wl_NAME.
workload() {
	local w=$1
	shift
	case $w in
	dd) wl_dd "$@" ;;
	fioseq) wl_fioseq "$@" ;;
	files4) wl_files4 "$@" ;;
	shared) wl_shared "$@" ;;
	small) wl_small "$@" ;;
	torch) wl_torch "$@" ;;
	*) die "internal error: no workload '$w'" ;;
	esac
}

# Rows each workload records (for ERR marks when it fails).
declare -A WL_ROWS=(
	[dd]="dd_write dd_read"
	[fioseq]="fio_write fio_read"
	[files4]="files4_write"
	[shared]="shared_write"
	[small]="small_create small_stat small_read small_delete small_total"
	[torch]="torch_save torch_load"
)

# mark_err SETUP N FS ROWS...: ERR for every row not recorded yet.
mark_err() {
	local s=$1 n=$2 fs=$3 row
	shift 3
	for row in "$@"; do
		[[ -n ${RECORDED["$s:$n:$fs:$row"]-} ]] || record "$s" "$n" "$fs" "$row" ERR
	done
}

# run_fs SETUP N FS WORKLOAD...: make, mount, run the workloads, unmount.
run_fs() {
	local s=$1 n=$2 fs=$3 w all=() t0=$SECONDS
	shift 3
	for w in "$@"; do
		# shellcheck disable=SC2206 # a list of words
		all+=(${WL_ROWS[$w]})
	done
	[[ $fs == cached || $fs == direct ]] && all+=(rss)
	log "== $s x$n: $fs ($*)"
	if ! fs_mount "$fs"; then
		error "$s x$n: mkfs or mount of $fs failed (see $out/logs)"
		force_umount
		mark_err "$s" "$n" "$fs" "${all[@]}"
		return 0
	fi
	timed_out=0
	for w in "$@"; do
		last_fail=
		if ! workload "$w" "$s" "$n" "$fs"; then
			error "$s x$n $fs: workload $w failed: ${last_fail:-see $out/logs}"
			# shellcheck disable=SC2086 # a list of words
			mark_err "$s" "$n" "$fs" ${WL_ROWS[$w]}
			if ((timed_out)); then
				error "$s x$n $fs: a step ran out of time: skipping the rest of $fs"
				break
			fi
			if [[ $fs != btrfs && -n $daemon_pid ]] && ! alive "$daemon_pid"; then
				error "$s x$n $fs: the $fs daemon died (log: $daemon_log)"
				break
			fi
		fi
	done
	if ! fs_umount "$s" "$n"; then
		error "$s x$n: unmounting $fs failed"
		force_umount
	fi
	mark_err "$s" "$n" "$fs" "${all[@]}"
	log "$s x$n $fs: $((SECONDS - t0)) s"
}

# -------------------------------------------------------------- setups --
run_ram() {
	local fs t0=$SECONDS
	log "=== RAM: $RAM_NDEV drives of $((RAM_DEV / MIB)) MiB, no cap"
	echo "# setup: RAM, $RAM_NDEV drives, no cap" >>"$CMDLOG"
	setup_devices "$RAM_NDEV" "$RAM_DEV"
	fio_raw ram "$RAM_DEV" "$RAM_RAW_LOOPS"
	SZ_DD=$RAM_DD SZ_FIO=$RAM_FIO SZ_W4=$RAM_W4
	for fs in btrfs cached direct; do
		run_fs ram "$RAM_NDEV" "$fs" dd fioseq files4 shared small torch
	done
	# The FUSE ceiling: the same transport, no devices (see write_ceiling).
	for fs in null-cached null-direct; do
		run_fs ram "$RAM_NDEV" "$fs" dd fioseq
	done
	teardown_devices
	log "=== RAM: $((SECONDS - t0)) s"
}

run_capped() { # N
	local n=$1 fs t0=$SECONDS
	log "=== capped: $n drive(s) of $((CAP_DEV / MIB)) MiB at $CAP_MIBPS MiB/s each"
	echo "# setup: $n drive(s) capped at $CAP_MIBPS MiB/s" >>"$CMDLOG"
	setup_devices "$n" "$CAP_DEV"
	cap_devices "$CAP_MIBPS"
	fio_raw cap "$CAP_PER_DRIVE" 1
	SZ_DD=$((n * CAP_PER_DRIVE)) SZ_FIO=$((n * CAP_PER_DRIVE))
	for fs in btrfs cached direct; do
		run_fs cap "$n" "$fs" dd fioseq
	done
	teardown_devices
	log "=== capped x$n: $((SECONDS - t0)) s"
}

# ----------------------------------------------------- python workloads --
write_python() {
	cat >"$work/small.py" <<'EOF'
# small.py ROOT N SIZE WARM_PATH WARM_BYTES: N files of SIZE bytes in
# ROOT/small: create+write (+syncfs), stat, read after dropping caches (and
# writing and deleting WARM_BYTES at WARM_PATH), unlink (+syncfs). Prints
# one JSON line of seconds per completed phase; exit 1 if one failed.
import ctypes, json, os, sys, time, traceback

root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
warm_path, warm_bytes = sys.argv[4], int(sys.argv[5])
libc = ctypes.CDLL(None, use_errno=True)

def syncfs():
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.syncfs(fd) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), root)
    finally:
        os.close(fd)

d = os.path.join(root, "small")
os.mkdir(d)
names = [os.path.join(d, "f%06d" % i) for i in range(n)]
data = os.urandom(size)
t = {"files": n}

def create():
    for p in names:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            if os.write(fd, data) != size:
                raise OSError("short write: " + p)
        finally:
            os.close(fd)
    syncfs()

def stat():
    for p in names:
        if os.stat(p).st_size != size:
            raise OSError("wrong size: " + p)

def read():
    for p in names:
        fd = os.open(p, os.O_RDONLY)
        try:
            b = os.read(fd, size + 1)
        finally:
            os.close(fd)
        if b != data:
            raise OSError("wrong content: " + p)

def delete():
    for p in names:
        os.unlink(p)
    os.rmdir(d)
    syncfs()

def warm():
    block = bytes(1 << 20)
    with open(warm_path, "wb") as f:
        for _ in range(warm_bytes >> 20):
            f.write(block)
    os.unlink(warm_path)

rc = 0
try:
    for name, phase in (("create", create), ("stat", stat), ("read", read), ("delete", delete)):
        if name == "read":
            syncfs()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            warm()
        t0 = time.perf_counter()
        phase()
        t[name] = time.perf_counter() - t0
    t["total"] = t["create"] + t["stat"] + t["read"] + t["delete"]
except OSError as e:
    t["error"] = str(e)
    traceback.print_exc()
    sys.stderr.flush()
    rc = 1
# Last line: the phases that completed.
print(json.dumps(t), flush=True)
sys.exit(rc)
EOF
	cat >"$work/torch_io.py" <<'EOF'
# torch_io.py PATH MIB WARM_PATH WARM_BYTES: torch.save of a state dict of
# MIB MiB (16 float32 tensors) to PATH with fsync, drop caches, write and
# delete WARM_BYTES at WARM_PATH, torch.load; the tensors are compared after
# timing. Prints one JSON line (bytes, save and load seconds).
import json, os, sys, time
import torch

path, mib = sys.argv[1], int(sys.argv[2])
warm_path, warm_bytes = sys.argv[3], int(sys.argv[4])
count = 16
per = mib * 2**20 // 4 // count
sd = {"layers.%d.weight" % i: torch.arange(per, dtype=torch.float32) + i for i in range(count)}
nbytes = count * per * 4
t0 = time.perf_counter()
with open(path, "wb") as f:
    torch.save(sd, f)
    f.flush()
    os.fsync(f.fileno())
t_save = time.perf_counter() - t0
with open("/proc/sys/vm/drop_caches", "w") as f:
    f.write("3\n")
block = bytes(1 << 20)
with open(warm_path, "wb") as f:
    for _ in range(warm_bytes >> 20):
        f.write(block)
os.unlink(warm_path)
t0 = time.perf_counter()
sd2 = torch.load(path)
t_load = time.perf_counter() - t0
if sd2.keys() != sd.keys() or not all(torch.equal(sd[k], sd2[k]) for k in sd):
    sys.exit("torch.load returned different tensors")
print(json.dumps({"bytes": nbytes, "save": t_save, "load": t_load}))
EOF
}

# -------------------------------------------------------------- report --
declare -A RES=()
load_results() {
	local s n fs row v
	while IFS=$'\t' read -r s n fs row v; do
		RES["$s:$n:$fs:$row"]=$v
	done <"$RESULTS"
}

isnum() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

# calc EXPR: awk arithmetic, 4 decimals.
calc() { awk "BEGIN { printf \"%.4f\", $1 }"; }

# ge A B: A >= B (numbers).
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# div A B DEC: A/B with DEC decimals, or "-".
div() {
	if isnum "$1" && isnum "$2" && ! ge 0 "$2"; then
		awk -v a="$1" -v b="$2" -v d="$3" 'BEGIN { printf "%.*f", d, a / b }'
	else
		printf -- '-'
	fi
}

# fmt VALUE UNIT: a figure as printed in the table.
fmt() {
	local v=$1
	if ! isnum "$v"; then
		printf '%s' "${v:--}"
		return
	fi
	case $2 in
	GB/s) printf '%.2f' "$v" ;;
	MiB) printf '%.1f' "$v" ;;
	*) printf '%.0f' "$v" ;;
	esac
}

cap_mbps() { calc "$1 * $CAP_MIBPS * 1.048576"; } # N drives -> MB/s

human() { # bytes -> 1024-based
	if (($1 % GIB == 0)); then printf '%d GiB' $(($1 / GIB)); else printf '%d MiB' $(($1 / MIB)); fi
}

# table_rows SETUP N ROWSPEC...: one markdown line per "key|label|unit|kind"
# (kind w/r: a sequential write/read, compared with fio raw).
table_rows() {
	local s=$1 n=$2 spec key label unit kind raw b c d cap setup capr1 capr2 rawr1 rawr2 bmark
	shift 2
	if [[ $s == ram ]]; then setup="RAM x$n"; else setup="$CAP_MIBPS MiB/s x$n"; fi
	cap=
	[[ $s == cap ]] && cap=$(cap_mbps "$n")
	for spec in "$@"; do
		IFS='|' read -r key label unit kind <<<"$spec"
		raw=-
		[[ $kind == w ]] && raw=${RES["$s:$n:fio:raw_write"]-}
		[[ $kind == r ]] && raw=${RES["$s:$n:fio:raw_read"]-}
		b=${RES["$s:$n:btrfs:$key"]-}
		c=${RES["$s:$n:cached:$key"]-}
		d=${RES["$s:$n:direct:$key"]-}
		[[ $key == rss ]] && b=-
		bmark=
		if [[ -n $cap ]] && isnum "$b" && ge "$b" "$(calc "$cap * 1.10")"; then
			bmark='*'
		fi
		capr1=- capr2=-
		if [[ -n $cap && $kind != - ]]; then
			capr1=$(div "$c" "$cap" 2)
			capr2=$(div "$d" "$cap" 2)
		fi
		if [[ $kind == - ]]; then
			rawr1=- rawr2=-
		else
			rawr1=$(div "$c" "$raw" 2)
			rawr2=$(div "$d" "$raw" 2)
		fi
		printf '| %s | %s | %s | %s | %s%s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
			"$setup" "$label" "$unit" "$(fmt "$raw" "$unit")" "$(fmt "$b" "$unit")" "$bmark" \
			"$(fmt "$c" "$unit")" "$(fmt "$d" "$unit")" "$(div "$c" "$b" 2)" "$(div "$d" "$b" 2)" \
			"$rawr1" "$rawr2" "$capr1" "$capr2"
	done
}

ran_ram() { [[ $only != capped ]]; }
ran_capped() { [[ $only != ram ]]; }

write_table() {
	local n sm pool_label
	pool_label="nvmefs daemon peak RSS (VmHWM), pool=$pool"
	echo "| setup | workload | unit | fio raw | btrfs | nvmefs cached | nvmefs direct | cached / btrfs | direct / btrfs | cached / fio raw | direct / fio raw | cached / cap | direct / cap |"
	echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	if ran_ram; then
		sm="$SMALL_N x 4 KiB files"
		table_rows ram "$RAM_NDEV" \
			"dd_write|dd write $(human "$RAM_DD"), bs=1M conv=fsync|MB/s|w" \
			"dd_read|dd read, bs=1M, cold cache|MB/s|r" \
			"fio_write|fio seq write $(human "$RAM_FIO"), libaio QD32 direct|MB/s|w" \
			"fio_read|fio seq read, libaio QD32 direct|MB/s|r" \
			"files4_write|fio 4 writers, 4 files of $(human "$RAM_W4"), psync, end_fsync|MB/s|w" \
			"shared_write|fio 4 threads, 1 file, disjoint $(human "$RAM_W4") ranges, end_fsync|MB/s|w" \
			"small_create|$sm: create+write (+syncfs)|files/s|-" \
			"small_stat|$sm: stat|files/s|-" \
			"small_read|$sm: read, cold cache|files/s|-" \
			"small_delete|$sm: unlink (+syncfs)|files/s|-" \
			"small_total|$sm: all four phases|files/s|-" \
			"torch_save|torch.save $TORCH_MIB MiB state dict (+fsync)|GB/s|-" \
			"torch_load|torch.load, cold cache|GB/s|-" \
			"rss|$pool_label|MiB|-"
	fi
	if ran_capped; then
		for n in "${CAP_COUNTS[@]}"; do
			table_rows cap "$n" \
				"dd_write|dd write $(human $((n * CAP_PER_DRIVE))), bs=1M conv=fsync|MB/s|w" \
				"dd_read|dd read, bs=1M, cold cache|MB/s|r" \
				"fio_write|fio seq write $(human $((n * CAP_PER_DRIVE))), libaio QD32 direct|MB/s|w" \
				"fio_read|fio seq read, libaio QD32 direct|MB/s|r" \
				"rss|$pool_label|MiB|-"
		done
	fi
}

# model NULL RAW: the throughput of a daemon that costs what fuse_null does
# plus one device copy at fio raw's speed, both on the same CPUs: the times
# per byte add up.
model() {
	if isnum "$1" && isnum "$2" && ! ge 0 "$1" && ! ge 0 "$2"; then
		calc "1 / (1 / $1 + 1 / $2)"
	else
		printf -- '-'
	fi
}

# write_ceiling: the sequential RAM workloads against fuse_null, the FUSE
# transport with no device behind it, and against the model built on it.
write_ceiling() {
	local n=$RAM_NDEV spec key label kind raw b nc nd mc md c d
	echo "| workload | fio raw | btrfs | FUSE null cached | FUSE null direct | model cached | model direct | nvmefs cached | nvmefs direct | cached / model | direct / model | model cached / btrfs | model direct / btrfs | model cached / fio raw | model direct / fio raw |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	for spec in "dd_write|dd write $(human "$RAM_DD") conv=fsync|write" "dd_read|dd read, cold cache|read" \
		"fio_write|fio seq write, libaio QD32 direct|write" "fio_read|fio seq read, libaio QD32 direct|read"; do
		IFS='|' read -r key label kind <<<"$spec"
		raw=${RES["ram:$n:fio:raw_$kind"]-}
		b=${RES["ram:$n:btrfs:$key"]-}
		nc=${RES["ram:$n:null-cached:$key"]-}
		nd=${RES["ram:$n:null-direct:$key"]-}
		c=${RES["ram:$n:cached:$key"]-}
		d=${RES["ram:$n:direct:$key"]-}
		mc=$(model "$nc" "$raw")
		md=$(model "$nd" "$raw")
		printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
			"$label" "$(fmt "$raw" MB/s)" "$(fmt "$b" MB/s)" "$(fmt "$nc" MB/s)" "$(fmt "$nd" MB/s)" \
			"$(fmt "$mc" MB/s)" "$(fmt "$md" MB/s)" "$(fmt "$c" MB/s)" "$(fmt "$d" MB/s)" \
			"$(div "$c" "$mc" 2)" "$(div "$d" "$md" 2)" "$(div "$mc" "$b" 2)" "$(div "$md" "$b" 2)" \
			"$(div "$mc" "$raw" 2)" "$(div "$md" "$raw" 2)"
	done
}

nfail=0
# target OK LINE: print "PASS LINE" or "FAIL LINE".
target() {
	if (($1)); then
		echo "PASS $2"
	else
		echo "FAIL $2"
		nfail=$((nfail + 1))
	fi
}

# have V...: all figures are numbers.
have() {
	local v
	for v in "$@"; do
		isnum "$v" || return 1
	done
}

write_targets() {
	local mode key v v1 b raw cap want op n lin ok
	local seq=(dd_write dd_read fio_write fio_read)
	if ran_capped; then
		cap=$(cap_mbps 4)
		want=$(calc "0.95 * $cap")
		for mode in cached direct; do
			for key in "${seq[@]}"; do
				v=${RES["cap:4:$mode:$key"]-}
				if have "$v"; then
					ge "$v" "$want" && ok=1 || ok=0
					target "$ok" "capped x4 $mode $key: $(fmt "$v" MB/s) MB/s = $(div "$v" "$cap" 3) x cap ($(fmt "$cap" MB/s) MB/s); target >= 0.95"
				else
					target 0 "capped x4 $mode $key: no figure (${v:-not run}); target >= 0.95 x cap"
				fi
			done
		done
		for mode in cached direct; do
			for key in "${seq[@]}"; do
				v1=${RES["cap:1:$mode:$key"]-}
				for n in 2 4; do
					v=${RES["cap:$n:$mode:$key"]-}
					if have "$v" "$v1"; then
						lin=$(calc "$v / ($n * $v1)")
						ge "$lin" 0.95 && ge 1.05 "$lin" && ok=1 || ok=0
						target "$ok" "capped x1->x$n $mode $key: $(fmt "$v1" MB/s) -> $(fmt "$v" MB/s) MB/s = $(div "$v" "$(calc "$n * $v1")" 3) x linear; target 0.95..1.05"
					else
						target 0 "capped x1->x$n $mode $key: no figure; target 0.95..1.05 x linear"
					fi
				done
			done
		done
	fi
	if ran_ram; then
		n=$RAM_NDEV
		for mode in cached direct; do
			for key in "${seq[@]}"; do
				op=${key#*_}
				v=${RES["ram:$n:$mode:$key"]-}
				b=${RES["ram:$n:btrfs:$key"]-}
				raw=${RES["ram:$n:fio:raw_$op"]-}
				if have "$v" "$b" "$raw"; then
					ge "$v" "$b" && ge "$v" "$(calc "0.5 * $raw")" && ok=1 || ok=0
					target "$ok" "RAM x$n $mode $key: $(fmt "$v" MB/s) MB/s = $(div "$v" "$b" 2) x btrfs ($(fmt "$b" MB/s)), $(div "$v" "$raw" 2) x fio raw ($(fmt "$raw" MB/s)); target >= 1.0 x btrfs and >= 0.5 x fio raw"
				else
					target 0 "RAM x$n $mode $key: no figure (nvmefs ${v:-?}, btrfs ${b:-?}, fio raw ${raw:-?})"
				fi
			done
			for key in torch_save torch_load; do
				v=${RES["ram:$n:$mode:$key"]-}
				b=${RES["ram:$n:btrfs:$key"]-}
				if have "$v" "$b"; then
					ge "$v" "$b" && ok=1 || ok=0
					target "$ok" "RAM x$n $mode $key: $(fmt "$v" GB/s) GB/s = $(div "$v" "$b" 2) x btrfs ($(fmt "$b" GB/s)); target >= 1.0"
				else
					target 0 "RAM x$n $mode $key: no figure (nvmefs ${v:-?}, btrfs ${b:-?})"
				fi
			done
			v=${RES["ram:$n:$mode:small_total"]-}
			b=${RES["ram:$n:btrfs:small_total"]-}
			if have "$v" "$b"; then
				ge "$v" "$(calc "0.5 * $b")" && ok=1 || ok=0
				target "$ok" "RAM x$n $mode small files: $(fmt "$v" files/s) files/s = $(div "$v" "$b" 2) x btrfs ($(fmt "$b" files/s)); target >= 0.5"
			else
				target 0 "RAM x$n $mode small files: no figure (nvmefs ${v:-?}, btrfs ${b:-?})"
			fi
		done
	fi
}

write_caps() {
	local n cap fs key v line
	for n in "${CAP_COUNTS[@]}"; do
		cap=$(cap_mbps "$n")
		line="x$n (cap $(fmt "$cap" MB/s) MB/s):"
		for fs in fio btrfs cached direct; do
			for key in raw_write raw_read dd_write dd_read fio_write fio_read; do
				v=${RES["cap:$n:$fs:$key"]-}
				isnum "$v" || continue
				line+=" $fs $key $(div "$v" "$cap" 3);"
			done
		done
		echo "${line%;}"
	done
}

write_plot() {
	local dat=$out/capped.dat gp=$out/capped.gp n fs key row term
	{
		echo "# drives, MB/s: cap, fio raw write, read, then dd write, dd read, fio write, fio read for btrfs, nvmefs cached, nvmefs direct (- = no figure)"
		for n in "${CAP_COUNTS[@]}"; do
			row="$n $(cap_mbps "$n") ${RES["cap:$n:fio:raw_write"]-} ${RES["cap:$n:fio:raw_read"]-}"
			for fs in btrfs cached direct; do
				for key in dd_write dd_read fio_write fio_read; do
					row+=" ${RES["cap:$n:$fs:$key"]-}"
				done
			done
			# Anything not a number (ERR, missing) becomes "-".
			awk '{ for (i = 1; i <= NF; i++) if ($i !~ /^[0-9.]+$/) $i = "-"; print }' <<<"$row"
		done
	} >"$dat"
	if gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1; then
		term="pngcairo size 1200,520 noenhanced font ',10'"
	else
		term="png size 1200,520 noenhanced"
	fi
	cat >"$gp" <<EOF
set terminal $term
set output '$out/capped.png'
set datafile missing '-'
set multiplot layout 1,2 title "nvmefs vs btrfs raid0 vs fio raw, drives capped at $CAP_MIBPS MiB/s each (dd: solid, fio in the mount: dashed)"
set xlabel 'drives'
set ylabel 'MB/s'
set xtics (1, 2, 4)
set xrange [0.8:4.2]
set yrange [0:*]
set key left top
set grid
do for [o=0:1] {
	set title (o == 0 ? 'sequential write' : 'sequential read')
	plot '$dat' u 1:2 w l dt 2 lw 2 lc 'black' t 'cap (drives x $CAP_MIBPS MiB/s)', \\
	     '' u 1:(column(3+o)) w lp pt 7 lw 2 lc 'gray50' t 'fio raw', \\
	     '' u 1:(column(5+o)) w lp pt 5 lw 2 lc 'blue' t 'btrfs dd', \\
	     '' u 1:(column(7+o)) w lp pt 4 dt 3 lw 2 lc 'blue' t 'btrfs fio', \\
	     '' u 1:(column(9+o)) w lp pt 9 lw 2 lc 'red' t 'nvmefs cached dd', \\
	     '' u 1:(column(11+o)) w lp pt 8 dt 3 lw 2 lc 'red' t 'nvmefs cached fio', \\
	     '' u 1:(column(13+o)) w lp pt 11 lw 2 lc 'dark-green' t 'nvmefs direct dd', \\
	     '' u 1:(column(15+o)) w lp pt 10 dt 3 lw 2 lc 'dark-green' t 'nvmefs direct fio'
}
unset multiplot
EOF
	newlog gnuplot
	run 120 "$LOG" gnuplot "$gp" || error "gnuplot failed (see $LOG)"
}

write_report() {
	local report=$out/report.md targets=$out/targets.txt
	write_targets >"$targets"
	{
		echo "# nvmefs vs btrfs raid0 vs fio raw (scripts/bench.sh)"
		echo
		printf '%s; nproc %s, %s GiB RAM, kernel %s; %s, %s, torch %s\n' \
			"$(date '+%Y-%m-%d %H:%M')" "$(nproc)" \
			"$(awk '$1 == "MemTotal:" { printf "%.0f", $2 / 1048576 }' /proc/meminfo)" "$(uname -r)" \
			"$(fio --version)" "$(mkfs.btrfs --version 2>&1 | awk '{ print $NF; exit }' | sed 's/^/btrfs-progs /')" \
			"$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')"
		printf 'nvmefs: %s/nvmefs (%s), mkfs.nvmefs -f -K, -o mode=cached|direct,pool=%s; this script from %s at HEAD %s%s\n' \
			"$build" "$nvmefs_id" "$pool" "$TOP" "$repo_head" "$( ((quick)) && echo '; --quick sizes')"
		echo
		echo "Emulated drives: image files in /dev/shm on loop devices. RAM: $RAM_NDEV x $(human "$RAM_DEV"), no cap."
		echo "Capped: 1, 2, 4 x $(human "$CAP_DEV") at $CAP_MIBPS MiB/s each (read and write, blkio throttle"
		echo "rules in the v1 root group, which also hold btrfs's writeback), $(human "$CAP_PER_DRIVE") per drive per pass;"
		echo "the capped runs measure only fio raw and the sequential workloads (dd, fio)."
		echo "btrfs: mkfs.btrfs -f -K -d raid0 -m raid0, mount -o nodiscard. MB = 1e6 bytes, GB = 1e9."
		echo "fio raw: libaio direct bs=1M iodepth=32, one job per device, group_reporting."
		echo "Each figure is one run on a shared 2-core machine: compare within a row."
		if ((warm)); then
			echo "Memory warmed before every measured pass, for every file system (\"Cold memory\" in bench.sh)."
		else
			echo "--no-warm: passes ran on cold memory (\"Cold memory\" in bench.sh)."
		fi
		echo
		write_table
		echo
		if ran_ram; then
			echo "The FUSE ceiling, RAM x$RAM_NDEV (MB/s): FUSE null is tests/fuse_null, a daemon on the same"
			echo "FUSE settings as nvmefs that stores nothing (no device); model = 1 / (1 / FUSE null + 1 / fio raw),"
			echo "the transport's cost plus one device copy on the same CPUs. A target above model / btrfs"
			echo "or model / fio raw is out of reach for any FUSE daemon here (docs/PERFORMANCE.md)."
			echo
			write_ceiling
			echo
		fi
		if ran_capped; then
			echo "\"*\" on a capped btrfs figure: above 1.10 x the cap, i.e. btrfs was not held by the cap."
			echo
			echo "Caps (figure / (drives x $CAP_MIBPS MiB/s)):"
			echo
			echo '```'
			write_caps
			echo '```'
			echo
		fi
		echo "Targets (issue 5):"
		echo
		echo '```'
		cat "$targets"
		echo '```'
		if ((errors)); then
			echo
			echo "The benchmark itself failed $errors time(s):"
			echo
			echo '```'
			cat "$out/errors.txt"
			echo '```'
		fi
		echo
		echo "Commands: $out/commands.log; logs: $out/logs/"
		if ran_capped; then
			echo "Plot: $out/capped.png"
		fi
	} >"$report"
}

# ---------------------------------------------------------------- main --
t_start=$SECONDS
# What ran: the binary (it may be a snapshot of another commit than the
# repository's HEAD, which can also move during a run).
nvmefs_id="$("$build/nvmefs" -V 2>&1 | head -n 1), built $(date -r "$build/nvmefs" '+%Y-%m-%d %H:%M')"
repo_head=$(git -C "$TOP" rev-parse --short HEAD 2>/dev/null || echo '?')
write_python
log "results in $out"
if ran_ram; then
	run_ram
fi
if ran_capped; then
	for n in "${CAP_COUNTS[@]}"; do
		run_capped "$n"
	done
fi
load_results
if ran_capped; then
	write_plot
fi
write_report
cat "$out/report.md"
log "done in $((SECONDS - t_start)) s; results in $out"
nfail=$(grep -c '^FAIL' "$out/targets.txt" || true)
if ((errors)); then
	log "the benchmark itself failed $errors time(s): see $out/errors.txt"
	exit 1
fi
if ((check && nfail)); then
	log "$nfail target(s) missed (--check)"
	exit 1
fi
exit 0
