# SPDX-License-Identifier: MIT
"""test_preload.py MOUNTPOINT: run by tests/test_preload.sh under
LD_PRELOAD=libnvmefs-preload.so, as root, with /usr/bin/python3. What a
Python program sees when its creates go through the native door must be
what it sees through the mount: each check names what it asserts. The
daemon's "creates" counter (.nvmefs/stats, native) says which creates the
door served."""
import ctypes
import errno
import json
import os
import subprocess
import sys
import threading

mnt = sys.argv[1]
fails = 0


def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL:", what, flush=True)


def stats():
    with open(os.path.join(mnt, ".nvmefs/stats")) as f:
        return json.load(f)


def creates():
    return stats()["native"]["creates"]


def statfs_requests():
    return stats()["requests"].get("STATFS", 0)


def have_statmount():
    """Whether this kernel has statmount(2) (Linux 6.8), which the door
    asks instead of fstatvfs: a bad address is EFAULT there, ENOSYS (or a
    filter's EPERM) where it has none."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(ctypes.c_long(457), None, None, ctypes.c_size_t(0), ctypes.c_uint(0))
    return not (r < 0 and ctypes.get_errno() in (errno.ENOSYS, errno.EPERM))


def content(p):
    with open(p, "rb") as f:
        return f.read()


def as_other(fn):
    """fn() in a child as uid 4242, gid 4243, no supplementary groups: True
    when it returned True."""
    pid = os.fork()
    if pid == 0:
        rc = 3
        try:
            os.setgroups([])
            os.setresgid(4243, 4243, 4243)
            os.setresuid(4242, 4242, 4242)
            rc = 0 if fn() else 1
        except BaseException as e:
            print("child:", e, flush=True)
        finally:
            os._exit(rc)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


d = os.path.join(mnt, "preload")
os.mkdir(d)
os.umask(0o022)

# A new file with Python's own open: the door's, as the mount would do it.
n0 = creates()
p = os.path.join(d, "a.bin")
with open(p, "wb") as f:
    check(os.fstat(f.fileno()).st_size == 0, "fstat of a new file: size 0")
    f.write(b"x" * 5000)
    f.flush()
    check(f.tell() == 5000, "tell after a write")
    check(os.fstat(f.fileno()).st_size == 5000, "fstat after a write: 5000")
    check(os.stat(p).st_size == 5000, "stat through the mount while open: 5000")
    f.write(b"y" * 100)
check(creates() == n0 + 1, "the door made the file (creates counter)")
st = os.stat(p)
check(st.st_size == 5100 and (st.st_mode & 0o7777) == 0o644 and st.st_uid == 0,
      "size, mode less umask, owner through the mount: %d %o" % (st.st_size, st.st_mode))
check(content(p) == b"x" * 5000 + b"y" * 100, "bytes read back through the mount")

# The umask the program sets is the one the door applies.
os.umask(0o077)
with open(os.path.join(d, "u.bin"), "wb") as f:
    f.write(b"u")
check((os.stat(os.path.join(d, "u.bin")).st_mode & 0o777) == 0o600, "umask 077 gives 0600")
os.umask(0o022)

# An existing name: exclusive creates fail, others open it through the mount.
try:
    open(p, "xb")
    check(False, "open(x) of an existing file raises FileExistsError")
except FileExistsError:
    pass
n1 = creates()
with open(p, "wb") as f:
    f.write(b"again")
check(creates() == n1 and content(p) == b"again", "an existing file is truncated through the mount")

# Seeking and positioned writes.
q = os.path.join(d, "seek.bin")
fd = os.open(q, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"abcdef")
check(os.lseek(fd, 0, os.SEEK_CUR) == 6, "lseek SEEK_CUR after a write")
check(os.lseek(fd, 2, os.SEEK_SET) == 2, "lseek SEEK_SET")
os.write(fd, b"ZZ")
check(os.lseek(fd, 0, os.SEEK_END) == 6, "lseek SEEK_END")
os.pwrite(fd, b"!", 10)
os.fsync(fd)
try:
    os.read(fd, 1)
    check(False, "read of a write-only descriptor fails")
except OSError as e:
    check(e.errno == 9, "read of a write-only descriptor: EBADF")
check(not os.isatty(fd), "isatty is false")
os.close(fd)
check(content(q) == b"abZZef\0\0\0\0!", "positioned writes and the hole: %r" % content(q))

# Calls only the kernel serves: the file moves to it, and stays right.
t = os.path.join(d, "trunc.bin")
fd = os.open(t, os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"0123456789")
os.ftruncate(fd, 4)
os.write(fd, b"X")
os.fchmod(fd, 0o600)
fd2 = os.dup(fd)
os.write(fd2, b"Y")
os.close(fd)
os.close(fd2)
check(content(t) == b"0123\0\0\0\0\0\0XY" and (os.stat(t).st_mode & 0o777) == 0o600,
      "ftruncate, fchmod, dup after door writes: %r" % content(t))

# A door descriptor names a file. The *at calls refuse it as a directory
# (ENOTDIR), as the kernel does, and never resolve a name in the file's
# directory (the descriptor is an O_PATH one of that directory inside):
# unlinkat(fd, "sibling") removed the sibling before. An absolute path
# ignores the descriptor; AT_EMPTY_PATH, a NULL path (futimens) and the
# f*xattr calls act on the file itself, handed to the kernel first.
AT_EMPTY_PATH = 0x1000
libc = ctypes.CDLL(None, use_errno=True)
sib = os.path.join(d, "sibling")
fd = os.open(sib, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"s")
os.close(fd)
n2 = creates()
at = os.path.join(d, "at.bin")
fd = os.open(at, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
check(creates() == n2 + 1, "the door made at.bin")
for what, fn in (("unlinkat", lambda: os.unlink("sibling", dir_fd=fd)),
                 ("fstatat", lambda: os.stat("sibling", dir_fd=fd)),
                 ("openat", lambda: os.open("sibling", os.O_RDONLY, dir_fd=fd)),
                 ("mkdirat", lambda: os.mkdir("sub", dir_fd=fd)),
                 ("mkfifoat", lambda: os.mkfifo("fifo", dir_fd=fd)),
                 ("renameat", lambda: os.rename("sibling", "moved", src_dir_fd=fd)),
                 ("renameat (target)", lambda: os.rename(sib, "moved", dst_dir_fd=fd)),
                 ("linkat", lambda: os.link("sibling", "l", src_dir_fd=fd)),
                 ("symlinkat", lambda: os.symlink("t", "sl", dir_fd=fd)),
                 ("readlinkat", lambda: os.readlink("sibling", dir_fd=fd)),
                 ("fchmodat", lambda: os.chmod("sibling", 0o600, dir_fd=fd)),
                 ("fchownat", lambda: os.chown("sibling", 4242, 4242, dir_fd=fd)),
                 ("utimensat", lambda: os.utime("sibling", (1, 1), dir_fd=fd))):
    try:
        fn()
        check(False, "%s relative to a door descriptor fails" % what)
    except NotADirectoryError:
        pass
    except OSError as e:
        check(False, "%s relative to a door descriptor: ENOTDIR, not %s" % (what, e))
check(not os.access("sibling", os.F_OK, dir_fd=fd), "faccessat relative to a door descriptor fails")
st = os.stat(sib)
check(content(sib) == b"s" and (st.st_mode & 0o777) == 0o644 and st.st_uid == 0 and
      st.st_mtime > 1 and sorted(os.listdir(d)).count("sibling") == 1 and
      not set(os.listdir(d)) & {"sub", "fifo", "moved", "l", "sl"},
      "nothing done in the directory through a door descriptor: %r" % sorted(os.listdir(d)))
check(os.stat(sib, dir_fd=fd).st_size == 1, "an absolute path ignores the door descriptor")
os.close(os.open(sib, os.O_RDONLY, dir_fd=fd))
os.write(fd, b"at")
os.utime(fd, (1000, 2000))
check(os.stat(at).st_mtime == 2000 and os.stat(d).st_mtime != 2000,
      "futimens sets the file's times, not the directory's")
check(libc.fchownat(fd, b"", 4242, -1, AT_EMPTY_PATH) == 0 and os.stat(at).st_uid == 4242 and
      os.stat(d).st_uid == 0, "fchownat(AT_EMPTY_PATH) changes the file's owner, not the directory's")
os.setxattr(fd, "user.k", b"v")
check(os.getxattr(at, "user.k") == b"v" and os.getxattr(fd, "user.k") == b"v" and
      "user.k" in os.listxattr(fd), "f*xattr on a door descriptor")
os.removexattr(fd, "user.k")
check("user.k" not in os.listxattr(at), "fremovexattr on a door descriptor")
os.close(fd)
check(content(at) == b"at", "at.bin written: %r" % content(at))
# dup2 onto a door descriptor closes it: the number is the directory's now.
fd = os.open(os.path.join(d, "dup2.bin"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
os.dup2(dfd, fd)
os.close(dfd)
try:
    check(os.stat("sibling", dir_fd=fd).st_size == 1, "dup2 onto a door descriptor: a directory there")
except OSError as e:
    check(False, "dup2 onto a door descriptor: a directory there, not %s" % e)
os.close(fd)
# A failed dup2 onto a door descriptor leaves it the door's.
fd = os.open(os.path.join(d, "dup2fail.bin"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
try:
    os.dup2(987, fd)
    check(False, "dup2 of a closed descriptor fails")
except OSError as e:
    check(e.errno == errno.EBADF, "dup2 of a closed descriptor: EBADF, not %s" % e)
os.write(fd, b"still")
check(os.fstat(fd).st_size == 5, "a door descriptor after a failed dup2 onto it: a file of 5 bytes")
# futimesat with no path, and fstatat with no path and AT_EMPTY_PATH
# (Linux 6.11): the file itself, not its directory.
tv = (ctypes.c_long * 4)(3000, 0, 4000, 0)
check(libc.futimesat(fd, None, tv) == 0 and os.stat(os.path.join(d, "dup2fail.bin")).st_mtime == 4000,
      "futimesat(fd, NULL) sets the file's times (errno %d)" % ctypes.get_errno())
os.close(fd)
fd = os.open(os.path.join(d, "nopath.bin"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
buf = ctypes.create_string_buffer(512)
r = libc.fstatat(fd, None, buf, AT_EMPTY_PATH)
mode = int.from_bytes(buf.raw[24:28], "little")  # struct stat's st_mode (x86_64)
check(r == -1 or (mode & 0o170000) == 0o100000,
      "fstatat(fd, NULL, AT_EMPTY_PATH) of a door descriptor: a regular file, not %o" % mode)
os.close(fd)
# No path: the kernel's EFAULT, not a crash in the wrappers.
for what, call in (("fstatat", lambda: libc.fstatat(-100, None, buf, 0)),
                   ("statx", lambda: libc.statx(-100, None, 0, 0xfff, buf)),
                   ("openat", lambda: libc.openat(-100, None, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))):
    r = call()
    check(r == -1 and ctypes.get_errno() == errno.EFAULT, "%s with no path: EFAULT (%d, %d)" % (what, r, ctypes.get_errno()))

# fork: the child writes through what it inherited.
fk = os.path.join(d, "fork.bin")
with open(fk, "wb") as f:
    f.write(b"parent;")
    f.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(f.fileno(), b"child;")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    f.write(b"after")
check(content(fk) == b"parent;child;after", "fork: %r" % content(fk))

# A subprocess writing to a door file as its stdout.
sp = os.path.join(d, "sub.txt")
with open(sp, "wb") as f:
    f.write(b"first\n")
    f.flush()
    subprocess.run(["/bin/echo", "second"], stdout=f, check=True)
check(content(sp) == b"first\nsecond\n", "subprocess stdout: %r" % content(sp))

# Threads creating at once.
def worker(k):
    for i in range(100):
        with open(os.path.join(d, "t%d-%d" % (k, i)), "wb") as f:
            f.write(bytes([k]) * (i + 1))

s0 = statfs_requests()
ths = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
for th in ths:
    th.start()
for th in ths:
    th.join()
# The door asks the VFS (statmount) whether the mount is read-only; it
# used to ask fstatvfs, a STATFS round trip through the mount per create
# (still its way on kernels before 6.8).
if have_statmount():
    check(statfs_requests() - s0 < 10,
          "400 door creates sent %d STATFS through the mount" % (statfs_requests() - s0))
bad = [(k, i) for k in range(4) for i in range(100)
       if content(os.path.join(d, "t%d-%d" % (k, i))) != bytes([k]) * (i + 1)]
check(not bad, "400 files from 4 threads: %d wrong" % len(bad))

# Renamed while open: writes still reach it; what needs the kernel says so.
r = os.path.join(d, "ren.bin")
fd = os.open(r, os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"r1")
os.rename(r, r + ".moved")
os.write(fd, b"r2")
try:
    os.ftruncate(fd, 1)
    check(False, "ftruncate of a renamed door file fails")
except OSError:
    pass
os.close(fd)
check(content(r + ".moved") == b"r1r2", "writes after a rename: %r" % content(r + ".moved"))

# Another user in a directory it may not write to: EACCES, nothing made.
os.mkdir(os.path.join(d, "ro"), 0o755)
def refused():
    try:
        open(os.path.join(d, "ro", "f"), "wb")
        return False
    except PermissionError:
        return True


check(as_other(refused), "another user is refused in a 0755 root directory")
check(not os.path.exists(os.path.join(d, "ro", "f")), "nothing made there")

# An existing file in a directory the user may not write to: open(2)
# opens it (the door refuses, libc serves).
os.mkdir(os.path.join(d, "own"), 0o755)
mine = os.path.join(d, "own", "mine.log")
with open(mine, "wb") as f:
    f.write(b"old")
os.chown(mine, 4242, 4243)
# And root in a directory whose bits refuse writing: the kernel lets it.
os.mkdir(os.path.join(d, "r555"), 0o555)
with open(os.path.join(d, "r555", "root.bin"), "wb") as f:
    f.write(b"root")
check(content(os.path.join(d, "r555", "root.bin")) == b"root", "root creates in a 0555 directory")
def rewrite():
    with open(mine, "wb") as f:
        f.write(b"new")
    return True


check(as_other(rewrite) and content(mine) == b"new",
      "its owner opens an existing file in a 0755 root directory")

# A read-only bind mount of a directory of the volume: EROFS, as open(2).
ro = os.path.join(os.environ.get("MNT_TMP", "/tmp"), "robind")
os.makedirs(ro, exist_ok=True)
if subprocess.run(["mount", "--bind", "-o", "ro", d, ro]).returncode == 0:
    try:
        try:
            open(os.path.join(ro, "nope.bin"), "wb")
            check(False, "a create on a read-only bind mount fails")
        except OSError as e:
            check(e.errno == 30, "a create on a read-only bind mount: EROFS (%s)" % e)
        check(not os.path.exists(os.path.join(d, "nope.bin")), "nothing made behind it")
    finally:
        subprocess.run(["umount", ro])
else:
    check(False, "mount --bind -o ro for the read-only check")

# fork with a door file that cannot go to the kernel (renamed away): the
# child must not write into another file through a reused connection.
lost = os.path.join(d, "lost.bin")
fd = os.open(lost, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"L")
os.rename(lost, lost + ".away")
pid = os.fork()
if pid == 0:
    rc = 0
    try:
        with open(os.path.join(d, "childnew.bin"), "wb") as f:
            f.write(b"C")
            f.flush()
            # With childnew.bin open through a connection of its own,
            # which may have taken the number of the parent's.
            try:
                os.write(fd, b"X")
                rc = 1  # it must fail: the door's descriptor is no file here
            except OSError:
                pass
    finally:
        os._exit(rc)
_, status = os.waitpid(pid, 0)
os.close(fd)
check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0,
      "a door descriptor the fork could not materialize fails in the child (status %d)" % status)
check(content(os.path.join(d, "childnew.bin")) == b"C" and content(lost + ".away") == b"L",
      "nothing written into the wrong file: %r %r" % (content(os.path.join(d, "childnew.bin")),
                                                      content(lost + ".away")))

# A door descriptor closed with a raw system call stays in the door's table
# until it is looked up again. A memfd the library then makes for a bigger
# bounce region takes its number: the library's own calls on it (ftruncate,
# fcntl, mmap) must not reach the door, which would wait for the lock its
# thread holds during the write (it did: the write hung).
sys_close = {"x86_64": 3, "aarch64": 57}.get(os.uname().machine)
if sys_close is None:
    print("skipped: the raw close check (close's system call number on %s)" % os.uname().machine)
else:
    libc = ctypes.CDLL(None, use_errno=True)
    n2 = creates()
    b = os.open(os.path.join(d, "raw_b.bin"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    os.write(b, b"b" * 4096)
    a = os.open(os.path.join(d, "raw_a.bin"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    check(creates() == n2 + 2, "both files of the raw close check are the door's")
    fillers = []  # every free number below a's, so that a's is the lowest free
    while True:
        x = os.open("/dev/null", os.O_RDONLY)
        if x > a:
            os.close(x)
            break
        fillers.append(x)
    big = 48 << 20  # more than any bounce region made so far: a new memfd
    watchdog = threading.Timer(60, lambda: (print("FAIL: a write after a raw close of a door "
                                                  "descriptor hung", flush=True), os._exit(1)))
    watchdog.daemon = True
    watchdog.start()
    try:
        check(libc.syscall(sys_close, a) == 0, "a raw close system call of a door descriptor")
        check(os.write(b, b"B" * big) == big, "a write that needs a new bounce region after it")
        os.close(b)
    finally:
        watchdog.cancel()
    for x in fillers:
        os.close(x)
    check(content(os.path.join(d, "raw_b.bin")) == b"b" * 4096 + b"B" * big,
          "its bytes read back through the mount")

print("%d failed checks" % fails if fails else "all checks passed", flush=True)
sys.exit(1 if fails else 0)
