"""Shared by the python binding tests: buffers (numpy when importable, else array.array),
an exact comparison, and a launcher running a script's worker() as a world of ranks
(env COLLX_RANK / COLLX_WORLD_SIZE / COLLX_STORE_ADDR). The launcher fails if any rank fails
or the world exceeds its deadline (stragglers are killed)."""
import array
import os
import socket
import subprocess
import sys
import time
import traceback

try:
    import numpy as np
except ImportError:
    np = None


def make(kind, values):
    """A buffer of the given kind ('f' float32, 'q' int64, 'i' int32) holding values."""
    if np is not None:
        return np.array(values, dtype={"f": np.float32, "q": np.int64, "i": np.int32}[kind])
    return array.array(kind, values)


def aslist(buf):
    return [v.item() if hasattr(v, "item") else v for v in buf]


def expect(what, got, want):
    got = aslist(got)
    if got != list(want):
        bad = next(i for i in range(max(len(got), len(want)))
                   if i >= len(got) or i >= len(want) or got[i] != want[i])
        raise AssertionError("%s: mismatch at %d: got %s, want %s (len %d vs %d)"
                             % (what, bad, got[bad:bad + 4], list(want)[bad:bad + 4],
                                len(got), len(want)))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script, size, deadline_s):
    addr = "127.0.0.1:%d" % free_port()
    procs = []
    for rank in range(size):
        env = dict(os.environ, COLLX_RANK=str(rank), COLLX_WORLD_SIZE=str(size),
                   COLLX_STORE_ADDR=addr)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(script), "--worker"],
                                      env=env))
    start = time.monotonic()
    deadline = start + deadline_s
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        if any(p.poll() not in (None, 0) for p in procs):
            time.sleep(2)  # give the others a moment to report the failure too
            break
        time.sleep(0.05)
    failures = []
    for rank, p in enumerate(procs):
        if p.poll() is None:
            p.kill()
            p.wait()
            failures.append("rank %d still running at the deadline (%d s); killed"
                            % (rank, deadline_s))
        elif p.returncode != 0:
            failures.append("rank %d exited with %d" % (rank, p.returncode))
    took = time.monotonic() - start
    if failures:
        print("world of %d FAILED after %.1f s: %s" % (size, took, "; ".join(failures)), flush=True)
        return False
    print("world of %d passed in %.1f s" % (size, took), flush=True)
    return True


def main(script, worker, sizes=(2, 4), deadline_s=45):
    """Run worker() when started with --worker, else launch a world of each size."""
    if "--worker" in sys.argv:
        try:
            worker()
        except BaseException:
            traceback.print_exc()
            sys.stdout.flush()
            os._exit(1)
        return 0
    print("numpy: %s" % ("yes" if np is not None else "no (array.array)"), flush=True)
    ok = True
    for size in sizes:
        ok = launch(script, size, deadline_s) and ok
    return 0 if ok else 1
