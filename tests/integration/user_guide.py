"""docs/user-guide.md, followed literally: every ```console-test block runs, in order, in one
sandbox folder, and the output it shows must appear in what the commands print.

Block format (the guide's "About the examples" section says the same to readers):
  $ command                   a command; a line ending in a backslash continues on the next line
  output line                 must appear in the command's output (stdout and stderr together)
  ...                         any number of lines the guide leaves out
Consecutive shown lines must be consecutive in the output too; groups separated by `...` must
appear in order. Inside a line, `...` stands for any text and `<host>` for this machine's name.
Runs of spaces compare equal to one space (column widths follow the host name), colour codes
are ignored, and log lines match with or without their `[hh:mm:ss.mmm level] ` prefix. Every
command must exit 0, except that ```console-test exit=N expects N from the block's last command.

The sandbox is what a reader has after the guide's install step: `qmpi` on PATH (the QMPI
binary under test), the checkout's launch/ folder, and models/Qwen2.5-72B-Instruct/config.json
(tests/fixtures/configs/qwen2.5-72b-instruct.json standing in for the downloaded file).
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib  # noqa: E402

GUIDE = os.path.join(testlib.SOURCE_DIR, "docs", "user-guide.md")
FENCE = re.compile(r"^```console-test(?P<attrs>[^\n]*)\n(?P<body>.*?)^```\s*$", re.M | re.S)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LOG_PREFIX = re.compile(r"^\[\d\d:\d\d:\d\d\.\d+ \w+\] ")
MIN_COMMANDS = 10  # the guide's tested path; fewer means blocks were lost or mistagged


class Step:
    def __init__(self, command: str, expected: list, line: int):
        self.command, self.expected, self.line = command, expected, line
        self.want_exit = 0


def parse(text: str) -> list:
    steps = []
    for m in FENCE.finditer(text):
        attrs = dict(a.split("=", 1) for a in m.group("attrs").split() if "=" in a)
        first_line = text.count("\n", 0, m.start("body")) + 1
        lines = m.group("body").splitlines()
        block = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("$ "):
                cmd, start = line[2:], i
                while cmd.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    cmd += "\n" + lines[i]  # bash reads backslash-newline as a space
                block.append(Step(cmd, [], first_line + start))
            elif block:
                block[-1].expected.append(line.rstrip())
            elif line.strip():
                raise testlib.TestFailure(f"user-guide.md:{first_line + i}: output before any "
                                          f"command in a console-test block")
            i += 1
        if not block:
            raise testlib.TestFailure(f"user-guide.md:{first_line}: empty console-test block")
        block[-1].want_exit = int(attrs.get("exit", 0))
        steps += block
    return steps


def groups(expected: list) -> list:
    """Shown output as groups of consecutive lines, split at `...`."""
    out, cur = [], []
    for line in expected:
        if line.strip() == "...":
            if cur:
                out.append(cur)
            cur = []
        elif line.strip():
            cur.append(line)
    if cur:
        out.append(cur)
    return out


def squeeze(line: str) -> str:
    return " ".join(line.split())


def line_matcher(shown: str):
    """A predicate for one shown line: `...` inside it is any text, `<host>` this host."""
    parts = squeeze(shown.replace("<host>", socket.gethostname())).split("...")
    pattern = re.compile(".*".join(re.escape(p) for p in parts))
    return lambda actual: any(pattern.fullmatch(form) for form in actual)


def find_groups(actual: list, want: list):
    """None when every group appears in order as consecutive lines; else the first missing."""
    forms = [(squeeze(a), squeeze(LOG_PREFIX.sub("", a))) for a in actual]
    pos = 0
    for group in want:
        matchers = [line_matcher(g) for g in group]
        n = len(group)
        for start in range(pos, len(forms) - n + 1):
            if all(m(forms[start + k]) for k, m in enumerate(matchers)):
                pos = start + n
                break
        else:
            return group
    return None


def sandbox() -> tuple:
    root = testlib.test_tmp("user_guide")
    shutil.rmtree(root)
    os.makedirs(os.path.join(root, "bin"))
    os.symlink(testlib.qmpi_binary(), os.path.join(root, "bin", "qmpi"))
    work = os.path.join(root, "work")
    os.makedirs(os.path.join(work, "models", "Qwen2.5-72B-Instruct"))
    os.symlink(os.path.join(testlib.SOURCE_DIR, "launch"), os.path.join(work, "launch"))
    shutil.copy(os.path.join(testlib.SOURCE_DIR, "tests", "fixtures", "configs",
                             "qwen2.5-72b-instruct.json"),
                os.path.join(work, "models", "Qwen2.5-72B-Instruct", "config.json"))
    env = dict(os.environ, PATH=os.path.join(root, "bin") + os.pathsep + os.environ["PATH"])
    # A reader's shell has none of ctest's variables that the launch recipes also read.
    for name in ("MPIRUN", "QMPI_BIN", "MODEL", "TP", "PP", "BACKEND", "HOSTFILE", "MPIRUN_ARGS",
                 "MAP_BY", "BIND_TO", "CUDA_VISIBLE_DEVICES"):
        env.pop(name, None)
    # The guide's mpirun lines as a reader types them: mpirun is whatever MPIRUN names.
    mpirun_dir = os.path.dirname(shutil.which(testlib.mpirun_binary()) or "")
    if mpirun_dir:
        env["PATH"] += os.pathsep + mpirun_dir
    return work, env


def body(checks: testlib.Checks) -> None:
    with open(GUIDE, encoding="utf-8") as f:
        steps = parse(f.read())
    # The matcher itself: order, adjacency and in-line wildcards must be able to fail.
    checks.check(find_groups(["b", "a"], [["a"], ["b"]]) == ["b"] and
                 find_groups(["a", "x", "b"], [["a", "b"]]) == ["a", "b"] and
                 find_groups(["[10:00:01.5 info] batch: 2 ok | 3 s"], [["batch: 2 ok | ..."]]) is None
                 and find_groups(["batch: 1 ok | 3 s"], [["batch: 2 ok | ..."]]) is not None,
                 "the output matcher rejects wrong order, gaps and wrong text")
    checks.check(len(steps) >= MIN_COMMANDS,
                 f"{len(steps)} tested commands in docs/user-guide.md (at least {MIN_COMMANDS})")
    work, env = sandbox()
    for step in steps:
        where = f"user-guide.md:{step.line}"
        start = time.monotonic()
        try:
            proc = subprocess.run(["bash", "-o", "pipefail", "-c", step.command], cwd=work,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=300)
        except subprocess.TimeoutExpired:
            checks.check(False, f"{where}: `{step.command}` timed out after 300 s")
            continue
        took = time.monotonic() - start
        out = [ANSI.sub("", line).rstrip() for line in proc.stdout.splitlines()]
        shown = step.command.replace("\n", " ")
        ok_exit = checks.check(proc.returncode == step.want_exit,
                               f"{where}: `{shown[:90]}` exit {proc.returncode} "
                               f"(want {step.want_exit}), {took:.1f} s")
        missing = find_groups(out, groups(step.expected))
        ok_out = checks.check(missing is None,
                              f"{where}: the output the guide shows appears"
                              + ("" if missing is None else f"; missing: {missing[0]!r}"))
        if not (ok_exit and ok_out):
            print("--- output\n" + "\n".join(out[-60:]), flush=True)


if __name__ == "__main__":
    testlib.main("user_guide", body)
