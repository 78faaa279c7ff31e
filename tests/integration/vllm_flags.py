"""vLLM command lines on qmpi (issue 29), parsing only, no model loaded:

- every row of docs/vllm-compat.md, given as the row writes it to `qmpi serve --help` or
  `qmpi batch --help`, is accepted; a "noted" row logs its note, a "renamed" row names an option
  the command's --help lists, a "same" row is in --help itself;
- every flag of the table in src/app/commands/vllm_flags.cpp has a row in the doc;
- all the serve rows on one command line are accepted together (no value taken for a flag);
- three unknown flags are all named at once, each with its closest option (QM100)."""

import os
import re
import subprocess

import testlib as t


def qmpi(*args):
    return subprocess.run([t.qmpi_binary(), *args], capture_output=True, text=True, timeout=60)


def doc_rows():
    """{"serve": [(flag words, kind, what)], "batch": [...]} from docs/vllm-compat.md."""
    text = open(os.path.join(os.environ["QMPI_SOURCE_DIR"], "docs", "vllm-compat.md")).read()
    rows = {"serve": [], "batch": []}
    section = None
    for line in text.splitlines():
        if line.startswith("## "):
            section = "batch" if "run-batch" in line else "serve"
        m = re.match(r"^\| `([^`]+)` \| (same|renamed|default|noted) \| (.*) \|$", line)
        if m and section:
            rows[section].append((m.group(1).split(" "), m.group(2), m.group(3)))
    return rows


def table_flags():
    src = open(os.path.join(os.environ["QMPI_SOURCE_DIR"], "src", "app", "commands",
                            "vllm_flags.cpp")).read()
    return set(re.findall(r'^\s*\{"(-[-a-zA-Z]+)", U::', src, re.M))


def body(c: t.Checks):
    rows = doc_rows()
    c.check(len(rows["serve"]) >= 60 and len(rows["batch"]) >= 10,
            f"docs/vllm-compat.md lists {len(rows['serve'])} serve and {len(rows['batch'])} "
            "run-batch flags")
    documented = {words[0] for section in rows.values() for words, _, _ in section}
    missing = sorted(table_flags() - documented - {"--gpu-util"})  # qmpi's former name, not vLLM's
    c.check(not missing, f"every flag of vllm_flags.cpp has a row in the doc (missing: {missing})")

    for command in ("serve", "batch"):
        help_text = qmpi(command, "--help").stdout
        for words, kind, what in rows[command]:
            p = qmpi(command, *words, "--help")
            label = f"{command} {' '.join(words)} ({kind})"
            if not c.check(p.returncode == 0, f"{label}: accepted (exit {p.returncode})"):
                print(p.stderr[-800:])
                continue
            note = f"vLLM's {' '.join(words)}: "
            if kind == "noted":
                c.check(note in p.stderr, f"{label}: logs one line saying what qmpi does")
            else:
                c.check("vLLM's" not in p.stderr, f"{label}: honoured without a note")
            if kind == "same":
                c.check(f"  {words[0]} " in help_text or f", {words[0]} " in help_text,
                        f"{label}: an option of `qmpi {command} --help`")
            if kind == "renamed":
                target = re.search(r"`(--[-a-z]+)`", what).group(1)
                c.check(f"  {target} " in help_text, f"{label}: {target} is in --help")

    # A vLLM deployment guide's whole line at once.
    # Each flag once (a flag with two example rows, like --speculative-config, keeps its first);
    # -tp, -pp, -dp and -q: their long forms are there.
    line, seen = [], {"-tp", "-pp", "-dp", "-q"}
    for words, _, _ in rows["serve"]:
        if words[0] not in seen:
            seen.add(words[0])
            line += words
    p = qmpi("serve", *line, "--help")
    c.check(p.returncode == 0, f"all {len(rows['serve'])} serve rows on one line (exit "
            f"{p.returncode}) {p.stderr[-300:] if p.returncode else ''}")

    bad = qmpi("serve", "--model", "m", "--maxnumseqs", "8", "--tp-size", "2", "--port", "1",
               "--enable-magic")
    names = ["--maxnumseqs (closest: --max-num-seqs)", "--tp-size (closest: --tp)",
             "--enable-magic (closest: "]
    c.check(bad.returncode == 2 and "QM100" in bad.stderr and
            all(n in bad.stderr for n in names),
            f"three unknown flags are named at once with their closest options: {bad.stderr!r}")
    # A vLLM flag is not taken for the start of a qmpi option (--seed is not --seed-weights),
    # while a qmpi option's start still is (Boost's abbreviations).
    p = qmpi("serve", "--seed", "7", "--max-num-seq", "8", "--help")
    c.check(p.returncode == 0 and "vLLM's --seed 7: " in p.stderr,
            "--seed is vLLM's (noted), --max-num-seq is --max-num-seqs")


t.main("vllm_flags", body)
