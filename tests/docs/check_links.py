#!/usr/bin/env python3
"""check_links - every relative link of the repository's Markdown files
leads somewhere: the file exists and, for a link to a heading
(FILE.md#anchor or #anchor), the heading exists, its anchor made as GitHub
makes it (lower case, punctuation dropped, spaces to hyphens). Links to
web pages are not followed. Prints each broken link; exit 1 if any.

usage: check_links.py SRC_DIR
"""
import os
import re
import sys

SKIP_DIRS = {".git", "__pycache__"}


def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.startswith("```"):
            fence = not fence
        if fence or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        base, n = slug, 1
        while slug in out:
            slug = "%s-%d" % (base, n)
            n += 1
        out.add(slug)
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    bad = 0
    cache = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and
                   not x.startswith("build")]
        for f in files:
            if not f.endswith(".md"):
                continue
            md = os.path.join(d, f)
            text = open(md, encoding="utf-8", errors="replace").read()
            text = re.sub(r"```.*?```", "", text, flags=re.S)
            for target in re.findall(r"\]\(([^)\s]+)\)", text):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(d, path)) if path \
                    else md
                where = os.path.relpath(md, root)
                if not os.path.exists(dest):
                    print("%s: link to %s: no such file" % (where, target))
                    bad += 1
                    continue
                if anchor and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        print("%s: link to %s: no such heading"
                              % (where, target))
                        bad += 1
    if bad:
        print("check_links: %d broken link(s)" % bad, file=sys.stderr)
        return 1
    print("check_links: every relative link leads somewhere")
    return 0


if __name__ == "__main__":
    sys.exit(main())
