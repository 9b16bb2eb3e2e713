#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The tree's layering holds (issue 34), so that a newcomer can trust it.

Over the sources of striping/, fs/, client/ and include/ (tests aside):
  - no include circle: no file includes itself, directly or through others
    (each `#include "x.h"` is resolved as the build resolves it: beside the
    including file, then in the folders the build adds to the include path);
  - the key/value store is used through its one header: a header of
    fs/store/ other than store.h (its *_i.h) is included only from fs/store/;
  - the core has no transport: nothing under fs/core/ or fs/store/ includes
    a FUSE header (<fuse*.h>, <linux/fuse.h>) or one of fs/fuse/;
  - no C source file is over 1,000 lines.

usage: test_includes.py SOURCE_DIR    (exit 0 pass, 1 fail)
"""

import argparse
import os
import re
import sys

DIRS = ("striping", "fs", "client", "include")
# The build's include path for quoted includes (fs/CMakeLists.txt,
# client/CMakeLists.txt, striping/CMakeLists.txt), after the file's own folder.
SEARCH = ("fs/core", "fs/store", "fs/fuse", "fs/native", "fs/tools", "include", "striping",
          "client")
MAX_LINES = 1000
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def sources(top):
    for d in DIRS:
        for root, dirs, files in os.walk(os.path.join(top, d)):
            dirs[:] = [x for x in dirs if not x.startswith("build") and x != "examples"]
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(root, f), top)


def resolve(top, src, name):
    for d in (os.path.dirname(src),) + SEARCH:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(top, p)):
            return p
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source_dir")
    top = os.path.realpath(p.parse_args().source_dir)
    problems = []
    graph = {}
    for src in sorted(sources(top)):
        with open(os.path.join(top, src), encoding="utf-8") as f:
            text = f.read()
        if src.endswith(".c") and text.count("\n") > MAX_LINES:
            problems.append(f"{src}: {text.count(chr(10))} lines (at most {MAX_LINES})")
        edges = graph.setdefault(src, [])
        for kind, name in INCLUDE.findall(text):
            core = src.startswith(("fs/core/", "fs/store/"))
            if core and (name.startswith("fuse") or name == "linux/fuse.h"):
                problems.append(f"{src}: includes <{name}>: the core has no transport")
            if kind != '"':
                continue
            dest = resolve(top, src, name)
            if not dest:
                continue
            edges.append(dest)
            if core and dest.startswith("fs/fuse/"):
                problems.append(f"{src}: includes {dest}: the core includes no door")
            if (dest.startswith("fs/store/") and dest != "fs/store/store.h"
                    and not src.startswith("fs/store/")):
                problems.append(f"{src}: includes {dest}: outside fs/store/ only store.h")
    # Circles: a depth-first walk; a file met again on the current path.
    state = {}
    path = []

    def walk(u):
        state[u] = 1
        path.append(u)
        for v in graph.get(u, ()):
            if state.get(v) == 1:
                problems.append("include circle: " + " -> ".join(path[path.index(v):] + [v]))
            elif v not in state:
                walk(v)
        path.pop()
        state[u] = 2

    sys.setrecursionlimit(10000)
    for u in sorted(graph):
        if u not in state:
            walk(u)
    for line in problems:
        print("FAIL:", line, file=sys.stderr)
    if problems:
        return 1
    edges = sum(len(v) for v in graph.values())
    print(f"{len(graph)} files, {edges} includes: no circle, the store behind store.h, "
          f"no transport in the core, no source over {MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
