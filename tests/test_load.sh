#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Multi-process load: several processes creating, writing, reading, renaming
# and deleting in the same directories and files for SECONDS, once in
# mode=cached and once in mode=direct, on 4 image files of 512M; no error, no
# hang, fsck clean after, and the content every process knows is there.
# NWORKERS (8, at least 6) python3 processes work at once in three shared
# directories (a tree of their own per mode), each with a mix of every
# operation weighted by its role (publisher, reader, writer, namespace):
#  - publish: a file whose content is derived from its (key, generation),
#    header included, so any reader can verify it, written completely by one
#    process into a temporary name (in pieces, some backwards, some after an
#    ftruncate), fsynced or fdatasynced (mostly), then renamed into place,
#    under a new name or over an existing one, in a shared directory or in
#    one of its subdirectories: readers see the old or the new complete
#    version, never a mix;
#  - read (read(2) or pread in pieces, or a private mmap) and verify such a
#    file; rename (over existing files, between the shared directories and
#    subdirectories); link (hard links); unlink; an orphan (write, unlink
#    while open, verify through the descriptor);
#  - pwrite at random offsets and lengths (unaligned) into the process's own
#    region of each of 4 shared region files (regions not block-aligned, so
#    neighbours share blocks), and read the region back against the model;
#  - append, pwrite (holes), ftruncate and read back on per-process files;
#  - pwrite, O_APPEND writes, truncate and reads on 3 fully shared files
#    (only sizes and the absence of errors checked);
#  - mkdir, rmdir and rename of subdirectories (EEXIST, ENOENT, ENOTEMPTY
#    are expected races); stat/readdir walks of the trees; statfs;
#    fsync/fdatasync of files and fsync of directories.
# ENOENT (and the other races above) from an operation that can race a
# delete or rename is counted, not an error; any other errno (EIO, ENOSPC:
# the volume is sized never to fill, EROFS, ENOTCONN...), a short file or a
# content mismatch is. The workers stop at the deadline; one still running
# 60 s later is a hang (its Python and kernel stacks are printed). After
# each mode: clean unmount, `fsck.nvmefs -n -v` must exit 0 (the test fails,
# never skips, without BUILD_DIR/fsck.nvmefs), then after a remount the trees
# of every mode so far must walk cleanly with nothing unknown (no temporary
# file left, a directory's st_nlink 2 + its subdirectories, a file's st_nlink
# the names found for it), every published file verifies and was published
# by a worker (the manifests), every region file and per-process file holds
# exactly the workers' models, and statfs agrees: used space = the files'
# st_blocks (each inode once), inodes in use = files + directories + root.
# One summary line per mode: operations per type, ops/s, expected races and
# errors. On failure the logs (workers' errors, manifests, fsck output, the
# daemon's log) are kept in a directory under /tmp, which is named.
# Exit 77 (skip) without root, /dev/fuse, nvmefs and mkfs.nvmefs or python3.
# usage: test_load.sh BUILD_DIR [SECONDS [SEED]]
#   (defaults: NVMEFS_LOAD_SECONDS or 30 seconds per mode; NVMEFS_TEST_SEED
#   or random; NVMEFS_LOAD_WORKERS or 8 processes; NVMEFS_TEST_TIME_LIMIT
#   the overall limit, 5*SECONDS/2+150 s)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
	echo "usage: test_load.sh BUILD_DIR [SECONDS [SEED]]" >&2
	exit 2
fi
build=$1
secs=${2:-${NVMEFS_LOAD_SECONDS:-30}}
seed=${3:-${NVMEFS_TEST_SEED:-$((RANDOM * 32768 + RANDOM))}}
workers=${NVMEFS_LOAD_WORKERS:-8}
case $secs$seed$workers in
*[!0-9]*) mnt_die "SECONDS, SEED and NVMEFS_LOAD_WORKERS must be numbers" ;;
esac
[ "$secs" -ge 1 ] || mnt_die "SECONDS must be at least 1"
[ "$workers" -ge 6 ] || mnt_die "NVMEFS_LOAD_WORKERS must be at least 6"
mnt_time_limit $((5 * secs / 2 + 150)) "$0" "$@"
py=/usr/bin/python3
mnt_need "$py" python3
# The daemon in the foreground (in the background of the script), so that
# its log is in $MNT_TMP/nvmefs.log, kept on failure.
MNT_FOREGROUND=1
mnt_setup "$build" 4 512M
# Required, not a reason to skip: a load test whose check cannot run passes
# nothing.
[ "$MNT_NO_MOUNT" = 1 ] || [ -x "$build/fsck.nvmefs" ] || mnt_die "$build/fsck.nvmefs not built"
echo "seed $seed, $workers workers, $secs s per mode (repeat with: test_load.sh $build $secs $seed)"
logs=$(mktemp -d "${TMPDIR:-/tmp}/nvmefs_load.XXXXXX")
echo "logs in $logs (kept on failure)"

cat >"$MNT_TMP/load.py" <<'EOF'
# The workers, the driver and the checker of test_load.sh.
#   load.py run ROOT OUT NWORKERS SEED SECONDS   make the tree ROOT, run the
#       workers until the deadline, print the summary (exit 1 on errors)
#   load.py worker ROOT OUT WID NWORKERS SEED DEADLINE   one worker
#   load.py verify MNT OUTBASE MODE...   check the trees MNT/MODE against the
#       manifests in OUTBASE/MODE, and statfs against the whole volume
import errno, faulthandler, json, mmap, os, random, re, signal, stat, subprocess, sys, time
from collections import Counter

SHARED = ['s0', 's1', 's2']
NSUB = 6  # subdirectory names D_0..D_5 in each shared directory
NREG = 4  # region files R_0..R_3
REG = 384 << 10  # each worker's region in each of them
GAP = 777  # between regions: they start unaligned
NS = 3  # fully shared files S_0..S_2
SMAX = 4 << 20
NP = 3  # per-worker files P_<wid>_0..2
PMAX = 1 << 20
GRACE = 60  # seconds after the deadline before a running worker is hung
HDR = re.compile(rb'NVLOAD (A_\d+_\d+) (\d+) (\d+)\n')
NAMES = re.compile(r'(A_\d+_\d+|D_\d+|R_\d+|S_\d+|P_\d+_\d+|\.t_\d+_\d+)$')


def ename(e):
    return errno.errorcode.get(e, str(e))


def a_content(key, gen, size):
    hdr = b'NVLOAD %s %d %d\n' % (key.encode(), gen, size)
    return hdr + random.Random('%s:%d' % (key, gen)).randbytes(size - len(hdr))


def a_check(data, size_seen):
    """None if DATA (a whole file of size SIZE_SEEN) is a complete published
    file, else why not; also the (key, gen) it claims."""
    m = HDR.match(data[:64])
    if not m:
        return 'no valid header (%d bytes, starts %r)' % (len(data), data[:40]), None
    key, gen, size = m.group(1).decode(), int(m.group(2)), int(m.group(3))
    if size_seen != size or len(data) != size:
        return '%s gen %d: %d bytes read, st_size %d, written %d' % (
            key, gen, len(data), size_seen, size), (key, gen)
    want = a_content(key, gen, size)
    if data != want:
        off = next(i for i in range(size) if data[i] != want[i])
        blk = data[off & ~4095:(off & ~4095) + 4096]
        return '%s gen %d (%d bytes): differs from offset %d (block %s)' % (
            key, gen, size, off, 'all zeros' if blk.count(0) == len(blk) else 'data'), (key, gen)
    return None, (key, gen)


def region_start(wid):
    return wid * (REG + GAP)


def read_all(fd, size):
    out = bytearray()
    while True:
        b = os.pread(fd, max(size - len(out), 0) + 65536, len(out))
        if not b:
            return bytes(out)
        out += b


class Bad(Exception):
    """A content or consistency failure."""


class Stop(Exception):
    pass


class Worker:
    ROLES = [  # weights of each operation, per role (wid % 4)
        dict(publish=8, read=3, mmap=1, unlink=3, link=2, rename=2, orphan=1, walk=1),
        dict(read=8, mmap=3, walk=3, statfs=2, rverify=1, sread=2),
        dict(rwrite=8, rverify=3, pfile=6, swrite=4, truncate=2, sync=3, sread=1),
        dict(rename=6, link=3, unlink=4, mkdir=3, rmdir=3, rendir=2, orphan=1, sync=1),
    ]
    OPS = ['publish', 'read', 'mmap', 'unlink', 'link', 'rename', 'orphan', 'walk', 'statfs',
           'rverify', 'sread', 'rwrite', 'pfile', 'swrite', 'truncate', 'sync', 'mkdir', 'rmdir',
           'rendir']

    def __init__(self, root, out, wid, nworkers, seed, deadline):
        self.root, self.out, self.wid, self.nw = root, out, wid, nworkers
        self.deadline = deadline
        self.rnd = random.Random(seed)
        self.ops, self.races = Counter(), Counter()
        self.errors = 0
        self.errf = open(os.path.join(out, 'errors.%d' % wid), 'a')
        self.n = 0
        self.published = []
        self.regions = [bytearray(REG) for _ in range(NREG)]
        self.reg_hi = [0] * NREG
        self.pfiles = [bytearray() for _ in range(NP)]
        with open(os.path.join(out, 'base.json')) as f:
            self.base = json.load(f)
        self.full, self.few, self.full_at = False, True, 0
        w = Worker.ROLES[wid % len(Worker.ROLES)]
        self.weights = [1 + w.get(op, 0) for op in Worker.OPS]
        self.op = None

    # helpers
    def p(self, *parts):
        return os.path.join(self.root, *parts)

    def race(self, e, *allowed):
        if e.errno not in allowed:
            raise e
        self.races['%s:%s' % (self.op, ename(e.errno))] += 1

    def fresh(self):
        self.n += 1
        return 'A_%d_%d' % (self.wid, self.n)

    def location(self):
        d = self.rnd.choice(SHARED)
        if self.rnd.random() < 0.5:
            return os.path.join(d, 'D_%d' % self.rnd.randrange(NSUB))
        return d

    def pick_a(self):
        """A random published file's path (relative to root), or None."""
        for _ in range(3):
            loc = self.location()
            try:
                names = [x for x in os.listdir(self.p(loc)) if x.startswith('A_')]
            except OSError as e:
                self.race(e, errno.ENOENT)
                continue
            if names:
                return os.path.join(loc, self.rnd.choice(names))
        return None

    def over_budget(self):
        now = time.time()
        if now - self.full_at > 0.5:
            sv = os.statvfs(self.root)
            used = sv.f_blocks - sv.f_bfree
            inodes = sv.f_files - sv.f_ffree
            self.full = (used - self.base['used'] > sv.f_blocks // 4 or
                         inodes - self.base['inodes'] > 6000)
            self.few = inodes - self.base['inodes'] < 500
            self.full_at = now
        return self.full

    def size(self):
        r = self.rnd.random()
        if r < 0.3:
            return self.rnd.randint(64, 4096)
        if r < 0.6:
            return self.rnd.randint(4096, 64 << 10)
        if r < 0.75:
            return 4096 * self.rnd.randint(1, 64)
        if r < 0.92:
            return self.rnd.randint(64 << 10, 512 << 10)
        return self.rnd.choice([1 << 20, 2 << 20, 3 << 20]) + self.rnd.choice([-1, 0, 1, 4096])

    def pwrite_all(self, fd, data, off):
        done = 0
        while done < len(data):
            n = os.pwrite(fd, data[done:], off + done)
            if n <= 0:
                raise Bad('pwrite returned %d' % n)
            done += n

    def write_tmp(self, key, gen, size):
        """A complete published-format file under a temporary name in a
        shared directory; its path (relative) and its open fd."""
        data = a_content(key, gen, size)
        tmp = os.path.join(self.rnd.choice(SHARED), '.t_%d_%d' % (self.wid, self.n))
        fd = os.open(self.p(tmp), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            pieces, off = [], 0
            while off < size:
                k = min(size - off, self.rnd.choice([self.rnd.randint(1, 8192),
                                                     self.rnd.randint(1, 1 << 20)]))
                pieces.append((off, k))
                off += k
            how = self.rnd.random()
            if how < 0.2:
                pieces.reverse()
            elif how < 0.3:
                os.ftruncate(fd, size)
                self.rnd.shuffle(pieces)
            for off, k in pieces:
                self.pwrite_all(fd, data[off:off + k], off)
            how = self.rnd.random()
            if how < 0.7:
                os.fsync(fd)
            elif how < 0.9:
                os.fdatasync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(self.p(tmp))
            raise
        return tmp, fd

    def verify_fd(self, fd, what, use_mmap=False):
        size = os.fstat(fd).st_size
        if use_mmap:
            if size == 0:
                raise Bad('%s: empty' % what)
            with mmap.mmap(fd, size, mmap.MAP_PRIVATE, mmap.PROT_READ) as m:
                data = bytes(m)
        elif self.rnd.random() < 0.5:
            data = read_all(fd, size)
        else:
            out, off = bytearray(), 0
            while True:
                b = os.pread(fd, self.rnd.randint(1, 256 << 10), off)
                if not b:
                    break
                out += b
                off += len(b)
            data = bytes(out)
        why, _ = a_check(data, size)
        if why:
            raise Bad('%s: %s' % (what, why))

    # operations
    def op_publish(self):
        if self.over_budget():
            self.op = 'unlink'
            return self.op_unlink()
        key, gen = self.fresh(), self.rnd.randrange(1 << 30)
        target = None
        if self.rnd.random() < 0.3:
            target = self.pick_a()  # replace, like a safe save
        if target is None:
            target = os.path.join(self.location(), key)
        tmp, fd = self.write_tmp(key, gen, self.size())
        os.close(fd)
        try:
            os.rename(self.p(tmp), self.p(target))
        except OSError as e:
            os.unlink(self.p(tmp))
            return self.race(e, errno.ENOENT)
        self.published.append((key, gen))
        if self.rnd.random() < 0.3:
            self.fsync_dir(os.path.dirname(target))

    def fsync_dir(self, rel):
        try:
            fd = os.open(self.p(rel), os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            return self.race(e, errno.ENOENT)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def open_a(self, flags=os.O_RDONLY):
        path = self.pick_a()
        if path is None:
            return None, None
        try:
            return path, os.open(self.p(path), flags)
        except OSError as e:
            self.race(e, errno.ENOENT)
            return None, None

    def op_read(self, use_mmap=False):
        path, fd = self.open_a()
        if fd is None:
            return
        try:
            self.verify_fd(fd, path, use_mmap)
        finally:
            os.close(fd)

    def op_mmap(self):
        self.op_read(use_mmap=True)

    def op_unlink(self):
        if not self.over_budget() and self.few and self.rnd.random() < 0.7:
            self.op = 'publish'  # let the tree grow to a few hundred files
            return self.op_publish()
        path = self.pick_a()
        if path:
            try:
                os.unlink(self.p(path))
            except OSError as e:
                self.race(e, errno.ENOENT)

    def op_link(self):
        if self.over_budget():
            self.op = 'unlink'
            return self.op_unlink()
        path = self.pick_a()
        if path:
            try:
                os.link(self.p(path), self.p(self.location(), self.fresh()))
            except OSError as e:
                self.race(e, errno.ENOENT)

    def op_rename(self):
        path = self.pick_a()
        if not path:
            return
        target = self.pick_a() if self.rnd.random() < 0.4 else None
        if target is None:
            target = os.path.join(self.location(), self.fresh())
        try:
            os.rename(self.p(path), self.p(target))
        except OSError as e:
            self.race(e, errno.ENOENT)

    def op_orphan(self):
        if self.over_budget():
            self.op = 'unlink'
            return self.op_unlink()
        key, gen = self.fresh(), self.rnd.randrange(1 << 30)
        tmp, fd = self.write_tmp(key, gen, self.size())
        try:
            os.unlink(self.p(tmp))
            st = os.fstat(fd)
            if st.st_nlink != 0:
                raise Bad('%s: st_nlink %d after unlink while open' % (tmp, st.st_nlink))
            self.verify_fd(fd, tmp + ' (unlinked)')
            if self.rnd.random() < 0.3:
                os.ftruncate(fd, self.rnd.randrange(st.st_size + 1))
        finally:
            os.close(fd)

    def op_walk(self):
        for d in SHARED:
            self.walk_dir(d, True)

    def walk_dir(self, rel, top):
        try:
            it = os.scandir(self.p(rel))
        except OSError as e:
            return self.race(e, errno.ENOENT)
        subs = []
        with it:
            for ent in it:
                if not NAMES.match(ent.name):
                    raise Bad('%s: unknown name %r' % (rel, ent.name))
                try:
                    st = os.lstat(self.p(rel, ent.name))
                except OSError as e:
                    self.race(e, errno.ENOENT)
                    continue
                isdir = ent.name.startswith('D_')
                if not (stat.S_ISDIR if isdir else stat.S_ISREG)(st.st_mode):
                    raise Bad('%s/%s: mode %o' % (rel, ent.name, st.st_mode))
                if isdir and not top:
                    raise Bad('%s/%s: a directory in a subdirectory' % (rel, ent.name))
                if isdir:
                    subs.append(ent.name)
        for s in subs:
            self.walk_dir(os.path.join(rel, s), False)

    def op_statfs(self):
        sv = os.statvfs(self.root)
        if not (sv.f_bavail <= sv.f_bfree <= sv.f_blocks) or sv.f_blocks != self.base['blocks']:
            raise Bad('statfs: bavail %d bfree %d blocks %d (%d at start)' %
                      (sv.f_bavail, sv.f_bfree, sv.f_blocks, self.base['blocks']))
        if sv.f_ffree > sv.f_files:
            raise Bad('statfs: ffree %d > files %d' % (sv.f_ffree, sv.f_files))

    def rpath(self, j):
        return self.p(SHARED[j % len(SHARED)], 'R_%d' % j)

    def op_rwrite(self):
        j = self.rnd.randrange(NREG)
        o = self.rnd.randrange(REG)
        r = self.rnd.random()
        if r < 0.4:
            k = self.rnd.randint(1, 300)
        elif r < 0.7:
            o &= ~4095
            k = 4096 * self.rnd.randint(1, 8)
        else:
            k = self.rnd.randint(1, 64 << 10)
        k = min(k, REG - o)
        data = self.rnd.randbytes(k)
        fd = os.open(self.rpath(j), os.O_WRONLY)
        try:
            self.pwrite_all(fd, data, region_start(self.wid) + o)
            if self.rnd.random() < 0.05:
                os.fdatasync(fd)
        finally:
            os.close(fd)
        self.regions[j][o:o + k] = data
        self.reg_hi[j] = max(self.reg_hi[j], o + k)

    def op_rverify(self):
        j = self.rnd.randrange(NREG)
        start = region_start(self.wid)
        fd = os.open(self.rpath(j), os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            n = max(0, min(REG, size - start))
            if n < self.reg_hi[j]:
                raise Bad('R_%d: size %d, region of worker %d written up to %d' %
                          (j, size, self.wid, start + self.reg_hi[j]))
            got = os.pread(fd, n, start)
        finally:
            os.close(fd)
        want = bytes(self.regions[j][:n])
        if got != want:
            off = next((i for i in range(min(len(got), n)) if got[i] != want[i]), len(got))
            raise Bad('R_%d: region of worker %d differs at file offset %d (%d bytes read of %d)' %
                      (j, self.wid, start + off, len(got), n))

    def ppath(self, j):
        return self.p(SHARED[j % len(SHARED)], 'P_%d_%d' % (self.wid, j))

    def op_pfile(self):
        j = self.rnd.randrange(NP)
        m = self.pfiles[j]
        r = self.rnd.random()
        if r < 0.35 and len(m) < PMAX:
            data = self.rnd.randbytes(self.rnd.randint(1, min(PMAX - len(m), 20000)))
            fd = os.open(self.ppath(j), os.O_WRONLY | os.O_APPEND)
            try:
                if os.write(fd, data) != len(data):
                    raise Bad('P_%d_%d: short append' % (self.wid, j))
            finally:
                os.close(fd)
            m += data
        elif r < 0.6:
            off = self.rnd.randrange(PMAX)
            data = self.rnd.randbytes(self.rnd.randint(1, min(PMAX - off, 30000)))
            fd = os.open(self.ppath(j), os.O_WRONLY)
            try:
                self.pwrite_all(fd, data, off)
            finally:
                os.close(fd)
            if off > len(m):
                m += bytes(off - len(m))
            m[off:off + len(data)] = data
        elif r < 0.75:
            n = self.rnd.choice([0, self.rnd.randrange(len(m) + 1), self.rnd.randrange(PMAX)])
            if self.rnd.random() < 0.5:
                os.truncate(self.ppath(j), n)
            else:
                fd = os.open(self.ppath(j), os.O_WRONLY)
                try:
                    os.ftruncate(fd, n)
                finally:
                    os.close(fd)
            if n < len(m):
                del m[n:]
            else:
                m += bytes(n - len(m))
        else:
            fd = os.open(self.ppath(j), os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                got = read_all(fd, size)
            finally:
                os.close(fd)
            if size != len(m) or got != m:
                off = next((i for i in range(min(len(got), len(m))) if got[i] != m[i]),
                           min(len(got), len(m)))
                raise Bad('P_%d_%d: st_size %d, %d bytes read, model %d; first difference at %d' %
                          (self.wid, j, size, len(got), len(m), off))

    def spath(self):
        j = self.rnd.randrange(NS)
        return self.p(SHARED[j % len(SHARED)], 'S_%d' % j)

    def op_swrite(self):
        path = self.spath()
        if self.rnd.random() < 0.3:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            try:
                if os.fstat(fd).st_size < SMAX:
                    os.write(fd, self.rnd.randbytes(self.rnd.randint(1, 64 << 10)))
            finally:
                os.close(fd)
            return
        off = self.rnd.randrange(SMAX)
        data = self.rnd.randbytes(min(self.rnd.randint(1, 128 << 10), SMAX - off))
        fd = os.open(path, os.O_WRONLY)
        try:
            self.pwrite_all(fd, data, off)
        finally:
            os.close(fd)

    def op_sread(self):
        path = self.spath()
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size > SMAX + (1 << 20):
                raise Bad('%s: size %d > %d' % (path, size, SMAX + (1 << 20)))
            off = self.rnd.randrange(SMAX)
            b = os.pread(fd, 256 << 10, off)
            if len(b) > 256 << 10:
                raise Bad('%s: pread returned %d bytes' % (path, len(b)))
        finally:
            os.close(fd)

    def op_truncate(self):
        if self.rnd.random() < 0.3:
            self.op = 'pfile'
            return self.op_pfile()
        os.truncate(self.spath(), self.rnd.choice([0, self.rnd.randrange(SMAX)]))

    def op_sync(self):
        r = self.rnd.random()
        if r < 0.2:
            return self.fsync_dir(self.location())
        if r < 0.4:
            path, fd = self.open_a()
            if fd is None:
                return
        else:
            path = self.rnd.choice([self.rpath(self.rnd.randrange(NREG)), self.spath(),
                                    self.ppath(self.rnd.randrange(NP))])
            fd = os.open(path, os.O_WRONLY if self.rnd.random() < 0.5 else os.O_RDONLY)
        try:
            if self.rnd.random() < 0.5:
                os.fsync(fd)
            else:
                os.fdatasync(fd)
        finally:
            os.close(fd)

    def op_mkdir(self):
        try:
            os.mkdir(self.p(self.rnd.choice(SHARED), 'D_%d' % self.rnd.randrange(NSUB)))
        except OSError as e:
            self.race(e, errno.EEXIST)

    def op_rmdir(self):
        try:
            os.rmdir(self.p(self.rnd.choice(SHARED), 'D_%d' % self.rnd.randrange(NSUB)))
        except OSError as e:
            self.race(e, errno.ENOENT, errno.ENOTEMPTY)

    def op_rendir(self):
        a = self.p(self.rnd.choice(SHARED), 'D_%d' % self.rnd.randrange(NSUB))
        b = self.p(self.rnd.choice(SHARED), 'D_%d' % self.rnd.randrange(NSUB))
        try:
            os.rename(a, b)
        except OSError as e:
            self.race(e, errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST)

    def fail(self, msg):
        self.errors += 1
        if self.errors <= 100:
            self.errf.write('%.3f worker %d %s: %s\n' % (time.time(), self.wid, self.op, msg))
            self.errf.flush()

    def run(self):
        t0 = time.time()
        while time.time() < self.deadline and self.errors < 50:
            self.op = self.rnd.choices(Worker.OPS, self.weights)[0]
            try:
                getattr(self, 'op_' + self.op)()
                self.ops[self.op] += 1
            except OSError as e:
                self.fail('%s (%s%s)' % (ename(e.errno), e.strerror,
                                         ': ' + e.filename if e.filename else ''))
                if e.errno in (errno.ENOTCONN, errno.ECONNABORTED):
                    break
            except Bad as e:
                self.fail('%s' % e)
        for j in range(NREG):
            with open(os.path.join(self.out, 'r%d_%d.bin' % (self.wid, j)), 'wb') as f:
                f.write(self.regions[j][:self.reg_hi[j]])
        for j in range(NP):
            with open(os.path.join(self.out, 'p%d_%d.bin' % (self.wid, j)), 'wb') as f:
                f.write(self.pfiles[j])
        with open(os.path.join(self.out, 'w%d.json' % self.wid), 'w') as f:
            json.dump(dict(ops=self.ops, races=self.races, errors=self.errors,
                           seconds=time.time() - t0, published=self.published), f)


def proc_info(pid):
    out = []
    for f in ('wchan', 'syscall', 'stack'):
        try:
            with open('/proc/%d/%s' % (pid, f)) as x:
                out.append('%s: %s' % (f, x.read().strip().replace('\n', ' | ')))
        except OSError:
            pass
    return '; '.join(out)


def run(root, out, nworkers, seed, seconds, mode):
    os.makedirs(out, exist_ok=True)
    os.mkdir(root)
    for d in SHARED:
        os.mkdir(os.path.join(root, d))
    names = ([os.path.join(SHARED[j % len(SHARED)], 'R_%d' % j) for j in range(NREG)] +
             [os.path.join(SHARED[j % len(SHARED)], 'S_%d' % j) for j in range(NS)] +
             [os.path.join(SHARED[j % len(SHARED)], 'P_%d_%d' % (w, j))
              for w in range(nworkers) for j in range(NP)])
    for n in names:
        os.close(os.open(os.path.join(root, n), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    sv = os.statvfs(root)
    base = dict(used=sv.f_blocks - sv.f_bfree, inodes=sv.f_files - sv.f_ffree, blocks=sv.f_blocks,
                nworkers=nworkers)
    with open(os.path.join(out, 'base.json'), 'w') as f:
        json.dump(base, f)
    t0 = time.time()
    deadline = t0 + seconds
    procs = []
    for w in range(nworkers):
        log = open(os.path.join(out, 'w%d.log' % w), 'w')
        procs.append(subprocess.Popen(
            [sys.executable, __file__, 'worker', root, out, str(w), str(nworkers),
             str(seed * 1000 + w), repr(deadline)], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL))
        log.close()
    fails = []
    while any(p.poll() is None for p in procs) and time.time() < deadline + GRACE:
        time.sleep(0.2)
    elapsed = time.time() - t0
    hung = [(w, p) for w, p in enumerate(procs) if p.poll() is None]
    for w, p in hung:
        p.send_signal(signal.SIGUSR1)  # faulthandler: the Python stack to its log
    time.sleep(1)
    for w, p in hung:
        fails.append('worker %d (pid %d) still running %d s after the deadline (hang): %s' %
                     (w, p.pid, GRACE, proc_info(p.pid)))
        p.kill()
    for w, p in hung:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            fails.append('worker %d (pid %d) survived SIGKILL for 10 s' % (w, p.pid))
    ops, races, errors = Counter(), Counter(), 0
    for w, p in enumerate(procs):
        rc = p.poll()
        if rc != 0 and (w, p) not in hung:
            with open(os.path.join(out, 'w%d.log' % w)) as f:
                fails.append('worker %d exited with status %s: %s' % (w, rc, f.read()[-2000:]))
        try:
            with open(os.path.join(out, 'w%d.json' % w)) as f:
                r = json.load(f)
        except (OSError, ValueError):
            if (w, p) not in hung and rc == 0:
                fails.append('worker %d left no result' % w)
            continue
        ops.update(r['ops'])
        races.update(r['races'])
        errors += r['errors']
    for w, _ in hung:
        with open(os.path.join(out, 'w%d.log' % w)) as f:
            print('worker %d log (Python stack at the hang):\n%s' % (w, f.read()[-3000:]))
    total = sum(ops.values())
    exp = Counter()
    for k, v in races.items():
        exp[k.split(':')[1]] += v
    print('summary %s: %d ops in %.1f s = %.0f ops/s, %d workers; %s; expected races %s; '
          'errors %d%s' % (mode, total, elapsed, total / max(elapsed, 1e-9), nworkers,
                           ' '.join('%s %d' % kv for kv in sorted(ops.items())),
                           ' '.join('%s %d' % kv for kv in sorted(exp.items())) or 'none',
                           errors, ', hung workers %d' % len(hung) if hung else ''))
    shown = 0
    for w in range(nworkers):
        try:
            with open(os.path.join(out, 'errors.%d' % w)) as f:
                for line in f:
                    if shown < 30:
                        print('FAIL: ' + line.rstrip(), file=sys.stderr)
                    shown += 1
        except OSError:
            pass
    for f in fails:
        print('FAIL: ' + f, file=sys.stderr)
    return 1 if errors or fails else 0


def verify(mnt, outbase, modes):
    errs = []
    inodes, ndirs = {}, 0  # ino -> [lstat, names]
    for mode in modes:
        root, out = os.path.join(mnt, mode), os.path.join(outbase, mode)
        with open(os.path.join(out, 'base.json')) as f:
            base = json.load(f)
        published = set()
        for w in range(base['nworkers']):
            with open(os.path.join(out, 'w%d.json' % w)) as f:
                published.update(tuple(x) for x in json.load(f)['published'])
        if sorted(os.listdir(root)) != SHARED:
            errs.append('%s: holds %s, want %s' % (root, sorted(os.listdir(root)), SHARED))
        na, aino, sizes = 0, {}, {}

        def onerror(e):
            errs.append('walk: %s' % e)

        for d, dn, fn in os.walk(root, onerror=onerror):
            rel = os.path.relpath(d, root)
            dst = os.lstat(d)
            ndirs += 1
            if dst.st_nlink != 2 + len(dn):
                errs.append('%s/%s: directory st_nlink %d, %d subdirectories' %
                            (mode, rel, dst.st_nlink, len(dn)))
            depth = 0 if rel == '.' else rel.count('/') + 1
            for x in dn:
                if (x not in SHARED if depth == 0 else
                        depth != 1 or not x.startswith('D_') or not NAMES.match(x)):
                    errs.append('%s/%s/%s: unexpected directory' % (mode, rel, x))
            for x in fn:
                p = os.path.join(d, x)
                st = os.lstat(p)
                if not stat.S_ISREG(st.st_mode):
                    errs.append('%s/%s/%s: mode %o' % (mode, rel, x, st.st_mode))
                    continue
                inodes.setdefault(st.st_ino, [st, []])[1].append(p)
                ok = NAMES.match(x) and (depth == 1 or x.startswith('A_'))
                if not ok or x.startswith('.t_'):
                    errs.append('%s/%s/%s: unexpected file (%d bytes)' % (mode, rel, x, st.st_size))
                    continue
                if x.startswith('A_'):
                    with open(p, 'rb') as f:
                        data = f.read()
                    why, kg = a_check(data, st.st_size)
                    if why:
                        errs.append('%s/%s/%s: %s' % (mode, rel, x, why))
                    elif kg not in published:
                        errs.append('%s/%s/%s: %s gen %d never published' % ((mode, rel, x) + kg))
                    na += 1
                    aino[st.st_ino] = st.st_size
                else:
                    with open(p, 'rb') as f:
                        sizes[x] = (rel, f.read())
        # Region files: each worker's region as its model, zeros elsewhere.
        for j in range(NREG):
            name = 'R_%d' % j
            if name not in sizes or sizes[name][0] != SHARED[j % len(SHARED)]:
                errs.append('%s: %s missing' % (mode, name))
                continue
            want = bytearray()
            for w in range(base['nworkers']):
                with open(os.path.join(out, 'r%d_%d.bin' % (w, j)), 'rb') as f:
                    m = f.read()
                if m:
                    s = region_start(w)
                    if len(want) < s + len(m):
                        want += bytes(s + len(m) - len(want))
                    want[s:s + len(m)] = m
            got = sizes[name][1]
            if got != want:
                off = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                           min(len(got), len(want)))
                errs.append('%s/%s: %d bytes, want %d; first difference at %d (worker %d\'s region)'
                            % (mode, name, len(got), len(want), off, off // (REG + GAP)))
        for w in range(base['nworkers']):
            for j in range(NP):
                name = 'P_%d_%d' % (w, j)
                with open(os.path.join(out, 'p%d_%d.bin' % (w, j)), 'rb') as f:
                    want = f.read()
                if name not in sizes:
                    errs.append('%s: %s missing' % (mode, name))
                elif sizes[name][1] != want:
                    errs.append('%s/%s: %d bytes, want %d (the owner\'s model)' %
                                (mode, name, len(sizes[name][1]), len(want)))
        for j in range(NS):
            name = 'S_%d' % j
            if name not in sizes:
                errs.append('%s: %s missing' % (mode, name))
            elif len(sizes[name][1]) > SMAX + (1 << 20):
                errs.append('%s/%s: %d bytes' % (mode, name, len(sizes[name][1])))
        multi = sum(1 for ino in aino if len(inodes[ino][1]) > 1)
        print('verify %s: %d names of %d published files (%d MiB; %d with several names), of '
              '%d published by the workers; region, per-worker and shared files checked' %
              (mode, na, len(aino), sum(aino.values()) >> 20, multi, len(published)))
    for ino, (st, names) in inodes.items():
        if st.st_nlink != len(names):
            errs.append('inode %d: st_nlink %d, names %s' % (ino, st.st_nlink, names))
    sv = os.statvfs(mnt)
    alloc = sum(st.st_blocks * 512 for st, _ in inodes.values())
    used = (sv.f_blocks - sv.f_bfree) * sv.f_frsize
    print('verify: statfs %d MiB used, %d inodes in use; the files have %d MiB allocated, '
          '%d inodes, %d directories' % (used >> 20, sv.f_files - sv.f_ffree, alloc >> 20,
                                         len(inodes), ndirs))
    # Not on a kernel filesystem (no-mount mode): it has metadata of its own.
    if os.environ.get('NVMEFS_TEST_NO_MOUNT') != '1':
        if used != alloc:
            errs.append('statfs: %d bytes used, the files have %d allocated (st_blocks)' %
                        (used, alloc))
        if sv.f_files - sv.f_ffree != len(inodes) + ndirs + 1:
            errs.append('statfs: %d inodes in use, the tree has %d files and %d directories '
                        '+ root' % (sv.f_files - sv.f_ffree, len(inodes), ndirs))
    if not (sv.f_bavail <= sv.f_bfree <= sv.f_blocks):
        errs.append('statfs: not bavail %d <= bfree %d <= blocks %d' %
                    (sv.f_bavail, sv.f_bfree, sv.f_blocks))
    for e in errs[:50]:
        print('FAIL: ' + e, file=sys.stderr)
    return 1 if errs else 0


if __name__ == '__main__':
    a = sys.argv
    if a[1] == 'run':
        sys.exit(run(a[2], a[3], int(a[4]), int(a[5]), float(a[6]), a[7]))
    elif a[1] == 'worker':
        faulthandler.register(signal.SIGUSR1)
        Worker(a[2], a[3], int(a[4]), int(a[5]), int(a[6]), float(a[7])).run()
    else:
        sys.exit(verify(a[2], a[3], a[4:]))
EOF

# The daemon's log and the run's files into $logs (kept on failure).
keep_logs() {
	cp "$MNT_TMP/nvmefs.log" "$logs/" 2>/dev/null || true
}

modes=()
for mode in cached direct; do
	modes+=("$mode")
	mnt_mount "mode=$mode"
	check "$mode: load (seed $seed)" \
		"$py" "$MNT_TMP/load.py" run "$MNT/$mode" "$logs/$mode" "$workers" "$seed" "$secs" "$mode"
	keep_logs
	mnt_umount
	if [ "$MNT_NO_MOUNT" = 0 ]; then
		rc=0
		timeout 300 "$build/fsck.nvmefs" -n -v "${MNT_DEV_LIST[@]}" >"$logs/fsck.$mode.log" 2>&1 || rc=$?
		tail -n 5 "$logs/fsck.$mode.log"
		if [ "$rc" != 0 ]; then
			cat "$logs/fsck.$mode.log" >&2
		fi
		check "$mode: fsck.nvmefs -n -v exit status $rc after unmounting (0 clean)" test "$rc" = 0
	fi
	mnt_mount "mode=$mode"
	check "$mode: remounted, the trees ${modes[*]} differ from the manifests" \
		"$py" "$MNT_TMP/load.py" verify "$MNT" "$logs" "${modes[@]}"
	df -h "$MNT" | tail -n 1
	mnt_umount
	keep_logs
done
if [ "$MNT_FAIL" = 0 ]; then
	rm -rf "$logs"
else
	echo "logs kept in $logs (seed $seed)" >&2
fi
mnt_result
