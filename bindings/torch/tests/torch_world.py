"""Shared by the collx torch-backend tests and the benchmark: launches a world of ranks as
processes with the environment torchrun gives them (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; Debian's torchrun 1.13 cannot start on Python
3.11), bounds the world by a deadline (stragglers are killed and reported), and skips with
exit code 77 when torch or the plugin is missing."""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "support"))
from rank_world import free_port, run_world  # noqa: E402

SKIP = 77
WORKER_FLAG = "COLLX_TORCH_TEST_WORKER"


def require_plugin():
    """Imports torch.distributed and collx_torch, or exits SKIP saying what is missing."""
    try:
        import torch.distributed  # noqa: F401
    except ImportError as e:
        print("SKIP: torch is not importable by %s (%s)" % (sys.executable, e))
        sys.exit(SKIP)
    try:
        import collx_torch  # noqa: F401
    except ImportError as e:
        print("SKIP: the collx torch plugin is not built (%s); see docs/torch.md" % e)
        sys.exit(SKIP)


def is_worker():
    return os.environ.get(WORKER_FLAG) == "1"


def launch(script, size, deadline_s, args=(), killed_ranks=()):
    """Runs `script` as `size` ranks; returns their outputs. Raises AssertionError when a rank
    fails, a rank outside killed_ranks dies by a signal, or the world outlives deadline_s."""
    port = free_port()
    problems, outputs = run_world(
        [sys.executable, script] + list(args), size,
        lambda rank: {"RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(rank),
                      "LOCAL_WORLD_SIZE": str(size), "MASTER_ADDR": "127.0.0.1",
                      "MASTER_PORT": str(port), WORKER_FLAG: "1"},
        deadline_s, capture=True, killed_ranks=killed_ranks)
    if problems:
        for rank, text in enumerate(outputs):
            print("----- rank %d of %d -----\n%s" % (rank, size, text))
        raise AssertionError("world of %d: %s" % (size, "; ".join(problems)))
    return outputs


def main(script, worker, worlds, deadline_s, killed_ranks=()):
    """The test's entry point: a rank runs worker() (exit 1 with the traceback on failure);
    the launcher runs one world per size in `worlds` and prints what rank 0 printed.
    killed_ranks may die by a signal (the test kills them)."""
    require_plugin()
    if is_worker():
        try:
            worker()
        except BaseException:
            traceback.print_exc()
            sys.stdout.flush()
            os._exit(1)
        sys.stdout.flush()
        return
    for size in worlds:
        start = time.monotonic()
        outputs = launch(script, size, deadline_s, killed_ranks=killed_ranks)
        print("world of %d passed in %.1fs; rank 0 said:\n%s" % (size, time.monotonic() - start, outputs[0]))
