"""Every `qmpi <command>` and every repository path that README.md and docs/*.md name exists
(issue 29): a command in `qmpi --help`'s list (or `help`), a path (launch/, docs/, tests/,
src/, bench/, scripts/, io/, kernels/) in the checkout. Paths with placeholders (<...>, *,
MODEL) and run outputs are skipped."""

import glob
import os
import re
import subprocess

import testlib as t

PREFIXES = ("launch/", "docs/", "tests/", "src/", "bench/", "scripts/", "io/", "kernels/")


def body(c: t.Checks) -> None:
    root = t.SOURCE_DIR
    usage = subprocess.run([t.qmpi_binary(), "--help"], capture_output=True, text=True).stdout
    commands = set(re.findall(r"^  ([a-z][-a-z]*) ", usage, re.M)) | {"help"}
    c.check({"serve", "batch", "plan"} <= commands, f"qmpi --help lists the commands {commands}")
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    bad_commands, bad_paths = [], []
    for page in pages:
        text = open(page, encoding="utf-8").read()
        name = os.path.relpath(page, root)
        for cmd in re.findall(r"`(?:mpirun [^`]*?)?qmpi ([a-z][-a-z]*)", text):
            if cmd not in commands:
                bad_commands.append(f"{name}: qmpi {cmd}")
        for path in re.findall(r"(?<![\w./-])((?:%s)[\w./-]*[\w/])" % "|".join(map(re.escape, PREFIXES)), text):
            if re.search(r"[<>*]|\b[A-Z]+\b|/results/|/tmp/", path):
                continue  # a placeholder (MODEL.json, N) or a run's output
            here = os.path.join(os.path.dirname(page), path)
            found = [p for p in (os.path.join(root, path), here)
                     if os.path.exists(p) or glob.glob(p + ".*")]  # a source named without .cpp
            if not found:
                bad_paths.append(f"{name}: {path}")
    c.check(not bad_commands, "every `qmpi <command>` the docs name exists"
            + "".join("\n      " + b for b in bad_commands))
    c.check(not bad_paths, "every repository path the docs name exists"
            + "".join("\n      " + b for b in sorted(set(bad_paths))))


t.main("docs_names_exist", body)
