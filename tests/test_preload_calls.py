#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Inside libnvmefs-preload.so, no code calls an interposer but the
interposers named in ALLOWED.

The preload exports libc's names (close, write, fcntl, ftruncate, mmap, ...):
its doors' interposers. A call to one of those names from inside the library
goes through the PLT to the interposer itself, which looks the descriptor up
in the door's table and, for an entry there, takes the door's lock. Code that
runs with that lock held (a door write, a materialize, the attach of a new
mount) then waits for its own thread: a door write hung for ever when the
client's ftruncate of a fresh memfd met a stale table entry (commit e00a6e4,
client/sys_i.h). So the library's own calls go to libc through REAL() in the
preload's files and through sys_i.h in the client's, and the only calls
between exported names are wrappers that hand a call to another wrapper
before any lock is taken: ALLOWED. A new call to an exported name fails this
test; if it is meant, add it to ALLOWED with the reason it takes no lock.

What it reads: the disassembly of the linked library (objdump -d), every
instruction that names NAME@plt where NAME is a function the library
exports (nm -D), with the function it lies in; names at one address are
aliases of one function (open64 of open), and GCC's split-off parts of a
function (writev.cold, x.part.0, x.constprop.0, x.isra.0) count as the
function. The pair open -> openat must be found, or the disassembly was
not read as expected. An ALLOWED pair allows every call between the two,
and a static helper inlined into a wrapper counts as the wrapper (the
Debug builds, which inline nothing, see the helper's own calls).

Not covered: calls that do not go through the PLT (a pointer taken of an
exported name, a build with -fno-plt, -Bsymbolic or
-fno-semantic-interposition: the self-check fails on the last three);
other libraries' calls (libnuma, which the client calls only
for a buffer placed on a given NUMA node; the read door's buffer is placed
anywhere, -1), and libc's own, which do not go through the PLT.

usage: test_preload_calls.py LIBRARY    (exit 0 pass, 1 fail, 77 skip)
"""

import collections
import re
import shutil
import subprocess
import sys

# (caller, callee): a wrapper handing the call on, with no lock held.
ALLOWED = {
    ("open", "openat"): "open(2) is openat(2) from the working directory",
    ("__open_2", "open"): "the fortified open",
    ("__openat_2", "openat"): "the fortified openat",
    ("creat", "open"): "creat is open(O_CREAT | O_TRUNC | O_WRONLY)",
    ("writev", "write"): "a door descriptor's writev, one write per buffer",
    ("fstat64", "fstat"): "the same struct on a 64-bit ABI",
    ("fstatat", "fstat"): "AT_EMPTY_PATH on a door descriptor",
    ("fstatat64", "fstatat"): "the same struct on a 64-bit ABI",
    ("statx", "fstat"): "AT_EMPTY_PATH on a door descriptor",
    ("closefrom", "close_range"): "glibc's closefrom makes its own system call",
    ("closefrom", "close"): "closefrom without close_range, one close per number",
}
SELF_CHECK = ("open", "openat")

FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
PLT_REF = re.compile(r"<([^>@+]+)@plt>")
# GCC's names for a function's parts and clones: writev.cold, x.part.0, ...
CLONE = re.compile(r"\.(cold|part|constprop|isra|localalias)(\.[0-9]+)?$")


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def exported(lib):
    """{address: set of names} of the functions lib defines and exports."""
    by_addr = collections.defaultdict(set)
    for line in run(["nm", "-D", "--defined-only", lib]).splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TWi":
            by_addr[int(f[0], 16)].add(f[2].split("@")[0])
    return by_addr


def plt_calls(lib):
    """[(caller address, caller label, callee name)] of every PLT reference."""
    calls, addr, label = [], None, None
    for line in run(["objdump", "-d", "--no-show-raw-insn", lib]).splitlines():
        m = FUNC.match(line)
        if m:
            addr, label = int(m.group(1), 16), m.group(2)
            while CLONE.search(label):
                label = CLONE.sub("", label)
            continue
        for callee in PLT_REF.findall(line):
            calls.append((addr, label, callee))
    return calls


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    lib = sys.argv[1]
    for tool in ("nm", "objdump"):
        if not shutil.which(tool):
            print("SKIP: %s (binutils) not found" % tool)
            return 77
    by_addr = exported(lib)
    names = set().union(*by_addr.values())
    bad, seen = [], set()
    for addr, label, callee in plt_calls(lib):
        if callee not in names:
            continue
        callers = by_addr.get(addr, set()) | {label}
        ok = [c for c in callers if (c, callee) in ALLOWED]
        if ok:
            seen.add((ok[0], callee))
        else:
            bad.append("%s -> %s" % ("/".join(sorted(callers)), callee))
    if SELF_CHECK not in seen:
        print("FAIL: no call %s -> %s found in %s: the disassembly was not read as "
              "expected" % (SELF_CHECK + (lib,)))
        return 1
    for b in sorted(set(bad)):
        print("FAIL: %s: a call from inside the preload to its own interposer "
              "(REAL(), or sys_i.h in the client, reaches libc)" % b)
    if bad:
        return 1
    for pair in sorted(set(ALLOWED) - seen):
        print("note: %s -> %s is allowed but not made (inlined, or gone: drop it?)" % pair)
    print("ok: %d exported names, %d calls between them, all of them wrappers handing on "
          "(%s)" % (len(names), len(seen), ", ".join("%s -> %s" % p for p in sorted(seen))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
