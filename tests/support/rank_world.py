"""Runs a script as a world of ranks (one process each) under a deadline. Shared by the
Python binding tests (tests/python/world.py) and the torch-backend tests
(bindings/torch/tests/torch_world.py), which differ only in the environment each rank gets
and in what they report."""
import os
import socket
import subprocess
import tempfile
import time


def free_port():
    """A TCP port on 127.0.0.1 free at the time of the call (for the rendezvous store)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(argv, size, rank_env, deadline_s, capture=False, stop_on_failure=False,
              killed_ranks=()):
    """Starts `argv` once per rank with os.environ plus rank_env(rank), and waits until every
    rank has exited or deadline_s has passed; ranks still running then are killed.
    stop_on_failure: once a rank fails, wait 2 s more (the others may report it too), then
    stop. capture: each rank's stdout and stderr are returned instead of shown.
    Returns (problems, outputs): one line per rank that failed or was killed at the deadline
    (a rank in killed_ranks may die: the test kills it), and the outputs (None without
    capture)."""
    procs, logs = [], []
    for rank in range(size):
        env = dict(os.environ)
        env.update(rank_env(rank))
        log = tempfile.TemporaryFile(mode="w+") if capture else None
        procs.append(subprocess.Popen(argv, env=env, stdout=log,
                                      stderr=subprocess.STDOUT if capture else None))
        logs.append(log)
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        if stop_on_failure and any(p.poll() not in (None, 0) for p in procs):
            time.sleep(2)
            break
        time.sleep(0.05)
    problems = []
    for rank, proc in enumerate(procs):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            problems.append("rank %d still running at the deadline (%d s); killed" % (rank, deadline_s))
        elif rank in killed_ranks:
            continue
        elif proc.returncode != 0:
            problems.append("rank %d exited with %d" % (rank, proc.returncode))
    outputs = None
    if capture:
        outputs = []
        for log in logs:
            log.seek(0)
            outputs.append(log.read())
            log.close()
    return problems, outputs
