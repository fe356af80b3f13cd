"""Shared by the python binding tests: buffers (numpy when importable, else array.array),
an exact comparison, and a launcher running a script's worker() as a world of ranks
(env COLLX_RANK / COLLX_WORLD_SIZE / COLLX_STORE_ADDR). The launcher fails if any rank fails
or the world exceeds its deadline (stragglers are killed)."""
import array
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from rank_world import free_port, run_world  # noqa: E402

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


def launch(script, size, deadline_s):
    addr = "127.0.0.1:%d" % free_port()
    start = time.monotonic()
    failures, _ = run_world(
        [sys.executable, os.path.abspath(script), "--worker"], size,
        lambda rank: {"COLLX_RANK": str(rank), "COLLX_WORLD_SIZE": str(size), "COLLX_STORE_ADDR": addr},
        deadline_s, stop_on_failure=True)
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
