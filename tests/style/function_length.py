#!/usr/bin/env python3
"""Fails when a function in the given folders is longer than the limit (default 80 lines, from
the first line of its signature to its closing brace). A heuristic brace parser: comments,
strings and character literals are blanked first; a brace block opened at namespace or class
scope after a `)` (a parameter list) is a function, lambdas and blocks inside it are its body.

usage: function_length.py ROOT DIR... [--max N] [--list]
"""
import re
import sys
from pathlib import Path


def blank_literals(text: str) -> str:
    """Comments, string and char literals (raw strings included) replaced by spaces, newlines
    kept so that line numbers hold."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator: 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path: Path):
    """(name, first line, last line) of every function defined in `path`."""
    text = blank_literals(path.read_text(errors="replace"))
    stack = []  # kinds: ns, type, func, block
    header_start = 0
    found = []
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        if c in ";{}":
            if c == "{":
                header = text[header_start:i]
                inside_func = any(k[0] == "func" for k in stack)
                flat = " ".join(header.split())
                if inside_func:
                    kind = ("block", 0, "")
                elif re.search(r"\bnamespace\b", flat) or re.search(r'\bextern\s*$', flat):
                    kind = ("ns", 0, "")
                elif re.search(r"\b(class|struct|union|enum)\b", flat) and "(" not in flat:
                    kind = ("type", 0, "")
                elif ")" in flat and not re.search(r"(?<![=!<>])=(?!=)", flat.replace("operator=", "")):
                    first = header_start + len(header) - len(header.lstrip())
                    name = re.findall(r"([~\w:]+)\s*\(", flat)
                    kind = ("func", text.count("\n", 0, first) + 1, name[0] if name else "?")
                else:
                    kind = ("block", 0, "")
                stack.append(kind)
            elif c == "}" and stack:
                kind = stack.pop()
                if kind[0] == "func" and not any(k[0] == "func" for k in stack):
                    found.append((kind[2], kind[1], line))
            header_start = i + 1
    return found


def main() -> int:
    args = sys.argv[1:]
    limit = 80
    if "--max" in args:
        k = args.index("--max")
        limit = int(args[k + 1])
        del args[k : k + 2]
    listing = "--list" in args
    args = [a for a in args if a != "--list"]
    root, dirs = Path(args[0]), args[1:]
    long = []
    for d in dirs:
        for path in sorted((root / d).rglob("*.cpp")) + sorted((root / d).rglob("*.h")):
            for name, first, last in functions(path):
                n = last - first + 1
                if listing:
                    print(f"{n:5d} {path.relative_to(root)}:{first} {name}")
                if n > limit:
                    long.append(f"{path.relative_to(root)}:{first}: {name} is {n} lines")
    for entry in long:
        print(entry)
    if long:
        print(f"{len(long)} function(s) over {limit} lines: split them (one job each)")
        return 1
    print(f"no function over {limit} lines in {', '.join(dirs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
