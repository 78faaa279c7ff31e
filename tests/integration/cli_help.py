"""What `--help` and the error catalogue tell a user, through the real binary (issue 18):

- defaults print as written (0.9, not 0.90000000000000002), and --max-num-seqs shows the
  default each command uses (16 for batch and serve, 1 for run) on the option itself;
- the commands that log take --log-level (in their --help; a bad level is a usage error);
- every `qmpi <command> ...` the catalogue suggests names a command that exists."""

import re
import subprocess

import testlib as t


def qmpi(*args):
    return subprocess.run([t.qmpi_binary(), *args], capture_output=True, text=True, timeout=60)


def body(c: t.Checks):
    for command, seqs in [("serve", 16), ("batch", 16), ("run", 1)]:
        p = qmpi(command, "--help")
        text = p.stdout
        c.check(p.returncode == 0 and f"--max-num-seqs arg (={seqs})" in text and
                "defaults to" not in text,
                f"{command} --help: --max-num-seqs shows its default {seqs} on the option")
        c.check("(=0.9)" in text and "0.9000" not in text and "(=300)" in text,
                f"{command} --help: decimal defaults as written (0.9, 300)")
        c.check("--log-level arg" in text and "QMPI_LOG_LEVEL" in text,
                f"{command} --help documents --log-level and QMPI_LOG_LEVEL")
    plan = qmpi("plan", "--help").stdout
    c.check("--gpu-memory-utilization arg (=0.9)" in plan and "--gpu-util arg" not in plan,
            "plan --help: --gpu-memory-utilization, the name every command uses")
    c.check("QMPI_LOG_LEVEL" in qmpi("--help").stdout, "qmpi --help documents QMPI_LOG_LEVEL")
    bad = qmpi("plan", "--log-level", "loud")
    c.check(bad.returncode == 2 and "QM100" in bad.stderr and "--log-level loud" in bad.stderr,
            f"--log-level loud: a usage error (exit {bad.returncode})")

    # Every command line the catalogue suggests starts with a command qmpi has.
    catalogue = qmpi("help", "errors", "--markdown").stdout
    suggested = sorted(set(re.findall(r"`(?:mpirun [^`]*?)?qmpi ([a-z][-a-z]*)", catalogue)))
    c.check(len(suggested) >= 5, f"the catalogue suggests commands: {suggested}")
    for command in suggested:
        p = qmpi(command, "--help")
        c.check(p.returncode == 0 and p.stdout.startswith("usage: qmpi " + command),
                f"`qmpi {command} ...` from the catalogue is a command (exit {p.returncode})")


t.main("cli_help", body)
