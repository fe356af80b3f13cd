#!/usr/bin/env python3
"""all_reduce bus bandwidth of torch.distributed over backend "collx" against "gloo", in the
same run: every rank holds a collx default group and a gloo group, and each size is measured
on both (alternating, so machine load hits both alike). Ranks are started as torchrun starts
them (bindings/torch/tests/torch_world.py). Rank 0 prints one line per size:

    size  collx time  collx busbw  gloo time  gloo busbw  collx/gloo

time: mean of --iters back-to-back in-place all_reduce(SUM) calls on float32, the slowest
rank's; busbw = size / time * 2(n-1)/n (nccl-tests' all-reduce formula), in GB/s.

    PYTHONPATH=build/bindings/torch /usr/bin/python3 bench/torch_allreduce.py --np 4 -b 64K -e 64M
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "torch", "tests"))
from torch_world import is_worker, launch, require_plugin  # noqa: E402


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def human(size):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return "%d%s" % (size // scale, unit)
    return str(size)


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--np", type=int, default=2, help="ranks (processes) to start")
    parser.add_argument("-b", "--begin", default="64K", help="smallest size in bytes (K/M/G)")
    parser.add_argument("-e", "--end", default="64M", help="largest size in bytes (K/M/G)")
    parser.add_argument("-f", "--factor", type=int, default=4, help="size step factor")
    parser.add_argument("--iters", type=int, default=0,
                        help="timed calls per size and backend (0: about 256 MiB moved, 5 to 100)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls first")
    return parser.parse_args()


def timed(dist, tensor, group, iters, warmup):
    import torch
    for _ in range(warmup):
        dist.all_reduce(tensor, group=group)
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)  # the slowest rank's time
    return elapsed.item()


def worker(args):
    import torch
    import torch.distributed as dist
    import collx_torch  # noqa: F401 (registers "collx")

    dist.init_process_group("collx")
    size = dist.get_world_size()
    groups = (("collx", dist.group.WORLD), ("gloo", dist.new_group(backend="gloo")))
    if dist.get_rank() == 0:
        print("# all_reduce float32 sum, in place, %d ranks; busbw = size/time * 2(n-1)/n" % size)
        print("# %10s %12s %12s %12s %12s %10s" % ("size", "collx us", "collx GB/s", "gloo us",
                                                   "gloo GB/s", "collx/gloo"))
    nbytes = parse_size(args.begin)
    while nbytes <= parse_size(args.end):
        iters = args.iters or max(5, min(100, (256 << 20) // nbytes))
        tensor = torch.ones(nbytes // 4, dtype=torch.float32)
        busbw = {}
        seconds = {}
        for name, group in groups:
            seconds[name] = timed(dist, tensor, group, iters, args.warmup)
            busbw[name] = nbytes / seconds[name] * 2 * (size - 1) / size / 1e9
        if dist.get_rank() == 0:
            print("  %10s %12.1f %12.3f %12.1f %12.3f %9.2fx"
                  % (human(nbytes), seconds["collx"] * 1e6, busbw["collx"], seconds["gloo"] * 1e6,
                     busbw["gloo"], busbw["collx"] / busbw["gloo"]), flush=True)
        nbytes *= args.factor
    dist.destroy_process_group()


def main():
    args = arguments()
    require_plugin()
    if is_worker():
        worker(args)
        return
    outputs = launch(os.path.abspath(__file__), args.np, deadline_s=1800, args=sys.argv[1:])
    sys.stdout.write(outputs[0])


if __name__ == "__main__":
    main()
