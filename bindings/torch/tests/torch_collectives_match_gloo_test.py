#!/usr/bin/env python3
"""torch_collectives_match_gloo_test: on worlds of 2 and 4 processes, every operation of the
collx process group (all_reduce with every mapped op, broadcast, reduce, all_gather and
all_gather_into_tensor, reduce_scatter and reduce_scatter_tensor, all_to_all and
all_to_all_single, barrier, send/recv, gather, scatter) gives exactly what a locally computed
reference gives and, where Gloo supports the dtype and op, what Gloo gives on the same inputs;
in place and out of place where torch has both; float32, float16, bfloat16 and int64. Async
work: wait, is_completed, get_future (value and then-callbacks), several operations in flight."""
import os
import sys

from torch_world import main

WORLDS = (2, 4)
DEADLINE_S = 150
DTYPES = ("float32", "float16", "bfloat16", "int64")
GLOO_DTYPES = ("float32", "float16", "int64")  # Gloo 1.13 rejects bfloat16 ("Invalid scalar type")


def worker():
    import torch
    import torch.distributed as dist
    import collx_torch  # noqa: F401 (registers "collx")

    dist.init_process_group("collx")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    collx = dist.group.WORLD
    assert dist.get_backend() == "collx", dist.get_backend()

    def data(r, n, dtype, period=13):
        """Rank r's input: small integers, exact in every dtype and in sums over 4 ranks."""
        return ((torch.arange(n) + 3 * r) % period + 1).to(getattr(torch, dtype))

    def same(what, got, want):
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            raise AssertionError("%s (rank %d of %d): got %s, want %s"
                                 % (what, rank, size, got.flatten()[:8], want.flatten()[:8]))

    def over_both(what, run, reference, dtype, gloo_has=True):
        """run(group) returns the result tensor(s); compared with the reference and, where
        Gloo implements the operation (gloo_has) for the dtype, with Gloo's result."""
        got = run(collx)
        for g, w in zip(as_list(got), as_list(reference)):
            same(what + " vs reference", g, w)
        if not gloo_has or dtype not in GLOO_DTYPES:
            return
        theirs = run(gloo)
        for g, w in zip(as_list(got), as_list(theirs)):
            same(what + " vs gloo", g, w)

    def as_list(x):
        return list(x) if isinstance(x, (list, tuple)) else [x]

    ranks = range(size)
    n = 1000
    for dtype in DTYPES:
        inputs = [data(r, n, dtype) for r in ranks]
        mine = inputs[rank]
        stacked = torch.stack([x.to(torch.float64) for x in inputs])

        # all_reduce, in place (torch has no out-of-place form), every op collx maps.
        small = [data(r, n, dtype, period=2) for r in ranks]  # products stay exact
        stacked_small = torch.stack([x.to(torch.float64) for x in small])
        refs = {
            "SUM": (inputs, stacked.sum(0)),
            "PRODUCT": (small, stacked_small.prod(0)),
            "MIN": (inputs, stacked.min(0).values),
            "MAX": (inputs, stacked.max(0).values),
        }
        for opname, (ins, want) in refs.items():
            op = getattr(dist.ReduceOp, opname)

            def run(group, ins=ins, op=op):
                t = ins[rank].clone()
                dist.all_reduce(t, op=op, group=group)
                return t
            over_both("all_reduce %s %s" % (opname, dtype), run, want.to(mine.dtype), dtype)

        # reduce to the last rank (in place on the root; non-roots' tensors are scratch).
        root = size - 1

        def run_reduce(group):
            t = mine.clone()
            dist.reduce(t, dst=root, op=dist.ReduceOp.MAX, group=group)
            return t if rank == root else stacked.max(0).values.to(mine.dtype)
        over_both("reduce MAX %s" % dtype, run_reduce, stacked.max(0).values.to(mine.dtype), dtype)

        # broadcast from rank 1.
        def run_broadcast(group):
            t = mine.clone()
            dist.broadcast(t, src=1, group=group)
            return t
        over_both("broadcast %s" % dtype, run_broadcast, inputs[1], dtype)

        # all_gather (list) and all_gather_into_tensor, out of place and in place.
        def run_all_gather(group):
            outs = [torch.full((n,), -1).to(mine.dtype) for _ in ranks]
            dist.all_gather(outs, mine, group=group)
            return outs
        over_both("all_gather %s" % dtype, run_all_gather, inputs, dtype)

        def run_gather_tensor(group):
            out = torch.full((size * n,), -1).to(mine.dtype)
            dist.all_gather_into_tensor(out, mine, group=group)
            return out
        over_both("all_gather_into_tensor %s" % dtype, run_gather_tensor, torch.cat(inputs), dtype,
                  gloo_has=False)  # Gloo 1.13: "no support for _allgather_base"
        flat = torch.zeros(size * n, dtype=mine.dtype)
        flat[rank * n:(rank + 1) * n] = mine
        dist.all_gather_into_tensor(flat, flat[rank * n:(rank + 1) * n])  # in place
        same("all_gather_into_tensor in place %s" % dtype, flat, torch.cat(inputs))

        # reduce_scatter (list) and reduce_scatter_tensor, out of place and in place: rank r
        # contributes block j = data(r + j) and receives the sum of the blocks for itself.
        blocks = [[data(r + j, n, dtype) for j in ranks] for r in ranks]
        want_rs = torch.stack([blocks[r][rank].to(torch.float64) for r in ranks]).sum(0).to(mine.dtype)

        def run_reduce_scatter(group):
            if group is gloo:  # Gloo 1.13 has no reduce_scatter: its all_reduce, block `rank`
                whole = torch.cat(blocks[rank])
                dist.all_reduce(whole, group=gloo)
                return whole[rank * n:(rank + 1) * n]
            out = torch.full((n,), -1).to(mine.dtype)
            dist.reduce_scatter(out, [b.clone() for b in blocks[rank]], group=group)
            return out
        over_both("reduce_scatter %s" % dtype, run_reduce_scatter, want_rs, dtype)
        out = torch.full((n,), -1).to(mine.dtype)
        dist.reduce_scatter_tensor(out, torch.cat(blocks[rank]))
        same("reduce_scatter_tensor %s" % dtype, out, want_rs)
        whole = torch.cat(blocks[rank])
        dist.reduce_scatter_tensor(whole[rank * n:(rank + 1) * n], whole)  # in place
        same("reduce_scatter_tensor in place %s" % dtype, whole[rank * n:(rank + 1) * n], want_rs)

        # all_to_all (list) and all_to_all_single: block j of rank r is data(10 r + j).
        sends = [data(10 * rank + j, n, dtype) for j in ranks]
        want_a2a = [data(10 * r + rank, n, dtype) for r in ranks]

        def run_all_to_all(group):
            if group is gloo:  # Gloo 1.13 has only the single-tensor form
                out = torch.full((size * n,), -1).to(mine.dtype)
                dist.all_to_all_single(out, torch.cat(sends), group=gloo)
                return list(out.split(n))
            outs = [torch.full((n,), -1).to(mine.dtype) for _ in ranks]
            dist.all_to_all(outs, [s.clone() for s in sends], group=group)
            return outs
        over_both("all_to_all %s" % dtype, run_all_to_all, want_a2a, dtype)

        def run_all_to_all_single(group):
            out = torch.full((size * n,), -1).to(mine.dtype)
            dist.all_to_all_single(out, torch.cat(sends), group=group)
            return out
        over_both("all_to_all_single %s" % dtype, run_all_to_all_single, torch.cat(want_a2a), dtype)
        out = torch.full((size, n), -1).to(mine.dtype)
        dist.all_to_all_single(out, torch.stack(sends), output_split_sizes=[1] * size,
                               input_split_sizes=[1] * size)
        same("all_to_all_single equal splits %s" % dtype, out, torch.stack(want_a2a))

        # gather to rank 0 and scatter from the last rank.
        def run_gather(group):
            outs = [torch.full((n,), -1).to(mine.dtype) for _ in ranks] if rank == 0 else None
            dist.gather(mine, gather_list=outs, dst=0, group=group)
            return outs if rank == 0 else inputs
        over_both("gather %s" % dtype, run_gather, inputs, dtype)

        def run_scatter(group):
            out = torch.full((n,), -1).to(mine.dtype)
            lst = [data(100 + j, n, dtype) for j in ranks] if rank == root else None
            dist.scatter(out, scatter_list=lst, src=root, group=group)
            return out
        over_both("scatter %s" % dtype, run_scatter, data(100 + rank, n, dtype), dtype)

        # send/recv around the ring, with a tag; the receiver's buffer starts wrong.
        right, left = (rank + 1) % size, (rank - 1) % size
        recv = torch.full((n,), -1).to(mine.dtype)
        reqs = [dist.isend(mine, dst=right, tag=7), dist.irecv(recv, src=left, tag=7)]
        for req in reqs:
            req.wait()
        same("send/recv %s" % dtype, recv, inputs[left])

    # AVG and PREMUL_SUM (Gloo has neither): float32 against the reference.
    x = data(rank, n, "float32")
    total = torch.stack([data(r, n, "float32") for r in ranks]).sum(0)
    t = x.clone()
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert torch.allclose(t, total / size), "all_reduce AVG"
    t = x.clone()
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    same("all_reduce PREMUL_SUM(0.5)", t, total * 0.5)

    # Edge counts: one element and an empty tensor.
    one = torch.tensor([rank + 1.0])
    dist.all_reduce(one)
    same("all_reduce of one element", one, torch.tensor([size * (size + 1) / 2.0]))
    empty = torch.empty(0)
    dist.all_reduce(empty)
    dist.broadcast(empty, src=0)

    # Async work: several in flight, wait / is_completed / get_future / then.
    tensors = [torch.full((4096,), float(rank + k)) for k in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    chained = works[0].get_future().then(lambda fut: fut.value()[0].sum().item())
    for k, work in enumerate(works):
        assert work.wait() is True
        assert work.is_completed()
        value = work.get_future().wait()
        same("future value of async all_reduce %d" % k, value[0], tensors[k])
        same("async all_reduce %d" % k, tensors[k],
             torch.full((4096,), float(sum(r + k for r in ranks))))
    assert chained.wait() == 4096.0 * sum(ranks), chained.wait()
    work = dist.barrier(async_op=True)
    work.wait()
    assert work.is_completed()
    work = dist.broadcast(torch.zeros(3), src=0, async_op=True)
    work.get_future().wait()
    assert work.is_completed()

    # torch's object collectives ride on the tensor ones.
    objects = [None] * size
    dist.all_gather_object(objects, {"rank": rank})
    assert objects == [{"rank": r} for r in ranks], objects
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d: every collective matched (dtypes %s)" % (rank, ", ".join(DTYPES)))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(os.path.abspath(__file__), worker, WORLDS, DEADLINE_S)
