# SPDX-License-Identifier: MIT
"""What nvmefs's Python programs share: emulated drives and mounts.

scripts/bench.py (run as scripts/bench.sh) and scripts/nvmefs-tune both
format volumes, start FUSE daemons in the foreground, wait for their
mounts, time commands that may hang on a mount that no longer answers,
unmount (killing a daemon that does not answer, which aborts its FUSE
connection), wait for daemons to exit (they hold the members until their
final checkpoint is written), drop caches and read fio's JSON. The bench
also makes emulated drives: image files in /dev/shm on loop devices,
capped with blkio throttle rules. This module holds all of that once.

The pure parts (sizes, fio and dd output, mountinfo, /proc stat lines)
take text and return values, so tests/test_benchlib.py checks them
without root. The rest acts on the machine and needs root.

Installed with nvmefs-tune (CMake puts it in share/nvmefs; the tuner looks
next to itself, then in ../share/nvmefs).
"""

import json
import math
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time

MIB = 1 << 20
GIB = 1 << 30
BLKIO = "/sys/fs/cgroup/blkio"

# Children get English messages and '.' as the decimal point (dd's summary
# is parsed).
CHILD_ENV = dict(os.environ, LC_ALL="C")

# ------------------------------------------------------------ sizes, text --


def parse_size(text):
    """Bytes for '123', '64K', '1M', '2G' (1024-based); None if not a size."""
    m = re.fullmatch(r"([0-9]+)([KkMmGg]?)", text)
    if not m:
        return None
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    return int(m.group(1)) * mult


def human_unit(nbytes):
    """The largest of G, M, K that divides NBYTES: 262144 -> '256K'."""
    for unit, div in (("G", GIB), ("M", MIB), ("K", 1024)):
        if nbytes >= div and nbytes % div == 0:
            return "%d%s" % (nbytes // div, unit)
    return str(nbytes)


def human_iec(nbytes):
    """'4 GiB' when whole GiB, else whole MiB: '512 MiB'."""
    if nbytes % GIB == 0:
        return "%d GiB" % (nbytes // GIB)
    return "%d MiB" % (nbytes // MIB)


def shell_word(word):
    """WORD as a shell reads it back; bare when nothing in it is special
    (commas of a member list stay bare)."""
    if re.fullmatch(r"[A-Za-z0-9_./,:=+@%-]+", word):
        return word
    return shlex.quote(word)


def shell_line(argv):
    """ARGV as one shell command line."""
    return " ".join(shell_word(str(a)) for a in argv)


def jq_number(x):
    """X printed as jq prints a number: no '.0' on whole numbers."""
    if x == int(x) and abs(x) < 1e17:
        return str(int(x))
    return repr(x)


def round_half_up(x, decimals=0):
    """jq's round (half away from zero) at DECIMALS places, for x >= 0."""
    scale = 10 ** decimals
    v = math.floor(x * scale + 0.5)
    return v / scale if decimals else v


# ----------------------------------------------------------- fio and dd --


class ParseError(Exception):
    """A tool's output does not say what was expected."""


def fio_job(text):
    """The first job of fio's JSON output TEXT. Anything before the first
    '{' (fio's notes) is skipped; a job error is a ParseError."""
    start = text.find("{")
    if start < 0:
        raise ParseError("no JSON in fio's output")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
        job = data["jobs"][0]
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise ParseError("fio's JSON has no job: %s" % e) from None
    if job.get("error"):
        raise ParseError("fio: job error %d" % job["error"])
    return job


def fio_bytes_bw(text, op):
    """(io_bytes, bw_bytes) of OP ('read' or 'write') in fio's JSON TEXT
    (with group_reporting: all jobs together)."""
    job = fio_job(text)
    try:
        o = job[op]
        return int(o["io_bytes"]), float(o["bw_bytes"])
    except (KeyError, TypeError, ValueError) as e:
        raise ParseError("fio's JSON has no %s figures: %s" % (op, e)) from None


def fio_mbps_exact(text, op, want):
    """MB/s of OP (1 decimal, as a jq number) from fio's JSON TEXT, which
    must have moved exactly WANT bytes."""
    io, bw = fio_bytes_bw(text, op)
    if io != want or bw <= 0:
        raise ParseError("moved %d bytes, expected %d" % (io, want))
    return jq_number(round_half_up(bw / 1e6, 1))


def dd_mbps(text, want):
    """MB/s ('%.1f') from dd's last summary line ('N bytes (...) copied,
    S s, ...'), which must say WANT bytes."""
    found = None
    for line in text.splitlines():
        if " copied, " in line:
            m = re.match(r"\s*([0-9]+)", line)
            s = re.search(r" copied, ([0-9.eE+-]+) s,", line)
            if m and s:
                found = (int(m.group(1)), float(s.group(1)))
    if not found or found[0] != want or found[1] <= 0:
        raise ParseError("no dd summary for %d bytes" % want)
    return "%.1f" % (found[0] / found[1] / 1e6)


# ------------------------------------------------------------ mountinfo --


def mi_unescape(field):
    """A /proc/*/mountinfo (or mounts) field with its octal escapes undone."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text):
    """/proc/self/mountinfo as a list of dicts: devnum (MAJ:MIN), root,
    target, fstype, source, options (fields unescaped)."""
    out = []
    for line in text.splitlines():
        f = line.split(" ")
        if len(f) < 10 or "-" not in f[6:]:
            continue
        sep = f.index("-", 6)
        out.append({
            "devnum": f[2],
            "root": mi_unescape(f[3]),
            "target": mi_unescape(f[4]),
            "options": f[5],
            "fstype": f[sep + 1],
            "source": mi_unescape(f[sep + 2]),
        })
    return out


def parse_mounts(text):
    """/proc/self/mounts as a list of (source, target, fstype)."""
    out = []
    for line in text.splitlines():
        f = line.split(" ")
        if len(f) >= 3:
            out.append((mi_unescape(f[0]), mi_unescape(f[1]), f[2]))
    return out


def mounts():
    """The mount table (reads it, never the mount points: a hung daemon
    would hang stat())."""
    with open("/proc/self/mountinfo") as f:
        return parse_mountinfo(f.read())


def mount_at(path):
    """The topmost mount on PATH, or None."""
    found = None
    for m in mounts():
        if m["target"] == path:
            found = m
    return found


def is_mounted(path):
    return path is not None and mount_at(path) is not None


# -------------------------------------------------------------- processes --


def stat_state(stat_line):
    """The state letter of a /proc/PID/stat line ('R', 'S', 'Z', ...)."""
    rest = stat_line[stat_line.rindex(")") + 2:]
    return rest.split(" ", 1)[0]


def alive(pid):
    """PID exists and some thread of it is not a zombie (after SIGKILL the
    main thread can be a zombie while others still exit holding files)."""
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return False
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                if stat_state(f.read()) not in ("Z", "X"):
                    return True
        except (OSError, ValueError):
            continue
    return False


def stopped(pid):
    """PID is stopped (SIGSTOP, a debugger): it will not exit by itself."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return stat_state(f.read()) in ("T", "t")
    except (OSError, ValueError):
        return False


def proc_status_kib(pid, key):
    """A kB figure (VmHWM, VmRSS...) from /proc/PID/status, or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def meminfo_kib(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise ParseError("no %s in /proc/meminfo" % key)


def fs_avail(path):
    """Bytes free for unprivileged users on PATH's file system (df avail)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def sigkill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def signal_pid(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


# --------------------------------------------------------------- commands --


class Stopped(Exception):
    """A signal arrived: clean up and exit with CODE (128 + signal)."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.code = 128 + signum


def raise_on_signals(signums=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):
    """Turn SIGNUMS into Stopped exceptions, so that finally: blocks clean
    up (the shell versions' EXIT/INT/TERM/HUP traps)."""
    def handler(signum, _frame):
        raise Stopped(signum)
    for s in signums:
        signal.signal(s, handler)


def ignore_signals(signums=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):
    """Cleanup is bounded: finish it even on a second ^C."""
    for s in signums:
        signal.signal(s, signal.SIG_IGN)


def wait_exit(proc, secs):
    """Wait up to SECS for Popen PROC to exit (all its threads: waitpid
    returns only then); its status or None."""
    try:
        return proc.wait(timeout=secs)
    except subprocess.TimeoutExpired:
        return None


class Runner:
    """Runs commands one at a time under time limits.

    run() starts ARGV (stdin /dev/null, stdout and stderr appended to a
    log), waits at most LIMIT seconds and returns its status, or 124 when it
    had to be stopped. A command stuck in a FUSE request cannot die until
    the daemon does, so past the limit it gets SIGTERM, then after 5 s the
    hook on_stuck (which kills the daemon) and SIGKILL.
    cmdlog: a file that gets every command line and its status and time.
    note: prints one message (the program's own prefix and style).
    limit_cap: every limit is lowered to this (tests of the time-out path).
    """

    def __init__(self, note, cmdlog=None, limit_cap=None):
        self.note = note
        self.cmdlog = cmdlog
        self.limit_cap = limit_cap
        self.current = None  # the Popen run() waits for
        self.timed_out = False  # the last run() hit its limit

    def log_line(self, text):
        if self.cmdlog:
            with open(self.cmdlog, "a") as f:
                f.write(text + "\n")

    def run(self, limit, log, argv, on_stuck=None, after_limit=None, quiet=False):
        """ARGV's status (124: stopped at LIMIT seconds). on_stuck(): called
        when the command survives SIGTERM; after_limit(): called after a
        stopped command is gone (both optional)."""
        if self.limit_cap and limit > self.limit_cap:
            limit = self.limit_cap
        if not quiet:
            self.log_line(shell_line(argv))
        t0 = time.monotonic()
        self.timed_out = False
        with open(log, "ab") as out:
            try:
                self.current = subprocess.Popen(
                    [str(a) for a in argv], stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, env=CHILD_ENV)
            except OSError as e:
                out.write(("%s: %s\n" % (argv[0], e)).encode())
                rc = 127
            else:
                rc = wait_exit(self.current, limit)
                if rc is None:
                    self.note("time limit of %d s reached, stopping: %s" % (limit, " ".join(map(str, argv))))
                    self.timed_out = True
                    self.stop_current(on_stuck)
                    if after_limit:
                        after_limit()
                    rc = 124
                elif rc < 0:
                    rc = 128 - rc  # killed by signal -rc: as the shell says it
                self.current = None
        if not quiet:
            self.log_line("#   -> status %d, %.2f s" % (rc, time.monotonic() - t0))
        return rc

    def stop_current(self, on_stuck=None):
        """Stop the running command: SIGTERM; 5 s later on_stuck() and
        SIGKILL; then reap it (bounded: one stuck in an uninterruptible
        wait is left)."""
        p = self.current
        if p is None or p.poll() is not None:
            return
        signal_pid(p.pid, signal.SIGTERM)
        if wait_exit(p, 5) is None:
            if on_stuck:
                on_stuck()
            sigkill(p.pid)
            wait_exit(p, 30)

    def output(self, limit, argv, merge=False):
        """(status, stdout text) of a short command; stderr discarded, or
        with MERGE part of the text."""
        try:
            r = subprocess.run([str(a) for a in argv], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT if merge else subprocess.DEVNULL,
                               env=CHILD_ENV, timeout=limit, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return 124, ""
        return r.returncode, r.stdout.decode(errors="replace")


def bg_wait(limit, log, argv):
    """Run ARGV (output appended to LOG) for at most LIMIT seconds, not
    logged as a command; its status, or 124 (then it is left running: a
    process stuck in a FUSE request cannot die until the daemon does)."""
    with open(log, "ab") as out:
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, env=CHILD_ENV)
        except OSError:
            return 127
    rc = wait_exit(p, limit)
    return 124 if rc is None else rc


def last_line(path, skip_prefix=None):
    """The last line of PATH (not starting with SKIP_PREFIX), or ''."""
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip("\n") for l in f]
    except OSError:
        return ""
    if skip_prefix:
        lines = [l for l in lines if not l.startswith(skip_prefix)]
    return lines[-1] if lines else ""


def tail(path, n):
    try:
        with open(path, errors="replace") as f:
            return f.readlines()[-n:]
    except OSError:
        return []


# ------------------------------------------------------------ FUSE daemons --


class Daemon:
    """A FUSE daemon (nvmefs, fuse_null) run in the foreground (-f) as our
    child, its output appended to LOG."""

    def __init__(self, argv, log, new_session=False):
        self.argv = [str(a) for a in argv]
        self.log = log
        with open(log, "ab") as out:
            # new_session: a Ctrl-C reaches us first, and we unmount in
            # order.
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=CHILD_ENV,
                                         start_new_session=new_session)
        self.pid = self.proc.pid
        self.status = None

    def running(self):
        if self.status is not None:
            return False
        st = self.proc.poll()
        if st is not None:
            self.status = st
            return False
        return True

    def wait(self, secs):
        """Its exit status after up to SECS seconds, or None."""
        if self.status is None:
            self.status = wait_exit(self.proc, secs)
        return self.status

    def kill(self, note=None, why=""):
        """SIGKILL: aborts its FUSE connection, so whatever waits in a
        request on the mount fails (ENOTCONN) instead of hanging. Reaped."""
        if self.running():
            if note:
                note("%s: SIGKILL to the FUSE daemon %d" % (why, self.pid))
            sigkill(self.pid)
        self.wait(10)

    def stop(self, grace, note=None):
        """After an unmount: let it write its final checkpoint for up to
        GRACE s (a stopped one will not), then SIGTERM (and SIGCONT), 5 s
        more, then SIGKILL; waits until it has exited, so that its images
        are free."""
        end = time.monotonic() + grace
        warned = False
        while self.running() and not stopped(self.pid) and time.monotonic() < end:
            if note and not warned and time.monotonic() > end - grace + 2:
                note("waiting for the daemon (pid %d) to exit" % self.pid)
                warned = True
            self.wait(0.1)
        if self.running():
            signal_pid(self.pid, signal.SIGTERM)
            signal_pid(self.pid, signal.SIGCONT)
            self.wait(5)
        self.kill(note, "still running after unmounting")

    def peak_rss_mib(self):
        """VmHWM in MiB ('%.1f'), or None."""
        kib = proc_status_kib(self.pid, "VmHWM")
        return None if kib is None else "%.1f" % (kib / 1024)


def start_daemon(argv, log, mnt, timeout=30, new_session=False):
    """Start the FUSE daemon ARGV and wait until MNT is in the mount table.
    (daemon, None), or (None, why) when it exited or did not mount in
    TIMEOUT s (then it is SIGKILLed). The mount table is polled every
    10 ms: bench.py --only scale times mounts from the start to here."""
    try:
        d = Daemon(argv, log, new_session)
    except OSError as e:
        return None, "could not be started (%s)" % e
    end = time.monotonic() + timeout
    while not is_mounted(mnt):
        if not d.running():
            return None, "exited (status %d) without mounting" % d.status
        if time.monotonic() >= end:
            return d, "not mounted after %d s" % timeout
        time.sleep(0.01)
    return d, None


def unmount_fuse(run, mnt, daemon, umount_argv, limit, exit_limit, log):
    """Unmount MNT (UMOUNT_ARGV + [MNT] under RUN, for LIMIT s) and wait up
    to EXIT_LIMIT s for DAEMON to exit (it writes a final checkpoint and
    holds the members until then). None, or why it failed (the daemon is
    then left for force_unmount)."""
    if is_mounted(mnt):
        argv = list(umount_argv) + [mnt]
        rc = run(limit, log, argv)
        if rc == 124:
            return "%s: not done after %d s" % (shell_line(argv), limit)
        if rc:
            line = last_line(log)
            return "%s failed (status %d)%s" % (shell_line(argv), rc, ": " + line if line else "")
    if daemon is None:
        return None
    st = daemon.wait(exit_limit)
    if st is None:
        return "daemon (pid %d) still runs %d s after unmounting" % (daemon.pid, exit_limit)
    if st < 0:
        return "daemon was killed by signal %d" % -st
    if st != 0:
        return "daemon exited with status %d" % st
    return None


def force_unmount(mnt, fs, daemon, log, note, umount_argv=("fusermount3", "-u")):
    """Whatever it takes, nothing mounted on MNT and DAEMON gone. FS:
    'btrfs' (a kernel file system) or anything else (FUSE). A FUSE daemon
    that does not answer statfs in 5 s is not going to flush anything: it is
    killed rather than hung on in umount."""
    if is_mounted(mnt):
        if fs == "btrfs":
            if bg_wait(120, log, ["umount", mnt]) != 0:
                bg_wait(30, log, ["umount", "-l", mnt])
        else:
            if bg_wait(5, log, ["stat", "-f", mnt]) != 0 and daemon:
                daemon.kill(note, "no answer to statfs")
            if bg_wait(30, log, list(umount_argv) + [mnt]) != 0:
                if daemon:
                    daemon.kill(note, "unmounting failed")
                if bg_wait(10, log, ["fusermount3", "-u", "-z", mnt]) != 0:
                    bg_wait(10, log, ["umount", "-l", mnt])
    if daemon is not None:
        daemon.stop(30, note)


def drop_caches(run, mnt, log):
    """Write back MNT and drop clean caches; RUN's first failing status, or
    0."""
    rc = run(300, log, ["sync", "-f", mnt])
    if rc == 0:
        rc = run(60, log, ["sh", "-c", "echo 3 >/proc/sys/vm/drop_caches"])
    return rc


# ------------------------------------------------------------ cold memory --


def warm_size(want, reserve=2 * GIB, shm="/dev/shm"):
    """How much warm_memory may write for a pass of WANT bytes: at most
    MemAvailable - RESERVE and what SHM has room for (less 1 GiB), in whole
    MiB; 0 below 1 MiB."""
    mem = meminfo_kib("MemAvailable") * 1024 - reserve
    room = fs_avail(shm) - GIB
    return clamp_warm(want, mem, room)


def clamp_warm(want, mem, room):
    want = min(want, mem, room)
    if want < MIB:
        return 0
    return want // MIB * MIB


def warm_file(path, nbytes):
    """Write NBYTES of zeros to PATH in 1 MiB blocks and delete it (the
    pages the host then backs are the next allocation's)."""
    block = bytes(MIB)
    with open(path, "wb") as f:
        for _ in range(nbytes >> 20):
            f.write(block)
    os.unlink(path)


# ---------------------------------------------------------- emulated drives --


def devnum(path):
    """MAJ:MIN of the block device PATH."""
    st = os.stat(path)
    return "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))


def cgroup_v1_path(text, controller):
    """The cgroup path of CONTROLLER in a /proc/PID/cgroup TEXT, or None."""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            return parts[2]
    return None


def throttle_rules(text):
    """MAJ:MIN with a rule in a blkio.throttle.*_bps_device TEXT."""
    return {l.split()[0] for l in text.splitlines() if l.strip()}


class Drives:
    """N image files in a fresh directory under /dev/shm on loop devices,
    optionally capped with blkio throttle rules in the v1 root group.
    teardown() removes the rules, the loop devices and the images, also a
    device attached just before an interrupt and not yet recorded."""

    def __init__(self, note, blkio=BLKIO):
        self.note = note
        self.blkio = blkio
        self.imgdir = None
        self.images = []
        self.devs = []
        self.rules = []

    def create(self, n, size, cmdlog=None, prefix="nvmefs-bench."):
        self.imgdir = tempfile.mkdtemp(prefix=prefix, dir="/dev/shm")
        for k in range(n):
            f = os.path.join(self.imgdir, "d%d.img" % k)
            self.images.append(f)
            with open(f, "wb") as img:
                img.truncate(size)
            argv = ["losetup", "-f", "--show", "--", f]
            if cmdlog:
                with open(cmdlog, "a") as c:
                    c.write(shell_line(argv) + "\n")
            d = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               check=True, env=CHILD_ENV).stdout.decode().strip()
            self.devs.append(d)
            # A rule left on this device number (by a run that was killed)
            # would cap the uncapped setup.
            mm = devnum(d)
            if mm in self.rules_now():
                self.note("clearing a stale throttle rule on %s (%s)" % (d, mm))
                self.clear_rule(mm)

    def rules_now(self):
        out = set()
        for op in ("read", "write"):
            try:
                with open("%s/blkio.throttle.%s_bps_device" % (self.blkio, op)) as f:
                    out |= throttle_rules(f.read())
            except OSError:
                pass
        return out

    def set_rule(self, mm, bps):
        for op in ("read", "write"):
            with open("%s/blkio.throttle.%s_bps_device" % (self.blkio, op), "w") as f:
                f.write("%s %d\n" % (mm, bps))

    def clear_rule(self, mm):
        try:
            self.set_rule(mm, 0)
        except OSError:
            pass

    def cap(self, bps, cmdlog=None):
        """Throttle every device, read and write, in the root group."""
        for d in self.devs:
            mm = devnum(d)
            self.rules.append(mm)
            self.set_rule(mm, bps)
            if cmdlog:
                with open(cmdlog, "a") as c:
                    c.write("echo '%s %d' >%s/blkio.throttle.{read,write}_bps_device\n"
                            % (mm, bps, self.blkio))

    def teardown(self):
        for mm in self.rules:
            self.clear_rule(mm)
        self.rules = []
        for d in self.devs:
            quiet_run(["btrfs", "device", "scan", "--forget", d])
            quiet_run(["losetup", "-d", d])
        for f in self.images:
            if not os.path.exists(f):
                continue
            for _ in range(30):
                held = quiet_run(["losetup", "-n", "-O", "NAME", "-j", f]).split()
                if not held:
                    break
                for d in held:
                    quiet_run(["losetup", "-d", d])
                time.sleep(0.1)
            try:
                os.unlink(f)
            except OSError:
                pass
        self.devs = []
        self.images = []
        if self.imgdir:
            quiet_run(["rm", "-rf", "--", self.imgdir])
        self.imgdir = None


def quiet_run(argv, limit=60):
    """ARGV's stdout ('' if it could not run), stderr discarded: for
    cleanup, which must go on whatever fails."""
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, env=CHILD_ENV, timeout=limit, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout.decode(errors="replace")


def move_to_blkio_root(note, blkio=BLKIO):
    """Under cgroup v1 throttling is flat (a group's rules apply to its own
    tasks only): move this process into the root blkio group, where the
    rules go, so that everything it starts is charged there."""
    if not os.access(os.path.join(blkio, "cgroup.procs"), os.W_OK):
        return
    with open("/proc/self/cgroup") as f:
        own = cgroup_v1_path(f.read(), "blkio")
    if own is not None and own != "/":
        note("moving myself from blkio cgroup %s to the root group (the caps are set there)" % own)
        with open(os.path.join(blkio, "cgroup.procs"), "w") as f:
            f.write("%d\n" % os.getpid())
