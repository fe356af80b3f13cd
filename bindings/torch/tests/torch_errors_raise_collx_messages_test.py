#!/usr/bin/env python3
"""torch_errors_raise_collx_messages_test: on a world of 3 processes, failures of the collx
process group raise collx_torch.CollxError (a RuntimeError) carrying collx's message, within a
bounded time, never a hang:
  - bad arguments (bitwise op, bool dtype, uneven all_to_all splits, non-contiguous tensor)
    raise COLLX_ERR_UNSUPPORTED / COLLX_ERR_INVALID_ARG at the call, and the group stays usable;
  - ranks calling different collectives all get COLLX_ERR_MISMATCH;
  - the timeout passed to init_process_group is the collx deadline: a collective that the
    other ranks never join fails with COLLX_ERR_TIMEOUT after that long (and Work.wait's own
    shorter timeout fires first);
  - a rank killed with SIGKILL while the others wait in a collective is reported to every
    survivor as COLLX_ERR_REMOTE naming it, long before the group's 30-minute deadline."""
import os
import signal
import sys
import time
from datetime import timedelta

from torch_world import main

WORLDS = (3,)
DEADLINE_S = 150
GROUP_TIMEOUT_S = 6     # passed to init_process_group; the collx deadline under test
DETECTION_BOUND_S = 30  # a dead peer or a mismatch must be reported well within this
KILLED_RANK = 2


def worker():
    import torch
    import torch.distributed as dist
    import collx_torch

    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # Rendezvous through a store with a generous timeout first, so that ranks which took
    # different times to import torch do not eat into the short timeout under test.
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), size, rank == 0,
                          timeout=timedelta(seconds=60))
    dist.init_process_group("collx", store=store, rank=rank, world_size=size,
                            timeout=timedelta(seconds=GROUP_TIMEOUT_S))
    gloo = dist.new_group(backend="gloo")  # coordinates the scenarios

    def expect_error(what, call, status, contains=(), bound_s=DETECTION_BOUND_S):
        start = time.monotonic()
        try:
            call()
        except collx_torch.CollxError as e:
            elapsed = time.monotonic() - start
            message = str(e)
            assert isinstance(e, RuntimeError)
            assert status in message, "%s: %r lacks %s" % (what, message, status)
            for word in contains:
                assert word in message, "%s: %r lacks %r" % (what, message, word)
            assert elapsed < bound_s, "%s: reported after %.1fs" % (what, elapsed)
            print("rank %d: %s -> %.1fs: %s" % (rank, what, elapsed, message))
            return elapsed, message
        raise AssertionError("%s: no CollxError" % what)

    # 1. Bad arguments fail at the call and leave the group usable.
    t = torch.ones(8)
    expect_error("bitwise op", lambda: dist.all_reduce(t, op=dist.ReduceOp.BAND),
                 "COLLX_ERR_UNSUPPORTED", ["BAND"])
    expect_error("bool dtype", lambda: dist.all_reduce(torch.ones(8, dtype=torch.bool)),
                 "COLLX_ERR_UNSUPPORTED", ["Bool"])
    uneven = [1] * (size - 1) + [size + 1]
    expect_error("uneven all_to_all", lambda: dist.all_to_all_single(
        torch.zeros(2 * size), torch.zeros(2 * size), output_split_sizes=uneven,
        input_split_sizes=uneven), "COLLX_ERR_UNSUPPORTED", ["all_to_all_single", "uneven"])
    expect_error("non-contiguous tensor", lambda: dist.all_reduce(torch.zeros(4, 4).t()),
                 "COLLX_ERR_INVALID_ARG", ["contiguous"])
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((8,), float(size))), t

    # 2. Different collectives on the ranks of a fresh collx group.
    mixed = dist.new_group(backend="collx")
    calls = [lambda: dist.all_reduce(torch.ones(1000), group=mixed),
             lambda: dist.broadcast(torch.ones(1000), src=0, group=mixed),
             lambda: dist.all_reduce(torch.ones(2000), group=mixed)]
    _, message = expect_error("mismatched collectives", calls[rank % len(calls)], "COLLX_ERR_")
    messages = [None] * size
    dist.all_gather_object(messages, message, group=gloo)
    assert any("COLLX_ERR_MISMATCH" in m for m in messages), messages

    # 3. The init_process_group timeout is the collx deadline: rank 0 waits alone.
    if rank == 0:
        work = dist.all_reduce(torch.ones(16), async_op=True)
        expect_error("Work.wait(timeout=1s)", lambda: work.wait(timeout=timedelta(seconds=1)),
                     "COLLX_ERR_TIMEOUT", ["Work.wait"], bound_s=GROUP_TIMEOUT_S)
        elapsed, _ = expect_error("collective nobody joins", work.wait, "COLLX_ERR_TIMEOUT",
                                  ["all_reduce"], bound_s=GROUP_TIMEOUT_S * 3)
        assert elapsed >= GROUP_TIMEOUT_S * 0.5, "deadline fired after %.1fs" % elapsed
    dist.barrier(group=gloo)

    # 4. A killed rank: the survivors' collective fails with the peer named.
    doomed = dist.new_group(backend="collx")  # default timeout: 30 minutes
    dist.barrier(group=gloo)
    if rank == KILLED_RANK:  # dies while the survivors wait in the collective
        sys.stdout.flush()
        time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)
    expect_error("killed peer", lambda: dist.all_reduce(torch.ones(1 << 16), group=doomed),
                 "COLLX_ERR_REMOTE", ["rank %d" % KILLED_RANK])
    print("rank %d: every failure raised collx's message in bounded time" % rank)
    sys.stdout.flush()
    # The gloo group lost a rank: leave without a collective teardown.
    os._exit(0)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(os.path.abspath(__file__), worker, WORLDS, DEADLINE_S, killed_ranks=(KILLED_RANK,))
