#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kill -9 durability: what fsync made durable survives the daemon's death.
# On 4 image files of 256M mounted with the default commit interval (so only
# fsync makes anything durable), each iteration runs a writer (python3) that,
# one operation at a time, creates files of random content and size (0..3
# MiB, with edge sizes; written in random pieces, some backwards, some after
# an ftruncate) in the root and in subdirectories, makes directories, renames
# files (also over other files) and deletes files; it fsyncs each file and
# the directories an operation touched, like a careful application, and only
# then appends the operation to a manifest outside the volume (an intent line
# goes before each operation). Some files it writes without fsync. After a
# random 1..4 s the nvmefs daemon gets SIGKILL; the mount is detached and
# mounted again (journal replay), and the tree must be exactly the manifest's
# state: every recorded file with its size and sha256, every recorded
# directory, nothing deleted or renamed away, no other file; the one
# operation in flight either happened or did not (a rename is atomic), and a
# file not yet fsynced holds, block by block, what was written or zeros
# (never other files' data). statfs must agree: used space = the files'
# st_blocks, inodes in use = files + directories + root, and the totals stay
# those after mkfs. Iterations alternate mode=cached and mode=direct. At the
# end everything is deleted and the root fsynced, the daemon killed again:
# after the replay and after a clean remount the free blocks and inodes are
# back to their values after mkfs (within 8 blocks).
# Exit 77 (skip) without root, /dev/fuse, the nvmefs binaries or python3.
# usage: test_crash.sh BUILD_DIR [ITERATIONS [SEED]]
#   (defaults: NVMEFS_CRASH_ITERS or 5; NVMEFS_TEST_SEED or random;
#   NVMEFS_TEST_MOUNT_OPTS replaces the alternating mode option;
#   NVMEFS_TEST_TIME_LIMIT the overall 240 s limit)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
	echo "usage: test_crash.sh BUILD_DIR [ITERATIONS [SEED]]" >&2
	exit 2
fi
build=$1
iters=${2:-${NVMEFS_CRASH_ITERS:-5}}
seed=${3:-${NVMEFS_TEST_SEED:-$((RANDOM * 32768 + RANDOM))}}
mnt_time_limit 240 "$0" "$@"
py=/usr/bin/python3
mnt_need "$py" python3
mnt_setup "$build" 4 256M
echo "seed $seed, $iters iterations (repeat with: test_crash.sh $build $iters $seed)"
RANDOM=$seed

cat >"$MNT_TMP/crash.py" <<'EOF'
# The writer and the checker of test_crash.sh.
#   crash.py write ROOT MANIFEST SEED
#   crash.py verify ROOT MANIFEST BLOCKS  (BLOCKS: statfs f_blocks after mkfs)
import errno, hashlib, os, random, sys, time

BLOCK = 4096


def content(key, size):
    return random.Random(key).randbytes(size)


class State:
    def __init__(self):
        self.files = {}  # path -> (size, sha256)
        self.dirs = set()
        self.unsynced = {}  # path -> (key, size): written without fsync
        self.pending = None  # the intent not followed by its record

    def apply(self, rec):
        op = rec[0]
        if op == 'C':
            self.files[rec[1]] = (int(rec[3]), rec[4])
        elif op == 'M':
            self.dirs.add(rec[1])
        elif op == 'R':
            self.files[rec[2]] = self.files.pop(rec[1])
        elif op == 'D':
            del self.files[rec[1]]

    def copy(self):
        s = State()
        s.files = dict(self.files)
        s.dirs = set(self.dirs)
        return s


def load(manifest):
    st = State()
    seq = 0
    with open(manifest) as f:
        for line in f:
            if not line.endswith('\n'):
                break  # torn by a kill
            rec = line.rstrip('\n').split('\t')
            seq += 1
            if rec[0] == 'I':
                st.pending = rec[1:]
                if rec[1] == 'U':
                    st.unsynced[rec[2]] = (rec[3], int(rec[4]))
                    st.pending = None
                continue
            if rec[0] == 'Z':
                st.unsynced.clear()
            elif rec[0] != 'N':
                st.apply(rec)
            st.pending = None
    return st, seq


class Writer:
    def __init__(self, root, manifest, seed):
        self.root = root
        self.st, n = load(manifest)
        self.fd = os.open(manifest, os.O_WRONLY | os.O_APPEND)
        self.rnd = random.Random(seed)
        self.seed = seed
        self.n = n
        sv = os.statvfs(root)
        self.budget = sv.f_blocks * sv.f_frsize * 35 // 100
        self.ops = {}

    def log(self, *rec):
        os.write(self.fd, ('\t'.join(str(x) for x in rec) + '\n').encode())

    def fsync_dir(self, rel):
        fd = os.open(os.path.join(self.root, rel) if rel else self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def name(self, prefix):
        self.n += 1
        d = self.rnd.choice([''] + sorted(self.st.dirs)) if self.rnd.random() < 0.6 else ''
        return os.path.join(d, '%s%d_%d' % (prefix, self.seed, self.n))

    def size(self):
        r = self.rnd.random()
        if r < 0.05:
            return 0
        if r < 0.2:
            return self.rnd.randint(1, BLOCK - 1)
        if r < 0.35:
            return BLOCK * self.rnd.randint(1, 768)
        if r < 0.45:
            return (1 << 20) * self.rnd.randint(1, 3) + self.rnd.choice([-1, 0, 1])
        return self.rnd.randint(0, 3 << 20)

    def write_file(self, path, key, size, sync):
        data = content(key, size)
        fd = os.open(os.path.join(self.root, path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            pieces, off = [], 0
            while off < size:
                n = min(size - off, self.rnd.randint(1, 512 << 10))
                pieces.append((off, n))
                off += n
            how = self.rnd.random()
            if how < 0.2:
                pieces.reverse()
            elif how < 0.3:
                os.ftruncate(fd, size)
                self.rnd.shuffle(pieces)
            for off, n in pieces:
                done = 0
                while done < n:
                    done += os.pwrite(fd, data[off + done:off + n], off + done)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        return hashlib.sha256(data).hexdigest()

    def create(self, sync=True):
        path, size = self.name('f' if sync else 'u'), self.size()
        key = '%d:%s' % (self.seed, path)
        self.log('I', 'C' if sync else 'U', path, key, size)
        sha = self.write_file(path, key, size, sync)
        if sync:
            self.fsync_dir(os.path.dirname(path))
            self.log('C', path, key, size, sha)
            self.st.apply(['C', path, key, size, sha])
        else:
            self.st.unsynced[path] = (key, size)

    def unsynced(self):
        self.create(sync=False)

    def mkdir(self):
        parents = [''] + sorted(d for d in self.st.dirs if d.count('/') < 1)
        path = os.path.join(self.rnd.choice(parents), 'd%d_%d' % (self.seed, self.n + 1))
        self.n += 1
        self.log('I', 'M', path)
        os.mkdir(os.path.join(self.root, path))
        self.fsync_dir(os.path.dirname(path))
        self.log('M', path)
        self.st.apply(['M', path])

    def rename(self):
        old = self.rnd.choice(sorted(self.st.files))
        others = sorted(p for p in self.st.files if p != old)
        if others and self.rnd.random() < 0.4:
            new = self.rnd.choice(others)  # replace, like a safe save
        else:
            new = self.name('r')
        self.log('I', 'R', old, new)
        os.rename(os.path.join(self.root, old), os.path.join(self.root, new))
        self.fsync_dir(os.path.dirname(new))
        if os.path.dirname(old) != os.path.dirname(new):
            self.fsync_dir(os.path.dirname(old))
        self.log('R', old, new)
        self.st.apply(['R', old, new])

    def delete(self):
        path = self.rnd.choice(sorted(self.st.files))
        self.log('I', 'D', path)
        os.unlink(os.path.join(self.root, path))
        self.fsync_dir(os.path.dirname(path))
        self.log('D', path)
        self.st.apply(['D', path])

    def step(self):
        live = sum(s for s, _ in self.st.files.values())
        r = self.rnd.random()
        if not self.st.files or (live < self.budget and r < 0.5):
            op = self.create
        elif live >= self.budget or r < 0.7:
            op = self.delete
        elif r < 0.85:
            op = self.rename
        elif r < 0.9 and len(self.st.dirs) < 12:
            op = self.mkdir
        else:
            op = self.unsynced
        op()
        name = op.__name__
        self.ops[name] = self.ops.get(name, 0) + 1

    def run(self):
        t0 = time.time()
        try:
            while True:
                self.step()
        except OSError as e:
            print('writer: stopped by %s after %.1f s; done: %s; %d files, %d dirs' %
                  (e, time.time() - t0, self.ops, len(self.st.files), len(self.st.dirs)))
            # ECANCELED: a request the io_uring transport held (FUSE over
            # io_uring) when the daemon died.
            if e.errno not in (errno.ENOTCONN, errno.ECONNABORTED, errno.ECANCELED):
                print('writer: unexpected error %s' % errno.errorcode.get(e.errno, e.errno))
                sys.exit(3)


def walk(root):
    files, dirs = {}, set()
    for d, dn, fn in os.walk(root):
        rel = os.path.relpath(d, root)
        for x in dn:
            dirs.add(os.path.normpath(os.path.join(rel, x)))
        for x in fn:
            p = os.path.normpath(os.path.join(rel, x))
            files[p] = os.lstat(os.path.join(root, p))
    return files, dirs


def sha_of(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def blockwise(path, key, size):
    """What a file written without fsync may hold: a size up to the one
    written, each block what was written or zeros. None if fine."""
    with open(path, 'rb') as f:
        got = f.read()
    if len(got) > size:
        return 'size %d > %d written' % (len(got), size)
    want = content(key, size)
    for off in range(0, len(got), BLOCK):
        b = got[off:off + BLOCK]
        if b != want[off:off + len(b)] and b.count(0) != len(b):
            return 'block at %d is neither the data written nor zeros' % off
    return None


def verify(root, manifest, blocks0):
    st, _ = load(manifest)
    errs = []
    disk, ddirs = walk(root)
    wild = dict(st.unsynced)
    pend = st.pending
    cands = [('did not happen', st)]
    if pend:
        after = st.copy()
        if pend[0] == 'C':
            wild[pend[1]] = (pend[2], int(pend[3]))
        elif pend[0] == 'M':
            after.apply(['M', pend[1]])
            cands.append(('happened', after))
        elif pend[0] == 'R':
            after.apply(['R', pend[1], pend[2]])
            cands.append(('happened', after))
        elif pend[0] == 'D':
            after.apply(['D', pend[1]])
            cands.append(('happened', after))
    for p, (key, size) in wild.items():
        if p in disk:
            why = blockwise(os.path.join(root, p), key, size)
            if why:
                errs.append('%s (not fsynced): %s' % (p, why))
    shas = {}

    def matches(s):
        if ddirs != s.dirs:
            return False
        names = set(disk) - (set(wild) - set(s.files))
        if names != set(s.files):
            return False
        for p, (size, sha) in s.files.items():
            if disk[p].st_size != size:
                return False
            if p not in shas:
                shas[p] = sha_of(os.path.join(root, p))
            if shas[p] != sha:
                return False
        return True

    outcome = None
    for what, s in cands:
        if matches(s):
            outcome = what
            break
    if outcome is None:
        s = cands[0][1]
        errs.append('the tree is neither the state before the operation in flight (%s) '
                    'nor after it' % (pend,))
        for d in sorted(s.dirs - ddirs):
            errs.append('directory %s missing' % d)
        for d in sorted(ddirs - s.dirs):
            errs.append('directory %s should not exist' % d)
        for p in sorted(set(s.files) - set(disk)):
            errs.append('file %s missing (fsynced, %d bytes)' % (p, s.files[p][0]))
        for p in sorted(set(disk) - set(s.files) - set(wild)):
            errs.append('file %s should not exist (%d bytes)' % (p, disk[p].st_size))
        for p in sorted(set(s.files) & set(disk)):
            size, sha = s.files[p]
            if disk[p].st_size != size:
                errs.append('file %s: size %d, want %d' % (p, disk[p].st_size, size))
            elif sha_of(os.path.join(root, p)) != sha:
                errs.append('file %s: content differs (size %d)' % (p, size))
    # Every other file reads without error.
    for p in disk:
        if p not in shas:
            sha_of(os.path.join(root, p))

    sv = os.statvfs(root)
    alloc = sum(x.st_blocks * 512 for x in disk.values())
    used = (sv.f_blocks - sv.f_bfree) * sv.f_frsize
    inodes = len(disk) + len(ddirs) + 1
    if sv.f_blocks != blocks0:
        errs.append('statfs: f_blocks %d, %d after mkfs' % (sv.f_blocks, blocks0))
    if not (sv.f_bavail <= sv.f_bfree <= sv.f_blocks):
        errs.append('statfs: not bavail %d <= bfree %d <= blocks %d' %
                    (sv.f_bavail, sv.f_bfree, sv.f_blocks))
    if used != alloc:
        errs.append('statfs: %d bytes used, the files have %d allocated (st_blocks)' %
                    (used, alloc))
    if sv.f_files - sv.f_ffree != inodes:
        errs.append('statfs: %d inodes in use (files %d - ffree %d), the tree has %d' %
                    (sv.f_files - sv.f_ffree, sv.f_files, sv.f_ffree, inodes))
    if pend and pend[0] == 'C' and outcome:
        outcome = ('file there, %d bytes' % disk[pend[1]].st_size if pend[1] in disk
                   else 'file not there')
    size = sum(x.st_size for x in disk.values())
    print('verify: %d files (%d MiB), %d dirs, %d not fsynced; operation in flight %s: %s; '
          'statfs: %d MiB used, %d inodes' %
          (len(disk), size >> 20, len(ddirs), len(wild),
           ' '.join(pend[:3 if pend[0] == 'R' else 2]) if pend else None, outcome, used >> 20,
           sv.f_files - sv.f_ffree))
    if errs:
        for e in errs:
            print('FAIL: ' + e, file=sys.stderr)
        sys.exit(1)

    # Settle the operation in flight and drop the files never fsynced, so
    # that the manifest is exact again for the next writer.
    with open(manifest, 'a') as m:
        rec = 'N'
        if pend and pend[0] == 'C' and pend[1] in disk:
            p = os.path.join(root, pend[1])
            fd = os.open(p, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            rec = '\t'.join(['C', pend[1], pend[2], str(disk[pend[1]].st_size), sha_of(p)])
        elif pend and outcome == 'happened':
            rec = '\t'.join(pend)
        m.write(rec + '\n')
        dirs = set()
        for p in wild:
            if p in disk and (not pend or p != pend[1]):
                os.unlink(os.path.join(root, p))
                dirs.add(os.path.dirname(p))
        for d in dirs:
            fd = os.open(os.path.join(root, d), os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)
        m.write('Z\n')


if __name__ == '__main__':
    if sys.argv[1] == 'write':
        Writer(sys.argv[2], sys.argv[3], int(sys.argv[4])).run()
    else:
        verify(sys.argv[2], sys.argv[3], int(sys.argv[4]))
EOF

statfs() { # FIELD: stat -f's %FIELD of $MNT
	stat -f -c "%$1" "$MNT"
}

# SIGKILL the daemon, detach the dead mount and wait for the daemon to go.
crash() {
	local pids end
	pids=$(_mnt_daemon_pids | xargs)
	[ -n "$pids" ] || mnt_die "no nvmefs daemon for $MNT to kill"
	# shellcheck disable=SC2086 # one pid a word
	kill -KILL $pids
	end=$((SECONDS + 20))
	while [ -n "$(_mnt_daemon_pids)" ]; do
		[ "$SECONDS" -lt "$end" ] || mnt_die "nvmefs daemon $pids survived SIGKILL"
		sleep 0.1
	done
	# Once: a mount on top of the dead one is refused, naming the way out.
	if [ "$dead_mount_checked" = 0 ]; then
		dead_mount_checked=1
		local out rc=0
		out=$(timeout 30 "$MNT_BUILD/nvmefs" "$MNT_DEVS" "$MNT" 2>&1) || rc=$?
		check "mounting over a dead mount is refused (exit $rc: $out)" test "$rc" != 0
		check "the refusal says to unmount first ($out)" grep -q "umount $MNT" <<<"$out"
		if [ "$rc" = 0 ]; then
			fusermount3 -u "$MNT" || true
		fi
	fi
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
}
dead_mount_checked=0

mode_opts() { # ITERATION
	if [ -n "${NVMEFS_TEST_MOUNT_OPTS:-}" ]; then
		echo "$NVMEFS_TEST_MOUNT_OPTS"
	elif [ $(($1 % 2)) = 0 ]; then
		echo mode=cached
	else
		echo mode=direct
	fi
}

manifest=$MNT_TMP/manifest
: >"$manifest"
mnt_mount "$(mode_opts 0)"
blocks0=$(statfs b) bfree0=$(statfs f) ffree0=$(statfs d)
echo "after mkfs: $blocks0 blocks, $bfree0 free, $ffree0 free inodes"
for ((it = 1; it <= iters; it++)); do
	wseed=$((seed * 100 + it))
	ms=$((1000 + RANDOM % 3001))
	"$py" "$MNT_TMP/crash.py" write "$MNT" "$manifest" "$wseed" >"$MNT_TMP/writer.log" 2>&1 &
	wpid=$!
	sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
	if ! kill -0 "$wpid" 2>/dev/null; then
		wrc=0
		wait "$wpid" || wrc=$?
		cat "$MNT_TMP/writer.log" >&2
		mnt_die "iteration $it: the writer stopped (status $wrc) before the daemon was killed"
	fi
	crash
	end=$((SECONDS + 20))
	while kill -0 "$wpid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
		sleep 0.1
	done
	if kill -0 "$wpid" 2>/dev/null; then
		kill -KILL "$wpid"
		check "iteration $it: writer still running 20 s after the daemon died" false
	fi
	wrc=0
	wait "$wpid" || wrc=$?
	echo "iteration $it: killed after $ms ms; $(cat "$MNT_TMP/writer.log")"
	check "iteration $it: writer exit status $wrc" test "$wrc" = 0
	mnt_mount "$(mode_opts "$it")"
	if ! "$py" "$MNT_TMP/crash.py" verify "$MNT" "$manifest" "$blocks0"; then
		check "iteration $it (seed $seed): the volume after replay does not match the manifest" false
		cp "$manifest" "/tmp/test_crash.manifest.$seed"
		echo "manifest kept as /tmp/test_crash.manifest.$seed" >&2
		break
	fi
done
df -h "$MNT" | tail -n 1

# Delete everything (fsync each directory emptied, then its parent), crash.
"$py" - "$MNT" <<'EOF'
import os, sys
def fsync(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
for d, dirs, files in os.walk(sys.argv[1], topdown=False):
    for f in files:
        os.unlink(os.path.join(d, f))
    for x in dirs:
        os.rmdir(os.path.join(d, x))
    fsync(d)
EOF
check "files left after deleting everything" test -z "$(ls -A "$MNT")"
crash
mnt_mount
# FREE_BLOCKS FREE_INODES WHEN
space_back() {
	local f=$1 d=$2 left
	left=$(find "$MNT" -mindepth 1 | wc -l)
	check "$3: $left entries left" test "$left" = 0
	check "$3: $f free blocks, $bfree0 after mkfs" test $((bfree0 - f)) -le 8 -a $((f - bfree0)) -le 8
	check "$3: $d free inodes, $ffree0 after mkfs" test "$d" = "$ffree0"
	check "$3: $(statfs b) blocks, $blocks0 after mkfs" test "$(statfs b)" = "$blocks0"
}
space_back "$(statfs f)" "$(statfs d)" "deleted everything, killed, replayed"
mnt_remount ""
space_back "$(statfs f)" "$(statfs d)" "after a clean remount"
mnt_umount
mnt_result
