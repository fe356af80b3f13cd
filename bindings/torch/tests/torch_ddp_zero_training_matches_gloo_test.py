#!/usr/bin/env python3
"""torch_ddp_zero_training_matches_gloo_test: on worlds of 2 and 4 processes, a small model
trained for a few steps with DistributedDataParallel (SGD), and with DistributedDataParallel
plus ZeroRedundancyOptimizer (Adam, state sharded across ranks), once over the "collx"
process group and once over a "gloo" one from the same initial weights and data, ends with
parameters equal within 1e-6; and training moved the parameters (the check is not vacuous)."""
import copy
import os
import sys

from torch_world import main

WORLDS = (2, 4)
DEADLINE_S = 150
STEPS = 5
TOLERANCE = 1e-6


def worker():
    import torch
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    import collx_torch  # noqa: F401 (registers "collx")

    dist.init_process_group("collx")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"collx": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}

    torch.manual_seed(1234)  # the same initial model on every rank and for both backends
    initial = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    data = torch.Generator().manual_seed(rank)  # each rank its own batches
    batches = [(torch.randn(8, 16, generator=data), torch.randn(8, 4, generator=data))
               for _ in range(STEPS)]

    def train(backend, use_zero):
        model = DDP(copy.deepcopy(initial), process_group=groups[backend])
        if use_zero:
            optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                                process_group=groups[backend], lr=0.01)
        else:
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for inputs, targets in batches:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(inputs), targets).backward()
            optimizer.step()
        return [p.detach().clone() for p in model.module.parameters()]

    start = [p.detach() for p in initial.parameters()]
    for name, use_zero in (("DDP+SGD", False), ("DDP+ZeroRedundancyOptimizer(Adam)", True)):
        ours, theirs = train("collx", use_zero), train("gloo", use_zero)
        worst = max((a - b).abs().max().item() for a, b in zip(ours, theirs))
        moved = max((a - b).abs().max().item() for a, b in zip(ours, start))
        assert worst <= TOLERANCE, "%s: collx and gloo parameters differ by %g" % (name, worst)
        assert moved > 1e-3, "%s: training did not move the parameters (%g)" % (name, moved)
        # Every rank holds the same model.
        mine = torch.cat([p.flatten() for p in ours])
        everyone = [torch.empty_like(mine) for _ in range(size)]
        dist.all_gather(everyone, mine)
        assert all(torch.equal(mine, other) for other in everyone), "%s: ranks disagree" % name
        print("rank %d: %s over %d steps: collx vs gloo max |diff| %.3g (moved %.3g)"
              % (rank, name, STEPS, worst, moved))
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(os.path.abspath(__file__), worker, WORLDS, DEADLINE_S)
