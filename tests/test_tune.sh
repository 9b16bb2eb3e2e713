#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/nvmefs-tune on 2 sparse image files of 256M:
#  refusals  a missing DEV, a DEV given twice (also through a symlink), no
#            -y with stdin not a terminal, no DEV at all: each exits non-zero
#            with a message naming the problem, and the images' labels are
#            untouched;
#  sweep     --chunks 64K,256K --modes cached,direct --qd 8,32 --threads 4
#            -s 32M -t 1 -y --json under timeout 300: exit 0, one table row
#            per trial (8, each combination once, ranked by score), the JSON
#            parses and agrees with the table (scores are the harmonic mean
#            of write and read), nothing left mounted, no daemon left, the
#            tuner's temporary directory gone;
#  advice    the printed mkfs and mount command lines run as printed (the
#            mount point put in): a file written through the mount reads
#            back after dropping caches, the tuner refuses the mounted
#            images as in use, fsck.nvmefs -n is clean after unmounting;
#  handle    --handle on the mounted volume: 4 trials of nvmefs.aio_handle
#            settings through the native client, the best call, the JSON;
#  dd        a 2-trial sweep with --dd (the fallback when fio is missing).
#  installed the tuner from cmake --install finds its module and runs.
# Exit 77 (skip) without root, /dev/fuse, fusermount3, /usr/bin/python3 or
# the nvmefs binaries. About 30-60 s.
# usage: test_tune.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -ne 1 ]; then
	echo "usage: test_tune.sh BUILD_DIR" >&2
	exit 2
fi
build=$(cd "$1" && pwd)
mnt_time_limit 420 "$0" "$@"

tuner=$here/../scripts/nvmefs-tune
[ -x "$tuner" ] || mnt_die "$tuner missing or not executable"
mnt_need /usr/bin/python3 python3
mnt_setup "$build" 2 256M
# The tuner's own temporary directory (and mount point) goes in here, so that
# we can see it removed and unmount it if the tuner could not.
export TMPDIR=$MNT_TMP

# Safety net beside lib_mount's: a mount the tuner left under $MNT_TMP (it
# should leave none; that is checked) is unmounted before $MNT_TMP goes.
TUNER_PID=
# shellcheck disable=SC2317 # runs from the trap
tune_cleanup() {
	local m pid i
	set +e
	# A tuner still running (we were interrupted) cleans up after itself
	# on SIGTERM: timeout(1), in a process group of its own, passes it on.
	if [ -n "$TUNER_PID" ] && kill -0 "$TUNER_PID" 2>/dev/null; then
		echo "cleanup: stopping nvmefs-tune" >&2
		kill -TERM "$TUNER_PID"
		for ((i = 0; i < 600; i++)); do
			kill -0 "$TUNER_PID" 2>/dev/null || break
			sleep 0.1
		done
	fi
	while read -r m; do
		echo "cleanup: the tuner left $m mounted" >&2
		timeout 20 fusermount3 -u "$m" && continue
		for pid in $(pgrep -f "nvmefs .* $m( |$)"); do
			kill -KILL "$pid"
		done
		timeout 10 fusermount3 -u -z "$m" || timeout 10 umount -l "$m"
	done < <(tuner_mounts)
}
trap 'tune_cleanup; _mnt_cleanup' EXIT

# tuner_mounts: mount points under $MNT_TMP other than $MNT.
# shellcheck disable=SC2317 # runs from the trap
tuner_mounts() {
	awk -v t="$MNT_TMP/" -v m="$MNT" 'index($5, t) == 1 && $5 != m { print $5 }' /proc/self/mountinfo
}

# labels: checksum of the first 64 KiB of every image (its label).
labels() {
	local d
	for d in "${MNT_DEV_LIST[@]}"; do
		head -c 65536 "$d" | sha256sum
	done
}

# refused WHAT PATTERN [ARGS...]: the tuner exits non-zero (stdin from
# /dev/null) and says PATTERN (an extended regexp) on stderr.
# shellcheck disable=SC2317 # runs through check
refused() {
	local what=$1 pat=$2 rc=0
	shift 2
	timeout 60 "$tuner" --bin "$build" "$@" </dev/null >"$MNT_TMP/ref.out" 2>"$MNT_TMP/ref.err" || rc=$?
	if [ "$rc" = 0 ]; then
		echo "FAIL: $what: exit status 0" >&2
		return 1
	fi
	if ! grep -Eq -- "$pat" "$MNT_TMP/ref.err"; then
		echo "FAIL: $what: exit $rc, but stderr does not match '$pat':" >&2
		cat "$MNT_TMP/ref.err" >&2
		return 1
	fi
	echo "ok: $what refused (exit $rc): $(grep -Em1 -- "$pat" "$MNT_TMP/ref.err")"
}

# leftovers: no nvmefs mount of our images, nothing mounted by the tuner, no
# daemon running on the images, the tuner's temporary directory removed.
# shellcheck disable=SC2317 # runs through check
leftovers() {
	local bad=0 d pid
	for d in "${MNT_DEV_LIST[@]}"; do
		if awk -v d="nvmefs:$d" '$1 == d { f = 1 } END { exit !f }' /proc/self/mounts; then
			echo "FAIL: $d still mounted" >&2
			bad=1
		fi
	done
	if [ -n "$(tuner_mounts)" ]; then
		echo "FAIL: left mounted: $(tuner_mounts | xargs)" >&2
		bad=1
	fi
	for pid in $(pgrep -f "nvmefs .*$MNT_IMGDIR" || true); do
		echo "FAIL: daemon left running: $(tr '\0' ' ' <"/proc/$pid/cmdline")" >&2
		bad=1
	done
	if compgen -G "$MNT_TMP/nvmefs-tune.*" >/dev/null; then
		echo "FAIL: temporary directory left: $(echo "$MNT_TMP"/nvmefs-tune.*)" >&2
		bad=1
	fi
	return "$bad"
}

# like STRING GLOB: STRING matches the glob pattern GLOB.
# shellcheck disable=SC2317 # runs through check
like() {
	# shellcheck disable=SC2053 # a pattern on purpose
	[[ $1 == $2 ]]
}

# tune LIMIT OUT ERR ARGS...: run the tuner for at most LIMIT seconds, in
# the background so that the trap can stop it; its exit status.
tune() {
	local limit=$1 out=$2 err=$3 rc=0
	shift 3
	timeout -k 30 "$limit" "$tuner" --bin "$build" "$@" </dev/null >"$out" 2>"$err" &
	TUNER_PID=$!
	wait "$TUNER_PID" || rc=$?
	TUNER_PID=
	return "$rc"
}

# ---------------------------------------------------------------- refusals
before=$(labels)
ln -s "${MNT_DEV_LIST[0]}" "$MNT_TMP/alias.img"
check "missing DEV" refused "a missing DEV" "$MNT_TMP/missing\.img: no such file" \
	-y "${MNT_DEV_LIST[0]}" "$MNT_TMP/missing.img"
check "DEV twice" refused "a DEV given twice" "${MNT_DEV_LIST[1]}: given twice" \
	-y "${MNT_DEV_LIST[0]}" "${MNT_DEV_LIST[1]}" "${MNT_DEV_LIST[1]}"
check "DEV twice (symlink)" refused "a DEV given twice through a symlink" "alias\.img: given twice" \
	-y "${MNT_DEV_LIST[0]}" "$MNT_TMP/alias.img"
check "no -y, no terminal" refused "no -y without a terminal" "not a terminal.*-y" \
	"${MNT_DEV_LIST[@]}"
check "no DEV" refused "no DEV" "no devices given"
check "usage errors exit 2" [ "$("$tuner" --qd 0 "${MNT_DEV_LIST[0]}" 2>/dev/null || echo $?)" = 2 ]
check "refusals left the images alone" [ "$before" = "$(labels)" ]

# The installed copy: cmake --install puts the tuner in sbin and its module
# (nvmefs_emu.py) in share/nvmefs, where it must find it.
if command -v cmake >/dev/null; then
	cmake --install "$build" --prefix "$MNT_TMP/prefix" >"$MNT_TMP/install.log" 2>&1 ||
		mnt_die "cmake --install failed: $(tail -n 1 "$MNT_TMP/install.log")"
	check "installed nvmefs-tune finds its module" grep -q '^nvmefs-tune [0-9]' \
		<<<"$("$MNT_TMP/prefix/sbin/nvmefs-tune" --version 2>&1)"
	check "installed nvmefs-tune refuses a missing DEV" grep -q 'missing\.img: no such file' \
		<<<"$("$MNT_TMP/prefix/sbin/nvmefs-tune" -y "${MNT_DEV_LIST[0]}" "$MNT_TMP/missing.img" 2>&1 </dev/null)"
fi

# ------------------------------------------------------------------- sweep
out=$MNT_TMP/tune.out
err=$MNT_TMP/tune.err
json=$MNT_TMP/tune.json
t0=$SECONDS
rc=0
tune 300 "$out" "$err" -y --chunks 64K,256K --modes cached,direct --qd 8,32 \
	--threads 4 -s 32M -t 1 --json "$json" "${MNT_DEV_LIST[@]}" || rc=$?
echo "sweep: exit $rc after $((SECONDS - t0)) s; its output:"
cat "$out"
if [ "$rc" != 0 ]; then
	echo "--- its stderr:" >&2
	cat "$err" >&2
	mnt_die "nvmefs-tune exited with $rc"
fi
check "nothing left behind by the sweep" leftovers

row='^ +[0-9]+ +(64K|256K) +(cached|direct) +(8|32) +4 +[0-9]+\.[0-9] +[0-9]+\.[0-9] +[0-9]+\.[0-9]$'
check "8 table rows" [ "$(grep -cE "$row" "$out")" = 8 ]
check "each trial once" [ "$(grep -E "$row" "$out" | awk '{ print $2, $3, $4, $5 }' | sort -u | wc -l)" = 8 ]
# shellcheck disable=SC2016 # awk's $1
check "ranked 1..8 by score" awk -v re="$row" '
	$0 ~ re { n++; if ($1 != n || (n > 1 && $8 > prev)) bad = 1; prev = $8 }
	END { exit bad || n != 8 }' "$out"
check "no failed trial" [ "$(grep -c FAILED "$out")" = 0 ]

mkfs_line=$(sed -n '/^Format/{n;s/^  //p;}' "$out")
mount_line=$(sed -n '/^Mount:/{n;s/^  //p;}' "$out")
best=$(grep -E "$row" "$out" | head -n 1)
read -r _ b_chunk b_mode b_qd b_th _ <<<"$best"
echo "best row: $best"
check "mkfs line is the best chunk's" like "$mkfs_line" "*mkfs.nvmefs -f -c $b_chunk *"
check "mount line has the best options" \
	like "$mount_line" "* /MOUNTPOINT -o mode=$b_mode,queue_depth=$b_qd,threads=$b_th"

# The JSON: 8 trials that agree with the table, the best and its commands.
check "JSON results" python3 - "$json" "$out" "$mkfs_line" "$mount_line" "${MNT_DEV_LIST[@]}" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
table = {}
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) == 8 and f[0].isdigit():
        table[(f[1], f[2], int(f[3]), int(f[4]))] = (float(f[5]), float(f[6]), float(f[7]))
trials = doc["trials"]
assert len(trials) == 8, len(trials)
for t in trials:
    assert t["ok"] and t["error"] is None, t
    w, r, s = t["write_mbps"], t["read_mbps"], t["score"]
    assert w > 0 and r > 0, t
    assert abs(s - 2 * w * r / (w + r)) < 0.2, t
    assert table[(t["chunk"], t["mode"], t["queue_depth"], t["threads"])] == (w, r, s), t
best = doc["best"]
assert best["score"] == max(t["score"] for t in trials), best
assert best["mkfs_command"] == sys.argv[3], (best["mkfs_command"], sys.argv[3])
assert best["mount_command"] == sys.argv[4], (best["mount_command"], sys.argv[4])
assert doc["devices"] == sys.argv[5:], doc["devices"]
print("ok: JSON: %d trials, best %s %s qd=%d threads=%d, score %.1f" % (
    len(trials), best["chunk"], best["mode"], best["queue_depth"], best["threads"], best["score"]))
EOF

# ------------------------------------------------- the advice, as printed
# prog ARGV0: the program a printed command names (a bare name is ours).
prog() {
	case $1 in */*) echo "$1" ;; *) echo "$build/$1" ;; esac
}
eval "mkfs_cmd=($mkfs_line)"
eval "mount_cmd=($mount_line)"
# shellcheck disable=SC2154 # set by eval
mkfs_cmd[0]=$(prog "${mkfs_cmd[0]}")
# shellcheck disable=SC2154 # set by eval
mount_cmd[0]=$(prog "${mount_cmd[0]}")
for i in "${!mount_cmd[@]}"; do
	[ "${mount_cmd[i]}" != /MOUNTPOINT ] || mount_cmd[i]=$MNT
done
echo "running: ${mkfs_cmd[*]}"
"${mkfs_cmd[@]}" >"$MNT_TMP/mkfs.log" 2>&1 || {
	cat "$MNT_TMP/mkfs.log" >&2
	mnt_die "the printed mkfs command failed"
}
echo "running: ${mount_cmd[*]}"
timeout 30 "${mount_cmd[@]}" </dev/null >>"$MNT_TMP/nvmefs.log" 2>&1 || {
	_mnt_log_tail
	mnt_die "the printed mount command failed"
}
end=$((SECONDS + 30))
until mountpoint -q "$MNT"; do
	[ "$SECONDS" -lt "$end" ] || mnt_die "$MNT not mounted 30 s after the printed mount command"
	sleep 0.1
done
for pid in $(_mnt_daemon_pids); do
	MNT_DAEMONS+=" $pid:$(_mnt_start_time "$pid" || true)"
done
check "mount options in effect" grep -q "mode=$b_mode" <<<"$(tr '\0' ' ' </proc/"$(_mnt_daemon_pids | head -n 1)"/cmdline)"
head -c $((8 * 1024 * 1024 + 12345)) /dev/urandom >"$MNT_TMP/data"
cp "$MNT_TMP/data" "$MNT/data"
sync -f "$MNT"
echo 3 >/proc/sys/vm/drop_caches
check "file reads back through the suggested mount" cmp "$MNT_TMP/data" "$MNT/data"
check "mounted images refused" refused "the mounted images" "in use" -y "${MNT_DEV_LIST[@]}"
check "second member of the mount refused" refused "the mount's second member" \
	"${MNT_DEV_LIST[1]}: in use" -y "${MNT_DEV_LIST[1]}"
check "file still there after the refusals" cmp "$MNT_TMP/data" "$MNT/data"

# --handle on the mounted volume: nvmefs.dsio's sweep through the native
# client (the volume's native read counter grows), its table, the best
# aio_handle call and the JSON the examples take, the scratch file gone.
hjson=$MNT_TMP/handle.json
native_reads() {
	/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["native"]["reads"])' "$MNT/.nvmefs/stats"
}
reads0=$(native_reads)
rc=0
tune 180 "$out" "$err" --handle "$MNT" --block-sizes 256K,1M --qd 8 --threads 1,2 -s 8M \
	--json "$hjson" || rc=$?
cat "$out"
[ "$rc" = 0 ] || cat "$err" >&2
check "--handle: exit status 0" [ "$rc" = 0 ]
hrow='^ +[0-9]+ +(256K|1M) +8 +[12] +[0-9]+\.[0-9]{2} +[0-9]+\.[0-9]{2} +[0-9]+\.[0-9]{2}$'
check "--handle: 4 table rows" [ "$(grep -cE "$hrow" "$out")" = 4 ]
check "--handle: the best aio_handle call" grep -q '^Best: nvmefs\.aio_handle(block_size=' "$out"
check "--handle: JSON with the best's aio configuration" /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["results"]) == 4 and all(r["error"] is None for r in d["results"]), d
assert d["aio"]["block_size"] == d["best"]["block_size"] and d["best"]["score"] == max(r["score"] for r in d["results"]), d
' "$hjson"
check "--handle: through the native client" [ "$(native_reads)" -gt "$reads0" ]
check "--handle: scratch file removed" [ ! -e "$MNT/_nvmefs_dsio.dat" ]
check "file still there after --handle" cmp "$MNT_TMP/data" "$MNT/data"
mnt_umount
if [ -x "$build/fsck.nvmefs" ]; then
	check "fsck.nvmefs -n clean" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
fi

# ------------------------------------------------------- the dd fallback
rc=0
tune 120 "$out" "$err" -y --dd --chunks 256K --modes cached,direct --qd 32 \
	--threads 4 -s 16M -t 1 "${MNT_DEV_LIST[@]}" || rc=$?
cat "$out"
if [ "$rc" = 0 ]; then
	check "dd: 2 rows" [ "$(grep -cE "$row" "$out")" = 2 ]
	check "dd: measured with dd" grep -q ', dd bs=1M' "$out"
else
	cat "$err" >&2
	check "nvmefs-tune --dd exit status 0" false
fi
check "nothing left behind by the dd sweep" leftovers

echo "total: $((SECONDS - t0)) s"
mnt_result
