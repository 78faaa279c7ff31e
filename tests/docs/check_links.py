#!/usr/bin/env python3
"""Dead links and dead citations (issue 27), without building anything:

- every relative link `[text](target)` in README.md and docs/**/*.md names a file or folder of
  the checkout, and its `#anchor`, if any, a heading of that page (GitHub's anchor rule);
- every `docs/....md` path cited in the sources (src/, kernels/, io/, tests/, bench/, scripts/,
  launch/) exists;
- every "facts §N" / "facts sheet §N" / "qwen-facts.md section N" citation names a section
  heading of docs/reference/qwen-facts.md.

Usage: check_links.py [checkout]. Prints each dead link and exits 1 if there is one."""

import glob
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE_DIRS = ("src", "kernels", "io", "tests", "bench", "scripts", "launch")
SOURCE_EXT = (".cpp", ".h", ".cu", ".cuh", ".py", ".sh", ".c", ".bash", ".mjs", ".txt", ".cmake")
FACTS = "docs/reference/qwen-facts.md"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to -."""
    text = re.sub(r"`|\*\*|\*|_(?=\w)|(?<=\w)_", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: str) -> set:
    out, seen, fenced = set(), {}, False
    for line in open(page, encoding="utf-8"):
        if line.startswith("```"):
            fenced = not fenced
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m and not fenced:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def pages() -> list:
    found = [os.path.join(ROOT, "README.md")]
    found += sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return found


def strip_code(text: str) -> str:
    """The page without fenced blocks and inline code (example links are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def dead_doc_links() -> list:
    dead = []
    for page in pages():
        name = os.path.relpath(page, ROOT)
        for m in LINK.finditer(strip_code(open(page, encoding="utf-8").read())):
            target = m.group(1) or m.group(2)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                dead.append(f"{name}: ({target}): no {os.path.relpath(dest, ROOT)}")
            elif anchor and dest.endswith(".md") and anchor.lower() not in anchors(dest):
                dead.append(f"{name}: ({target}): no heading #{anchor} in "
                            f"{os.path.relpath(dest, ROOT)}")
    return dead


def source_files() -> list:
    out = []
    for d in SOURCE_DIRS:
        for path in glob.glob(os.path.join(ROOT, d, "**", "*"), recursive=True):
            if (path.endswith(SOURCE_EXT) and os.path.isfile(path) and
                    os.path.abspath(path) != os.path.abspath(__file__)):
                out.append(path)
    return sorted(out)


def facts_sections() -> set:
    path = os.path.join(ROOT, FACTS)
    if not os.path.exists(path):
        return set()
    return set(re.findall(r"^#{2,3}\s+(\d+[a-z]?)\.?\s", open(path, encoding="utf-8").read(), re.M))


def dead_citations() -> list:
    dead, sections = [], facts_sections()
    for path in source_files():
        name = os.path.relpath(path, ROOT)
        text = open(path, encoding="utf-8", errors="replace").read()
        for doc in set(re.findall(r"(?<![\w/.-])(docs/[\w./-]*\.md)", text)):
            if not os.path.exists(os.path.join(ROOT, doc)):
                dead.append(f"{name}: cites {doc}, which does not exist")
        cited = re.findall(r"facts(?: sheet)?(?:'s)? (?:§|section )(\d+[a-z]?)", text)
        cited += re.findall(r"facts (?:sheet )?(?:§\d+[a-z]?, )*§(\d+[a-z]?)", text)
        cited += re.findall(r"qwen-facts\.md sections? (\d+[a-z]?)", text)
        for number in set(cited):
            if number not in sections and number.rstrip("abcd") not in sections:
                dead.append(f"{name}: cites facts §{number}, not a section of {FACTS}")
    return dead


def main() -> int:
    dead = dead_doc_links() + dead_citations()
    for d in dead:
        print("dead: " + d)
    checked = len(pages())
    print(f"check_links: {checked} pages and {len(source_files())} sources read, "
          f"{len(dead)} dead link(s)")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
