#!/usr/bin/env python3
"""python_collectives_test: launches worlds of 2 and 4 ranks as subprocesses (env
COLLX_RANK / COLLX_WORLD_SIZE / COLLX_STORE_ADDR); every rank runs allreduce (float32 and
int64, in place and out of place), allgather, reduce_scatter, a nonblocking allreduce,
broadcast, alltoall and point-to-point through the Python binding and checks the results
exactly. The launcher fails if any rank fails or the world exceeds its deadline (stragglers
are killed). Uses numpy when importable, else array.array."""
import os
import sys

from world import aslist, expect, main, make


def worker():
    import collx
    rank = int(os.environ["COLLX_RANK"])
    size = int(os.environ["COLLX_WORLD_SIZE"])
    with collx.Communicator.from_env(timeout_ms=20000) as comm:
        assert comm.rank == rank and comm.size == size, (comm.rank, comm.size, rank, size)
        assert 0 <= comm.local_rank < comm.local_size, (comm.local_rank, comm.local_size)
        ranks = range(size)

        for n, algorithm in ((1, None), (1000, None), (70001, "ring"), (4096, "recursive_doubling")):
            # float32: halves and small integers sum exactly.
            want = [sum(r + 1 for r in ranks) + size * (i % 64) * 0.5 for i in range(n)]
            buf = make("f", [rank + 1 + (i % 64) * 0.5 for i in range(n)])
            out = comm.allreduce(buf, algorithm=algorithm)  # in place
            assert out is buf
            expect("allreduce float32 in place n=%d" % n, buf, want)
            send = make("f", [rank + 1 + (i % 64) * 0.5 for i in range(n)])
            recv = make("f", [-1.0] * n)
            assert comm.allreduce(send, recv, op="sum", algorithm=algorithm) is recv
            expect("allreduce float32 out of place n=%d" % n, recv, want)
            expect("allreduce float32 send untouched", send,
                   [rank + 1 + (i % 64) * 0.5 for i in range(n)])

            # Zero-copy buffers: peers on this host read them in place (from 64 KiB per peer).
            zc = collx.mem_alloc(4 * n).cast("f")
            for i in range(n):
                zc[i] = rank + 1 + (i % 64) * 0.5
            comm.allreduce(zc, algorithm=algorithm)
            expect("allreduce float32 zero-copy n=%d" % n, zc, want)
            del zc

            # int64 beyond 32 bits.
            base = 1 << 40
            want64 = [sum(base + r * 7 + i for r in ranks) for i in range(n)]
            buf64 = make("q", [base + rank * 7 + i for i in range(n)])
            comm.allreduce(buf64, op=collx.Op.SUM, algorithm=algorithm)
            expect("allreduce int64 in place n=%d" % n, buf64, want64)
            recv64 = make("q", [0] * n)
            comm.allreduce(make("q", [base + rank * 7 + i for i in range(n)]), recv64)
            expect("allreduce int64 out of place n=%d" % n, recv64, want64)

        mx = comm.allreduce(make("i", [rank, -rank]), op="max")
        expect("allreduce max", mx, [size - 1, 0])

        # allgather: every rank contributes k values.
        for k in (1, 5, 3000):
            send = make("i", [rank * 100000 + i for i in range(k)])
            got = comm.allgather(send)
            expect("allgather k=%d" % k, got, [r * 100000 + i for r in ranks for i in range(k)])
            recv = make("i", [-1] * (k * size))
            comm.allgather(send, recv)
            expect("allgather into recv k=%d" % k, recv,
                   [r * 100000 + i for r in ranks for i in range(k)])
            inplace = make("i", [rank * 100000 + i if r == rank else -1
                                 for r in ranks for i in range(k)])
            comm.allgather(None, inplace)
            expect("allgather in place k=%d" % k, inplace,
                   [r * 100000 + i for r in ranks for i in range(k)])

        # reduce_scatter: send has size * k values; rank gets block `rank` of the sum.
        for k in (1, 7, 2500):
            send = make("f", [r0 * 2 + (j % 50) for r0 in [rank] for j in range(k * size)])
            want = [sum(r * 2 + ((rank * k + i) % 50) for r in ranks) for i in range(k)]
            got = comm.reduce_scatter(send)
            expect("reduce_scatter float32 k=%d" % k, got, want)
            send64 = make("q", [rank * 1000 + j for j in range(k * size)])
            recv64 = make("q", [0] * k)
            comm.reduce_scatter(send64, recv64)
            expect("reduce_scatter int64 k=%d" % k, recv64,
                   [sum(r * 1000 + rank * k + i for r in ranks) for i in range(k)])
            inplace = make("q", [rank * 1000 + j for j in range(k * size)])
            comm.reduce_scatter(inplace, inplace)
            expect("reduce_scatter in place k=%d" % k, aslist(inplace)[rank * k:(rank + 1) * k],
                   [sum(r * 1000 + rank * k + i for r in ranks) for i in range(k)])

        # nonblocking allreduce: the Request keeps the buffers alive.
        req = comm.iallreduce(make("f", [rank + 0.25] * 33), make("f", [0.0] * 33))
        assert req.wait(), "iallreduce did not finish"
        assert req.test()
        expect("iallreduce", req.result, [sum(r + 0.25 for r in ranks)] * 33)
        req.free()

        # broadcast, alltoall, send/recv, barrier.
        root = size - 1
        b = make("q", [rank * 11 + i for i in range(9)])
        comm.broadcast(b, root=root)
        expect("broadcast", b, [root * 11 + i for i in range(9)])
        a2a = comm.alltoall(make("i", [rank * 10 + j for j in range(size) for _ in range(2)]))
        expect("alltoall", a2a, [r * 10 + rank for r in ranks for _ in range(2)])
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        sreq = comm.isend(make("q", [rank] * 4), nxt, tag=3)
        got = comm.recv(make("q", [0] * 4), prv, tag=3)
        sreq.wait()
        sreq.free()
        expect("send/recv ring", got, [prv] * 4)
        comm.barrier()

        # split into even/odd ranks, then allreduce within each half.
        half = comm.split(rank % 2, key=rank)
        with half:
            members = [r for r in ranks if r % 2 == rank % 2]
            assert half.size == len(members), (half.size, members)
            s = comm.allreduce(make("q", [rank]), op="sum")  # parent still usable
            expect("parent after split", s, [sum(ranks)])
            expect("split allreduce", half.allreduce(make("q", [rank])), [sum(members)])
    print("rank %d/%d ok" % (rank, size), flush=True)


if __name__ == "__main__":
    sys.exit(main(__file__, worker))
