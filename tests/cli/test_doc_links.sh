#!/usr/bin/env bash
# Dead relative links in README.md and docs/*.md: every inline link
# `[text](target)` that is not a URL must name a file of the repository,
# and a `#anchor` (alone, or after a Markdown file) must name one of that
# file's headings, as GitHub derives anchors from them. Links inside code
# (fenced blocks and `inline code`) are not links and are left alone.
# Usage: test_doc_links.sh [REPO_ROOT]   (default: two levels above this script)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}

exec python3 - "$root" <<'EOF'
import glob
import os
import re
import sys

root = sys.argv[1]
files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
files = [f for f in files if os.path.isfile(f)]
if not files:
    print("test_doc_links: no Markdown files under %s" % root)
    sys.exit(1)

LINK = re.compile(r"\]\(([^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks, with
    inline code spans blanked out."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line)
            if m:
                if fence is None:
                    fence = m.group(1)
                elif m.group(1) == fence:
                    fence = None
                continue
            if fence is None:
                yield n, CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


anchors_cache = {}


def anchors(path):
    if path not in anchors_cache:
        seen = {}
        out = set()
        fence = None
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = FENCE.match(line)
                if m:
                    fence = m.group(1) if fence is None else (None if m.group(1) == fence else fence)
                    continue
                h = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
                if fence is None and h:
                    base = slug(h.group(1))
                    k = seen.get(base, 0)
                    seen[base] = k + 1
                    out.add(base if k == 0 else "%s-%d" % (base, k))
        anchors_cache[path] = out
    return anchors_cache[path]


bad = 0
checked = 0
for path in files:
    rel = os.path.relpath(path, root)
    for n, line in prose_lines(path):
        for m in LINK.finditer(line):
            target = m.group(1)
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # a URL (http:, https:, mailto:, ...)
            checked += 1
            where, _, anchor = target.partition("#")
            dest = path if where == "" else os.path.normpath(os.path.join(os.path.dirname(path), where))
            if not os.path.exists(dest):
                print("%s:%d: dead link %s (no file %s)" % (rel, n, target, os.path.relpath(dest, root)))
                bad += 1
                continue
            if not os.path.realpath(dest).startswith(os.path.realpath(root) + os.sep):
                print("%s:%d: link %s leaves the repository" % (rel, n, target))
                bad += 1
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                print("%s:%d: dead link %s (no heading #%s in %s)" % (rel, n, target, anchor,
                                                                    os.path.relpath(dest, root)))
                bad += 1
print("test_doc_links: %d files, %d relative links, %d dead" % (len(files), checked, bad))
sys.exit(1 if bad else 0)
EOF
