"""A rank killed mid-run stops the whole job: mpirun exits non-zero well within
--comm-timeout and the output names the dead rank. No rank is left running."""

import os
import signal
import subprocess
import time

import testlib as t



def body(c: t.Checks):
    model = t.make_model(dtype="bf16")
    timeout = 20
    victim = 3
    cmd = [t.mpirun_binary(), "--oversubscribe", "-np", "6", "-x", "OMP_NUM_THREADS",
           t.qmpi_binary(), "run", "--model", model, "--ids", "1,2,3", "--max-tokens", "3000",
           "--max-model-len", "4000", "--ignore-eos", "--temperature", "0", "--tp", "2", "--pp",
           "3", "--comm-timeout", str(timeout)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    pids = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(pids) < 6:
        time.sleep(0.5)
        pids = t.rank_pids(proc.pid)
    c.check(len(pids) == 6, f"found the 6 rank processes ({sorted(pids)})")
    time.sleep(3)  # let it load and start generating
    c.check(proc.poll() is None, "the job is still running before the kill")
    killed_at = time.monotonic()
    if victim in pids:
        os.kill(pids[victim], signal.SIGKILL)
    try:
        out, _ = proc.communicate(timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        c.check(False, "the job hung after a rank was killed")
    took = time.monotonic() - killed_at
    print(out[-2500:])
    c.check(proc.returncode != 0, f"mpirun exited non-zero ({proc.returncode})")
    c.check(took < timeout + 10, f"the job stopped {took:.1f}s after the kill (timeout {timeout}s)")
    c.check(f"rank {victim}" in out, f"the output names rank {victim}")
    def alive():
        out = []
        for p in pids.values():
            try:
                if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(p)
            except OSError:
                pass
        return out

    grace = time.monotonic() + 10  # processes already signalled may take a moment to go
    while alive() and time.monotonic() < grace:
        time.sleep(0.2)
    c.check(not alive(), f"no rank process is left running ({alive()})")


t.main("rank_death", body)
