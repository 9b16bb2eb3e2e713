#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The workload and the checker of scripts/crash-torture.sh.

usage:
  torture.py run ROOT MANIFEST SEED [LIBNVMEFS]
                                      seeded random single-threaded workload
                                      in a fresh directory ROOT/w<time>-<seed>
                                      until the filesystem goes away (exit 0,
                                      "stopped by crash"), an op cap is reached
                                      (exit 0, "done") or an unexpected error
                                      (exit 3); with LIBNVMEFS (the path of
                                      libnvmefs.so) a share of the writes and
                                      fsyncs go through the native client
  torture.py verify ROOT MANIFEST     check the volume, mounted again after
                                      the crash, against MANIFEST: exit 0 if
                                      it is a state nvmefs may recover to, 1
                                      (and what differs) if not

What nvmefs promises after a crash (kill -9 of the daemon, or a power loss:
every device write not yet flushed is kept, dropped or torn), and so what
verify checks:

 (a) Metadata operations are applied in order, and a journal commit makes a
     prefix of them durable. fsync, fdatasync and fsyncdir all commit the
     journal, so every namespace, xattr and size change completed before a
     successful sync call is durable. After a crash the recovered namespace
     (paths, types, hard-link groups, inode numbers, user.* xattrs of files
     and directories) equals the state after SOME prefix of the operation
     sequence that is at least as long as the last completed sync call
     (and may include the operation in flight).
 (b) A regular file whose last data change (write or truncate, also one in
     flight) was followed by a completed fsync or fdatasync of that file
     holds exactly its content as of that sync, size included (if it still
     exists at the chosen prefix).
 (c) Any other file: every 512-byte piece is zeros or the file's OWN data
     (bytes some write of this very file put at this very offset), never
     another file's data or garbage; its size is not checked.

A write through the native client (libnvmefs: nvmefs_pwrite or a batch of
nvmefs_submit, waited for) is a data change like any other, and
nvmefs_fsync a sync like any other (it commits the journal as fsync(2)
does): the rules above hold for them unchanged, and verify cannot tell
them apart.

Besides, verify checks what follows from those: link counts agree with the
tree (a file's st_nlink = its names, a directory's = 2 + its subdirectories),
every file reads without error, statfs agrees (space in use = the files'
st_blocks, inodes in use = the tree's), the directories of earlier
iterations (checked and unmounted cleanly since) are exactly as they were
then, and those this run deleted (the "prune" at its start) are gone if a
sync followed, else a subset of what they were.

Data is stamped: every 512-byte piece of the file space (aligned to 512 in
the file) of a write carries a 32-byte header (magic "NVTT", the iteration
seed, the node id of the file, the write's generation number, the piece's
file offset) and 480 bytes of filler derived from that header by BLAKE2b. A
write at an unaligned offset or length writes the matching part of the
pieces it covers. So a reader can tell its own data (and which write put
it there), zeros and another file's data apart.

The manifest (JSON lines, on local disk outside the volume) gets a header,
then for every operation an intent line {"t":"i","n":K,"op":...} before it
and a done line {"t":"d","n":K,...} once it returned (with the inode number
for create, mkdir and mkdir of the run's directory), and an end line. Each
line is one write(2) on an O_APPEND descriptor, so it is in the kernel
before the next operation starts; a torn last line is ignored.

verify replays the manifest: prefixes from the last completed sync to the
end (the operation in flight included) whose namespace equals the disk's are
candidates; the first whose data checks pass is the answer. If none, it
prints the differences against the nearest prefix (or, when namespaces
matched, the data failures) and the operations around.

After a successful verify the iteration's directory is summarised in
MANIFEST.snap (paths, types, inode numbers, sizes, sha256, xattrs) for the
later iterations' checks; verify reads every *.snap beside MANIFEST. When
verify runs again on the same MANIFEST (the harness killed the replayed
volume once more), the directory must equal that snapshot exactly.

The workload's operations: create, write (append, overwrite, past the end
leaving a hole, anywhere; aligned to 4 KiB, to 512 or not at all; 1 byte to
1 MiB), truncate (grow and shrink, by path or descriptor), rename of files
(to new names and over other files) and of directories (to new names and
over empty directories), RENAME_EXCHANGE of two files, link, unlink, mkdir,
rmdir, setxattr and removexattr (user.x0..5, up to 8000 bytes, on files and
directories), fsync, fdatasync, fsyncdir, and keeping up to 4 files open
(written, truncated and fsynced through that descriptor also after their
last name is gone). Each file has a size class (256 KiB, 1 MiB or 4 MiB);
live data stays under TORTURE_BUDGET_MIB (32); how often it syncs is drawn
per run (from every few operations to almost never).

With LIBNVMEFS, a share of the writes (drawn per run: 0.1 to 0.9) goes
through the native client, on a descriptor held open or opened for it
(read-write or write-only) and registered: from its shared buffer (at
block offset 0, at the file offset's place in a block, so that the
aligned middle moves with no copy, or anywhere), from ordinary memory
(the library's bounce buffers), or as a batch of pieces submitted at once
and waited for; and a share of the fsyncs (0.2 to 0.9) are nvmefs_fsync.
A native call that finds its daemon gone (the connection dropped; after an
emulated power cut the door answers nothing until the daemon exits) stops
the run as ENOTCONN from the mount does, once the mount answers ENOTCONN
too.
"""
import ctypes
import errno
import glob
import hashlib
import json
import os
import random
import stat
import struct
import sys
import time

PIECE = 512
MAGIC = b'NVTT'
HDR = struct.Struct('<4sQIIQ4x')  # magic, seed, nid, gen, offset: 32 bytes
ZERO = bytes(PIECE)
KEEP_OLD = 2  # earlier iterations' directories kept (the rest is pruned)
BUDGET = int(os.environ.get('TORTURE_BUDGET_MIB', '32')) << 20  # live bytes
MAX_OPS = int(os.environ.get('TORTURE_MAX_OPS', '100000'))
MAX_SECONDS = float(os.environ.get('TORTURE_MAX_SECONDS', '120'))
SYNCS = ('fsync', 'fdatasync', 'fsyncdir', 'fsyncroot')
DATA_OPS = ('write', 'trunc')
# ECANCELED: a request the io_uring transport held when the daemon died.
CRASH_ERRNOS = (errno.ENOTCONN, errno.ECONNABORTED, errno.ECANCELED)


def piece(seed, nid, gen, off):
    h = HDR.pack(MAGIC, seed, nid, gen, off)
    d = hashlib.blake2b(h, digest_size=64).digest()
    return h + (d * 8)[:PIECE - HDR.size]


def stamp(seed, nid, gen, off, length):
    """The bytes a write of LENGTH at OFF (generation GEN, file NID) puts."""
    if length <= 0:
        return b''
    first, last = off // PIECE, (off + length - 1) // PIECE
    buf = b''.join(piece(seed, nid, gen, k * PIECE) for k in range(first, last + 1))
    s = off - first * PIECE
    return buf[s:s + length]


def xval(vseq, vlen):
    s = b'%d.' % vseq
    return (s * (vlen // len(s) + 1))[:vlen]


class Node:
    __slots__ = ('kind', 'ino', 'x', 'size', 'maxsize')

    def __init__(self, kind, ino=None, maxsize=0):
        self.kind = kind  # 'f' or 'd'
        self.ino = ino
        self.x = {}  # xattr name -> (vseq, vlen)
        self.size = 0
        self.maxsize = maxsize


class Model:
    """The namespace (paths relative to the run's directory, '' being that
    directory) after each operation, and the files' sizes."""

    def __init__(self):
        self.paths = {}  # path -> node id
        self.nodes = {}  # node id -> Node

    def apply(self, op, ino=None):
        t = op['op']
        if t == 'mkroot':
            self.nodes[0] = Node('d', ino)
            self.paths[''] = 0
        elif t == 'create':
            self.nodes[op['nid']] = Node('f', ino, op['max'])
            self.paths[op['path']] = op['nid']
        elif t == 'mkdir':
            self.nodes[op['nid']] = Node('d', ino)
            self.paths[op['path']] = op['nid']
        elif t == 'link':
            self.paths[op['dst']] = op['nid']
        elif t in ('unlink', 'rmdir'):
            del self.paths[op['path']]
        elif t == 'rename':
            src, dst = op['src'], op['dst']
            nid = self.paths.pop(src)
            if self.nodes[nid].kind == 'd':
                pre = src + '/'
                moved = [p for p in self.paths if p.startswith(pre)]
                for p in moved:
                    self.paths[dst + '/' + p[len(pre):]] = self.paths.pop(p)
            self.paths[dst] = nid
        elif t == 'exchange':
            a, b = op['src'], op['dst']
            self.paths[a], self.paths[b] = self.paths[b], self.paths[a]
        elif t == 'setx':
            self.nodes[op['nid']].x[op['name']] = (op['vseq'], op['vlen'])
        elif t == 'delx':
            del self.nodes[op['nid']].x[op['name']]
        elif t == 'write':
            n = self.nodes[op['nid']]
            n.size = max(n.size, op['off'] + op['len'])
        elif t == 'trunc':
            self.nodes[op['nid']].size = op['size']

    def children(self, d):
        pre = d + '/' if d else ''
        return [p for p in self.paths if p != d and p.startswith(pre) and '/' not in p[len(pre):]]


def fsync_path(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_libc = None


def renameat2_exchange(a, b):
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    if _libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


class NativeError(OSError):
    """A libnvmefs call failed (errno is its -ret)."""


class Native:
    """The few calls of libnvmefs (include/libnvmefs.h) the workload makes,
    through ctypes: one client (attached to the mount that holds ROOT) and
    one shared buffer. Every failure raises NativeError."""

    class Io(ctypes.Structure):  # struct nvmefs_io
        _fields_ = [('fd', ctypes.c_int), ('op', ctypes.c_int), ('buf', ctypes.c_void_p),
                    ('len', ctypes.c_size_t), ('off', ctypes.c_uint64),
                    ('user_data', ctypes.c_uint64)]

    class Cqe(ctypes.Structure):  # struct nvmefs_cqe
        _fields_ = [('user_data', ctypes.c_uint64), ('res', ctypes.c_int64)]

    class Stats(ctypes.Structure):  # struct nvmefs_client_stats
        _fields_ = [(n, ctypes.c_uint64) for n in
                    ('requests', 'bytes', 'bounced', 'bounce_bytes', 'shared_bytes')]

    OP_WRITE = 2
    BUF = (1 << 20) + 2 * 4096  # the largest write, at any offset in a block

    def __init__(self, lib, root):
        P, I = ctypes.c_void_p, ctypes.c_int
        L = ctypes.CDLL(lib)
        for name, res, args in [
                ('nvmefs_attach', I, [ctypes.c_char_p, ctypes.POINTER(P)]),
                ('nvmefs_detach', None, [P]),
                ('nvmefs_client_error', ctypes.c_char_p, [P]),
                ('nvmefs_buf_alloc', I, [P, ctypes.c_size_t, I, ctypes.POINTER(P)]),
                ('nvmefs_reg_fd', I, [P, I]),
                ('nvmefs_unreg_fd', I, [P, I]),
                ('nvmefs_submit', I, [P, ctypes.POINTER(self.Io), ctypes.c_uint]),
                ('nvmefs_wait', I, [P, ctypes.POINTER(self.Cqe), ctypes.c_uint,
                                    ctypes.c_uint, I]),
                ('nvmefs_pwrite', ctypes.c_ssize_t, [P, I, P, ctypes.c_size_t,
                                                     ctypes.c_uint64]),
                ('nvmefs_fsync', I, [P, I]),
                ('nvmefs_client_stats', None, [P, ctypes.POINTER(self.Stats)])]:
            f = getattr(L, name)
            f.restype, f.argtypes = res, args
        self.L = L
        self.c = P()
        self.check(L.nvmefs_attach(root.encode(), ctypes.byref(self.c)), 'nvmefs_attach')
        buf = P()
        self.check(L.nvmefs_buf_alloc(self.c, self.BUF, -1, ctypes.byref(buf)),
                   'nvmefs_buf_alloc')
        self.buf = buf.value

    def check(self, ret, what):
        if ret < 0:
            msg = self.L.nvmefs_client_error(self.c).decode(errors='replace')
            raise NativeError(-ret, '%s: %s (%s)' % (what, os.strerror(-ret), msg))
        return ret

    def reg(self, fd):
        self.check(self.L.nvmefs_reg_fd(self.c, fd), 'nvmefs_reg_fd')

    def unreg(self, fd):
        self.check(self.L.nvmefs_unreg_fd(self.c, fd), 'nvmefs_unreg_fd')

    def fsync(self, fd):
        self.check(self.L.nvmefs_fsync(self.c, fd), 'nvmefs_fsync')

    def pwrite(self, fd, data, off, how, moff=0):
        """Write data at off: how is 'memory' (from the caller's memory,
        through the library's bounce buffers), 'shared' (from the shared
        buffer at moff) or 'batch' (from there too, in pieces submitted
        together and waited for)."""
        if how == 'memory':
            keep = ctypes.create_string_buffer(data, len(data))  # ordinary memory
            src = ctypes.addressof(keep)
        else:
            ctypes.memmove(self.buf + moff, data, len(data))
            src = self.buf + moff
        if how != 'batch':
            done = 0
            while done < len(data):
                n = self.check(self.L.nvmefs_pwrite(self.c, fd, src + done, len(data) - done,
                                                    off + done), 'nvmefs_pwrite')
                if n == 0:
                    raise NativeError(errno.EIO, 'nvmefs_pwrite: wrote nothing')
                done += n
            return
        cuts = sorted(set([0, len(data)] + [x * len(data) // 4 for x in (1, 2, 3)]))
        ios = (self.Io * (len(cuts) - 1))()
        for k in range(len(ios)):
            ios[k] = self.Io(fd, self.OP_WRITE, src + cuts[k], cuts[k + 1] - cuts[k],
                             off + cuts[k], k)
        n = self.check(self.L.nvmefs_submit(self.c, ios, len(ios)), 'nvmefs_submit')
        if n != len(ios):
            raise NativeError(errno.EIO, 'nvmefs_submit took %d of %d' % (n, len(ios)))
        cq, res = (self.Cqe * len(ios))(), {}
        while len(res) < len(ios):
            n = self.check(self.L.nvmefs_wait(self.c, cq, len(ios), 1, -1), 'nvmefs_wait')
            res.update((q.user_data, q.res) for q in cq[:n])
        for k, r in sorted(res.items()):
            self.check(r, 'a batched write of %d bytes' % ios[k].len)
            if r != ios[k].len:
                raise NativeError(errno.EIO, 'a batched write of %d bytes completed with %d' %
                                  (ios[k].len, r))

    def stats(self):
        st = self.Stats()
        self.L.nvmefs_client_stats(self.c, ctypes.byref(st))
        return st

    def detach(self):
        self.L.nvmefs_detach(self.c)
        self.c = None


# --------------------------------------------------------------------------
# The workload.

class Workload:
    def __init__(self, root, manifest, seed, native=None):
        self.root = root
        self.seed = seed & 0xffffffffffffffff
        self.rnd = random.Random(seed)
        self.name = 'w%016d-%x' % (time.time_ns() // 1000, self.seed & 0xffffffff)
        self.W = os.path.join(root, self.name)
        self.mfd = os.open(manifest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.m = Model()
        self.k = 0  # next operation number
        self.nid = 1
        self.gen = 1
        self.uniq = 0
        self.held = {}  # nid -> fd (kept open; the file may be unlinked)
        self.count = {}
        self.nsyncs = 0
        self.nnative = {'write': 0, 'fsync': 0}
        # How often this run syncs: from every few operations to rarely
        # (then the periodic commit and the 1 MiB threshold decide).
        self.sync_rate = self.rnd.choice([1, 1, 0.3, 0.1, 0.02])
        # With libnvmefs (the path of libnvmefs.so): the share of the writes
        # and of the fsyncs that go through it. Drawn only then, so that a
        # run without it makes the choices it always made.
        self.lib = native
        self.nat = None  # the Native client, once attached
        self.nreg = set()  # held descriptors registered with it
        self.native_w = self.native_s = 0
        if native:
            self.native_w = self.rnd.choice([0.1, 0.3, 0.6, 0.9])
            self.native_s = self.rnd.choice([0.2, 0.5, 0.9])

    def log(self, rec):
        os.write(self.mfd, (json.dumps(rec, separators=(',', ':')) + '\n').encode())

    def path(self, rel):
        return os.path.join(self.W, rel) if rel else self.W

    def do(self, op, fn):
        """Log the intent, run fn (which may return the new inode's
        number), log the completion and apply op to the model."""
        op['t'] = 'i'
        op['n'] = self.k
        self.log(op)
        t0 = time.monotonic()
        ino = fn()
        done = {'t': 'd', 'n': self.k}
        if ino is not None:
            done['ino'] = ino
        ms = (time.monotonic() - t0) * 1000
        if ms >= 50:  # slow operations, for the curious
            done['ms'] = int(ms)
        self.log(done)
        self.k += 1
        self.m.apply(op, ino)
        self.count[op['op']] = self.count.get(op['op'], 0) + 1
        if op['op'] in SYNCS:
            self.nsyncs += 1

    # -- choices

    def lists(self):
        files, dirs = [], []
        for p, n in self.m.paths.items():
            (files if self.m.nodes[n].kind == 'f' else dirs).append(p)
        files.sort()
        dirs.sort()
        return files, dirs

    def live_nids(self):
        s = set(n for p, n in self.m.paths.items() if self.m.nodes[n].kind == 'f')
        return s | set(self.held)

    def live_bytes(self):
        return sum(self.m.nodes[n].size for n in self.live_nids())

    def newname(self, dirs, prefix):
        self.uniq += 1
        d = self.rnd.choice(dirs)
        r = self.rnd.random()
        if r < 0.03:
            base = '%s%d_%s' % (prefix, self.uniq, 'L' * self.rnd.randint(100, 240))
        elif r < 0.06:
            base = '%s%d \u00e9t\u00e9 %%' % (prefix, self.uniq)
        else:
            base = '%s%d' % (prefix, self.uniq)
        return os.path.join(d, base) if d else base

    def io_target(self, nid, mode=os.O_RDWR):
        """(fd, close?, path or None) to do I/O on file nid."""
        paths = sorted(p for p, n in self.m.paths.items() if n == nid)
        if nid in self.held and (not paths or self.rnd.random() < 0.5):
            return self.held[nid], False, None
        p = self.rnd.choice(paths)
        return os.open(self.path(p), mode), True, p

    def native_target(self, nid):
        """(fd, path or None, done) for a native request on file nid: a
        held descriptor (registered at its first native request, until it
        is released), or one opened now (read-write or write-only, which
        may write and fsync too) and registered; done() unregisters and
        closes the latter."""
        mode = os.O_WRONLY if self.rnd.random() < 0.3 else os.O_RDWR
        fd, close, p = self.io_target(nid, mode)
        if not close:
            if fd not in self.nreg:
                self.nat.reg(fd)
                self.nreg.add(fd)
            return fd, p, lambda: None
        try:
            self.nat.reg(fd)
        except OSError:
            os.close(fd)
            raise

        def done():
            try:
                self.nat.unreg(fd)
            finally:
                os.close(fd)
        return fd, p, done

    def native_write(self, nid, off, data):
        """A write through libnvmefs: from its shared buffer (at an offset
        in a block that is 0, the file offset's or any), from ordinary
        memory, or from the shared buffer in pieces submitted together."""
        how = self.rnd.choice(['shared', 'shared', 'memory', 'batch'])
        moff = 0
        if how != 'memory':
            r = self.rnd.random()
            moff = 0 if r < 0.5 else (off % 4096 if r < 0.75 else self.rnd.randrange(4096))
        fd, p, done = self.native_target(nid)

        def fn():
            try:
                self.nat.pwrite(fd, data, off, how, moff)
            finally:
                done()
        return p, {'via': 'native', 'how': how, 'moff': moff}, fn

    # -- operations

    def op_create(self, files, dirs):
        path = self.newname(dirs, 'f')
        r = self.rnd.random()
        mx = 256 << 10 if r < 0.8 else (1 << 20 if r < 0.95 else 4 << 20)
        nid = self.nid
        self.nid += 1

        def fn():
            fd = os.open(self.path(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                return os.fstat(fd).st_ino
            finally:
                os.close(fd)
        self.do({'op': 'create', 'path': path, 'nid': nid, 'max': mx}, fn)
        if self.rnd.random() < 0.6:
            self.op_write(files, dirs, nid)

    def op_write(self, files, dirs, nid=None):
        if nid is None:
            nid = self.rnd.choice(sorted(self.live_nids()))
        n = self.m.nodes[nid]
        mx = n.maxsize
        r = self.rnd.random()
        if r < 0.3:
            off = n.size  # append
        elif r < 0.65 and n.size:
            off = self.rnd.randrange(n.size)  # overwrite
        elif r < 0.75:
            off = n.size + self.rnd.randint(1, 64 << 10)  # leave a hole
        else:
            off = self.rnd.randrange(mx)
        if off >= mx:
            off = self.rnd.randrange(mx)
        r = self.rnd.random()
        if r < 0.25:
            ln = self.rnd.randint(1, 512)
        elif r < 0.55:
            ln = self.rnd.randint(1, 8 << 10)
        elif r < 0.85:
            ln = self.rnd.randint(1, 64 << 10)
        else:
            ln = self.rnd.randint(1, 1 << 20)
        r = self.rnd.random()
        if r < 0.35:
            off &= ~4095
            ln = (ln + 4095) & ~4095
        elif r < 0.5:
            off &= ~511
            ln = (ln + 511) & ~511
        ln = max(1, min(ln, mx - off))
        gen = self.gen
        self.gen += 1
        data = stamp(self.seed, nid, gen, off, ln)
        if self.nat and self.rnd.random() < self.native_w:
            p, extra, fn = self.native_write(nid, off, data)
            self.do(dict({'op': 'write', 'nid': nid, 'path': p, 'off': off, 'len': ln,
                          'gen': gen}, **extra), fn)
            self.nnative['write'] += 1
            return
        fd, close, p = self.io_target(nid)

        def fn():
            try:
                done = 0
                while done < ln:
                    done += os.pwrite(fd, data[done:], off + done)
            finally:
                if close:
                    os.close(fd)
        self.do({'op': 'write', 'nid': nid, 'path': p, 'off': off, 'len': ln, 'gen': gen}, fn)

    def op_trunc(self, files, dirs, shrink=None):
        nid = self.rnd.choice(sorted(self.live_nids()))
        n = self.m.nodes[nid]
        if shrink is None:
            shrink = self.rnd.random() < 0.55
        if shrink or n.size >= n.maxsize:
            size = self.rnd.randint(0, n.size)
            if self.rnd.random() < 0.3:
                size &= ~4095
        else:
            size = min(n.maxsize, n.size + self.rnd.randint(1, 256 << 10))
        paths = [p for p, x in self.m.paths.items() if x == nid]
        if paths and (nid not in self.held or self.rnd.random() < 0.5) and self.rnd.random() < 0.5:
            p = self.rnd.choice(sorted(paths))
            self.do({'op': 'trunc', 'nid': nid, 'path': p, 'size': size},
                    lambda: os.truncate(self.path(p), size))
            return
        fd, close, p = self.io_target(nid)

        def fn():
            try:
                os.ftruncate(fd, size)
            finally:
                if close:
                    os.close(fd)
        self.do({'op': 'trunc', 'nid': nid, 'path': p, 'fd': True, 'size': size}, fn)

    def op_mkdir(self, files, dirs):
        parents = [d for d in dirs if d.count('/') < 2]
        path = self.newname(parents, 'd')
        nid = self.nid
        self.nid += 1

        def fn():
            os.mkdir(self.path(path))
            return os.lstat(self.path(path)).st_ino
        self.do({'op': 'mkdir', 'path': path, 'nid': nid}, fn)

    def empty_dirs(self, dirs):
        parents = set(os.path.dirname(p) for p in self.m.paths if p)
        return [d for d in dirs if d and d not in parents]

    def op_rmdir(self, files, dirs):
        empty = self.empty_dirs(dirs)
        if not empty:
            return self.op_mkdir(files, dirs)
        p = self.rnd.choice(empty)
        self.do({'op': 'rmdir', 'path': p, 'nid': self.m.paths[p]},
                lambda: os.rmdir(self.path(p)))

    def op_rename(self, files, dirs):
        src = self.rnd.choice(files)
        nid = self.m.paths[src]
        others = [p for p in files if self.m.paths[p] != nid]
        if others and self.rnd.random() < 0.4:
            dst = self.rnd.choice(others)  # over an existing file
        else:
            dst = self.newname(dirs, 'r')
        self.do({'op': 'rename', 'src': src, 'dst': dst, 'nid': nid},
                lambda: os.rename(self.path(src), self.path(dst)))

    def op_exchange(self, files, dirs):
        a = self.rnd.choice(files)
        others = [p for p in files if self.m.paths[p] != self.m.paths[a]]
        if not others:
            return self.op_rename(files, dirs)
        b = self.rnd.choice(others)
        self.do({'op': 'exchange', 'src': a, 'dst': b},
                lambda: renameat2_exchange(self.path(a), self.path(b)))

    def op_rename_dir(self, files, dirs):
        cands = [d for d in dirs if d]
        if not cands:
            return self.op_mkdir(files, dirs)
        src = self.rnd.choice(cands)
        inside = lambda d: d == src or d.startswith(src + '/')
        targets = [d for d in dirs if not inside(d)]
        empty = [d for d in self.empty_dirs(dirs) if not inside(d)]
        if empty and self.rnd.random() < 0.3:
            dst = self.rnd.choice(empty)  # over an empty directory
        else:
            depth = max(p.count('/') for p in self.m.paths if p == src or p.startswith(src + '/')) \
                - src.count('/')
            parents = [d for d in targets if (d.count('/') + 1 if d else 0) + depth < 3]
            if not parents:
                return self.op_mkdir(files, dirs)
            dst = self.newname(parents, 'm')
        self.do({'op': 'rename', 'src': src, 'dst': dst, 'nid': self.m.paths[src]},
                lambda: os.rename(self.path(src), self.path(dst)))

    def op_link(self, files, dirs):
        src = self.rnd.choice(files)
        dst = self.newname(dirs, 'l')
        self.do({'op': 'link', 'src': src, 'dst': dst, 'nid': self.m.paths[src]},
                lambda: os.link(self.path(src), self.path(dst)))

    def op_unlink(self, files, dirs):
        p = self.rnd.choice(files)
        self.do({'op': 'unlink', 'path': p, 'nid': self.m.paths[p]},
                lambda: os.unlink(self.path(p)))

    def op_setx(self, files, dirs):
        p = self.rnd.choice(files + dirs)
        nid = self.m.paths[p]
        name = 'user.x%d' % self.rnd.randint(0, 5)
        r = self.rnd.random()
        vlen = self.rnd.randint(0, 64) if r < 0.7 else (
            self.rnd.randint(0, 1024) if r < 0.95 else self.rnd.randint(0, 8000))
        vseq = self.k
        self.do({'op': 'setx', 'path': p, 'nid': nid, 'name': name, 'vseq': vseq, 'vlen': vlen},
                lambda: os.setxattr(self.path(p), name, xval(vseq, vlen)))

    def op_delx(self, files, dirs):
        cands = [p for p in files + dirs if self.m.nodes[self.m.paths[p]].x]
        if not cands:
            return self.op_setx(files, dirs)
        p = self.rnd.choice(cands)
        nid = self.m.paths[p]
        name = self.rnd.choice(sorted(self.m.nodes[nid].x))
        self.do({'op': 'delx', 'path': p, 'nid': nid, 'name': name},
                lambda: os.removexattr(self.path(p), name))

    def op_fsync(self, files, dirs, kind='fsync'):
        nid = self.rnd.choice(sorted(self.live_nids()))
        if kind == 'fsync' and self.nat and self.rnd.random() < self.native_s:
            # nvmefs_fsync: a sync like fsync(2), of everything completed.
            fd, p, done = self.native_target(nid)

            def nfn():
                try:
                    self.nat.fsync(fd)
                finally:
                    done()
            self.do({'op': kind, 'nid': nid, 'path': p, 'via': 'native'}, nfn)
            self.nnative['fsync'] += 1
            return
        fd, close, p = self.io_target(nid)

        def fn():
            try:
                (os.fsync if kind == 'fsync' else os.fdatasync)(fd)
            finally:
                if close:
                    os.close(fd)
        self.do({'op': kind, 'nid': nid, 'path': p}, fn)

    def op_fdatasync(self, files, dirs):
        self.op_fsync(files, dirs, 'fdatasync')

    def op_fsyncdir(self, files, dirs):
        p = self.rnd.choice(dirs)
        self.do({'op': 'fsyncdir', 'path': p, 'nid': self.m.paths[p]},
                lambda: fsync_path(self.path(p), True))

    def op_hold(self, files, dirs):
        cands = [p for p in files if self.m.paths[p] not in self.held]
        if len(self.held) >= 4 or not cands:
            return self.op_release(files, dirs)
        p = self.rnd.choice(cands)
        nid = self.m.paths[p]

        def fn():
            self.held[nid] = os.open(self.path(p), os.O_RDWR)
        self.do({'op': 'hold', 'path': p, 'nid': nid}, fn)

    def op_release(self, files, dirs):
        if not self.held:
            return self.op_fsyncdir(files, dirs)
        nid = self.rnd.choice(sorted(self.held))

        def fn():
            fd = self.held.pop(nid)
            if fd in self.nreg:  # unregistered first: the number is free after the close
                self.nreg.discard(fd)
                self.nat.unreg(fd)
            os.close(fd)
        self.do({'op': 'release', 'nid': nid}, fn)

    WEIGHTS = [('create', 10), ('write', 24), ('trunc', 6), ('rename', 6), ('exchange', 1),
               ('rename_dir', 2), ('link', 4), ('unlink', 6), ('mkdir', 3), ('rmdir', 2),
               ('setx', 6), ('delx', 3), ('fsync', 5), ('fdatasync', 3), ('fsyncdir', 3),
               ('hold', 1), ('release', 1)]

    def step(self):
        files, dirs = self.lists()
        live = self.live_bytes()
        if live > BUDGET and files and self.rnd.random() < 0.7:
            if self.rnd.random() < 0.7:
                return self.op_unlink(files, dirs)
            return self.op_trunc(files, dirs, shrink=True)
        ok = []
        for name, w in self.WEIGHTS:
            if name in ('rename', 'exchange', 'link', 'unlink') and not files:
                continue
            if name in ('write', 'trunc', 'fsync', 'fdatasync') and not self.live_nids():
                continue
            if name == 'create' and len(files) > 400:
                continue
            if name == 'mkdir' and len(dirs) > 30:
                continue
            if name == 'link' and len(files) > 500:
                continue
            if name in ('fsync', 'fdatasync', 'fsyncdir'):
                w *= self.sync_rate
            ok.append((name, w))
        name = self.rnd.choices([n for n, _ in ok], [w for _, w in ok])[0]
        getattr(self, 'op_' + name)(files, dirs)

    def prune(self):
        """Delete the oldest earlier directories (all but KEEP_OLD), one
        operation each, no sync after (sometimes one of ROOT)."""
        old = sorted(e for e in os.listdir(self.root) if e.startswith('w') and e != self.name)
        for d in old[:max(0, len(old) - KEEP_OLD)]:
            def fn(d=d):
                for top, dn, fn_ in os.walk(os.path.join(self.root, d), topdown=False):
                    for f in fn_:
                        os.unlink(os.path.join(top, f))
                    for x in dn:
                        os.rmdir(os.path.join(top, x))
                os.rmdir(os.path.join(self.root, d))
            self.do({'op': 'prune', 'dir': d}, fn)

    def run(self):
        t0 = time.time()
        self.log({'t': 'hdr', 'seed': self.seed, 'dir': self.name, 'root': self.root,
                  'budget': BUDGET, 'sync_rate': self.sync_rate, 'native_writes': self.native_w,
                  'native_fsyncs': self.native_s, 'pid': os.getpid(), 'time': t0})
        why = 'done'
        try:
            if self.lib:
                self.nat = Native(self.lib, self.root)
            self.prune()

            def mk():
                os.mkdir(self.W)
                return os.lstat(self.W).st_ino
            self.do({'op': 'mkroot'}, mk)
            if self.rnd.random() < 0.5:
                self.do({'op': 'fsyncroot'}, lambda: fsync_path(self.root, True))
            while self.k < MAX_OPS and time.time() - t0 < MAX_SECONDS:
                self.step()
        except OSError as e:
            # A native call that lost its daemon (the connection dropped, or
            # refused) counts when the mount is gone too: the process exits
            # in a moment, closing its socket and its FUSE device one after
            # the other.
            native = isinstance(e, NativeError)
            crash = e.errno in CRASH_ERRNOS and not native
            if not crash:
                crash = self.mount_gone(10 if native else 0)
            why = 'crash' if crash else 'error'
            self.log({'t': 'end', 'why': why, 'errno': e.errno, 'err': str(e), 'n': self.k,
                      'time': time.time()})
            print('run: stopped by %s%s after %d ops (%d syncs) in %.2f s; %s' %
                  (errno.errorcode.get(e.errno, e.errno), ' (native: %s)' % e if native else '',
                   self.k, self.nsyncs, time.time() - t0, self.summary()))
            if not crash:
                import traceback
                traceback.print_exc()
                print('run: UNEXPECTED ERROR %s in operation %d while the filesystem is up' %
                      (e, self.k))
                return 3
            return 0
        self.log({'t': 'end', 'why': 'done', 'n': self.k, 'time': time.time()})
        print('run: done: %d ops (%d syncs) in %.2f s; %s' %
              (self.k, self.nsyncs, time.time() - t0, self.summary()))
        if self.nat:
            self.nat.detach()
        return 0

    def mount_gone(self, wait):
        """Whether the mount answers ENOTCONN or ECONNABORTED (its daemon
        is gone), asking for up to wait seconds."""
        end = time.monotonic() + wait
        while True:
            try:
                os.statvfs(self.root)
            except OSError as e:
                if e.errno in CRASH_ERRNOS:
                    return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.05)

    def summary(self):
        out = ' '.join('%s=%d' % kv for kv in sorted(self.count.items()))
        if self.nat:
            st = self.nat.stats()
            out += ('; native (shares %.1f of writes, %.1f of fsyncs): %d writes, %d fsyncs, '
                    '%d requests, %d bounced' % (self.native_w, self.native_s,
                                                 self.nnative['write'], self.nnative['fsync'],
                                                 st.requests, st.bounced))
        return out


# --------------------------------------------------------------------------
# The checker.

def load(manifest):
    hdr, ops, done, end = None, [], {}, None
    with open(manifest, 'rb') as f:
        for raw in f:
            if not raw.endswith(b'\n'):
                break  # torn
            r = json.loads(raw)
            t = r.pop('t')
            if t == 'hdr':
                hdr = r
            elif t == 'i':
                assert r['n'] == len(ops), 'manifest: op %d out of sequence' % r['n']
                ops.append(r)
            elif t == 'd':
                done[r['n']] = r
            elif t == 'end':
                end = r
    return hdr, ops, done, end


def opstr(k, op, done):
    d = dict(op)
    d.pop('n', None)
    kind = d.pop('op')
    st = 'done' if k in done else 'IN FLIGHT'
    if k in done and 'ino' in done[k]:
        st += ' ino=%d' % done[k]['ino']
    return '#%d %s %s [%s]' % (k, kind, ' '.join('%s=%s' % kv for kv in d.items()), st)


def read_xattrs(path):
    out = {}
    for name in os.listxattr(path, follow_symlinks=False):
        if name.startswith('user.'):
            out[name] = os.getxattr(path, name, follow_symlinks=False)
    return out


def scan(top):
    """path (relative to top, '' = top) -> (kind, st_ino, st_nlink, size,
    xattrs); kind 'f', 'd' or '?' (something else)."""
    out = {}

    def add(rel, full):
        st = os.lstat(full)
        kind = 'd' if stat.S_ISDIR(st.st_mode) else ('f' if stat.S_ISREG(st.st_mode) else '?')
        out[rel] = (kind, st.st_ino, st.st_nlink, st.st_size, read_xattrs(full), st.st_blocks)
        return kind

    add('', top)
    for d, dn, fn in os.walk(top):
        rel = os.path.relpath(d, top)
        rel = '' if rel == '.' else rel
        for x in dn + fn:
            add(os.path.join(rel, x) if rel else x, os.path.join(d, x))
    return out


def fmt_x(x):
    return '{%s}' % ', '.join('%s: %d bytes %r' % (k, len(v), v[:12]) for k, v in sorted(x.items()))


def ns_diff(m, disk, limit=None):
    """Differences between the model's namespace and the disk's (a list of
    strings; empty if equal). Stops after limit differences."""
    out = []

    def add(s):
        out.append(s)
        return limit is not None and len(out) >= limit

    if disk is None:
        return [] if not m.paths else ['the run directory is missing']
    if not m.paths:
        return ['the run directory exists (it was not created yet at this prefix)']
    if limit == 1 and len(m.paths) != len(disk):
        return ['%d names, want %d' % (len(disk), len(m.paths))]
    for p in m.paths.keys() - disk.keys():
        n = m.nodes[m.paths[p]]
        if add('missing: %s (%s, node %d, ino %s)' % (p or '.', 'dir' if n.kind == 'd' else 'file',
                                                       m.paths[p], n.ino)):
            return out
    for p in disk.keys() - m.paths.keys():
        kind, ino, nl, size, x, _ = disk[p]
        if add('unexpected: %s (%s, ino %d, size %d)' % (p, {'d': 'dir', 'f': 'file'}.get(kind, kind),
                                                          ino, size)):
            return out
    ino_of = {}  # node -> disk ino
    node_of = {}  # disk ino -> node
    for p in m.paths.keys() & disk.keys():
        nid = m.paths[p]
        n = m.nodes[nid]
        kind, ino, nl, size, x, _ = disk[p]
        if kind != n.kind:
            if add('%s: a %s on disk, want a %s' % (p, kind, n.kind)):
                return out
            continue
        if n.ino is not None and ino != n.ino:
            if add('%s: inode %d on disk, want %d (node %d)' % (p or '.', ino, n.ino, nid)):
                return out
        if ino_of.setdefault(nid, ino) != ino:
            if add('%s: inode %d, but node %d (a hard link) is inode %d elsewhere' %
                   (p, ino, nid, ino_of[nid])):
                return out
        if node_of.setdefault(ino, nid) != nid:
            if add('%s: inode %d is also another node (%d) than this one (%d)' %
                   (p, ino, node_of[ino], nid)):
                return out
        want = {k: xval(*v) for k, v in n.x.items()}
        if x != want:
            if add('%s: xattrs %s, want %s' % (p or '.', fmt_x(x), fmt_x(want))):
                return out
    return out


class Checker:
    def __init__(self, root, manifest):
        self.root = root
        self.manifest = manifest
        self.hdr, self.ops, self.done, self.end = load(manifest)
        self.errs = []
        self.contents = {}  # disk ino -> bytes (or an exception)
        self.nfiles = 0
        self.t0 = time.time()

    def err(self, s):
        self.errs.append(s)

    def read(self, path, ino):
        if ino not in self.contents:
            try:
                with open(path, 'rb') as f:
                    self.contents[ino] = f.read()
            except OSError as e:
                self.contents[ino] = e
        return self.contents[ino]

    def data_history(self):
        """Per file node: the writes (gen, off, len), whether rule (b)
        applies, and (for (b) files) the content."""
        self.writes = {}
        last_change, last_sync = {}, {}
        for k, op in enumerate(self.ops):
            t = op['op']
            if t in DATA_OPS:
                last_change[op['nid']] = k
                if t == 'write':
                    self.writes.setdefault(op['nid'], []).append((op['gen'], op['off'], op['len']))
            elif t in ('fsync', 'fdatasync') and k in self.done:
                last_sync[op['nid']] = k
        self.exact = set(n for n, k in last_sync.items() if k > last_change.get(n, -1))
        self.content = {n: bytearray() for n in self.exact}
        seed = self.hdr['seed']
        for op in self.ops:
            c = self.content.get(op.get('nid'))
            if c is None:
                continue
            if op['op'] == 'write':
                off, ln = op['off'], op['len']
                if len(c) < off + ln:
                    c.extend(bytes(off + ln - len(c)))
                c[off:off + ln] = stamp(seed, op['nid'], op['gen'], off, ln)
            elif op['op'] == 'trunc':
                if op['size'] < len(c):
                    del c[op['size']:]
                else:
                    c.extend(bytes(op['size'] - len(c)))
        self.cover = {}

    def describe(self, data, off, own):
        b = data[off:off + PIECE]
        if b == ZERO[:len(b)]:
            return 'zeros'
        if len(b) >= HDR.size and b[:4] == MAGIC:
            _, s, nid, gen, o = HDR.unpack(b[:HDR.size])
            if s != self.hdr['seed']:
                what = 'data of ANOTHER iteration (seed %d, node %d, write gen %d, offset %d)' % (
                    s, nid, gen, o)
            elif nid != own:
                what = 'data of ANOTHER file (node %d, write gen %d, offset %d%s)' % (
                    nid, gen, o, self.where(nid))
            else:
                what = 'own data of write gen %d for offset %d' % (gen, o)
            if b != piece(s, nid, gen, o)[:len(b)]:
                what += ', mixed with other bytes'
            return what
        i = next(i for i, c in enumerate(b) if c)
        return 'unrecognised bytes (%d zeros, then %s...)' % (i, b[i:i + 16].hex())

    def where(self, nid):
        for k, op in enumerate(self.ops):
            if op['op'] == 'create' and op['nid'] == nid:
                return '; created as %s by op #%d' % (op['path'], k)
        return ''

    def check_own(self, data, nid):
        """Rule (c): a list of bad piece offsets."""
        seed = self.hdr['seed']
        if nid not in self.cover:
            cov = {}
            for gen, off, ln in self.writes.get(nid, ()):
                for k in range(off // PIECE, (off + ln - 1) // PIECE + 1):
                    cov.setdefault(k, []).append(gen)
            self.cover[nid] = cov
        cov = self.cover[nid]
        bad = []
        for k in range((len(data) + PIECE - 1) // PIECE):
            b = data[k * PIECE:(k + 1) * PIECE]
            if b == ZERO[:len(b)]:
                continue
            gens = cov.get(k, ())
            ok = False
            pcs = []
            for g in reversed(gens):
                p = piece(seed, nid, g, k * PIECE)[:len(b)]
                if p == b:
                    ok = True
                    break
                pcs.append(p)
            if not ok and pcs:  # bytes of several writes (or zeros)
                ok = all(c == 0 or any(p[i] == c for p in pcs) for i, c in enumerate(b))
            if not ok:
                bad.append(k * PIECE)
        return bad

    def check_data(self, paths, disk, W, quick):
        """Rules (b) and (c) for the files at one prefix; a list of errors."""
        errs = []
        seen = set()
        for p, nid in sorted(paths.items()):
            kind, ino, nl, size, x, _ = disk[p]
            if kind != 'f' or ino in seen:
                continue
            seen.add(ino)
            data = self.read(os.path.join(W, p), ino)
            if isinstance(data, Exception):
                errs.append('%s: read failed: %s' % (p, data))
                continue
            if nid in self.exact:
                want = self.content[nid]
                if data != want:
                    if len(data) != len(want):
                        e = '%s (node %d, fsynced after its last change): size %d, want %d' % (
                            p, nid, len(data), len(want))
                    else:
                        e = '%s (node %d, fsynced after its last change): content differs' % (p, nid)
                    diffs = [o for o in range(0, max(len(data), len(want)), PIECE)
                             if data[o:o + PIECE] != want[o:o + PIECE]]
                    if diffs:
                        e += '; %d pieces differ, first at %d: %s, want %s' % (
                            len(diffs), diffs[0], self.describe(data, diffs[0], nid),
                            self.describe(bytes(want), diffs[0], nid))
                    errs.append(e)
            else:
                bad = self.check_own(data, nid)
                if bad:
                    errs.append('%s (node %d, not fsynced after its last change, size %d): '
                                '%d pieces neither zeros nor its own data, first at %d: %s' % (
                                    p, nid, len(data), len(bad), bad[0],
                                    self.describe(data, bad[0], nid)))
            if quick and errs:
                break
        return errs

    def consistency(self, paths, disk):
        kids = {}
        for p in paths:
            if p:
                kids.setdefault(os.path.dirname(p), []).append(p)
        names = {}
        for p, nid in paths.items():
            names[nid] = names.get(nid, 0) + 1
        for p, nid in sorted(paths.items()):
            kind, ino, nl, size, x, _ = disk[p]
            if kind == 'd':
                want = 2 + sum(1 for c in kids.get(p, ()) if disk[c][0] == 'd')
            else:
                want = names[nid]
            if nl != want:
                self.err('%s: st_nlink %d, want %d' % (p or '.', nl, want))

    def old_dirs(self, W):
        """Earlier iterations' directories against their snapshots."""
        pruned = {}
        for k, op in enumerate(self.ops):
            if op['op'] == 'prune':
                pruned[op['dir']] = k
        lo = self.lower_bound()
        self.gone = []
        snaps = {}
        for f in glob.glob(os.path.join(os.path.dirname(os.path.abspath(self.manifest)), '*.snap')):
            # (This run's own snapshot exists when verify runs again after
            # a crash of the replayed volume: the directory must be exactly
            # what the first verify saw.)
            with open(f) as fh:
                s = json.load(fh)
            snaps[s['dir']] = (f, s)
        present = set(os.listdir(self.root))
        for e in sorted(present):
            if e != self.hdr['dir'] and e not in snaps:
                self.err('%s: in the volume root, neither this run\'s directory nor an earlier '
                         'one that verify saw' % e)
        nold = 0
        self.mark_pruned = []
        for d, (f, snap) in sorted(snaps.items()):
            ents = snap['entries']
            top = os.path.join(self.root, d)
            k = pruned.get(d)
            if d not in present:
                if k is None and not snap.get('pruned'):
                    self.err('earlier directory %s is gone (never deleted)' % d)
                else:
                    self.gone.append(f)
                continue
            if k is not None and k in self.done and lo > k:
                self.err('earlier directory %s still exists, but its deletion (op #%d) was '
                         'followed by a completed sync' % (d, k))
            disk = scan(top)
            subset = k is not None or snap.get('pruned')
            if k is not None and not snap.get('pruned'):
                self.mark_pruned.append((f, snap))  # partly deleted: a subset from now on
            if not subset:
                for p in sorted(set(ents) - set(disk))[:10]:
                    self.err('%s/%s: missing (earlier iteration)' % (d, p))
            for p in sorted(disk):
                kind, ino, nl, size, x, _ = disk[p]
                want = ents.get(p)
                if want is None:
                    self.err('%s/%s: unexpected (earlier iteration)' % (d, p))
                    continue
                wkind, wino, wsize, wsha, wx, wnl = want
                got = [kind, ino, size]
                if kind == 'f':
                    data = self.read(os.path.join(top, p), ino)
                    if isinstance(data, Exception):
                        self.err('%s/%s: read failed: %s' % (d, p, data))
                        continue
                    got.append(hashlib.sha256(data).hexdigest())
                    nold += 1
                else:
                    got.append(None)
                if got != [wkind, wino, wsize, wsha]:
                    self.err('%s/%s (earlier iteration): %s, want %s' % (
                        d, p, got, [wkind, wino, wsize, wsha]))
                if {n: v.hex() for n, v in x.items()} != wx:
                    self.err('%s/%s (earlier iteration): xattrs differ' % (d, p))
                if not subset and nl != wnl:
                    self.err('%s/%s (earlier iteration): st_nlink %d, want %d' % (d, p, nl, wnl))
        return nold

    def statfs(self):
        inodes, alloc = set(), 0
        for d, dn, fn in os.walk(self.root):
            for x in dn + fn + ([] if d != self.root else ['.']):
                st = os.lstat(os.path.join(d, x))
                if st.st_ino not in inodes:
                    inodes.add(st.st_ino)
                    alloc += st.st_blocks * 512
        sv = os.statvfs(self.root)
        used = (sv.f_blocks - sv.f_bfree) * sv.f_frsize
        if used != alloc:
            self.err('statfs: %d bytes in use, the files have %d allocated (st_blocks)' %
                     (used, alloc))
        if sv.f_files - sv.f_ffree != len(inodes):
            self.err('statfs: %d inodes in use, the tree has %d' %
                     (sv.f_files - sv.f_ffree, len(inodes)))

    def lower_bound(self):
        lo = 0
        for k, op in enumerate(self.ops):
            if op['op'] in SYNCS and k in self.done:
                lo = k + 1
        return lo

    def verify(self):
        if self.hdr is None:
            print('verify: the manifest has no header (the workload never started); '
                  'checking the earlier directories only')
            self.hdr = {'dir': None, 'seed': 0}
        name = self.hdr['dir']
        W = os.path.join(self.root, name) if name else None
        lo, N = self.lower_bound(), len(self.ops)
        disk = scan(W) if W and os.path.isdir(W) else None
        self.data_history()
        m = Model()
        cands = []
        for p in range(N + 1):
            if p:
                op = self.ops[p - 1]
                m.apply(op, self.done.get(p - 1, {}).get('ino'))
            if p >= lo and not ns_diff(m, disk, limit=1):
                cands.append((p, dict(m.paths)))
        chosen = None
        data_errs = []
        for p, paths in cands:
            e = self.check_data(paths, disk, W, quick=len(cands) > 1)
            if not e:
                chosen = (p, paths)
                break
            data_errs.append((p, e))
        if chosen is None and len(cands) > 1:  # full report for the first
            data_errs[0] = (cands[0][0], self.check_data(cands[0][1], disk, W, quick=False))
        inflight = [k for k in range(N) if k not in self.done]
        nold = self.old_dirs(W)
        if chosen is None:
            print('FAIL: no prefix of the %d operations from #%d (the last completed sync is #%d) '
                  'on is the state found' % (N, lo, lo - 1), file=sys.stderr)
            if cands:
                for p, e in data_errs:
                    print('FAIL: after the first %d operations the namespace matches, but:' % p,
                          file=sys.stderr)
                    for x in e[:20]:
                        print('FAIL:   ' + x, file=sys.stderr)
            else:
                best = None
                m = Model()
                for p in range(N + 1):
                    if p:
                        m.apply(self.ops[p - 1], self.done.get(p - 1, {}).get('ino'))
                    if p >= lo:
                        d = ns_diff(m, disk)
                        if best is None or len(d) < len(best[1]):
                            best = (p, d)
                p, d = best
                print('FAIL: nearest: the state after the first %d operations; it differs in:' % p,
                      file=sys.stderr)
                for x in sorted(d)[:40]:
                    print('FAIL:   ' + x, file=sys.stderr)
                if len(d) > 40:
                    print('FAIL:   ... %d more' % (len(d) - 40), file=sys.stderr)
                for x in sorted(d)[:8]:
                    path = x.split(':')[0]
                    rel = [k for k, op in enumerate(self.ops)
                           if path in (op.get('path'), op.get('src'), op.get('dst'))]
                    if rel:
                        print('FAIL:   %s: operations %s' % (path, ', '.join(
                            '#%d %s' % (k, self.ops[k]['op']) for k in rel[-6:])), file=sys.stderr)
            first = max(0, lo - 3)
            shown = list(range(first, N))
            if len(shown) > 60:
                shown = shown[:20] + [None] + shown[-40:]
            print('operations from #%d on (the last completed sync is #%d):' % (first, lo - 1),
                  file=sys.stderr)
            for k in shown:
                print('  ...' if k is None else '  ' + opstr(k, self.ops[k], self.done)[:300],
                      file=sys.stderr)
            for e in self.errs:
                print('FAIL: ' + e, file=sys.stderr)
            return 1
        p, paths = chosen
        if disk is not None:
            self.consistency(paths, disk)
        if os.path.ismount(self.root):
            self.statfs()
        nfiles = len(set(disk[q][1] for q in paths if disk[q][0] == 'f')) if disk else 0
        nexact = len(set(disk[q][1] for q, n in paths.items()
                         if disk[q][0] == 'f' and n in self.exact)) if disk else 0
        syncs = sum(1 for k, op in enumerate(self.ops) if op['op'] in SYNCS and k in self.done)
        native = [op['op'] for k, op in enumerate(self.ops)
                  if op.get('via') == 'native' and k in self.done]
        print('verify: %s: %d ops (%d completed syncs, the last #%d), %s; recovered the state '
              'after %d ops (%d candidates); %d files (%d fsynced exactly, %d own data or zeros), '
              '%d dirs; %d files of earlier iterations unchanged' % (
                  name, N, syncs, lo - 1,
                  'in flight: ' + opstr(inflight[0], self.ops[inflight[0]], self.done)
                  if inflight else 'none in flight', p, len(cands), nfiles, nexact,
                  nfiles - nexact, sum(1 for q in paths if disk[q][0] == 'd') if disk else 0, nold))
        if self.errs:
            for e in self.errs:
                print('FAIL: ' + e, file=sys.stderr)
            return 1
        slow = max(((d.get('ms', 0), k) for k, d in self.done.items()), default=(0, 0))
        if slow[0]:
            print('verify: the slowest operation took %d ms: %s' % (
                slow[0], opstr(slow[1], self.ops[slow[1]], self.done)))
        if self.hdr.get('time') and self.end and 'time' in self.end:
            print('verify: the workload ran %.2f s' % (self.end['time'] - self.hdr['time']))
        print('verify: %.2f s' % (time.time() - self.t0))
        print('TORTURE-STATS ops=%d done=%d syncs=%d files=%d exact=%d old=%d prefix=%d lo=%d '
              'nsmax=%d slowms=%d native_writes=%d native_syncs=%d' % (
                  N, len(self.done), syncs, nfiles, nexact, nold, p, lo, cands[-1][0], slow[0],
                  native.count('write'), len(native) - native.count('write')))
        # The state is exact now (a clean unmount follows): a snapshot for
        # the next iterations.
        if disk is not None:
            ents = {}
            for q, (kind, ino, nl, size, x, _) in disk.items():
                sha = None
                if kind == 'f':
                    sha = hashlib.sha256(self.read(os.path.join(W, q), ino)).hexdigest()
                ents[q] = [kind, ino, size, sha, {n: v.hex() for n, v in x.items()}, nl]
            with open(self.manifest + '.snap.tmp', 'w') as f:
                json.dump({'dir': name, 'entries': ents}, f)
            os.rename(self.manifest + '.snap.tmp', self.manifest + '.snap')
        for f in self.gone:
            os.rename(f, f + '.gone')
        for f, snap in self.mark_pruned:
            snap['pruned'] = True
            with open(f + '.tmp', 'w') as fh:
                json.dump(snap, fh)
            os.rename(f + '.tmp', f)
        return 0


def main(argv):
    if len(argv) in (5, 6) and argv[1] == 'run':
        return Workload(argv[2], argv[3], int(argv[4]), argv[5] if len(argv) == 6 else None).run()
    if len(argv) == 4 and argv[1] == 'verify':
        return Checker(argv[2], argv[3]).verify()
    print(__doc__.split('\n\n')[1], file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
