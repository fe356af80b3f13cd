#include "tools/collx_run/rank_env.h"

#include <string>

namespace collx_run {

std::vector<RankSpec> rank_specs(const AttemptPlan& plan, const RunOptions& options) {
  std::string store_host;
  int store_port = 0;
  split_endpoint(plan.store_addr, &store_host, &store_port);
  std::vector<RankSpec> specs;
  for (int local = 0; local < plan.local_size; ++local) {
    RankSpec spec;
    spec.rank = plan.rank_offset + local;
    auto set = [&spec](const char* name, const std::string& value) { spec.env.emplace_back(name, value); };
    const std::string rank = std::to_string(spec.rank);
    const std::string world = std::to_string(plan.world_size);
    const std::string local_rank = std::to_string(local);
    const std::string local_size = std::to_string(plan.local_size);
    const std::string restarts = std::to_string(plan.attempt);
    set("COLLX_RANK", rank);
    set("COLLX_WORLD_SIZE", world);
    set("COLLX_LOCAL_RANK", local_rank);
    set("COLLX_LOCAL_WORLD_SIZE", local_size);
    set("COLLX_STORE_ADDR", plan.store_addr);
    set("COLLX_RESTART_COUNT", restarts);
    set("COLLX_NODE_RANK", std::to_string(plan.node_rank));
    set("RANK", rank);
    set("WORLD_SIZE", world);
    set("LOCAL_RANK", local_rank);
    set("LOCAL_WORLD_SIZE", local_size);
    set("GROUP_RANK", std::to_string(plan.node_rank));
    set("GROUP_WORLD_SIZE", std::to_string(plan.nnodes));
    set("ROLE_RANK", rank);
    set("ROLE_WORLD_SIZE", world);
    set("MASTER_ADDR", store_host);
    // The library's torchrun convention: collx's store listens on MASTER_PORT + 1.
    set("MASTER_PORT", std::to_string(store_port - 1));
    set("TORCHELASTIC_RESTART_COUNT", restarts);
    set("TORCHELASTIC_MAX_RESTARTS", std::to_string(options.max_restarts));
    set("TORCHELASTIC_RUN_ID", options.run_id);
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace collx_run
