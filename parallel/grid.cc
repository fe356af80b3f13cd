// Process grid: config check across ranks, Megatron mixed-radix coordinates and the
// sub-communicators of the common axis sets (the expert layout's math is in grid_expert.cc).
#include <cstdio>
#include <sstream>

#include "parallel/parallel_internal.h"

namespace collx {
namespace parallel {

namespace {

const char* const kTokens[COLLX_GRID_NUM_DIMS] = {"tp", "cp", "ep", "dp", "pp"};
const uint32_t kAxisBits[COLLX_GRID_NUM_DIMS] = {COLLX_AXIS_TP, COLLX_AXIS_CP, COLLX_AXIS_EP,
                                                 COLLX_AXIS_DP, COLLX_AXIS_PP};
constexpr size_t kOrderWords = 10;  // 80 characters of the order travel in the record
constexpr size_t kRecordWords = 6 + kOrderWords;

// The axis sets created by collx_grid_create, in creation order (Megatron's groups).
const uint32_t kPrecreated[] = {
    COLLX_AXIS_TP,
    COLLX_AXIS_CP,
    COLLX_AXIS_DP,
    COLLX_AXIS_PP,
    COLLX_AXIS_DP | COLLX_AXIS_CP,
    COLLX_AXIS_TP | COLLX_AXIS_PP,
    COLLX_AXIS_TP | COLLX_AXIS_CP,
    COLLX_AXIS_TP | COLLX_AXIS_CP | COLLX_AXIS_DP,
    COLLX_AXIS_TP | COLLX_AXIS_CP | COLLX_AXIS_DP | COLLX_AXIS_PP,
    // Expert layout (Megatron's expert generator): EP, expert TP x EP, expert DP.
    COLLX_AXIS_EP,
    COLLX_AXIS_TP | COLLX_AXIS_EP,
    COLLX_AXIS_EDP,
};
constexpr uint32_t kAllAxes =
    COLLX_AXIS_TP | COLLX_AXIS_CP | COLLX_AXIS_EP | COLLX_AXIS_DP | COLLX_AXIS_PP | COLLX_AXIS_EDP;

// A mask naming EP or EDP is read in the expert layout, where the DP entry is edp.
bool is_expert_set(uint32_t axes) { return (axes & (COLLX_AXIS_EP | COLLX_AXIS_EDP)) != 0; }
bool in_set(uint32_t axes, int d) {
  if (is_expert_set(axes) && d == COLLX_DIM_DP) return (axes & COLLX_AXIS_EDP) != 0;
  return (axes & kAxisBits[d]) != 0;
}

std::string axes_name(uint32_t axes) {
  std::string s;
  for (int d = 0; d < COLLX_GRID_NUM_DIMS; ++d) {
    if (axes & kAxisBits[d]) {
      if (!s.empty()) s += "|";
      for (const char* c = kTokens[d]; *c; ++c) s += static_cast<char>(*c - 'a' + 'A');
    }
  }
  if (axes & COLLX_AXIS_EDP) s += s.empty() ? "EDP" : "|EDP";
  if (axes & ~kAllAxes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s0x%x", s.empty() ? "" : "|",
                  static_cast<unsigned>(axes & ~kAllAxes));
    s += buf;
  }
  return s.empty() ? std::string("(empty set)") : s;
}

struct Record {
  int64_t dims[5];
  uint64_t order_hash;
  std::string order;
};

// Fixed-size record of a config: 5 sizes, the hash of the order, its first 80 characters.
std::vector<uint64_t> encode(const collx_grid_config_t& c, const char* order) {
  std::vector<uint64_t> r(kRecordWords, 0);
  const int32_t v[5] = {c.tp, c.cp, c.ep, c.dp, c.pp};
  for (int i = 0; i < 5; ++i) r[i] = static_cast<uint64_t>(static_cast<int64_t>(v[i]));
  Fnv64 h;
  h.bytes(order, std::strlen(order));
  r[5] = h.value();
  size_t n = std::strlen(order);
  for (size_t i = 0; i < n && i < kOrderWords * 8; ++i)
    r[6 + i / 8] |= static_cast<uint64_t>(static_cast<unsigned char>(order[i])) << (8 * (i % 8));
  return r;
}

std::string describe(const uint64_t* r) {
  std::string order;
  for (size_t i = 0; i < kOrderWords * 8; ++i) {
    char ch = static_cast<char>((r[6 + i / 8] >> (8 * (i % 8))) & 0xff);
    if (!ch) break;
    order += ch;
  }
  std::ostringstream os;
  os << "{tp=" << static_cast<int64_t>(r[0]) << ", cp=" << static_cast<int64_t>(r[1])
     << ", ep=" << static_cast<int64_t>(r[2]) << ", dp=" << static_cast<int64_t>(r[3])
     << ", pp=" << static_cast<int64_t>(r[4]) << ", order=\"" << order << "\"";
  if (std::strlen(order.c_str()) >= kOrderWords * 8) os << "...";
  os << "}";
  return os.str();
}

// Parses `order` into the five dims, fastest first. Missing tokens of size-1 axes are
// appended; returns an empty string on success, else the reason.
std::string parse_order(const std::string& order, const int32_t dims[5], int perm[5]) {
  bool seen[5] = {false, false, false, false, false};
  int n = 0;
  size_t pos = 0;
  while (pos <= order.size()) {
    size_t dash = order.find('-', pos);
    if (dash == std::string::npos) dash = order.size();
    std::string tok = order.substr(pos, dash - pos);
    int found = -1;
    for (int d = 0; d < 5; ++d)
      if (tok == kTokens[d]) found = d;
    if (found < 0) return "unknown token \"" + tok + "\" (expected tp, cp, ep, dp, pp)";
    if (seen[found]) return "token \"" + tok + "\" appears twice";
    seen[found] = true;
    perm[n++] = found;
    pos = dash + 1;
  }
  for (int d = 0; d < 5; ++d) {
    if (seen[d]) continue;
    if (dims[d] != 1)
      return std::string("token \"") + kTokens[d] + "\" is missing and its size is " +
             std::to_string(dims[d]) + " (only size-1 axes may be left out)";
    perm[n++] = d;
  }
  return "";
}

collx_status_t fail(collx_status_t st, const std::string& msg) {
  thread_error() = "collx_grid_create: " + msg;
  return st;
}

collx_status_t create(collx_comm_t world, const collx_grid_config_t* config, collx_grid_t* out) {
  if (!out) return fail(COLLX_ERR_INVALID_ARG, "grid (output) is NULL");
  *out = nullptr;
  if (!world) return fail(COLLX_ERR_INVALID_ARG, "world is NULL");
  if (!config) return fail(COLLX_ERR_INVALID_ARG, "config is NULL");
  if (config->size < sizeof(collx_grid_config_t))
    return fail(COLLX_ERR_INVALID_ARG,
                "config->size is " + std::to_string(config->size) + ", expected " +
                    std::to_string(sizeof(collx_grid_config_t)) + " (call collx_grid_config_init)");
  int32_t world_size = 0, rank = 0;
  collx_status_t st = collx_comm_size(world, &world_size);
  if (st == COLLX_OK) st = collx_comm_rank(world, &rank);
  if (st != COLLX_OK) return fail(st, std::string("world: ") + collx_last_error(world));

  const char* order_c = config->order ? config->order : COLLX_GRID_DEFAULT_ORDER;
  // 1. Every rank must pass the same config.
  std::vector<uint64_t> mine = encode(*config, order_c);
  std::vector<uint64_t> all(kRecordWords * static_cast<size_t>(world_size));
  st = collx_allgather(mine.data(), all.data(), kRecordWords, COLLX_UINT64, world, nullptr);
  if (st != COLLX_OK)
    return fail(st, std::string("allgather of the grid configs failed: ") + collx_last_error(world));
  for (int32_t r = 1; r < world_size; ++r) {
    if (std::memcmp(&all[kRecordWords * r], &all[0], kRecordWords * sizeof(uint64_t)) != 0)
      return fail(COLLX_ERR_INVALID_USAGE,
                  "rank " + std::to_string(r) + " passed grid " + describe(&all[kRecordWords * r]) +
                      " but rank 0 passed " + describe(&all[0]) +
                      " (every rank must pass the same grid)");
  }
  // 2. Validate (identical on every rank from here on).
  int32_t dims[5] = {config->tp, config->cp, config->ep, config->dp, config->pp};
  for (int d = 0; d < 5; ++d) {
    if (dims[d] < 1 && !(d == COLLX_DIM_DP && dims[d] == 0))
      return fail(COLLX_ERR_INVALID_ARG, std::string(kTokens[d]) + " is " +
                                             std::to_string(dims[d]) + ", must be >= 1" +
                                             (d == COLLX_DIM_DP ? " (or 0 = the remainder)" : ""));
  }
  int64_t others = static_cast<int64_t>(dims[0]) * dims[1] * dims[4];
  std::string sizes = "tp=" + std::to_string(dims[0]) + " * cp=" + std::to_string(dims[1]) +
                      " * dp=" + std::to_string(dims[3]) + " * pp=" + std::to_string(dims[4]);
  if (dims[COLLX_DIM_DP] == 0) {
    if (others > world_size || world_size % others != 0)
      return fail(COLLX_ERR_INVALID_ARG, "dp = 0 (the remainder) but world size " +
                                             std::to_string(world_size) +
                                             " is not a multiple of tp*cp*pp = " +
                                             std::to_string(others));
    dims[COLLX_DIM_DP] = static_cast<int32_t>(world_size / others);
  } else if (others * dims[COLLX_DIM_DP] != world_size) {
    return fail(COLLX_ERR_INVALID_ARG,
                sizes + " = " + std::to_string(others * dims[COLLX_DIM_DP]) +
                    " but the world size is " + std::to_string(world_size));
  }
  if (std::strlen(order_c) > kOrderWords * 8)
    return fail(COLLX_ERR_INVALID_ARG, "order is longer than 80 characters");
  int perm[5];
  std::string why = parse_order(order_c, dims, perm);
  if (!why.empty()) return fail(COLLX_ERR_INVALID_ARG, "order \"" + std::string(order_c) + "\": " + why);

  auto grid = new collx_grid_s();
  grid->world = world;
  grid->world_size = world_size;
  grid->rank = rank;
  int32_t stride = 1;
  for (int i = 0; i < 5; ++i) {
    int d = perm[i];
    grid->dims[d] = dims[d];
    grid->stride[d] = stride;
    stride *= d == COLLX_DIM_EP ? 1 : dims[d];  // the dense layers see ep as 1
    if (i) grid->order += "-";
    grid->order += kTokens[d];
  }
  why = plan_expert_layout(grid, perm);
  if (!why.empty()) {
    delete grid;
    return fail(COLLX_ERR_INVALID_ARG, why);
  }
  // 3 and 4. Coordinates, then one split per axis set, in a fixed order on every rank.
  int32_t coords[5], ecoords[5];
  mixed_radix_coords(grid->dims, grid->stride, rank, coords);
  expert_coords(grid, rank, ecoords);
  for (uint32_t axes : kPrecreated) {
    const bool expert = is_expert_set(axes);
    int32_t color = 0;  // the world rank of the group's first member
    if (expert) {
      int32_t first[5];
      for (int d = 0; d < 5; ++d) first[d] = in_set(axes, d) ? 0 : ecoords[d];
      color = expert_rank(grid, first);
    } else {
      for (int d = 0; d < 5; ++d)
        if (!in_set(axes, d) && d != COLLX_DIM_EP) color += coords[d] * grid->stride[d];
    }
    collx_comm_t sub = nullptr;
    st = collx_comm_split(world, color, rank, &sub);
    if (st != COLLX_OK) {
      std::string msg = "collx_comm_split for the " + axes_name(axes) +
                        " communicator failed: " + collx_last_error(world);
      for (auto& p : grid->comms) collx_comm_destroy(p.second);
      delete grid;
      return fail(st, msg);
    }
    grid->comms.emplace_back(axes, sub);
  }
  *out = grid;
  return COLLX_OK;
}

collx_status_t grid_fail(collx_grid_t grid, collx_status_t st, const std::string& msg) {
  thread_error() = msg;
  if (grid) grid->error.set(msg);
  return st;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using collx::parallel::grid_fail;
using collx::parallel::guarded;

extern "C" {

COLLX_API collx_status_t collx_grid_config_init(collx_grid_config_t* config, size_t size) {
  if (!config || size < sizeof(size_t))
    return collx::parallel::refuse_arg(nullptr, "collx_grid_config_init", "config is NULL or size is too small (pass sizeof the struct)");
  collx_grid_config_t c;
  c.size = size < sizeof(c) ? size : sizeof(c);
  c.tp = c.cp = c.ep = c.pp = 1;
  c.dp = 0;
  c.order = nullptr;
  std::memcpy(config, &c, c.size);
  config->size = size;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_grid_create(collx_comm_t world, const collx_grid_config_t* config,
                                           collx_grid_t* grid) {
  return guarded([&] { return collx::parallel::create(world, config, grid); },
                 [](const std::string& m) { collx::parallel::thread_error() = "collx_grid_create: " + m; });
}

COLLX_API collx_status_t collx_grid_destroy(collx_grid_t grid) {
  if (!grid) return COLLX_OK;
  collx_status_t first = COLLX_OK;
  for (auto it = grid->comms.rbegin(); it != grid->comms.rend(); ++it) {
    collx_status_t st = collx_comm_destroy(it->second);
    if (st != COLLX_OK && first == COLLX_OK) first = st;
  }
  delete grid;
  return first;
}

COLLX_API collx_status_t collx_grid_comm(collx_grid_t grid, uint32_t axes, collx_comm_t* comm) {
  if (!grid || !comm) return grid_fail(grid, COLLX_ERR_INVALID_ARG, "collx_grid_comm: grid or comm is NULL");
  return guarded(
      [&]() -> collx_status_t {
        *comm = nullptr;
        for (const auto& p : grid->comms) {
          if (p.first == axes && axes != 0) {
            *comm = p.second;
            return COLLX_OK;
          }
        }
        std::string avail;
        for (const auto& p : grid->comms)
          avail += (avail.empty() ? "" : ", ") + collx::parallel::axes_name(p.first);
        return grid_fail(grid, COLLX_ERR_INVALID_ARG,
                         "collx_grid_comm: no communicator for the axis set " +
                             collx::parallel::axes_name(axes) + " (available: " + avail + ")");
      },
      [&](const std::string& m) { grid_fail(grid, COLLX_OK, "collx_grid_comm: " + m); });
}

COLLX_API collx_status_t collx_grid_dims(collx_grid_t grid, int32_t dims[COLLX_GRID_NUM_DIMS]) {
  if (!grid || !dims) return grid_fail(grid, COLLX_ERR_INVALID_ARG, "collx_grid_dims: grid or dims is NULL");
  for (int d = 0; d < COLLX_GRID_NUM_DIMS; ++d) dims[d] = grid->dims[d];
  return COLLX_OK;
}

COLLX_API collx_status_t collx_grid_coords(collx_grid_t grid, int32_t rank,
                                           int32_t coords[COLLX_GRID_NUM_DIMS]) {
  if (!grid || !coords)
    return grid_fail(grid, COLLX_ERR_INVALID_ARG, "collx_grid_coords: grid or coords is NULL");
  if (rank < 0 || rank >= grid->world_size)
    return grid_fail(grid, COLLX_ERR_INVALID_ARG,
                     "collx_grid_coords: rank " + std::to_string(rank) + " is out of range [0, " +
                         std::to_string(grid->world_size) + ")");
  collx::parallel::mixed_radix_coords(grid->dims, grid->stride, rank, coords);
  // The dense layers see ep as 1; the EP index comes from the expert layout.
  int32_t ec[COLLX_GRID_NUM_DIMS];
  collx::parallel::expert_coords(grid, rank, ec);
  coords[COLLX_DIM_EP] = ec[COLLX_DIM_EP];
  return COLLX_OK;
}

COLLX_API collx_status_t collx_grid_rank_of(collx_grid_t grid,
                                            const int32_t coords[COLLX_GRID_NUM_DIMS],
                                            int32_t* rank) {
  if (!grid || !coords || !rank)
    return grid_fail(grid, COLLX_ERR_INVALID_ARG, "collx_grid_rank_of: grid, coords or rank is NULL");
  int32_t r = 0;
  for (int d = 0; d < COLLX_GRID_NUM_DIMS; ++d) {
    if (coords[d] < 0 || coords[d] >= grid->dims[d])
      return grid_fail(grid, COLLX_ERR_INVALID_ARG,
                       std::string("collx_grid_rank_of: coordinate ") +
                           collx::parallel::kTokens[d] + " = " + std::to_string(coords[d]) +
                           " is out of range [0, " + std::to_string(grid->dims[d]) + ")");
    if (d != COLLX_DIM_EP) r += coords[d] * grid->stride[d];  // ep follows from cp and dp
  }
  *rank = r;
  return COLLX_OK;
}

COLLX_API const char* collx_grid_last_error(collx_grid_t grid) {
  if (!grid) return collx::parallel::thread_error().c_str();
  return grid->error.get();
}

}  // extern "C"
