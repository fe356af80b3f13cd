// Internals of the MoE dispatch/combine helpers (collx_moe_*): the routing plan shared by
// moe_plan.cc (counts) and moe_exchange.cc (data movement).
#pragma once

#include <string>
#include <vector>

#include "parallel/parallel_internal.h"

struct collx_moe_plan_s {
  collx_comm_t comm = nullptr;
  int32_t ep = 1;               // size of the EP communicator
  int32_t rank = 0;             // this rank in it
  int32_t num_experts = 0;      // E
  int32_t top_k = 1;            // k
  int32_t local_experts = 0;    // L = E / EP
  int64_t timeout_ms = -1;
  size_t num_tokens = 0;        // T, this rank's tokens
  // Send side: row i of the send buffer is copy send_copy[i] (= t*k + j), rows sorted by
  // (expert, token, slot), so by destination rank too; copy_row is the inverse.
  std::vector<size_t> send_copy;
  std::vector<size_t> copy_row;
  std::vector<size_t> send_rows;  // [EP] rows to each rank
  std::vector<size_t> recv_rows;  // [EP] rows from each rank
  // Receive side: arrival row a (grouped by source rank, then local expert) is row
  // arrival_to_expert[a] of expert_in (grouped by local expert, then source rank).
  std::vector<size_t> arrival_to_expert;
  std::vector<size_t> expert_rows;  // [L]
  size_t num_recv = 0;
  collx::parallel::ErrorSlot error;
};

namespace collx {
namespace parallel {

// Stores "fn: msg" as the plan's last error (and the thread's) and returns st.
collx_status_t moe_fail(collx_moe_plan_t plan, collx_status_t st, const char* fn, const std::string& msg);

}  // namespace parallel
}  // namespace collx
