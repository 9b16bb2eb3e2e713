#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ordinary programs on a freshly formatted and mounted nvmefs volume (4 image
# files of 512M), one TOOL a run, mounted with -o mode=MODE:
#  cp      cp -a of a tree (nested and deep directories, ~300 files of 0..3
#          MiB with edge sizes, a sparse file, 1000 small files in one
#          directory, symlinks, a hard link, a fifo, modes 0600/0755/0444,
#          names with spaces and UTF-8, user.* xattrs) into the volume:
#          diff -r, and type, mode, size, link count, owner, mtime (ns),
#          symlink target and xattrs of every entry match, the hard link is one
#          inode; again after a remount, and after cp -a back out;
#  dd      files written with dd at bs 512, 4K, 64K, 1M and 16M (a count of
#          whole blocks, then the tail), buffered and oflag=direct, read back
#          buffered and iflag=direct, plus an overwrite in the middle: sha256
#          and size match the source, again after a remount;
#  rsync   rsync -aH(X) in and back out, diff -r both ways; a second rsync,
#          also with --checksum, itemizes nothing; delta transfers of a
#          changed tree (--no-whole-file, then --inplace, with --delete)
#          give the same tree; after a remount still nothing to transfer;
#  tar     a posix-format, sparse-aware archive of the tree written into the
#          volume, extracted inside it: diff -r and metadata match, tar -d
#          finds no difference, a tar | tar copy back out matches; after a
#          remount the archive's sha256 and the tree are unchanged;
#  git     init, commits on two branches, a merge, gc, more commits (with
#          core.fsync=all), a local (hardlinked) and a --no-local clone, a
#          worktree: git fsck --full --strict passes in all three
#          repositories, commit counts and heads match, work trees are clean
#          and match the repository's and git archive's; again after a
#          remount;
#  sqlite  100000 rows in 100 transactions, deletes and re-inserts, VACUUM,
#          and a WAL database (its -shm index a shared mmap; in direct
#          mode before Linux 6.6, which cannot map a direct_io FUSE file
#          shared, with locking_mode=EXCLUSIVE): integrity_check is ok,
#          counts and sums are right,
#          .dump unchanged after a remount;
#  fio     verify=crc32c write and randwrite at bs 4k and 1m, 64 MiB each,
#          psync buffered and libaio direct (iodepth 16): exit status 0, no
#          verify error; after a remount fio --verify_only passes;
#  python  /usr/bin/python3: numpy np.save/np.load (also mmap_mode) and
#          np.memmap in modes w+, r+ and r, Python's mmap.mmap; torch.save/torch.load of a module's state dict
#          plus a 100 MB tensor, every tensor torch.equal; in a fresh process
#          and after a remount.
# Exit 77 (skip) without root, /dev/fuse, the nvmefs binaries or the TOOL.
# NVMEFS_TEST_NO_MOUNT=1 runs the same checks on a plain directory (see
# lib_mount.sh); NVMEFS_TEST_SEED fixes the tree's shape,
# NVMEFS_TEST_MOUNT_OPTS adds mount options (e.g. queue_depth=4) and
# NVMEFS_TEST_TIME_LIMIT replaces the 240 s limit of the whole run.
# usage: test_tools.sh BUILD_DIR TOOL [cached|direct]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

usage() {
	echo "usage: test_tools.sh BUILD_DIR cp|dd|rsync|tar|git|sqlite|fio|python [cached|direct]" >&2
	exit 2
}
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	usage
fi
build=$1 tool=$2 mode=${3:-cached}
case $mode in cached | direct) ;; *) usage ;; esac
case $tool in cp | dd | rsync | tar | git | sqlite | fio | python) ;; *) usage ;; esac
mnt_time_limit 240 "$0" "$@"

mount_opts="mode=$mode${NVMEFS_TEST_MOUNT_OPTS:+,$NVMEFS_TEST_MOUNT_OPTS}"
seed=${NVMEFS_TEST_SEED:-$((RANDOM * 32768 + RANDOM))}
RANDOM=$seed
XATTR=0 # make_tree managed to set user.* xattrs

# mkrand FILE BYTES: random content.
mkrand() {
	head -c "$2" /dev/urandom >"$1"
}

sha() { # FILE
	sha256sum <"$1" | cut -d' ' -f1
}

# make_tree DIR: the tree described at the top. Sets XATTR, TREE_BIG (the
# relative paths of the files of 1 MiB and more) and TREE_SMALL (others).
make_tree() {
	local d=$1 i n sub f
	local dirs=(. a a/b a/b/c a/b/c/d/e/f/g/h/i/j "with space" "ünïcödé" x x/y z)
	local sizes=(0 0 1 511 512 513 4095 4096 4097 65535 65536 65537 131071 131072 131073
		1048575 1048576 1048577 3145727 3145728)
	TREE_BIG=()
	TREE_SMALL=()
	for sub in "${dirs[@]}"; do
		mkdir -p "$d/$sub"
	done
	for ((i = 0; i < 300; i++)); do
		if ((i < ${#sizes[@]})); then
			n=${sizes[i]}
		else
			case $((i % 3)) in
			0) n=$((RANDOM % 4097)) ;;
			1) n=$(((RANDOM * 8 + RANDOM % 8) % 262145)) ;;
			*) n=$(((RANDOM * 32768 + RANDOM) % 3145729)) ;;
			esac
		fi
		sub=${dirs[RANDOM % ${#dirs[@]}]}
		f=$sub/f$i.bin
		mkrand "$d/$f" "$n"
		if ((n >= 1048576)); then
			TREE_BIG+=("$f")
		else
			TREE_SMALL+=("$f")
		fi
	done
	mkdir "$d/many"
	for i in {0001..1000}; do
		printf '%s\n' "$i" >"$d/many/entry_$i"
	done
	truncate -s 8M "$d/a/sparse"
	mkrand "$d/sparse.tmp" 70000
	dd if="$d/sparse.tmp" of="$d/a/sparse" bs=70000 seek=1M oflag=seek_bytes conv=notrunc status=none
	dd if="$d/sparse.tmp" of="$d/a/sparse" bs=70000 seek=$((5 << 20 | 7)) oflag=seek_bytes conv=notrunc status=none
	rm "$d/sparse.tmp"
	echo "file with spaces" >"$d/with space/file name with  spaces.txt"
	echo "utf-8" >"$d/ünïcödé/fïlé-ñämé.txt"
	mkrand "$d/a/b/private" 3000
	chmod 0600 "$d/a/b/private"
	printf '#!/bin/sh\necho hello\n' >"$d/x/script.sh"
	chmod 0755 "$d/x/script.sh"
	echo "read only" >"$d/z/readonly"
	chmod 0444 "$d/z/readonly"
	chmod 0700 "$d/x/y"
	mkrand "$d/a/hard1" 100000
	ln "$d/a/hard1" "$d/x/hard2"
	ln -s b/private "$d/a/link_rel"
	ln -s ../x/script.sh "$d/z/link_up"
	ln -s a/b "$d/link_dir"
	ln -s nowhere/at/all "$d/link_dangling"
	mkfifo "$d/a/named.fifo"
	echo "has xattrs" >"$d/a/xattr_file"
	if setfattr -n user.nvmefs.test -v "a value" "$d/a/xattr_file" 2>/dev/null; then
		setfattr -n user.nvmefs.bin -v "0x$(head -c 200 /dev/urandom | od -An -tx1 -v | tr -d ' \n')" "$d/a/xattr_file"
		setfattr -n user.nvmefs.empty "$d/a/xattr_file"
		setfattr -n user.nvmefs.dir -v "on a directory" "$d/a/b"
		XATTR=1
	else
		echo "note: $d takes no user.* xattrs; not testing them"
	fi
	# Times in the past, with nanoseconds: rsync leaves the time of a
	# directory, symlink or fifo alone when it has the right second.
	find "$d" ! -type f -exec touch -h -d "2021-02-03 04:05:06.123456789" {} +
	echo "tree: $(find "$d" | wc -l) entries, $(du -sm "$d" | cut -f1) MiB (seed $seed)"
}

# tree_list DIR: one line per entry: path, type, mode, size and link count
# (not for directories: those are the filesystem's business), owner, mtime
# in ns and symlink target.
tree_list() {
	(cd "$1" && find . \( -type d -printf '%p %y %m - - %U:%G %T@\n' \) \
		-o -printf '%p %y %m %s %n %U:%G %T@ %l\n' | LC_ALL=C sort)
}

xattr_dump() { # PATH
	getfattr --absolute-names -h -d -m '^user\.' -e hex "$1" | tail -n +2
}

# shellcheck disable=SC2317 # called through check
same_inode() { # A B
	[ "$(stat -c %i "$1")" = "$(stat -c %i "$2")" ]
}

# compare_trees WHAT A B: B is a faithful copy of A.
compare_trees() {
	local what=$1 a=$2 b=$3 p
	check "$what: diff -r $a $b" diff -r --no-dereference -x '*.fifo' "$a" "$b"
	check "$what: type, mode, size, links, owner, mtime, target" diff <(tree_list "$a") <(tree_list "$b")
	check "$what: hard link is one inode" same_inode "$b/a/hard1" "$b/x/hard2"
	if [ "$XATTR" = 1 ]; then
		for p in a/xattr_file a/b; do
			check "$what: xattrs of $p" diff <(xattr_dump "$a/$p") <(xattr_dump "$b/$p")
		done
	fi
}

tool_cp() {
	make_tree "$MNT_TMP/tree"
	cp -a "$MNT_TMP/tree" "$MNT/"
	compare_trees "cp -a in" "$MNT_TMP/tree" "$MNT/tree"
	mnt_remount "$mount_opts"
	compare_trees "after remount" "$MNT_TMP/tree" "$MNT/tree"
	cp -a "$MNT/tree" "$MNT_TMP/back"
	compare_trees "cp -a out" "$MNT_TMP/tree" "$MNT_TMP/back"
}

# dd_write SRC DST BS SIZE [direct]: SIZE/BS whole blocks, then the tail.
dd_write() {
	local src=$1 dst=$2 bs=$3 size=$4 flag=${5:-}
	local n=$((size / bs)) tail=$((size % bs))
	dd if="$src" of="$dst" bs="$bs" count="$n" iflag=fullblock ${flag:+oflag=$flag} status=none
	if [ "$tail" -gt 0 ]; then
		dd if="$src" of="$dst" bs="$tail" count=1 skip=$((n * bs)) seek=$((n * bs)) \
			iflag=skip_bytes,fullblock oflag=seek_bytes${flag:+,$flag} conv=notrunc status=none
	fi
}

dd_sha() { # FILE BS [direct]
	dd if="$1" bs="$2" ${3:+iflag=$3} status=none | sha256sum | cut -d' ' -f1
}

# dd_check WHAT FILE SIZE SHA [BS]: FILE has SIZE bytes and SHA, read at BS
# (1M) buffered and with iflag=direct.
dd_check() {
	local what=$1 f=$2 size=$3 want=$4 r
	check "$what: size of ${f##*/} is $(stat -c %s "$f"), not $size" test "$(stat -c %s "$f")" = "$size"
	for r in "" direct; do
		check "$what: ${f##*/} read back${r:+ with iflag=$r} at bs ${5:-1M}" \
			test "$(dd_sha "$f" "${5:-1M}" ${r:+"$r"})" = "$want"
	done
}

tool_dd() {
	local bs b w size src=$MNT_TMP/src.bin f t
	local -A want_size want_sha
	local -a files=()
	local writes=("" direct)
	mkrand "$src" $(((32 << 20) + 12345))
	if ! dd if=/dev/zero of="$MNT/odirect" bs=4096 count=1 oflag=direct status=none; then
		[ "$MNT_NO_MOUNT" = 1 ] || mnt_die "O_DIRECT write on the volume failed"
		echo "note: no O_DIRECT on this host filesystem: buffered cases only"
		writes=("")
	fi
	rm -f "$MNT/odirect"
	for bs in 512 4K 64K 1M 16M; do
		b=$(numfmt --from=iec "$bs")
		for w in "${writes[@]}"; do
			# bs 512 does 8 MiB: a syscall (and a FUSE request) per block.
			size=$((b == 512 ? 8 << 20 : 32 << 20))
			# Tails of 12345 (buffered) or 12288 (direct: 4096-aligned) bytes.
			if [ -z "$w" ]; then
				size=$((size + 12345))
			else
				size=$((size + 12288))
			fi
			f=$MNT/dd_${bs}_${w:-buffered}
			dd_write "$src" "$f" "$b" "$size" ${w:+"$w"}
			want_size[$f]=$size
			want_sha[$f]=$(head -c "$size" "$src" | sha256sum | cut -d' ' -f1)
			files+=("$f")
			dd_check "bs $bs ${w:-buffered} write" "$f" "$size" "${want_sha[$f]}" "$b"
		done
	done

	# Overwrites in the middle: unaligned buffered, aligned direct.
	mkrand "$MNT_TMP/patch" 100000
	f=$MNT/dd_4K_buffered
	head -c "${want_size[$f]}" "$src" >"$MNT_TMP/expect"
	for t in "$f" "$MNT_TMP/expect"; do
		dd if="$MNT_TMP/patch" of="$t" bs=100000 seek=1234567 oflag=seek_bytes conv=notrunc status=none
	done
	want_sha[$f]=$(sha "$MNT_TMP/expect")
	dd_check "buffered overwrite" "$f" "${want_size[$f]}" "${want_sha[$f]}"
	if [ ${#writes[@]} = 2 ]; then
		f=$MNT/dd_64K_direct
		head -c "${want_size[$f]}" "$src" >"$MNT_TMP/expect"
		dd if="$MNT_TMP/patch" of="$f" bs=8192 count=9 seek=$((5 * 65536 + 4096)) oflag=seek_bytes,direct \
			iflag=fullblock conv=notrunc status=none
		dd if="$MNT_TMP/patch" of="$MNT_TMP/expect" bs=8192 count=9 seek=$((5 * 65536 + 4096)) \
			oflag=seek_bytes conv=notrunc status=none
		want_sha[$f]=$(sha "$MNT_TMP/expect")
		dd_check "direct overwrite" "$f" "${want_size[$f]}" "${want_sha[$f]}"
	fi

	mnt_remount "$mount_opts"
	for f in "${files[@]}"; do
		dd_check "after remount" "$f" "${want_size[$f]}" "${want_sha[$f]}"
	done
}

# Changes to the source tree for a delta transfer; rounds 0 and 1 touch
# different files.
modify_tree() { # DIR ROUND
	local d=$1 r=$2 f t
	t="2022-03-04 05:06:1$r.98765432$r"
	# Same size, new bytes in the middle of big files; a time rsync's
	# quick check tells from the old one, whatever the clock did.
	for f in "${TREE_BIG[@]:r*2:2}"; do
		head -c 4096 /dev/urandom | dd of="$d/$f" bs=4096 seek=100 iflag=fullblock conv=notrunc status=none
		touch -d "$t" "$d/$f"
	done
	head -c 5000 /dev/urandom >>"$d/${TREE_BIG[r * 2 + 4]}"
	truncate -s 777 "$d/${TREE_BIG[r * 2 + 5]}"
	rm "$d/${TREE_SMALL[r]}"
	mkrand "$d/z/new_$r" 300000
	mv "$d/${TREE_SMALL[r + 10]}" "$d/x/renamed_$r"
	echo "round $r" >>"$d/many/entry_0500"
	touch -d "$t" "$d/many/entry_0500"
	find "$d" -type d -exec touch -d "$t" {} +
}

# no_changes CMD...: CMD succeeds and prints nothing.
# shellcheck disable=SC2317 # called through check
no_changes() {
	local out
	out=$("$@") || return 1
	[ -z "$out" ] && return 0
	printf '%s\n' "$out" | head -n 20 >&2
	return 1
}

# no_match ERE FILE...: no line matches (case-insensitive); shows those that
# do.
# shellcheck disable=SC2317 # called through check
no_match() {
	local re=$1
	shift
	! grep -iE -m 20 "$re" "$@" >&2
}

tool_rsync() {
	local src=$MNT_TMP/tree
	local ro=(-aH)
	mnt_need rsync
	make_tree "$src"
	[ "$XATTR" = 0 ] || ro+=(-X)
	rsync "${ro[@]}" "$src/" "$MNT/tree/"
	compare_trees "rsync in" "$src" "$MNT/tree"
	rsync "${ro[@]}" "$MNT/tree/" "$MNT_TMP/back/"
	compare_trees "rsync out" "$MNT/tree" "$MNT_TMP/back"
	compare_trees "rsync out vs source" "$src" "$MNT_TMP/back"
	check "second rsync: nothing to do" no_changes rsync "${ro[@]}" -i "$src/" "$MNT/tree/"
	check "rsync --checksum: nothing to do" no_changes rsync "${ro[@]}" -c -i "$src/" "$MNT/tree/"
	modify_tree "$src" 0
	rsync "${ro[@]}" --delete --no-whole-file "$src/" "$MNT/tree/"
	compare_trees "rsync delta" "$src" "$MNT/tree"
	modify_tree "$src" 1
	rsync "${ro[@]}" --delete --no-whole-file --inplace "$src/" "$MNT/tree/"
	compare_trees "rsync --inplace delta" "$src" "$MNT/tree"
	mnt_remount "$mount_opts"
	compare_trees "after remount" "$src" "$MNT/tree"
	check "after remount: nothing to do" no_changes rsync "${ro[@]}" -i "$src/" "$MNT/tree/"
	check "after remount: --checksum nothing to do" no_changes rsync "${ro[@]}" -c -i "$src/" "$MNT/tree/"
}

tool_tar() {
	local to=(--format=posix) s
	mnt_need tar
	make_tree "$MNT_TMP/tree"
	[ "$XATTR" = 0 ] || to+=(--xattrs --xattrs-include='user.*')
	tar "${to[@]}" -S -cf "$MNT/tree.tar" -C "$MNT_TMP" tree
	mkdir "$MNT/x" "$MNT_TMP/back"
	tar "${to[@]}" -xpf "$MNT/tree.tar" -C "$MNT/x"
	compare_trees "tar -x in the volume" "$MNT_TMP/tree" "$MNT/x/tree"
	check "tar -d against the extracted tree" tar "${to[@]}" -df "$MNT/tree.tar" -C "$MNT/x"
	check "tar -d against the source" tar "${to[@]}" -df "$MNT/tree.tar" -C "$MNT_TMP"
	tar "${to[@]}" -S -cf - -C "$MNT/x" tree | tar "${to[@]}" -xpf - -C "$MNT_TMP/back"
	compare_trees "tar | tar out" "$MNT_TMP/tree" "$MNT_TMP/back/tree"
	s=$(sha "$MNT/tree.tar")
	mnt_remount "$mount_opts"
	check "after remount: archive unchanged" test "$(sha "$MNT/tree.tar")" = "$s"
	compare_trees "after remount" "$MNT_TMP/tree" "$MNT/x/tree"
	check "after remount: tar -d" tar "${to[@]}" -df "$MNT/tree.tar" -C "$MNT/x"
}

g() {
	git -c user.name="nvmefs test" -c user.email=test@nvmefs.invalid -c init.defaultBranch=main \
		-c core.fsync=all -c advice.detachedHead=false -c gc.auto=0 "$@"
}

git_checks() { # WHAT
	local r head
	head=$(g -C "$MNT/repo" rev-parse main)
	for r in repo clone_local clone_pack; do
		check "$1: git fsck --full --strict in $r" g -C "$MNT/$r" fsck --full --strict --no-progress
		check "$1: $r has 34 commits" test "$(g -C "$MNT/$r" log --oneline --all | wc -l)" = 34
		check "$1: $r work tree clean" no_changes g -C "$MNT/$r" status --porcelain
	done
	for r in clone_local clone_pack; do
		check "$1: $r HEAD is repo's main" test "$(g -C "$MNT/$r" rev-parse HEAD)" = "$head"
		check "$1: $r work tree = repo's" diff -r -x .git "$MNT/repo" "$MNT/$r"
		check "$1: $r origin/feature" test "$(g -C "$MNT/$r" rev-parse origin/feature)" = \
			"$(g -C "$MNT/repo" rev-parse feature)"
	done
	check "$1: worktree clean" no_changes g -C "$MNT/worktree" status --porcelain
	rm -rf "$MNT/archive"
	mkdir "$MNT/archive"
	g -C "$MNT/repo" archive --format=tar feature | tar -xf - -C "$MNT/archive"
	check "$1: worktree of feature = git archive feature" diff -r -x .git "$MNT/worktree" "$MNT/archive"
}

tool_git() {
	local repo=$MNT/repo i
	mnt_need git
	export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
	g init -q "$repo"
	mkdir -p "$repo/src/sub" "$repo/data"
	for ((i = 0; i < 50; i++)); do
		seq "$i" 7 $((i * 500 + 20)) >"$repo/src/file$i.txt"
	done
	cp "$here/lib_mount.sh" "$repo/src/sub/"
	mkrand "$repo/data/blob.bin" $((2 << 20))
	g -C "$repo" add -A
	g -C "$repo" commit -q -m "first"
	for ((i = 0; i < 20; i++)); do
		echo "main $i" >>"$repo/main_log.txt"
		seq "$i" 1000 >"$repo/src/main$i.txt"
		g -C "$repo" add -A
		g -C "$repo" commit -q -m "main $i"
	done
	g -C "$repo" checkout -q -b feature HEAD~10
	for ((i = 0; i < 10; i++)); do
		head -c 4096 /dev/urandom |
			dd of="$repo/data/blob.bin" bs=4096 seek=$((i * 37)) iflag=fullblock conv=notrunc status=none
		g -C "$repo" mv "src/file$i.txt" "src/sub/moved$i.txt"
		g -C "$repo" rm -q "src/file$((i + 20)).txt"
		g -C "$repo" commit -q -a -m "feature $i"
	done
	g -C "$repo" checkout -q main
	g -C "$repo" merge -q --no-edit feature
	g -C "$repo" gc -q
	for ((i = 0; i < 2; i++)); do
		echo "after gc $i" >>"$repo/main_log.txt"
		g -C "$repo" commit -q -a -m "after gc $i"
	done
	g clone -q "$repo" "$MNT/clone_local"
	check "local clone hardlinks objects" test "$(find "$MNT/clone_local/.git/objects" -type f -links +1 | wc -l)" -gt 0
	g clone -q --no-local "$repo" "$MNT/clone_pack"
	g -C "$repo" worktree add -q "$MNT/worktree" feature
	git_checks "before remount"
	mnt_remount "$mount_opts"
	git_checks "after remount"
}

# sql DB SQL: the result, one row a line. The WAL database's -shm index is
# a shared mmap: in direct mode before Linux 6.6 (no shared mmap of direct_io
# files) it is opened with exclusive locking, which keeps the index in memory
# instead.
sql() {
	if [ "$1" = "$MNT/wal.db" ] && [ "$mode" = direct ] && ! mnt_direct_mmap; then
		printf '.output /dev/null\nPRAGMA locking_mode=EXCLUSIVE;\n.output stdout\n%s\n' "$2" |
			sqlite3 -bail -batch "$1"
	else
		sqlite3 -bail -batch "$1" "$2"
	fi
}

tool_sqlite() {
	local db=$MNT/test.db wal=$MNT/wal.db k dump1 dump2
	mnt_need sqlite3
	{
		echo "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER NOT NULL, s TEXT NOT NULL);"
		echo "CREATE INDEX t_v ON t(v);"
		for ((k = 0; k < 100; k++)); do
			echo "BEGIN;"
			echo "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000)"
			echo "  INSERT INTO t(v, s) SELECT $k * 1000 + x, printf('%08d-', $k * 1000 + x) || hex(randomblob(40)) FROM c;"
			echo "COMMIT;"
		done
		# Churn: delete a tenth of the rows, put them back, rewrite the file.
		echo "BEGIN; DELETE FROM t WHERE v % 10 = 0; COMMIT;"
		echo "BEGIN;"
		echo "WITH RECURSIVE c(x) AS (SELECT 10 UNION ALL SELECT x + 10 FROM c WHERE x < 100000)"
		echo "  INSERT INTO t(v, s) SELECT x, printf('%08d-', x) || hex(randomblob(40)) FROM c;"
		echo "COMMIT;"
		echo "VACUUM;"
	} >"$MNT_TMP/fill.sql"
	sql "$db" "$(cat "$MNT_TMP/fill.sql")"

	{
		echo "PRAGMA journal_mode=WAL;"
		echo "CREATE TABLE w(id INTEGER PRIMARY KEY, v INTEGER NOT NULL, b BLOB NOT NULL);"
		for ((k = 0; k < 20; k++)); do
			echo "BEGIN;"
			echo "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000)"
			echo "  INSERT INTO w(v, b) SELECT $k * 1000 + x, randomblob(300) FROM c;"
			echo "COMMIT;"
			[ $((k % 5)) != 4 ] || echo "PRAGMA wal_checkpoint(TRUNCATE);"
		done
	} >"$MNT_TMP/wal.sql"
	sql "$wal" "$(cat "$MNT_TMP/wal.sql")" >/dev/null

	sqlite_checks "before remount"
	dump1=$(sql "$db" .dump | sha256sum)
	dump2=$(sql "$wal" .dump | sha256sum)
	mnt_remount "$mount_opts"
	sqlite_checks "after remount"
	check "after remount: .dump unchanged" test "$(sql "$db" .dump | sha256sum)" = "$dump1"
	check "after remount: WAL .dump unchanged" test "$(sql "$wal" .dump | sha256sum)" = "$dump2"
}

sqlite_checks() { # WHAT
	local db=$MNT/test.db wal=$MNT/wal.db
	check "$1: integrity_check" test "$(sql "$db" 'PRAGMA integrity_check;')" = ok
	check "$1: count" test "$(sql "$db" 'SELECT count(*) FROM t;')" = 100000
	check "$1: sum(v)" test "$(sql "$db" 'SELECT sum(v) FROM t;')" = 5000050000
	check "$1: distinct v" test "$(sql "$db" 'SELECT count(DISTINCT v) FROM t;')" = 100000
	check "$1: sum(length(s))" test "$(sql "$db" 'SELECT sum(length(s)) FROM t;')" = 8900000
	check "$1: s matches v" test "$(sql "$db" "SELECT count(*) FROM t WHERE substr(s, 1, 8) != printf('%08d', v);")" = 0
	check "$1: index agrees" test "$(sql "$db" 'SELECT sum(v) FROM t INDEXED BY t_v WHERE v > 50000;')" = 3750025000
	check "$1: WAL integrity_check" test "$(sql "$wal" 'PRAGMA integrity_check;')" = ok
	check "$1: WAL count and sum" test "$(sql "$wal" 'SELECT count(*), sum(v), sum(length(b)) FROM w;')" = "20000|200010000|6000000"
}

tool_fio() {
	local job=$MNT_TMP/verify.fio e rw bs
	mnt_need fio
	{
		printf '[global]\ndirectory=%s\nsize=64m\nverify=crc32c\ndo_verify=1\nverify_fatal=1\n' "$MNT"
		# No verify state files in the current directory.
		printf 'stonewall\nrandrepeat=1\nverify_state_save=0\n'
		for e in psync libaio; do
			for rw in write randwrite; do
				for bs in 4k 1m; do
					printf '[%s-%s-%s]\nrw=%s\nbs=%s\nioengine=%s\n' "$e" "$rw" "$bs" "$rw" "$bs" "$e"
					[ "$e" = psync ] || printf 'direct=1\niodepth=16\n'
				done
			done
		done
	} >"$job"
	fio_run "write and verify" "$job"
	mnt_remount "$mount_opts"
	fio_run "after remount: --verify_only" "$job" --verify_only
}

fio_run() { # WHAT JOBFILE [ARGS...]
	local what=$1 job=$2 out=$MNT_TMP/fio.out err=$MNT_TMP/fio.err rc=0
	shift 2
	# The report goes to out, verify failures to stderr.
	fio "$@" --output="$out" "$job" 2>"$err" || rc=$?
	check "$what: fio exit status $rc" test "$rc" = 0
	check "$what: every job err=0" test "$(grep -c ': err= 0:' "$out")" = 8
	check "$what: no verify error" no_match 'verify|bad magic|crc32c' "$out" "$err"
	if [ "$rc" != 0 ]; then
		tail -n 20 "$err" >&2
		grep -E 'err=|error' "$out" >&2
	fi
}

tool_python() {
	local py=/usr/bin/python3 m
	[ -x "$py" ] || mnt_skip "$py not installed (Debian package python3)"
	for m in numpy torch; do
		"$py" -c "import $m" 2>/dev/null || mnt_skip "$m not importable by $py (Debian package python3-$m)"
	done
	cat >"$MNT_TMP/check.py" <<'EOF'
# write: save arrays and tensors into DIR and read them back; verify: read
# them in a fresh process. Data are regenerated from fixed seeds.
import mmap
import sys

import numpy as np
import torch

phase, d = sys.argv[1], sys.argv[2]
fails = 0


def check(what, ok):
    global fails
    if not ok:
        print(f"FAIL: {phase}: {what}", file=sys.stderr)
        fails += 1


rng = np.random.default_rng(12345)
a = rng.standard_normal(50_000_000 // 8)  # 50 MB of float64
odd = rng.integers(0, 2**31, size=1_000_003, dtype=np.int32)
shape = (3001, 4099)  # 49 MB of float32, rows not page-aligned
mexp = np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape) * 0.5
mexp[100:200] = -1.0
mexp[:, 7] = 42.0

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
    torch.nn.Flatten(), torch.nn.Linear(16 * 30 * 30, 10))
model.train()
model(torch.randn(4, 3, 32, 32))  # moves BatchNorm's running statistics
state = {k: v.clone() for k, v in model.state_dict().items()}
state["big"] = torch.randn(25_000_000)  # 100 MB of float32
state["ints"] = torch.arange(1_000_001, dtype=torch.int64)

if phase == "write":
    np.save(f"{d}/a.npy", a)
    np.save(f"{d}/odd.npy", odd)
    m = np.memmap(f"{d}/m.dat", dtype=np.float32, mode="w+", shape=shape)
    for r in range(0, shape[0], 500):
        m[r:r + 500] = np.arange(r * shape[1], min(r + 500, shape[0]) * shape[1],
                                 dtype=np.float32).reshape(-1, shape[1]) * 0.5
    m.flush()
    del m
    m = np.memmap(f"{d}/m.dat", dtype=np.float32, mode="r+", shape=shape)
    m[100:200] = -1.0
    m[:, 7] = 42.0
    m.flush()
    del m
    torch.save(state, f"{d}/state.pt")

check("np.load a.npy", np.array_equal(np.load(f"{d}/a.npy"), a))
check("np.load odd.npy", np.array_equal(np.load(f"{d}/odd.npy"), odd))
check("np.load mmap_mode=r", np.array_equal(np.load(f"{d}/a.npy", mmap_mode="r"), a))
check("np.memmap mode=r", np.array_equal(np.memmap(f"{d}/m.dat", dtype=np.float32, mode="r", shape=shape), mexp))
check("np.fromfile of the memmap file", np.array_equal(np.fromfile(f"{d}/m.dat", dtype=np.float32).reshape(shape), mexp))
# Python's mmap (MAP_SHARED), the way mmap-based checkers read a file, and a
# store through it seen by read(2) on another descriptor.
with open(f"{d}/m.dat", "r+b") as f:
    mm = mmap.mmap(f.fileno(), 0)
    check("mmap.mmap reads the file", mm[:mexp.nbytes] == mexp.tobytes())
    if phase == "write":
        mm[4096:4100] = b"\xde\xad\xbe\xef"
        mm.flush()
        with open(f"{d}/m.dat", "rb") as g:
            g.seek(4096)
            check("read(2) sees an mmap store", g.read(4) == b"\xde\xad\xbe\xef")
        mm[4096:4100] = mexp.tobytes()[4096:4100]  # the file is mexp again
        mm.flush()
    mm.close()
with open(f"{d}/m.dat", "rb") as f:
    check("read(2) after an mmap store", f.read() == mexp.tobytes())
loaded = torch.load(f"{d}/state.pt")
check(f"state dict keys {sorted(loaded)}", sorted(loaded) == sorted(state))
for k, v in state.items():
    check(f"torch.equal {k}", k in loaded and loaded[k].dtype == v.dtype and torch.equal(loaded[k], v))
fresh = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
    torch.nn.Flatten(), torch.nn.Linear(16 * 30 * 30, 10))
fresh.load_state_dict({k: v for k, v in loaded.items() if k not in ("big", "ints")})
x = torch.randn(2, 3, 32, 32)
model.eval()
fresh.eval()
check("loaded module computes the same", torch.equal(model(x), fresh(x)))
print(f"python {phase}: {'ok' if fails == 0 else f'{fails} failures'}")
sys.exit(1 if fails else 0)
EOF
	check "python: write and read back" "$py" "$MNT_TMP/check.py" write "$MNT"
	check "python: read in a fresh process" "$py" "$MNT_TMP/check.py" verify "$MNT"
	mnt_remount "$mount_opts"
	check "python: read after remount" "$py" "$MNT_TMP/check.py" verify "$MNT"
}

echo "test_tools: $tool on a $mode mount"
mnt_setup "$build"
mnt_mount "$mount_opts"
start=$SECONDS
case $tool in
cp) tool_cp ;;
dd) tool_dd ;;
rsync) tool_rsync ;;
tar) tool_tar ;;
git) tool_git ;;
sqlite) tool_sqlite ;;
fio) tool_fio ;;
python) tool_python ;;
esac
mnt_umount
echo "test_tools: $tool took $((SECONDS - start)) s"
mnt_result
