// collx-bench zero: per-rank memory and step time of ZeRO stages 1, 2 and 3 with the
// built-in AdamW. Memory is what each rank holds, from the handle's own sizes: the shard
// (float32 master, gradient, two AdamW moments), the full parameters (stage 3: the peak of
// gathered tensors) and the bucketed gradient buffer (stages 1 and 2).
#include "bench/collx_bench/bench_zero.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench/collx_bench/bench_dp.h"
#include "bench/collx_bench/launcher.h"

namespace collx_bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// One step: gradients in (stage 3: each tensor gathered, used, released, then its full
// gradient reduce-scattered; from the second step the prefetch plan gathers the next one
// ahead), AdamW, publish.
bool zero_step(collx_zero_t z, int stage, const StrategyArgs& a, std::vector<float>* full_grad) {
  const size_t each = a.elems / static_cast<size_t>(a.tensors);
  for (int t = a.tensors - 1; t >= 0; --t) {
    const uint64_t id = static_cast<uint64_t>(t);
    if (stage == 3) {
      if (collx_zero3_fetch(z, &id, 1) != COLLX_OK) return false;
      float* p = nullptr;
      collx_zero_param_ptr(z, id, &p);
      std::fill(full_grad->begin(), full_grad->end(), 0.001f + p[0]);
      if (collx_zero3_release(z, &id, 1) != COLLX_OK || collx_zero3_reduce_grad(z, id, full_grad->data()) != COLLX_OK)
        return false;
      continue;
    }
    float* g = nullptr;
    collx_zero_grad_ptr(z, id, &g);
    std::fill(g, g + each, 0.001f * static_cast<float>(t));
    if (collx_zero_mark_ready(z, id) != COLLX_OK) return false;
  }
  return collx_zero_finish_grads(z, -1) == COLLX_OK && collx_zero_step(z, 1.0) == COLLX_OK &&
         collx_zero_publish(z) == COLLX_OK;
}

int zero_body(const StrategyArgs& a, collx_comm_t world) {
  int32_t rank = 0, size = 1;
  collx_comm_rank(world, &rank);
  collx_comm_size(world, &size);
  const size_t each = a.elems / static_cast<size_t>(a.tensors), total_model = each * static_cast<size_t>(a.tensors);
  if (rank == 0) {
    std::printf("# collx-bench zero: %d ranks, %zu float32 elements in %d tensors, %d buckets, AdamW\n", size,
                total_model, a.tensors, a.buckets);
    std::printf("# %5s %12s %12s %10s %12s %12s %12s %10s\n", "stage", "shard_elems", "model/dp", "shard/ideal",
                "optstate_MiB", "params_MiB", "grads_MiB", "step_ms");
  }
  bool ok = true;
  std::vector<float> full_grad(each);
  for (int stage = 1; stage <= 3; ++stage) {
    collx_layout_t l = strategy_layout(a, size, stage == 3 ? COLLX_PART_PER_TENSOR : COLLX_PART_FLAT);
    collx_zero_config_t c;
    collx_zero_config_init(&c, sizeof c);
    c.stage = stage;
    c.comm_dtype = stage == 3 ? COLLX_FLOAT32 : a.comm_dtype;
    c.max_live_elems = 2 * ((each + static_cast<size_t>(size) - 1) / static_cast<size_t>(size)) * static_cast<size_t>(size);
    collx_zero_t z = nullptr;
    if (!l || collx_zero_create(world, l, &c, &z) != COLLX_OK) {
      std::fprintf(stderr, "collx-bench zero: %s\n", collx_zero_last_error(nullptr));
      return kExitFailure;
    }
    std::vector<double> times;
    for (int i = 0; i <= a.iters; ++i) {
      collx_barrier(world, nullptr);
      const double t0 = now_ms();
      ok = zero_step(z, stage, a, &full_grad) && ok;
      const double dt = slowest(now_ms() - t0, world);
      if (i > 0) times.push_back(dt);
    }
    std::sort(times.begin(), times.end());
    size_t shard = 0, total = 0, live = 0, peak = 0;
    collx_zero_shard(z, nullptr, nullptr, &shard);
    collx_layout_total(l, &total);
    collx_zero3_live(z, &live, &peak);
    const double ideal = static_cast<double>(total_model) / size;
    const double params = stage == 3 ? peak * 4.0 : total * 4.0;
    collx_zero_memory_t mem{};
    mem.size = sizeof mem;
    collx_zero_memory(z, &mem);  // measured: the peak of the gradient buffers held
    const double gradbuf = static_cast<double>(mem.peak_grads);
    if (rank == 0)
      std::printf("  %5d %12zu %12.0f %10.4f %12.3f %12.3f %12.3f %10.3f\n", stage, shard, ideal, shard / ideal,
                  3.0 * shard * 4 / kMiB, params / kMiB, gradbuf / kMiB, times[times.size() / 2]);
    collx_zero3_plan_stats_t plan{};
    plan.size = sizeof plan;
    if (stage == 3 && rank == 0 && collx_zero3_plan_stats(z, &plan) == COLLX_OK)
      std::printf("# stage 3 prefetch plan: %zu ids, %llu hits, %llu misses, %llu deferred (max_live_elems)\n",
                  plan.length, static_cast<unsigned long long>(plan.hits),
                  static_cast<unsigned long long>(plan.misses), static_cast<unsigned long long>(plan.deferred));
    collx_zero_destroy(z);
    collx_layout_destroy(l);
  }
  if (rank == 0)
    std::printf("# optstate = float32 master + AdamW moments of the shard (3 x shard_elems x 4 bytes);\n"
                "# grads = peak gradient bytes held (collx_zero_memory): stage 1 full buffer + shard, stage 2\n"
                "# shard + bucket slots, stage 3 shard + one padded gradient (the engine's full gradient not counted);\n"
                "# target: shard_elems <= model/dp + one bucket of padding\n");
  return ok ? kExitOk : kExitFailure;
}

}  // namespace

int bench_zero_main(int argc, char** argv) {
  StrategyArgs a;
  std::string error;
  if (!parse_strategy_args(argc, argv, &a, &error)) {
    std::fprintf(stderr, "collx-bench zero: %s\n", error.c_str());
    return kExitUsage;
  }
  return run_strategy(argc, argv, a, zero_body);
}

}  // namespace collx_bench
