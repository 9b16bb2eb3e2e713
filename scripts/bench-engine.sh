#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench-engine.sh: the striped libaio engine (nvmefs-bench) against fio, on
# the same emulated drives in the same run.
#
# Usage: bench-engine.sh [-n N] [-s SIZE] [-b BLOCK] [-q QD] [-B BUILD_DIR]
#                        [-o OUTFILE] [--quick]
#   -n N          drives in the multi-drive setups (default 4, at most 32)
#   -s SIZE       size of each emulated drive = bytes each device moves per
#                 pass (default 1G, 256M with --quick); K/M/G suffixes, a
#                 multiple of BLOCK
#   -b BLOCK      request size (default 1M)
#   -q QD         queue depth per device (default 32)
#   -B BUILD_DIR  where nvmefs-bench is (default: build/ at the repo root)
#   -o OUTFILE    also write the report (markdown) to OUTFILE
#   --quick       short passes: the whole run takes well under a minute
#   -h            print this help
# Needs root (loop devices, cgroups), fio, jq and scripts/emu-drives.sh.
#
# Three setups, each made by emu-drives.sh: (a) N drives in RAM, uncapped;
# (b) N drives capped at 200 MiB/s each (reads and writes); (c) 1 drive
# capped at 200 MiB/s. In each, after one unmeasured fio write pass over
# every device (so that the measured writes do not pay for tmpfs page
# allocation), it runs in this order, to be fair to both: fio write,
# nvmefs-bench write, fio read, nvmefs-bench read. Writes come first so that
# the reads hit allocated pages. fio runs one libaio job per device (QD each)
# and reports the aggregate bandwidth; nvmefs-bench stripes SIZE x devices
# over the devices with chunk = BLOCK and QD blocks in flight per device.
#
# Pass sizes: every pass moves SIZE per device per loop; the loop counts are
# chosen so that each device moves >= 2 GiB in a capped pass (~10 s at 200
# MiB/s, so the throttle's start-up slack does not matter) and >= 6 GiB in an
# uncapped pass (a few seconds at RAM speed). With --quick: 256 MiB and
# 1 GiB. nvmefs-bench also runs its own unmeasured warm-up loop. Measured
# here (2 cores, defaults): a full run takes ~2 min 20 s, --quick ~27 s.
# Short capped passes read a little high in fio (blk-throttle lets a first
# slice through at once: --quick shows fio ~5% over the cap), which is why
# the full run moves 2 GiB per device per capped pass.
#
# Output (stdout, and OUTFILE with -o): the machine, the exact commands, a
# markdown table (GB = 1e9 bytes) and PASS/FAIL lines for the targets:
# uncapped nvmefs/fio >= 0.90; capped N drives nvmefs >= 0.9 x N x 200 MiB/s;
# capped 1 drive nvmefs >= 0.9 x 200 MiB/s. A missed target does not change
# the exit status (this is a benchmark that reports); a tool that failed
# (fio, nvmefs-bench, emu-drives.sh, jq) makes it exit 1.
#
# That the cap really holds for O_DIRECT libaio I/O on loop devices (cgroup
# v1 blkio.throttle here) was measured: see the comment in emu-drives.sh.
#
# Internal: the script calls itself as "bench-engine.sh --inner" inside
# emu-drives.sh (parameters in BE_* environment variables) to run the passes
# of one setup.

set -euo pipefail

PROG=${0##*/}
# shellcheck source=scripts/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
SELF=$(realpath -- "${BASH_SOURCE[0]}")
HERE=$(dirname -- "$SELF")
TOP=$(dirname -- "$HERE")
CAP_MIBPS=200

usage() {
	cat <<EOF
Usage: $PROG [-n N] [-s SIZE] [-b BLOCK] [-q QD] [-B BUILD_DIR] [-o OUTFILE] [--quick]
Benchmark nvmefs-bench against fio on emulated drives: N drives in RAM,
N drives capped at $CAP_MIBPS MiB/s each, 1 drive capped at $CAP_MIBPS MiB/s.
  -n N          drives in the multi-drive setups (default 4, at most 32)
  -s SIZE       size of each drive = bytes per device per loop
                (default 1G, 256M with --quick); K/M/G suffixes
  -b BLOCK      request size (default 1M)
  -q QD         queue depth per device (default 32)
  -B BUILD_DIR  directory holding nvmefs-bench (default $TOP/build)
  -o OUTFILE    also write the report to OUTFILE
  --quick       short passes (well under a minute in all)
  -h            show this help
EOF
}

# ------------------------------------------------------------ inner mode --
# Runs inside emu-drives.sh (so inside the cgroup): the passes of one setup.
# Appends "OP TOOL GBPS" lines to $BE_RESULTS and the commands to $BE_CMDLOG.
# record OP TOOL NAME OUTPUT VALUE: append "OP TOOL VALUE" to the results, or
# "OP TOOL FAIL" with the end of OUTPUT when VALUE is empty (sets failed=1 in
# the caller, inner).
record() {
	local op=$1 tool=$2 name=$3 out=$4 val=$5
	if [[ -n $val ]]; then
		echo "$op $tool $val" >>"$BE_RESULTS"
		log "$BE_SETUP: $name $op $val GB/s"
	else
		log "$BE_SETUP: $name $op failed; the end of its output:"
		tail -n 5 "$out" >&2 || true
		echo "$op $tool FAIL" >>"$BE_RESULTS"
		failed=1
	fi
}

inner() {
	local -a devs fio_common jobs
	local n k op json val failed=0
	read -r -a devs <<<"${EMU_DEVS:?EMU_DEVS not set: run me through emu-drives.sh}"
	n=${#devs[@]}
	fio_common=(fio --output-format=json --ioengine=libaio --direct=1
		--bs="$BE_BLOCK" --iodepth="$BE_QD" --size="$BE_PER_DEV" --numjobs=1
		--group_reporting)
	jobs=()
	for ((k = 0; k < n; k++)); do
		jobs+=(--name="dev$k" --filename="${devs[k]}")
	done

	run() { # OUTFILE CMD...: log CMD, run it with stdout to OUTFILE
		local out=$1
		shift
		quote "$@" >>"$BE_CMDLOG"
		"$@" >"$out"
	}

	# Warm-up: allocate the tmpfs pages behind every device. Not measured.
	echo "# warm-up (not measured), then the measured passes" >>"$BE_CMDLOG"
	json=$BE_TMP/fio-warmup.json
	if ! run "$json" "${fio_common[@]}" --rw=write --loops=1 "${jobs[@]}"; then
		log "$BE_SETUP: fio warm-up write failed"
		failed=1
	fi

	for op in write read; do
		json=$BE_TMP/fio-$op.json
		val=
		run "$json" "${fio_common[@]}" --rw="$op" --loops="$BE_LOOPS" "${jobs[@]}" &&
			val=$(jq -er --arg op "$op" '.jobs[0][$op].bw_bytes / 1e9' "$json") || val=
		record "$op" fio fio "$json" "$val"

		json=$BE_TMP/nvmefs-$op.out
		val=
		run "$json" "$BE_BIN" "--$op" --block-size "$BE_BLOCK" --queue-depth "$BE_QD" \
			--size $((BE_PER_DEV * n)) --loops "$BE_LOOPS" --json "${devs[@]}" &&
			val=$(tail -n 1 "$json" | jq -er --arg op "$op" \
				'if .op == $op and (.gbps | type) == "number" then .gbps else error("bad JSON") end') ||
			val=
		record "$op" nvmefs nvmefs-bench "$json" "$val"
	done
	return "$failed"
}

if [[ ${1-} == --inner ]]; then
	inner
	exit $?
fi

# ------------------------------------------------------------- arguments --
ndev=4
size_arg=
block_arg=1M
qd=32
build_dir=$TOP/build
outfile=
quick=0

while (($#)); do
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	-n | -s | -b | -q | -B | -o)
		(($# >= 2)) || bad_arg "option $1 needs an argument"
		case $1 in
		-n) ndev=$2 ;;
		-s) size_arg=$2 ;;
		-b) block_arg=$2 ;;
		-q) qd=$2 ;;
		-B) build_dir=$2 ;;
		-o) outfile=$2 ;;
		esac
		shift 2
		;;
	--quick)
		quick=1
		shift
		;;
	*) bad_arg "unknown argument: '$1'" ;;
	esac
done

if ! [[ $ndev =~ ^[0-9]+$ ]] || ((10#$ndev < 1 || 10#$ndev > 32)); then
	bad_arg "bad drive count -n '$ndev' (want an integer 1..32)"
fi
ndev=$((10#$ndev))
if ! [[ $qd =~ ^[0-9]+$ ]] || ((10#$qd < 1 || 10#$qd > 4096)); then
	bad_arg "bad queue depth -q '$qd' (want an integer 1..4096)"
fi
qd=$((10#$qd))
block=$(parse_size "$block_arg") ||
	bad_arg "bad block size -b '$block_arg' (want bytes or a number with K, M or G)"
if ((block < 512 || block % 512 || block > 1 << 30)); then
	bad_arg "bad block size -b '$block_arg' (must be a multiple of 512, at most 1G)"
fi
if [[ -z $size_arg ]]; then
	if ((quick)); then size_arg=256M; else size_arg=1G; fi
fi
per_dev=$(parse_size "$size_arg") ||
	bad_arg "bad size -s '$size_arg' (want bytes or a number with K, M or G)"
if ((per_dev < block || per_dev % block)); then
	bad_arg "bad size -s '$size_arg' (must be a non-zero multiple of the block size, $block)"
fi
if [[ -n $outfile ]]; then
	[[ -d $(dirname -- "$outfile") && -w $(dirname -- "$outfile") ]] ||
		bad_arg "bad output file -o '$outfile' (its directory does not exist or is not writable)"
	[[ ! -d $outfile ]] || bad_arg "bad output file -o '$outfile' (is a directory)"
fi

bin=$build_dir/nvmefs-bench
[[ -x $bin ]] || die "nvmefs-bench not found at '$bin' (build it, e.g. scripts/build.sh, or give -B BUILD_DIR)"
bin=$(realpath -- "$bin")
emu=$HERE/emu-drives.sh
[[ -x $emu ]] || die "emu-drives.sh not found at '$emu'"
((EUID == 0)) || die "must run as root (loop devices, cgroups)"
for tool in fio jq awk losetup; do
	command -v "$tool" >/dev/null || die "required tool '$tool' not found"
done

# Loops per pass (see the top comment).
gib=$((1 << 30))
if ((quick)); then
	capped_target=$((256 << 20)) uncapped_target=$gib
else
	capped_target=$((2 * gib)) uncapped_target=$((6 * gib))
fi
loops_capped=$(((capped_target + per_dev - 1) / per_dev))
loops_uncapped=$(((uncapped_target + per_dev - 1) / per_dev))

# ----------------------------------------------------------------- cleanup --
tmp=$(mktemp -d /tmp/bench-engine.XXXXXX)
child=
# shellcheck disable=SC2317 # runs from a trap
cleanup() {
	# Finish even if signalled again (e.g. a second ^C).
	trap "" INT TERM HUP
	trap - EXIT
	rm -rf -- "$tmp"
}
# shellcheck disable=SC2317 # runs from a trap
on_signal() {
	set +e
	trap "" INT TERM HUP # once is enough
	if [[ -n $child ]]; then
		# emu-drives.sh stops the benchmark and tears down. SIGTERM, not
		# the signal we got: it may have been started ignoring SIGINT.
		kill -TERM "$child" 2>/dev/null
		wait "$child" 2>/dev/null
	fi
	exit $((128 + $2))
}
trap cleanup EXIT
trap 'on_signal INT 2' INT
trap 'on_signal TERM 15' TERM
trap 'on_signal HUP 1' HUP

# ------------------------------------------------------------------- run --
tool_failed=0
cmdlog=$tmp/commands
: >"$cmdlog"
labels=("$ndev x RAM" "$ndev x $CAP_MIBPS MiB/s" "1 x $CAP_MIBPS MiB/s")
counts=("$ndev" "$ndev" 1)
caps=("" "$CAP_MIBPS" "$CAP_MIBPS")

for i in 0 1 2; do
	label=${labels[i]}
	res=$tmp/results.$i
	: >"$res"
	emu_cmd=("$emu" -n "${counts[i]}" -s "$per_dev")
	if [[ -n ${caps[i]} ]]; then
		emu_cmd+=(-c "${caps[i]}")
		loops=$loops_capped
	else
		loops=$loops_uncapped
	fi
	emu_cmd+=(-- "$SELF" --inner)
	{
		echo "# setup: $label"
		quote "${emu_cmd[@]}"
	} >>"$cmdlog"
	log "setup $label: ${counts[i]} drive(s) of $per_dev bytes, $loops loop(s) per pass"
	mkdir -p "$tmp/$i"
	rc=0
	BE_SETUP=$label BE_RESULTS=$res BE_CMDLOG=$cmdlog BE_TMP=$tmp/$i BE_BIN=$bin \
		BE_BLOCK=$block BE_QD=$qd BE_PER_DEV=$per_dev BE_LOOPS=$loops \
		"${emu_cmd[@]}" </dev/null &
	child=$!
	wait "$child" || rc=$?
	child=
	if ((rc != 0)); then
		log "setup $label: failed (exit $rc)"
		tool_failed=1
	fi
done

# ---------------------------------------------------------------- report --
report=$tmp/report.md
{
	echo "# nvmefs-bench vs fio"
	echo
	printf 'machine: nproc %s, kernel %s, %s\n' "$(nproc)" "$(uname -r)" "$(fio --version)"
	printf 'nvmefs-bench: %s; block %s bytes, queue depth %s per device, %s bytes per device per loop, %s loop(s) uncapped, %s capped\n' \
		"$bin" "$block" "$qd" "$per_dev" "$loops_uncapped" "$loops_capped"
	echo
	echo "Commands (in this order; device paths as used):"
	echo
	echo '```'
	cat "$cmdlog"
	echo '```'
	echo
	echo "| setup | op | fio GB/s | nvmefs-bench GB/s | ratio (nvmefs/fio) | vs cap |"
	echo "| --- | --- | ---: | ---: | ---: | ---: |"
} >"$report"

targets=$tmp/targets
: >"$targets"
for i in 0 1 2; do
	res=$tmp/results.$i
	for op in write read; do
		fio_v=$(awk -v op="$op" '$1 == op && $2 == "fio" { v = $3 } END { print v == "" ? "FAIL" : v }' "$res")
		nv_v=$(awk -v op="$op" '$1 == op && $2 == "nvmefs" { v = $3 } END { print v == "" ? "FAIL" : v }' "$res")
		cap_bps=0
		[[ -n ${caps[i]} ]] && cap_bps=$((counts[i] * caps[i] * 1024 * 1024))
		awk -v label="${labels[i]}" -v op="$op" -v f="$fio_v" -v nv="$nv_v" \
			-v capbps="$cap_bps" -v report="$report" -v targets="$targets" '
		function num(x) { return x ~ /^[0-9.eE+-]+$/ }
		BEGIN {
			fs = num(f) ? sprintf("%.3f", f) : "FAIL"
			ns = num(nv) ? sprintf("%.3f", nv) : "FAIL"
			rs = (num(f) && num(nv) && f > 0) ? sprintf("%.3f", nv / f) : "n/a"
			if (capbps > 0)
				cs = num(nv) ? sprintf("%.3f", nv * 1e9 / capbps) : "n/a"
			else
				cs = "-"
			printf "| %s | %s | %s | %s | %s | %s |\n", label, op, fs, ns, rs, cs >> report
			if (capbps == 0) {
				if (rs == "n/a")
					line = sprintf("FAIL %s %s: no ratio (a tool failed); target nvmefs/fio >= 0.90", label, op)
				else
					line = sprintf("%s %s %s: nvmefs/fio = %s, target >= 0.90", (nv / f >= 0.90) ? "PASS" : "FAIL", label, op, rs)
			} else {
				want = 0.9 * capbps / 1e9
				if (!num(nv))
					line = sprintf("FAIL %s %s: no nvmefs-bench result; target >= %.3f GB/s (0.9 x cap)", label, op, want)
				else
					line = sprintf("%s %s %s: nvmefs %.3f GB/s = %.3f x cap, target >= %.3f GB/s (0.9 x cap)", (nv >= want) ? "PASS" : "FAIL", label, op, nv, nv * 1e9 / capbps, want)
			}
			print line >> targets
		}'
	done
done
{
	echo
	echo "GB = 1e9 bytes. fio: aggregate bw_bytes of all jobs (one per device);"
	echo "nvmefs-bench: \"gbps\" of its JSON line. vs cap = nvmefs-bench / (drives x $CAP_MIBPS MiB/s)."
	echo
	echo "Targets:"
	echo
	echo '```'
	cat "$targets"
	echo '```'
	if ((tool_failed)); then
		echo
		echo "A tool failed: see the messages on stderr."
	fi
} >>"$report"

cat "$report"
if [[ -n $outfile ]]; then
	cp -- "$report" "$outfile" || die "cannot write '$outfile'"
fi
((tool_failed == 0)) || exit 1
exit 0
