#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The documents' references lead somewhere inside the repository.

In README.md, docs/*.md and every other README.md of the tree, each
relative Markdown link ([text](path), anchors aside) and each `code span`
that names a relative path starting with ./ or ../ must resolve to a file
or directory that exists and lies inside the repository: a clone holds
nothing else (README.md once sent readers to ../shared/DESIGN.md, outside
it). Links into README.md's own sections (#anchor) must name a heading.

The user guide's C example (the ```c block of docs/USER-GUIDE.md) must be
client/examples/roundtrip.c byte for byte: that file is the one built
(nvmefs-example-roundtrip) and tested (test_readme_example), so the guide
shows what was compiled.

usage: test_docs.py SOURCE_DIR    (exit 0 pass, 1 fail)
"""

import argparse
import difflib
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`(\.{1,2}/[^`\s]+)`")


def anchors(text):
    """GitHub's anchors of the Markdown headings in text."""
    out = set()
    for line in text.splitlines():
        m = re.match(r"#+\s+(.*)", line)
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(a)
    return out


def documents(top):
    """README.md, docs/*.md and the READMEs of the tree's folders."""
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build")
                   and x != "corpus"]
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), top)
            if f == "README.md" or (rel.startswith("docs" + os.sep) and f.endswith(".md")):
                yield rel


def check(top, rel, problems):
    path = os.path.join(top, rel)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    here = os.path.dirname(path)
    refs = [(m.group(1), "link") for m in LINK.finditer(text)]
    refs += [(m.group(1), "path") for m in CODE.finditer(text)]
    for target, kind in refs:
        if re.match(r"[a-z]+:", target) or target.startswith("/"):
            continue  # a URL, or an absolute path on the user's machine
        file, _, anchor = target.partition("#")
        if not file:
            if anchor and rel == "README.md" and anchor not in anchors(text):
                problems.append(f"{rel}: link to #{anchor}: no such heading")
            continue
        dest = os.path.realpath(os.path.join(here, file))
        if os.path.commonpath([dest, top]) != top:
            problems.append(f"{rel}: {kind} {target} leads outside the repository")
        elif not os.path.exists(dest):
            problems.append(f"{rel}: {kind} {target}: no such file")


EXAMPLE = os.path.join("client", "examples", "roundtrip.c")
GUIDE = os.path.join("docs", "USER-GUIDE.md")
C_BLOCK = re.compile(r"^```c\n(.*?)^```$", re.S | re.M)


def check_example(top, problems):
    """GUIDE's ```c block is EXAMPLE, byte for byte."""
    with open(os.path.join(top, GUIDE), encoding="utf-8") as f:
        blocks = C_BLOCK.findall(f.read())
    with open(os.path.join(top, EXAMPLE), encoding="utf-8") as f:
        want = f.read()
    if want in blocks:
        return
    if not blocks:
        problems.append(f"{GUIDE}: no ```c block showing {EXAMPLE}")
        return
    diff = difflib.unified_diff(blocks[0].splitlines(), want.splitlines(),
                                f"{GUIDE} ```c block", EXAMPLE, lineterm="")
    problems.append(f"{GUIDE}: its ```c block differs from {EXAMPLE}:\n"
                    + "\n".join(list(diff)[:40]))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source_dir")
    args = p.parse_args()
    top = os.path.realpath(args.source_dir)
    problems = []
    docs = sorted(documents(top))
    for rel in docs:
        check(top, rel, problems)
    check_example(top, problems)
    for line in problems:
        print("FAIL:", line, file=sys.stderr)
    if problems:
        return 1
    print(f"{len(docs)} documents, every reference inside the repository; "
          f"{GUIDE} shows {EXAMPLE} as it is")
    return 0


if __name__ == "__main__":
    sys.exit(main())
