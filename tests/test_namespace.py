#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Randomized namespace test: one long seeded sequence of operations applied to
two trees, a filesystem under test (TREE, on nvmefs) and a reference (REF, on
tmpfs), which must stay the same.

Each step picks an operation (create and write, write, mkdir, mkfifo, link,
symlink, unlink, rmdir, rename with and without RENAME_NOREPLACE or
RENAME_EXCHANGE (through libc's renameat2), truncate, chmod, chown, utimes
with explicit times, setxattr and removexattr of user.* names), applies it to
TREE and then to REF, and requires the same outcome (success or the same
errno); then it compares the two trees: names, types (also readdir's d_type),
modes, owners, link counts, hard-link groups, sizes of all but directories,
contents, symlink targets and user.* xattrs. Times are not compared.
Operations are chosen so that errors happen too (EEXIST, ENOTEMPTY, EINVAL
moving a directory under itself, ENOTDIR, EISDIR, EPERM, ENOENT, ENODATA,
ELOOP...), and the tree stays small (--max-dirs, --max-names, --max-depth) so
that comparing everything after every step stays cheap. Paths that would
resolve, through a symlink, outside the tree of the seed are never used: the
two trees sit in different places.

Each seed runs in its own directory, TREE/sSEED and REF/sSEED. With
--compare nothing is run: the two whole trees are compared (after a remount,
say). On a difference: the seed, the step, the operation, the first
difference and the operations before it, then exit 1. Exit 0 when all is
the same, 77 (skip) when libc has no renameat2.

usage: test_namespace.py [--seed N ...] [--steps N] TREE REF
       test_namespace.py --compare TREE REF
"""

import argparse
import collections
import ctypes
import errno
import os
import random
import stat
import sys
import time

NAMES = list('abcdefgh')  # few names, so that they collide
XATTRS = ['user.a', 'user.b', 'user.c']
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
AT_FDCWD = -100
NOWHERE = '/nonexistent-nvmefs-ns'  # absolute symlink targets, never there
MODES = [0o644, 0o600, 0o755, 0o700, 0o000, 0o4755, 0o2755, 0o1777, 0o6711]
UIDS = [-1, 0, 1, 1000, 65534]
GIDS = [-1, 0, 1, 100, 1000]
TYPES = {stat.S_IFREG: 'file', stat.S_IFDIR: 'dir', stat.S_IFLNK: 'symlink',
         stat.S_IFIFO: 'fifo', stat.S_IFCHR: 'chardev', stat.S_IFBLK: 'blockdev',
         stat.S_IFSOCK: 'socket'}
FLAG_NAMES = {os.O_CREAT: 'O_CREAT', os.O_EXCL: 'O_EXCL', os.O_TRUNC: 'O_TRUNC',
              os.O_APPEND: 'O_APPEND'}


class Skip(Exception):
    pass


_renameat2 = None


def renameat2(old, new, flags):
    global _renameat2
    if _renameat2 is None:
        libc = ctypes.CDLL(None, use_errno=True)
        if not hasattr(libc, 'renameat2'):
            raise Skip('libc has no renameat2')
        _renameat2 = libc.renameat2
        _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                               ctypes.c_uint]
        _renameat2.restype = ctypes.c_int
    if _renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old, None, new)


# ---- operations ----
# An operation is a tuple (kind, args...) with paths relative to a seed's
# directory; apply() runs it under one root and returns 'ok' or the errno's
# name.

def write_all(fd, data, off=None):
    done = 0
    while done < len(data):
        if off is None:
            done += os.write(fd, data[done:])
        else:
            done += os.pwrite(fd, data[done:], off + done)


def do_op(op, path):
    kind, a = op[0], op[1:]
    if kind == 'create':
        flags, mode, data = a[1:]
        fd = os.open(path(a[0]), flags | os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC, mode)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
    elif kind == 'write':
        fd = os.open(path(a[0]), os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            write_all(fd, a[2], a[1])
        finally:
            os.close(fd)
    elif kind == 'mkdir':
        os.mkdir(path(a[0]), a[1])
    elif kind == 'mkfifo':
        os.mkfifo(path(a[0]), a[1])
    elif kind == 'link':
        os.link(path(a[0]), path(a[1]), follow_symlinks=False)
    elif kind == 'symlink':
        os.symlink(a[0], path(a[1]))
    elif kind == 'unlink':
        os.unlink(path(a[0]))
    elif kind == 'rmdir':
        os.rmdir(path(a[0]))
    elif kind == 'rename':
        renameat2(path(a[0]), path(a[1]), a[2])
    elif kind == 'truncate':
        os.truncate(path(a[0]), a[1])
    elif kind == 'chmod':
        os.chmod(path(a[0]), a[1])
    elif kind == 'chown':
        os.chown(path(a[0]), a[1], a[2], follow_symlinks=a[3])
    elif kind == 'utime':
        os.utime(path(a[0]), ns=(a[1], a[2]), follow_symlinks=a[3])
    elif kind == 'setxattr':
        os.setxattr(path(a[0]), a[1], a[2], a[3], follow_symlinks=a[4])
    elif kind == 'removexattr':
        os.removexattr(path(a[0]), a[1], follow_symlinks=a[2])
    else:
        raise ValueError(kind)


def apply(op, root):
    def path(rel):
        return os.path.join(root, rel) if rel else root
    try:
        do_op(op, path)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    return 'ok'


def describe(op):
    kind, a = op[0], [repr(x) for x in op[1:]]
    if kind == 'create':
        a[1] = '|'.join(n for f, n in FLAG_NAMES.items() if op[2] & f)
        a[2] = oct(op[3])
        a[3] = '<%d bytes>' % len(op[4])
    elif kind == 'write':
        a[2] = '<%d bytes>' % len(op[3])
    elif kind in ('mkdir', 'mkfifo', 'chmod'):
        a[1] = oct(op[2])
    elif kind == 'rename':
        a[2] = {0: '0', RENAME_NOREPLACE: 'RENAME_NOREPLACE', RENAME_EXCHANGE: 'RENAME_EXCHANGE'
                }.get(op[3], 'RENAME_NOREPLACE|RENAME_EXCHANGE')
    elif kind == 'symlink' and len(op[1]) > 40:
        a[0] = '%r...<%d bytes>' % (op[1][:8], len(op[1]))
    elif kind == 'setxattr':
        if len(op[2]) > 40:
            a[1] = '%r...<%d bytes>' % (op[2][:8], len(op[2]))
        a[2] = '<%d bytes>' % len(op[3])
        a[3] = {0: '0', os.XATTR_CREATE: 'XATTR_CREATE', os.XATTR_REPLACE: 'XATTR_REPLACE'}[op[4]]
    if kind in ('chown', 'utime', 'setxattr', 'removexattr'):
        a[-1] = 'follow' if op[-1] else 'nofollow'
    return '%s(%s)' % (kind, ', '.join(a))


def op_label(op):
    if op[0] == 'rename':
        return 'rename' + {0: '', RENAME_NOREPLACE: '+NOREPLACE', RENAME_EXCHANGE: '+EXCHANGE'
                           }.get(op[3], '+BOTH')
    return op[0]


# ---- comparing trees ----

def xattrs_of(path):
    out = {}
    for n in sorted(os.listxattr(path, follow_symlinks=False)):
        if n.startswith('user.'):
            out[n] = os.getxattr(path, n, follow_symlinks=False)
    return out


def d_type(e):
    if e.is_symlink():
        return 'symlink'
    if e.is_dir(follow_symlinks=False):
        return 'dir'
    if e.is_file(follow_symlinks=False):
        return 'file'
    return 'other'


def describe_entry(path, st, dtype):
    fmt = stat.S_IFMT(st.st_mode)
    f = {'type': TYPES.get(fmt, oct(fmt))}
    if dtype is not None:
        f['d_type'] = dtype  # readdir's, against lstat's in 'type'
    f['mode'] = oct(stat.S_IMODE(st.st_mode))
    f['nlink'] = st.st_nlink
    f['uid'] = st.st_uid
    f['gid'] = st.st_gid
    if fmt != stat.S_IFDIR:
        f['size'] = st.st_size  # a directory's size is the filesystem's own business
    if fmt == stat.S_IFREG:
        with open(path, 'rb', buffering=0) as fh:
            f['content'] = fh.read()
    elif fmt == stat.S_IFLNK:
        f['target'] = os.readlink(path)
    if fmt in (stat.S_IFREG, stat.S_IFDIR):
        f['xattrs'] = xattrs_of(path)
    return f


def scan(root):
    """Everything compared about the tree under root: {relpath: {field: value}},
    '' being root itself (not its mode: the two roots come from elsewhere)."""
    st = os.lstat(root)
    out = {'': describe_entry(root, st, None)}
    del out['']['mode']
    groups = collections.defaultdict(list)
    todo = [('', root)]
    while todo:
        rel, path = todo.pop()
        with os.scandir(path) as it:
            ents = sorted(it, key=lambda e: e.name)
        for e in ents:
            r = rel + '/' + e.name if rel else e.name
            st = e.stat(follow_symlinks=False)
            out[r] = describe_entry(e.path, st, d_type(e))
            if stat.S_ISDIR(st.st_mode):
                todo.append((r, e.path))
            else:
                groups[st.st_ino].append(r)
    for names in groups.values():
        for r in names:
            out[r]['hard links'] = sorted(names)
    return out


def show_value(v):
    if isinstance(v, bytes):
        return '%d bytes' % len(v)
    return repr(v)


def first_difference(a, b, an, bn):
    for rel in sorted(set(a) | set(b)):
        name = rel or '.'
        if rel not in a:
            return '%s: a %s only in %s' % (name, b[rel]['type'], bn)
        if rel not in b:
            return '%s: a %s only in %s' % (name, a[rel]['type'], an)
        fa, fb = a[rel], b[rel]
        for k in list(fa) + [k for k in fb if k not in fa]:
            va, vb = fa.get(k), fb.get(k)
            if va == vb:
                continue
            if isinstance(va, bytes) and isinstance(vb, bytes):
                off = next((i for i in range(min(len(va), len(vb))) if va[i] != vb[i]),
                           min(len(va), len(vb)))
                return '%s: content differs from byte %d (%d bytes in %s, %d in %s)' % (
                    name, off, len(va), an, len(vb), bn)
            if k == 'xattrs' and va is not None and vb is not None:
                for x in sorted(set(va) | set(vb)):
                    if va.get(x) != vb.get(x):
                        return '%s: xattr %s: %s in %s, %s in %s' % (
                            name, x, show_value(va.get(x)), an, show_value(vb.get(x)), bn)
            return '%s: %s %s in %s, %s in %s' % (name, k, show_value(va), an, show_value(vb), bn)
    return None


# ---- choosing operations ----

def depth(rel):
    return rel.count('/') + 1 if rel else 0


def parent(rel):
    return os.path.dirname(rel.rstrip('/'))


class Chooser:
    """Picks the next operation from the reference tree as it is now (the
    tree under test is the same, or the test has failed already)."""

    WEIGHTS = {'create': 12, 'write': 5, 'mkdir': 9, 'mkfifo': 1, 'link': 6, 'symlink': 5,
               'unlink': 9, 'rmdir': 7, 'rename': 22, 'truncate': 4, 'chmod': 4, 'chown': 3,
               'utime': 2, 'setxattr': 5, 'removexattr': 3}

    def __init__(self, rng, ref_root, max_dirs, max_names, max_depth, xattrs):
        self.rng = rng
        self.root = os.path.realpath(ref_root)
        self.max_dirs = max_dirs
        self.max_names = max_names
        self.max_depth = max_depth
        weights = dict(self.WEIGHTS)
        if not xattrs:
            del weights['setxattr'], weights['removexattr']
        self.kinds = list(weights)
        self.weights = list(weights.values())

    def look(self, snap):
        self.snap = snap
        self.names = sorted(r for r in snap if r)
        self.dirs = [''] + [r for r in self.names if snap[r]['type'] == 'dir']
        self.files = [r for r in self.names if snap[r]['type'] == 'file']
        self.nondirs = [r for r in self.names if snap[r]['type'] != 'dir']
        self.full = len(self.names) >= self.max_names

    # -- paths --
    def some(self, seq):
        return self.rng.choice(seq) if seq else None

    def fresh(self, parents=None):
        """A name in an existing directory: often new, sometimes taken; only
        taken ones when the tree is full."""
        if self.full and self.rng.random() < 0.9:
            return self.some(self.names) or self.rng.choice(NAMES)
        d = self.rng.choice(parents if parents else self.dirs)
        return (d + '/' if d else '') + self.rng.choice(NAMES)

    def bogus(self):
        r = self.rng.random()
        if r < 0.4 and self.nondirs:
            return self.rng.choice(self.nondirs) + '/' + self.rng.choice(NAMES)  # ENOTDIR
        if r < 0.7:
            d = self.rng.choice(self.dirs)
            return (d + '/' if d else '') + 'zz/' + self.rng.choice(NAMES)  # ENOENT
        if r < 0.9 and self.names:
            return self.rng.choice(self.names) + '/'  # trailing slash
        d = self.rng.choice(self.dirs)
        return (d + '/' if d else '') + self.rng.choice(['.', '..'])

    def any_path(self, existing=0.75):
        r = self.rng.random()
        if r < existing and self.names:
            return self.rng.choice(self.names)
        if r < 0.94:
            return self.fresh()
        return self.bogus()

    def pick(self, seq, p, fallback=None):
        if seq and self.rng.random() < p:
            return self.rng.choice(seq)
        return fallback() if fallback else self.any_path()

    def inside(self, rel, follow):
        """rel, and whatever a symlink in it leads to, stays in the tree."""
        path = os.path.join(self.root, rel) if rel else self.root
        if not follow and not rel.endswith('/'):
            path = os.path.dirname(path)
        real = os.path.realpath(path)
        return real == self.root or real.startswith(self.root + '/')

    def height(self, rel):
        """How many directory levels rel carries (0 for a non-directory)."""
        if self.snap.get(rel, {}).get('type') != 'dir':
            return 0
        pre = rel + '/'
        return 1 + max([depth(d) - depth(rel) for d in self.dirs if d.startswith(pre)] + [0])

    def fits(self, src, dst):
        """Moving src to dst keeps directories within max_depth (or fails
        anyway: dst under src)."""
        if (dst.rstrip('/') + '/').startswith(src.rstrip('/') + '/'):
            return True
        h = self.height(src.rstrip('/'))
        return not h or depth(parent(dst)) + h <= self.max_depth

    def mode(self):
        if self.rng.random() < 0.7:
            return self.rng.choice(MODES)
        return self.rng.randint(0, 0o7777)

    def data(self, big=9000):
        r = self.rng.random()
        if r < 0.1:
            return b''
        n = self.rng.randint(1, 100) if r < 0.4 else self.rng.randint(1, big)
        return self.rng.randbytes(n)

    def target(self, link):
        r = self.rng.random()
        base = parent(link) or '.'
        if r < 0.45 and self.names:
            return os.path.relpath(self.rng.choice(self.names + self.dirs[1:]), base)
        if r < 0.65:
            return self.rng.choice(NAMES)
        if r < 0.75:
            return '../' + self.rng.choice(NAMES)
        if r < 0.85:
            return NOWHERE + '/' + self.rng.choice(NAMES)
        if r < 0.9:
            return os.path.basename(link.rstrip('/')) or 'a'  # a loop
        if r < 0.98:
            return 'x' * self.rng.randint(100, 2000)
        return 'y' * self.rng.choice([4094, 4095, 4096])

    # -- one operation of each kind --
    def make(self, kind):
        rng = self.rng
        if self.full and kind in ('create', 'mkdir', 'mkfifo', 'link', 'symlink') \
                and rng.random() < 0.5:
            kind = rng.choice(['unlink', 'rmdir', 'rename'])
        if kind == 'create':
            path = self.pick(self.names, 0.3, self.fresh) if rng.random() > 0.08 else self.bogus()
            flags = os.O_CREAT
            for f, p in ((os.O_EXCL, 0.25), (os.O_TRUNC, 0.3), (os.O_APPEND, 0.1)):
                if rng.random() < p:
                    flags |= f
            return ('create', path, flags, self.mode(), self.data()), True
        if kind == 'write':
            path = self.pick(self.files, 0.9)
            size = self.snap.get(path, {}).get('size', 0)
            off = rng.randint(0, min(size + 2000, 16000))
            return ('write', path, off, self.data(4000)), True
        if kind == 'mkdir':
            if len(self.dirs) > self.max_dirs:
                return self.make('rmdir')
            parents = [d for d in self.dirs if depth(d) < self.max_depth]
            path = self.fresh(parents) if rng.random() > 0.08 else self.bogus()
            return ('mkdir', path, self.mode()), False
        if kind == 'mkfifo':
            return ('mkfifo', self.fresh(), self.mode()), False
        if kind == 'link':
            src = self.pick(self.nondirs, 0.75, lambda: self.pick(self.dirs[1:], 0.5))
            return ('link', src, self.pick(self.names, 0.2, self.fresh)), False
        if kind == 'symlink':
            path = self.pick(self.names, 0.15, self.fresh)
            return ('symlink', self.target(path), path), False
        if kind == 'unlink':
            return ('unlink', self.pick(self.nondirs, 0.8)), False
        if kind == 'rmdir':
            empty = [d for d in self.dirs[1:] if self.snap[d]['nlink'] == 2 and
                     not any(n.startswith(d + '/') for n in self.names)]
            if rng.random() < 0.5 and empty:
                return ('rmdir', rng.choice(empty)), False
            return ('rmdir', self.pick(self.dirs[1:], 0.7)), False
        if kind == 'rename':
            return self.make_rename()
        if kind == 'truncate':
            path = self.pick(self.files, 0.85)
            size = self.snap.get(path, {}).get('size', 0)
            size = rng.choice([0, rng.randint(0, 12000), size + 1, max(size - 1, 0),
                               size + rng.randint(1, 5000)])
            return ('truncate', path, size), True
        if kind == 'chmod':
            return ('chmod', self.any_path(0.9), self.mode()), True
        if kind == 'chown':
            follow = rng.random() < 0.3
            return ('chown', self.any_path(0.9), rng.choice(UIDS), rng.choice(GIDS),
                    follow), follow
        if kind == 'utime':
            follow = rng.random() < 0.5
            t = [rng.randint(0, 2**33) * 10**9 + rng.randint(0, 10**9 - 1) for _ in range(2)]
            return ('utime', self.any_path(0.9), t[0], t[1], follow), follow
        if kind == 'setxattr':
            follow = rng.random() < 0.2
            name = rng.choice(XATTRS) if rng.random() < 0.97 else 'user.' + 'n' * 251
            value = rng.randbytes(rng.choice([0, rng.randint(1, 64), rng.randint(1, 3000)]))
            flags = rng.choice([0, 0, os.XATTR_CREATE, os.XATTR_REPLACE])
            return ('setxattr', self.any_path(0.9), name, value, flags, follow), follow
        if kind == 'removexattr':
            follow = rng.random() < 0.2
            return ('removexattr', self.any_path(0.9), rng.choice(XATTRS), follow), follow
        raise ValueError(kind)

    def make_rename(self):
        rng = self.rng
        src = self.any_path(0.9)
        s = src.rstrip('/')
        src_dir = self.snap.get(s, {}).get('type') == 'dir'
        r = rng.random()
        if src_dir and r < 0.1:
            under = [d for d in self.dirs if d == s or d.startswith(s + '/')]
            dst = rng.choice(under) + '/' + rng.choice(NAMES)  # EINVAL (or ENOENT)
        elif r < 0.18 and '/' in s:
            dst = parent(s)  # an ancestor: ENOTEMPTY, EINVAL with EXCHANGE
        elif r < 0.6 and self.names:
            same = [n for n in self.names
                    if (self.snap[n]['type'] == 'dir') == src_dir and n != s]
            dst = self.pick(same, 0.6, lambda: rng.choice(self.names))
        elif r < 0.66:
            links = self.snap.get(s, {}).get('hard links', [s])
            dst = rng.choice(links)  # itself or another name of it
        else:
            dst = self.fresh()
        flags = rng.choices([0, RENAME_NOREPLACE, RENAME_EXCHANGE,
                             RENAME_NOREPLACE | RENAME_EXCHANGE], [50, 15, 33, 2])[0]
        if not self.fits(src, dst) or (flags & RENAME_EXCHANGE and not self.fits(dst, src)):
            return None, False
        return ('rename', src, dst, flags), False

    def next(self, snap):
        self.look(snap)
        for _ in range(100):
            op, follow = self.make(self.rng.choices(self.kinds, self.weights)[0])
            if op is None:
                continue
            paths = [op[1]]
            if op[0] in ('link', 'rename'):
                paths.append(op[2])
            elif op[0] == 'symlink':
                paths = [op[2]]
            if all(self.inside(p, follow) for p in paths):
                return op
        raise RuntimeError('no operation found in 100 tries')


# ---- running ----

def fail(msg):
    print('FAIL: ' + msg, file=sys.stderr)
    sys.exit(1)


def xattrs_work(path):
    probe = os.path.join(path, '.xattr-probe')
    try:
        with open(probe, 'wb'):
            pass
        os.setxattr(probe, 'user.probe', b'1')
        return True
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.ENOTSUP):
            return False
        raise
    finally:
        os.unlink(probe)


def run_seed(seed, args, xattrs):
    tree = os.path.join(args.tree, 's%d' % seed)
    ref = os.path.join(args.ref, 's%d' % seed)
    for d in (tree, ref):
        os.mkdir(d)
        os.chmod(d, 0o755)
    print('seed %d: %d steps in %s against %s' % (seed, args.steps, tree, ref), flush=True)
    rng = random.Random(seed)
    ch = Chooser(rng, ref, args.max_dirs, args.max_names, args.max_depth, xattrs)
    snap_ref = scan(ref)
    history = collections.deque(maxlen=args.history)
    counts = collections.defaultdict(collections.Counter)
    replay = ('replay: %s --seed %d --steps STEPS TREE REF (fresh trees)' %
              (sys.argv[0], seed))
    peak = 0
    t0 = time.monotonic()
    for step in range(1, args.steps + 1):
        op = ch.next(snap_ref)
        got = apply(op, tree)
        want = apply(op, ref)
        if args.verbose:
            print('%d: %s -> %s' % (step, describe(op), want))
        counts[op_label(op)][want] += 1
        if op[0] == 'rename' and op[3] == RENAME_EXCHANGE and parent(op[1]) != parent(op[2]) \
                and all(snap_ref.get(p.rstrip('/'), {}).get('type') == 'dir' for p in op[1:3]):
            counts['rename+EXCHANGE of 2 dirs in different parents'][want] += 1
        history.append('  step %d: %s -> %s' % (step, describe(op), want))
        why = None
        if got != want:
            why = 'outcome %s on the tree under test, %s on the reference' % (got, want)
        else:
            snap_ref = scan(ref)
            diff = first_difference(scan(tree), snap_ref, 'the tree under test', 'the reference')
            if diff:
                why = 'trees differ after it: ' + diff
        if why:
            print('operations up to the failing one:\n' + '\n'.join(history), file=sys.stderr)
            print(replay.replace('STEPS', str(step)), file=sys.stderr)
            fail('seed %d step %d: %s: %s' % (seed, step, describe(op), why))
        peak = max(peak, len(snap_ref) - 1)
    dt = time.monotonic() - t0
    ndirs = sum(1 for f in snap_ref.values() if f['type'] == 'dir') - 1
    print('seed %d: %d steps in %.1f s (%.1f ms a step), trees the same; at the end %d names '
          '(%d directories), at most %d' % (seed, args.steps, dt, 1000 * dt / max(args.steps, 1),
                                            len(snap_ref) - 1, ndirs, peak))
    for label in sorted(counts):
        c = counts[label]
        print('  %s: %s' % (label, ', '.join('%s %d' % kv for kv in sorted(
            c.items(), key=lambda kv: (kv[0] != 'ok', -kv[1])))))


def main():
    ap = argparse.ArgumentParser(
        description='Apply one seeded random sequence of namespace operations to TREE (the '
        'filesystem under test) and REF (a reference, tmpfs), comparing the outcomes and the '
        'two trees after every step; or only compare them (--compare).')
    ap.add_argument('--seed', type=int, action='extend', nargs='+', default=[],
                    help='seed(s); each runs in TREE/sSEED and REF/sSEED (default: one random)')
    ap.add_argument('--steps', type=int, default=1000, help='operations per seed (1000)')
    ap.add_argument('--compare', action='store_true',
                    help='run nothing: compare the whole of TREE and REF')
    ap.add_argument('--max-dirs', type=int, default=24, help='directories at most (24)')
    ap.add_argument('--max-names', type=int, default=100,
                    help='names at most, directories included (100)')
    ap.add_argument('--max-depth', type=int, default=4, help='directory depth at most (4)')
    ap.add_argument('--history', type=int, default=12,
                    help='operations shown before a failing one (12)')
    ap.add_argument('-v', '--verbose', action='store_true', help='print every operation')
    ap.add_argument('tree', help='directory on the filesystem under test')
    ap.add_argument('ref', help='reference directory (tmpfs)')
    args = ap.parse_args()
    for d in (args.tree, args.ref):
        if not os.path.isdir(d):
            ap.error('%s is not a directory' % d)
    if args.compare:
        diff = first_difference(scan(args.tree), scan(args.ref), args.tree, args.ref)
        if diff:
            fail('trees differ: ' + diff)
        print('%s and %s are the same' % (args.tree, args.ref))
        return 0
    os.umask(0o022)
    seeds = args.seed or [random.randrange(1 << 32)]
    try:
        renameat2('/', '/', 0xffffffff)  # EINVAL; Skip if there is no renameat2
    except OSError:
        pass
    except Skip as e:
        print('SKIP: %s' % e)
        return 77
    xattrs = xattrs_work(args.tree) and xattrs_work(args.ref)
    if not xattrs:
        print('user.* xattrs not supported on both trees: no xattr operations')
    print('seeds %s' % ' '.join(map(str, seeds)))
    for seed in seeds:
        run_seed(seed, args, xattrs)
    return 0


if __name__ == '__main__':
    sys.exit(main())
