#!/usr/bin/env python3
"""python_group_test: worlds of 2 and 4 ranks use `with collx.group():` for a ring exchange
whose send/recv order would deadlock without the group (every rank receives first), many
small all-reduces (fused) with an allgatherv in a nested group, requests recorded in a
group, and a call refused while recorded (the exception reaches the caller, the group runs
nothing and the communicator stays usable), and a grouped receive whose count disagrees with
the sender's (Mismatch, or RemoteError where a peer failed first, on exit, naming the call
in the group)."""
import os
import sys

from world import expect, main, make


def worker():
    import collx
    from collx import _group
    rank = int(os.environ["COLLX_RANK"])
    size = int(os.environ["COLLX_WORLD_SIZE"])
    ranks = range(size)
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    with collx.Communicator.from_env(timeout_ms=20000) as comm:
        # Ring: receive from the left before sending right, blocking calls, one group.
        n = 50000  # large enough that an ungrouped blocking send would not complete eagerly
        got = make("f", [0.0] * n)
        with collx.group():
            assert _group.depth() == 1
            comm.recv(got, prv, tag=7)
            comm.send(make("f", [rank + 0.5] * n), nxt, tag=7)  # a temporary: kept by the group
        assert _group.depth() == 0
        expect("grouped ring", got, [prv + 0.5] * n)

        # Small all-reduces (fused by collx) and v-collectives, results only after the block.
        bufs = [make("q", [rank * 10 + i] * (i + 1)) for i in range(8)]
        counts = [r + 1 for r in ranks]
        with collx.group():
            outs = [comm.allreduce(b) for b in bufs]
            with collx.group():  # nested: runs with the outer block
                agv = comm.allgatherv(make("i", [rank] * counts[rank]), counts)
                req = comm.iallreduce(make("f", [1.0] * 3), make("f", [0.0] * 3))
                raised = False
                try:
                    req.wait()
                except collx.InvalidUsage:
                    raised = True
                assert raised, "Request.wait inside the open group should raise InvalidUsage"
        for i, o in enumerate(outs):
            assert o is bufs[i]
            expect("grouped allreduce %d" % i, o, [sum(r * 10 + i for r in ranks)] * (i + 1))
        expect("grouped allgatherv", agv, [r for r in ranks for _ in range(counts[r])])
        assert req.wait(0) and req.test()
        expect("grouped iallreduce", req.result, [float(size)] * 3)
        req.free()

        # A call refused while recorded: raised in the block; the group runs nothing.
        untouched = make("q", [rank] * 4)
        raised = None
        try:
            with collx.group():
                comm.allreduce(untouched)
                comm.broadcast(make("q", [1]), root=size + 3)
        except collx.InvalidArgument as e:
            raised = e
        assert raised is not None, "a bad root inside a group did not raise"
        assert "root" in str(raised), str(raised)
        assert _group.depth() == 0
        expect("refused group ran nothing", untouched, [rank] * 4)
        expect("communicator usable after a refused group", comm.allreduce(make("q", [1])),
               [size])
        # A call failing while the group runs: raised on exit with collx's message naming it.
        with comm.dup() as bad:
            raised = None
            try:
                with collx.group():
                    bad.recv(make("q", [0] * 3), prv, tag=9, timeout_ms=5000)
                    bad.send(make("q", [rank] * 4), nxt, tag=9, timeout_ms=5000)
            except collx.CollxError as e:
                raised = e
            # Mismatch where detected; a rank whose peer failed first may see RemoteError.
            assert isinstance(raised, (collx.Mismatch, collx.RemoteError)), repr(raised)
            assert "in the group" in str(raised) and "group end" in str(raised), str(raised)
            print("rank %d: failing grouped recv: %s" % (rank, raised), flush=True)
    print("rank %d/%d ok" % (rank, size), flush=True)


if __name__ == "__main__":
    sys.exit(main(__file__, worker))
