#!/usr/bin/env python3
"""Every ```console block of a document is real: each `$ gpumem ...`
command is run (gpumem = the build's binary, from a scratch directory
that sees the repository's models/ and tools/ and the build tree as
build/), and the lines the document shows under it must appear in the
output (stdout then stderr) in that order, exactly; `...` stands for
lines left out. Lines of `gpumem verify` compare with their numbers
masked and runs of blanks as one (its bandwidth and times are measured,
and a table's columns widen with them). A command whose program
is not gpumem's own (e.g. `-- python train.py`) is not run.
Usage: check_readme.py GPUMEM BUILD_DIR ROOT [DOC...]"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

GPUMEM, BUILD, ROOT = (os.path.abspath(a) for a in sys.argv[1:4])
DOCS = sys.argv[4:] or ["README.md"]
NUM = re.compile(r"\d+(\.\d+)?")


def blocks(text):
    """(line number, [lines]) of each ```console block."""
    out, cur, start = [], None, 0
    for i, line in enumerate(text.splitlines(), 1):
        if cur is None and line.strip() == "```console":
            cur, start = [], i + 1
        elif cur is not None and line.strip() == "```":
            out.append((start, cur))
            cur = None
        elif cur is not None:
            cur.append(line)
    return out


def commands(lines):
    """(command, [expected lines]) in the order they appear."""
    out = []
    for line in lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line.rstrip())
    return out


def in_order(want, got, mask):
    """The first expected line not found after the previous one, or None."""
    norm = (lambda s: " ".join(NUM.sub("#", s).split())) if mask else \
        (lambda s: s)
    got = [norm(g.rstrip()) for g in got]
    j = 0
    for w in want:
        if w.strip() == "...":
            continue
        w = norm(w)
        while j < len(got) and got[j] != w:
            j += 1
        if j == len(got):
            return w
        j += 1
    return None


def main():
    failures = ran = 0
    scratch = tempfile.mkdtemp(prefix="gm-readme-")
    for name in ("models", "tools"):
        os.symlink(os.path.join(ROOT, name), os.path.join(scratch, name))
    os.symlink(BUILD, os.path.join(scratch, "build"))
    env = dict(os.environ, LC_ALL="C", COLUMNS="200")
    env.pop("GPUMEM_LOG", None)
    for doc in DOCS:
        with open(os.path.join(ROOT, doc)) as f:
            text = f.read()
        for start, lines in blocks(text):
            for cmd, want in commands(lines):
                if not cmd.startswith("gpumem ") or "python" in cmd:
                    continue
                script = "gpumem() { %s \"$@\"; }\n%s\n" % (GPUMEM, cmd)
                p = subprocess.run(["bash", "-c", script], cwd=scratch,
                                   env=env, capture_output=True, text=True,
                                   timeout=300)
                ran += 1
                got = (p.stdout + p.stderr).splitlines()
                miss = in_order(want, got, cmd.startswith("gpumem verify"))
                if miss is not None:
                    failures += 1
                    print("FAIL %s:%d: $ %s\n  expected line not in the "
                          "output (in order): %r\n  output:\n    %s" %
                          (doc, start, cmd, miss, "\n    ".join(got)))
                else:
                    print("ok   %s:%d: $ %s" % (doc, start, cmd))
    shutil.rmtree(scratch, ignore_errors=True)
    print("%d commands, %d failures" % (ran, failures))
    return 1 if failures or not ran else 0


sys.exit(main())
