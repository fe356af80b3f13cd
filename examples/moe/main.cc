// collx-example-moe: trains a small mixture-of-experts model with expert parallelism
// (grid ep = --ep, dp = the world size) on as many processes as the launcher starts, and
// checks after every step that this rank's parameters (dense layer, router, its experts)
// equal a one-process reference run of the whole global batch within --tol.
//
//   collx-example-moe [--ep EP] [--steps N] [--tol T]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "examples/moe/ep_step.h"
#include "examples/moe/moe_model.h"

namespace {

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Largest difference between this rank's parameters and the reference's.
double compare(const moe::EpRank& r, const moe::Params& mine, const moe::Params& ref) {
  double m = std::max(max_diff(mine.w_in, ref.w_in), max_diff(mine.w_router, ref.w_router));
  for (int32_t e = r.first_expert; e < r.first_expert + r.local_experts; ++e)
    m = std::max(m, max_diff(mine.experts[static_cast<size_t>(e)], ref.experts[static_cast<size_t>(e)]));
  return m;
}

int run(collx_comm_t world, int32_t ep, int steps, double tol) {
  collx_grid_config_t gc;
  collx_grid_config_init(&gc, sizeof gc);
  gc.ep = ep;
  collx_grid_t grid = nullptr;
  if (collx_grid_create(world, &gc, &grid) != COLLX_OK)
    throw moe::Failure{std::string("collx_grid_create: ") + collx_grid_last_error(nullptr)};
  int rc = 0;
  try {
    const moe::EpRank r = moe::locate(grid, world);
    moe::Params mine = moe::init_params(), ref = moe::init_params();
    for (int step = 0; step < steps; ++step) {
      std::vector<size_t> rows;
      const double loss = moe::ep_step(r, &mine, step, &rows);
      const double ref_loss = moe::reference_step(&ref, step, r.world_size);
      const double diff = std::max(compare(r, mine, ref), std::fabs(loss - ref_loss));
      if (r.world_rank == 0) {
        std::string per_expert;
        for (size_t n : rows) per_expert += (per_expert.empty() ? "" : "/") + std::to_string(n);
        std::printf("step %d: loss %.12f reference %.12f max parameter difference %.3g (rank 0 experts got %s rows)\n",
                    step, loss, ref_loss, diff, per_expert.c_str());
      }
      if (!(diff <= tol)) {
        std::fprintf(stderr, "collx-example-moe: rank %d: step %d differs from the reference by %.3g (tolerance %.3g)\n",
                     r.world_rank, step, diff, tol);
        rc = 1;
        break;
      }
    }
  } catch (...) {
    collx_grid_destroy(grid);
    throw;
  }
  collx_grid_destroy(grid);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  int32_t ep = 2;
  int steps = 5;
  double tol = 1e-12;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "collx-example-moe: missing value for %s\nusage: collx-example-moe [--ep EP] [--steps N] [--tol T]\n",
                   a.c_str());
      return 2;
    }
    if (a == "--ep") {
      ep = std::atoi(argv[++i]);
    } else if (a == "--steps") {
      steps = std::atoi(argv[++i]);
    } else if (a == "--tol") {
      tol = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "collx-example-moe: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  collx_comm_t world = nullptr;
  if (collx_comm_create_from_env(nullptr, &world) != COLLX_OK) {
    std::fprintf(stderr, "collx-example-moe: collx_comm_create_from_env: %s\n", collx_last_error(nullptr));
    return 1;
  }
  int rc = 0;
  try {
    rc = run(world, ep, steps, tol);
  } catch (const moe::Failure& f) {
    int32_t rank = -1;
    collx_comm_rank(world, &rank);
    std::fprintf(stderr, "collx-example-moe: rank %d: %s\n", rank, f.message.c_str());
    rc = 1;
  }
  collx_comm_destroy(world);
  return rc;
}
