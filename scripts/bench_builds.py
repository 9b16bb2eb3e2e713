# SPDX-License-Identifier: MIT
"""bench_builds.py: two builds of nvmefs side by side, round after round,
on the same emulated drives: is the newer one's mount no slower than the
older one's where one program moves much data (dd, torch.save/load, the
native client)? Issue 33's "no lower than today" was measured with it,
against the commit before that issue's work (docs/PERFORMANCE.md, "No
lower than today, and the 1 MiB read's copy profiled").

Usage: /usr/bin/python3 scripts/bench_builds.py [-r ROUNDS] [--opts OPTS]
           [--size SIZE] [--torch-mib N] [-o DIR] OLD NEW
  OLD, NEW      build directories, each with mkfs.nvmefs, nvmefs and
                nvmefs-bench (scripts/build.sh DIR -DCMAKE_BUILD_TYPE=Release)
  -r ROUNDS     rounds (default 6; an odd count runs OLD first once more)
  --opts OPTS   nvmefs -o options for both (default mode=direct: the
                default mount; each build picks its own default transport)
  --size SIZE   the dd and native client file, 1 MiB to 6 GiB (default 2G)
  --torch-mib N torch.save's state dict, 16 to 4096 MiB (default 1024)
  -o DIR        where the logs go: a new or empty directory (default a
                new one in /tmp)

Devices: 4 image files of 3 GiB in /dev/shm on loop devices, made once,
their pages allocated (fallocate); then dd's and the native client's
passes below on each build's mount, not measured (the first passes of a
run were up to 4 times slower than the rest, and its first native client
write, the old build's in three runs, up to 5 times).
Each round mounts OLD, then NEW (NEW first in every other round, so that
neither always runs second), each on a volume made afresh (mkfs.nvmefs
-f -K), and runs on it: dd write of SIZE (bs=1M conv=fsync), caches
dropped, dd read; bench.py's torch_io.py (torch.save with fsync, caches
dropped, torch.load, the tensors compared); nvmefs-bench --client write
of SIZE (4 threads x QD 8 x 4 MiB), caches dropped, its read 3 times over.
Memory is warmed before dd's write and read and before torch.save and
torch.load, as bench.py does ("Cold memory" there), and not before the
native client's passes, as bench.py. Each build runs its own
nvmefs-bench: the native protocol is the build's. Every command runs
under a time limit; a mount that does not answer gets its daemon killed.

Output: two lines per build per round (its transport, its figures),
then per figure, over the rounds where both builds have it, each build's
median and the median of the rounds' own NEW/OLD ratios (the two figures
of a ratio are measured half a minute apart, not a round apart: the
machine's slow spells last minutes), with each round's ratio. Needs
root, dd, python3-torch. Exit status 0 when every round ran, 128 +
the signal's number when one stopped it, else 1.
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import bench  # noqa: E402  (found next to this file)
import nvmefs_emu as emu  # noqa: E402
from nvmefs_emu import MIB, GIB  # noqa: E402

NDEV = 4
DEV_SIZE = 3 * GIB
NATIVE = ["--block-size", str(bench.NATIVE_BS), "--queue-depth", str(bench.NATIVE_QD),
          "--threads", str(bench.NATIVE_THREADS)]
NATIVE_READ_LOOPS = 3
TORCH_MIB_MAX = 4096  # its tensors twice in memory, beside 12 GiB of images
# (key, label, unit) of every figure, in the order printed.
FIGURES = (("dd_write", "dd write", "MB/s"), ("dd_read", "dd read, cold", "MB/s"),
           ("torch_save", "torch.save (+fsync)", "GB/s"), ("torch_load", "torch.load, cold", "GB/s"),
           ("native_write", "native client write", "MB/s"), ("native_read", "native client read", "MB/s"))


def note(msg):
    print("bench_builds: " + msg, file=sys.stderr, flush=True)


def round_order(r):
    """The builds' order in round R (from 1): OLD first in odd rounds."""
    return ("old", "new") if r % 2 else ("new", "old")


def summary(rounds):
    """Lines for ROUNDS [{"old": {key: float}, "new": {key: float}}]: per
    figure, over the rounds where both builds have it, each build's median
    and the median of the rounds' own NEW/OLD ratios."""
    out = []
    for key, label, unit in FIGURES:
        paired = [r for r in rounds if key in r["new"] and r["old"].get(key)]
        old = [r["old"][key] for r in paired]
        new = [r["new"][key] for r in paired]
        ratios = [n / o for n, o in zip(new, old)]
        if not ratios:
            out.append("%-22s no round with both figures" % label)
            continue
        out.append("%-22s old %8.2f  new %8.2f %s  new/old %.2f (rounds: %s)"
                   % (label, bench.median(old), bench.median(new), unit, bench.median(ratios),
                      " ".join("%.2f" % x for x in ratios)))
    return out


class Pass:
    """One build's figures on a fresh volume: mount, measure, unmount."""

    def __init__(self, a, drives, mnt, run, logs):
        self.a = a
        self.drives = drives
        self.mnt = mnt
        self.run = run
        self.logs = logs
        self.daemon = None

    def log(self, name):
        return os.path.join(self.logs, name + ".log")

    def on_limit(self):
        """A command past its limit on the mount: the mount does not answer,
        and only the daemon's death ends a request stuck in it."""
        if self.daemon is not None and self.daemon.running():
            note("the mount did not answer in time: SIGKILL to the daemon %d" % self.daemon.pid)
            emu.sigkill(self.daemon.pid)

    def cmd(self, limit, name, argv):
        """ARGV's status under LIMIT s, its output in logs/NAME.log; a
        failure is named."""
        lg = self.log(name)
        rc = self.run.run(limit, lg, argv, on_stuck=self.on_limit, after_limit=self.on_limit)
        if rc:
            note("failed (status %d): %s (output in %s)" % (rc, emu.shell_line(argv), lg))
        return rc

    def remove(self, tag, path):
        """Delete PATH from the mount, under a time limit."""
        return self.cmd(300, tag + "-rm", ["rm", "-f", "--", path]) == 0

    def figure_failed(self, name, what):
        note("%s: no %s in %s" % (name, what, self.log(name)))
        return False

    def warm(self, nbytes):
        """Write and delete up to NBYTES in /dev/shm, so that the pass that
        follows allocates pages the host has just backed (bench.py's "Cold
        memory")."""
        b = emu.warm_size(nbytes)
        if b > 0:
            emu.warm_file(os.path.join(self.drives.imgdir, "warm"), b)

    def drop(self, name, warm=0):
        """Write back the mount, drop clean caches, warm WARM bytes."""
        if emu.drop_caches(self.run.run, self.mnt, self.log(name)):
            return False
        self.warm(warm)
        return True

    def mount(self, build, tag):
        devs = self.drives.devs
        if self.cmd(300, tag + "-mkfs", [build + "/mkfs.nvmefs", "-f", "-K"] + devs):
            return False
        argv = [build + "/nvmefs", ",".join(devs), self.mnt, "-o", self.a.opts, "-f"]
        self.run.log_line(emu.shell_line(argv))
        self.daemon, why = emu.start_daemon(argv, self.log(tag + "-daemon"), self.mnt,
                                            new_session=True)
        if why:
            note("%s: %s (%s)" % (argv[0], why, self.log(tag + "-daemon")))
            return False
        return True

    def transport(self):
        """The mount's transport as its .nvmefs/config says (read under a
        time limit); a build from before FUSE over io_uring names none:
        '/dev/fuse'."""
        rc, text = self.run.output(10, ["cat", self.mnt + "/.nvmefs/config"])
        return (bench.config_transport(text) or "/dev/fuse") if rc == 0 else "?"

    def umount(self, tag):
        why = emu.unmount_fuse(self.run.run, self.mnt, self.daemon, ("fusermount3", "-u"), 60, 60,
                               self.log(tag + "-umount"))
        if why:
            note(why)
            emu.force_unmount(self.mnt, "nvmefs", self.daemon, self.log(tag + "-umount"), note)
        self.daemon = None
        return why is None

    def dd(self, tag, figs):
        f, size = self.mnt + "/dd.bin", self.a.size
        self.warm(size)
        for op, argv in (("write", ["dd", "if=/dev/zero", "of=" + f, "bs=1M",
                                    "count=%d" % (size // MIB), "conv=fsync"]),
                         ("read", ["dd", "if=" + f, "of=/dev/null", "bs=1M"])):
            if op == "read" and not self.drop(tag + "-drop", size):
                return False
            lg = self.log("%s-dd-%s" % (tag, op))
            if self.cmd(600, "%s-dd-%s" % (tag, op), argv):
                return False
            try:
                with open(lg, errors="replace") as t:
                    figs["dd_" + op] = float(emu.dd_mbps(t.read(), size))
            except (OSError, emu.ParseError) as e:
                note("%s: %s" % (lg, e))
                return False
        return self.remove(tag, f)

    def torch(self, tag, figs, script):
        name = tag + "-torch"
        warm = emu.warm_size(2 * self.a.torch_mib * MIB)
        self.warm(warm)
        if self.cmd(1200, name, [bench.PY, script, self.mnt + "/state.pt", self.a.torch_mib,
                                 os.path.join(self.drives.imgdir, "warm"), warm]):
            return False
        rates = bench.torch_rates(emu.last_line(self.log(name)))
        if rates is None:
            return self.figure_failed(name, "torch_io.py result")
        figs["torch_save"], figs["torch_load"] = float(rates["save"]), float(rates["load"])
        return self.remove(tag, self.mnt + "/state.pt")

    def native(self, build, tag, figs):
        f = self.mnt + "/native.bin"
        for op, loops in (("write", 1), ("read", NATIVE_READ_LOOPS)):
            if op == "read" and not self.drop(tag + "-drop"):
                return False
            name = "%s-native-%s" % (tag, op)
            if self.cmd(600, name, [build + "/nvmefs-bench", "--client", f, "--" + op, "--size",
                                    self.a.size, "--loops", loops, "--json"] + NATIVE):
                return False
            fig = bench.native_figures(emu.last_line(self.log(name)), self.a.size * loops)
            if fig is None:
                return self.figure_failed(name, "result of %d bytes" % (self.a.size * loops))
            figs["native_" + op] = float(fig["mbps"])
        return self.remove(tag, f)

    def warm_up(self, build, tag):
        """dd's and the native client's passes on BUILD's mount, not
        measured."""
        figs = {}
        ok = self.mount(build, tag) and self.dd(tag, figs) and self.native(build, tag, figs)
        return self.umount(tag) and ok

    def measure(self, build, tag, script):
        """BUILD's figures {key: float} on a fresh volume (those it got
        before a failure), and whether all ran."""
        figs = {}
        ok = self.mount(build, tag)
        if ok:
            print("%s: %s, transport %s" % (tag, build, self.transport()), flush=True)
        ok = ok and self.dd(tag, figs) and self.torch(tag, figs, script) and self.native(build, tag, figs)
        return figs, self.umount(tag) and ok


def parse(argv):
    p = argparse.ArgumentParser(prog="bench_builds.py", description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("-r", dest="rounds", type=int, default=6)
    p.add_argument("--opts", default="mode=direct")
    p.add_argument("--size", default="2G")
    p.add_argument("--torch-mib", type=int, default=1024)
    p.add_argument("-o", dest="out")
    a = p.parse_args(argv)
    text, a.size = a.size, emu.parse_size(a.size)
    if a.size is None:
        p.error("--size: not a size: %r" % text)
    if a.size < MIB or a.size % MIB or a.size > DEV_SIZE * NDEV // 2:
        p.error("--size %s: must be whole MiB, from 1 to %d MiB" % (text, DEV_SIZE * NDEV // 2 // MIB))
    if a.rounds < 1:
        p.error("-r %d: must be at least 1" % a.rounds)
    if not 16 <= a.torch_mib <= TORCH_MIB_MAX:
        p.error("--torch-mib %d: must be from 16 to %d" % (a.torch_mib, TORCH_MIB_MAX))
    if a.out and os.path.exists(a.out) and (not os.path.isdir(a.out) or os.listdir(a.out)):
        p.error("-o %s: exists and is not an empty directory" % a.out)
    for b in (a.old, a.new):
        for exe in ("mkfs.nvmefs", "nvmefs", "nvmefs-bench"):
            if not os.access(os.path.join(b, exe), os.X_OK):
                p.error("%s: no %s there (build it: scripts/build.sh %s -DCMAKE_BUILD_TYPE=Release)"
                        % (b, exe, b))
    a.old, a.new = os.path.realpath(a.old), os.path.realpath(a.new)
    return a


def main(argv):
    a = parse(argv)
    if os.geteuid():
        note("needs root (loop devices, drop_caches)")
        return 1
    out = a.out or tempfile.mkdtemp(prefix="nvmefs-builds.", dir="/tmp")
    logs = os.path.join(out, "logs")
    os.makedirs(logs, exist_ok=True)
    script = os.path.join(out, "torch_io.py")
    with open(script, "w") as f:
        f.write(bench.TORCH_PY)
    run = emu.Runner(note, cmdlog=os.path.join(out, "commands.log"))
    drives = emu.Drives(note)
    rounds, ok, code, mnt, p = [], True, 1, None, None
    emu.raise_on_signals()
    try:
        mnt = tempfile.mkdtemp(prefix="nvmefs-builds.mnt.", dir="/tmp")
        p = Pass(a, drives, mnt, run, logs)
        drives.create(NDEV, DEV_SIZE, run.cmdlog)
        # Every image's tmpfs pages allocated now, not by the first
        # passes' writes, which would pay for the rest.
        for img in drives.images:
            fd = os.open(img, os.O_RDWR)
            try:
                os.posix_fallocate(fd, 0, DEV_SIZE)
            finally:
                os.close(fd)
        # Not counted: the first passes of a run wrote up to 4 times
        # slower than the rest, and its first native client write (the
        # old build's, in three runs) up to 5 times. Each build warms up.
        for which, build in (("old", a.old), ("new", a.new)):
            print("warm-up %s: %s" % (which, "done" if p.warm_up(build, "warm-up-" + which)
                                      else "failed (ignored)"), flush=True)
        for r in range(1, a.rounds + 1):
            figs = {}
            for which in round_order(r):
                build = a.old if which == "old" else a.new
                figs[which], done = p.measure(build, "r%d-%s" % (r, which), script)
                ok = ok and done
                print("round %d %s: %s" % (r, which, " ".join(
                    "%s %.2f" % (k, figs[which][k]) for k, _l, _u in FIGURES if k in figs[which])),
                    flush=True)
            rounds.append(figs)
    except emu.Stopped as e:
        note("stopped by signal %d" % e.signum)
        ok, code = False, e.code
    except (OSError, subprocess.CalledProcessError) as e:
        note("giving up: %s" % e)
        ok = False
    finally:
        emu.ignore_signals()
        if p is not None:
            run.stop_current(on_stuck=p.on_limit)
            if p.daemon is not None or emu.is_mounted(mnt):
                emu.force_unmount(mnt, "nvmefs", p.daemon, os.path.join(logs, "cleanup.log"), note)
        drives.teardown()
        if mnt and not emu.is_mounted(mnt):
            os.rmdir(mnt)
    print("OLD %s\nNEW %s\n-o %s; %d round(s); logs in %s" % (a.old, a.new, a.opts, len(rounds), out))
    print("\n".join(summary(rounds)))
    return 0 if ok else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
