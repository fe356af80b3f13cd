#!/usr/bin/env python3
"""python_vcollectives_test: worlds of 2 and 4 ranks run gather, scatter, gatherv, scatterv,
allgatherv, alltoallv and reduce_scatterv (blocking, nonblocking, in place, uneven counts
with empty blocks, gaps between blocks) through the Python binding and compare every result
with a reference computed here; bad count arrays raise InvalidArgument naming the array, and
ranks disagreeing on recvcounts get Mismatch from collx."""
import os
import sys

from world import aslist, expect, main, make, np


def raises(exc_type, fn, *contains):
    try:
        fn()
    except exc_type as e:
        for c in contains:
            assert c in str(e), "%s message %r lacks %r" % (exc_type.__name__, str(e), c)
        return e
    raise AssertionError("expected %s (%s), nothing raised" % (exc_type.__name__, contains))


def packed(counts):
    out, at = [], 0
    for c in counts:
        out.append(at)
        at += c
    return out


def check_rooted(comm, rank, size):
    ranks = range(size)
    root = size - 1
    # gather: 3 values per rank into the root.
    send = make("i", [rank * 100 + i for i in range(3)])
    got = comm.gather(send, root=root)
    if rank == root:
        expect("gather", got, [r * 100 + i for r in ranks for i in range(3)])
    else:
        assert got is None, got
    if rank == root:  # in place: the root's block is already in recv
        inplace = make("i", [r * 100 + i if r == root else -1 for r in ranks for i in range(3)])
        comm.gather(None, inplace, root=root)
        expect("gather in place", inplace, [r * 100 + i for r in ranks for i in range(3)])
    else:
        comm.gather(send, root=root)
    # scatter: block r of the root's send goes to rank r.
    k = 5
    full = make("q", [j * 3 for j in range(size * k)]) if rank == 0 else None
    mine = comm.scatter(full, make("q", [0] * k) if rank else None, root=0)
    expect("scatter", mine, [(rank * k + i) * 3 for i in range(k)])
    req = comm.iscatter(full, make("q", [0] * k), root=0)
    assert req.wait()
    expect("iscatter", req.result, [(rank * k + i) * 3 for i in range(k)])
    req.free()

    # gatherv with uneven counts (one empty) and gaps of 2 between the blocks.
    counts = [(r * 3 + 1) % 5 for r in ranks]  # 1, 4, 2, 0
    displs = [d + 2 * r for r, d in enumerate(packed(counts))]
    groot = 1 % size
    send = make("f", [rank * 1000 + i for i in range(counts[rank])])
    recv = make("f", [-1.0] * (displs[-1] + counts[-1] + 1)) if rank == groot else None
    got = comm.gatherv(send, counts, recv, displs, root=groot)
    if rank == groot:
        want = [-1.0] * len(recv)
        for r in ranks:
            want[displs[r]:displs[r] + counts[r]] = [r * 1000 + i for i in range(counts[r])]
        expect("gatherv", got, want)
    req = comm.igatherv(send, counts, root=groot)  # packed, recv allocated on the root
    assert req.wait()
    if rank == groot:
        expect("igatherv", req.result, [r * 1000 + i for r in ranks for i in range(counts[r])])
    req.free()

    # scatterv: the root sends rank r counts[r] values at displs[r].
    sroot = 0
    span = displs[-1] + counts[-1]
    full = make("f", [j * 0.5 for j in range(span)]) if rank == sroot else None
    got = comm.scatterv(full, counts, make("f", [0.0] * counts[rank]), displs, root=sroot)
    expect("scatterv", got, [(displs[rank] + i) * 0.5 for i in range(counts[rank])])
    if rank == sroot:  # in place: the root's block stays at displs[root]
        assert comm.scatterv(full, counts, full, displs, root=sroot) is full
    else:
        comm.scatterv(None, None, make("f", [0.0] * counts[rank]), root=sroot)


def check_vector(comm, rank, size):
    ranks = range(size)
    counts = [(r * 3 + 1) % 5 for r in ranks]
    mine = [rank * 1000 + i for i in range(counts[rank])]
    want = [r * 1000 + i for r in ranks for i in range(counts[r])]
    expect("allgatherv", comm.allgatherv(make("q", mine), counts), want)
    as_array = np.array(counts, dtype=np.int64) if np is not None else tuple(counts)
    expect("allgatherv, counts as an array", comm.allgatherv(make("q", mine), as_array), want)
    displs = [d + r for r, d in enumerate(packed(counts))]  # one-element gaps
    recv = make("q", [-7] * (displs[-1] + counts[-1]))
    req = comm.iallgatherv(make("q", mine), counts, recv, displs)
    assert req.wait()
    gapped = [-7] * len(recv)
    for r in ranks:
        gapped[displs[r]:displs[r] + counts[r]] = [r * 1000 + i for i in range(counts[r])]
    expect("iallgatherv with displs", recv, gapped)
    req.free()
    inplace = make("q", [v if displs[rank] <= j < displs[rank] + counts[rank] else -7
                         for j, v in enumerate(gapped)])
    comm.allgatherv(None, counts, inplace, displs)
    expect("allgatherv in place", inplace, gapped)

    # alltoallv: rank r sends (r + j) % 3 values to rank j (zero-length blocks included).
    scounts = [(rank + j) % 3 for j in ranks]
    rcounts = [(r + rank) % 3 for r in ranks]
    send = make("i", [rank * 1000 + j * 100 + i for j in ranks for i in range(scounts[j])])
    want = [r * 1000 + rank * 100 + i for r in ranks for i in range(rcounts[r])]
    expect("alltoallv", comm.alltoallv(send, scounts, rcounts), want)
    req = comm.ialltoallv(send, scounts, rcounts, make("i", [0] * sum(rcounts)))
    assert req.wait()
    expect("ialltoallv", req.result, want)
    req.free()

    # reduce_scatterv: block r of every rank's send is reduced into rank r.
    total = sum(counts)
    off = packed(counts)[rank]
    want = [sum(r + off + i for r in ranks) for i in range(counts[rank])]
    send = make("q", [rank + j for j in range(total)])
    expect("reduce_scatterv", comm.reduce_scatterv(send, counts), want)
    expect("reduce_scatterv max", comm.reduce_scatterv(send, counts, op="max"),
           [size - 1 + off + i for i in range(counts[rank])])
    comm.reduce_scatterv(send, counts, send)  # in place: block `rank` of send
    expect("reduce_scatterv in place", aslist(send)[off:off + counts[rank]], want)
    req = comm.ireduce_scatterv(make("f", [1.5] * total), counts)
    assert req.wait()
    expect("ireduce_scatterv", req.result, [1.5 * size] * counts[rank])
    req.free()


def check_errors(comm, rank, size):
    import collx
    counts = [1] * size
    raises(collx.InvalidArgument, lambda: comm.allgatherv(make("q", [1]), counts[:-1]),
           "allgatherv", "recvcounts has %d entries" % (size - 1), "%d ranks" % size)
    raises(collx.InvalidArgument,
           lambda: comm.alltoallv(make("i", [0] * size), [1] * (size - 1) + [-1], counts),
           "alltoallv", "sendcounts[%d] is -1" % (size - 1))
    raises(collx.InvalidArgument, lambda: comm.allgatherv(make("q", [1, 2]), counts),
           "allgatherv", "recvcounts[%d] is 1" % rank)
    raises(collx.InvalidArgument, lambda: comm.reduce_scatterv(make("f", [1.0]), [2] * size),
           "reduce_scatterv", "send buffer holds 1")
    raises(collx.InvalidArgument, lambda: comm.scatterv(make("f", [1.0] * size), "abc", root=rank),
           "scatterv", "sendcounts must be a sequence of ints")
    raises(collx.InvalidArgument, lambda: comm.gatherv(make("f", [1.0]), None, root=rank),
           "gatherv", "recvcounts is required")
    raises(collx.InvalidArgument, lambda: comm.scatter(None, None, root=(rank + 1) % size),
           "scatter", "needs its recv buffer")
    comm.barrier()  # nothing above reached the wire: the communicator is healthy
    # Counts that pass every local check but disagree between ranks: collx detects it.
    with comm.dup() as bad:
        skew = [1 + (rank == 0)] * size
        e = raises(collx.Mismatch,
                   lambda: bad.allgatherv(make("q", [5] * skew[rank]), skew, timeout_ms=5000),
                   "allgatherv", "counts hash")
        print("rank %d: mismatched recvcounts: %s: %s" % (rank, type(e).__name__, e), flush=True)


def worker():
    import collx
    rank = int(os.environ["COLLX_RANK"])
    size = int(os.environ["COLLX_WORLD_SIZE"])
    with collx.Communicator.from_env(timeout_ms=20000) as comm:
        check_rooted(comm, rank, size)
        check_vector(comm, rank, size)
        check_errors(comm, rank, size)
    print("rank %d/%d ok" % (rank, size), flush=True)


if __name__ == "__main__":
    sys.exit(main(__file__, worker))
