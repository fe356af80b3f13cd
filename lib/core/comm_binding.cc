// COLLX_BIND: pin the calling thread (the rank's main thread, which creates the world
// communicator) to the CPUs lib/topo chooses for its local rank. Done once per process, at
// the first world communicator; threads the program starts afterwards inherit it.
#include <sched.h>

#include <mutex>
#include <string>
#include <vector>

#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "lib/core/comm.h"
#include "lib/topo/topo_decide.h"
#include "lib/topo/topo_load.h"

namespace collx {

Status apply_cpu_binding(int local_rank, int local_size) {
  topo::BindMode mode;
  COLLX_RETURN_IF_ERROR(topo::parse_bind_mode(setting_raw(SettingId::BIND), &mode));
  if (mode == topo::BindMode::kNone) return Status::Ok();
  static std::once_flag once;
  static Status result;
  std::call_once(once, [&] {
    topo::Topology machine;
    Status st = topo::load_this_machine(&machine);
    std::vector<int> pus;
    if (st.ok()) st = topo::bind_cpus(machine, mode, local_rank, local_size, /*gpu=*/-1, &pus);
    if (!st.ok()) {
      result = st.with_context("COLLX_BIND=" + setting_raw(SettingId::BIND) + ": ");
      return;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    std::string list;
    for (int pu : pus) {
      if (pu < 0 || pu >= CPU_SETSIZE) continue;
      CPU_SET(pu, &set);
      list += (list.empty() ? "" : ",") + std::to_string(pu);
    }
    if (CPU_COUNT(&set) == 0) {
      result = make_status(COLLX_ERR_INVALID_ARG, "COLLX_BIND=%s: no CPU found for local rank %d of %d",
                           topo::bind_mode_name(mode), local_rank, local_size);
      return;
    }
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
      result = make_status(COLLX_ERR_SYSTEM, "COLLX_BIND=%s: sched_setaffinity(%s) failed",
                           topo::bind_mode_name(mode), list.c_str());
      return;
    }
    COLLX_INFO(INIT, "COLLX_BIND=%s: local rank %d of %d bound to CPUs %s", topo::bind_mode_name(mode), local_rank,
               local_size, list.c_str());
  });
  return result;
}

}  // namespace collx
