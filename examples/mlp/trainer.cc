// Training loop of the example MLP on a DP x TP (+SP) x PP grid.
#include "examples/mlp/trainer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <vector>

#include "examples/mlp/mlp_math.h"

namespace mlp {
namespace {

enum TensorId : uint64_t { kW1 = 0, kB1 = 1, kW2 = 2, kB2 = 3 };

struct Rank {
  int32_t world = 0, dp = 0, tp = 0, pp = 0;  // coordinates
  int32_t dp_size = 1, tp_size = 1, pp_size = 1;
  collx_comm_t world_comm = nullptr, tp_comm = nullptr, pp_comm = nullptr, dp_comm = nullptr;
  bool has_layer1() const { return pp_size == 1 || pp == 0; }
  bool has_layer2() const { return pp_size == 1 || pp == 1; }
  size_t hidden() const { return kHidden / static_cast<size_t>(tp_size); }
};

// This rank's TP shard of the initial full parameters: W1 rows and W2 columns.
std::map<uint64_t, std::vector<float>> initial_shards(const Rank& r) {
  const size_t hl = r.hidden(), h0 = static_cast<size_t>(r.tp) * hl;
  std::map<uint64_t, std::vector<float>> m;
  if (r.has_layer1()) {
    std::vector<float> w1 = initial_w1(), b1 = initial_b1();
    m[kW1].assign(w1.begin() + static_cast<long>(h0 * kIn), w1.begin() + static_cast<long>((h0 + hl) * kIn));
    m[kB1].assign(b1.begin() + static_cast<long>(h0), b1.begin() + static_cast<long>(h0 + hl));
  }
  if (r.has_layer2()) {
    std::vector<float> w2 = initial_w2();
    for (size_t o = 0; o < kOut; ++o)
      for (size_t h = 0; h < hl; ++h) m[kW2].push_back(w2[o * kHidden + h0 + h]);
    m[kB2] = initial_b2();
  }
  return m;
}

collx_layout_t build_layout(const Options& opt, const Rank& r, const std::map<uint64_t, std::vector<float>>& init) {
  collx_layout_config_t c;
  collx_layout_config_init(&c, sizeof c);
  c.dp_size = r.dp_size;
  c.partition = opt.zero == 3 ? COLLX_PART_PER_TENSOR : COLLX_PART_FLAT;
  c.align_elems = 4;
  c.bucket_elems = 40;  // several buckets, one smaller than W1
  collx_layout_t l = nullptr;
  check(collx_layout_create(&c, &l), "collx_layout_create", [&] { return collx_layout_last_error(nullptr); });
  for (const auto& kv : init) {
    uint32_t flags = 0;
    // b2 exists whole on every TP rank: replicated (its gradient is identical there), or,
    // under SP, a norm-like parameter whose gradient must be summed over TP.
    if (kv.first == kB2 && r.tp_size > 1) flags = opt.sp ? COLLX_TENSOR_SP_NORM : COLLX_TENSOR_TP_REPLICATED;
    size_t n = kv.second.size();
    if (opt.skew_layout && r.world == 1 && kv.first == kB1) n += 1;
    check(collx_layout_add(l, kv.first, n, COLLX_FLOAT32, flags), "collx_layout_add", [&] { return collx_layout_last_error(l); });
  }
  check(collx_layout_finalize(l), "collx_layout_finalize", [&] { return collx_layout_last_error(l); });
  // Every DP replica must plan the same buffer, or buckets would mix tensors.
  check(collx_layout_verify(l, r.dp_comm), "collx_layout_verify", [&] { return collx_layout_last_error(l); });
  return l;
}

// The tp/sp ops on the example's data, through Buffers: with --device collx sees device
// memory, as an engine's activations would be; the result comes back to the host math.
std::vector<float> sp_gather(const std::vector<float>& part, size_t rows, size_t cols, const Rank& r) {
  Buffer in(part), out(rows * static_cast<size_t>(r.tp_size) * cols);
  check(collx_sp_gather_first(in.data(), out.data(), rows, cols, COLLX_FLOAT32, r.tp_comm), "collx_sp_gather_first",
        [&] { return collx_last_error(nullptr); });
  return out.read();
}

std::vector<float> sp_reduce_scatter(const std::vector<float>& full, size_t rows, size_t cols, const Rank& r) {
  Buffer in(full), out(rows / static_cast<size_t>(r.tp_size) * cols);
  check(collx_sp_reduce_scatter_first(in.data(), out.data(), rows, cols, COLLX_FLOAT32, r.tp_comm),
        "collx_sp_reduce_scatter_first", [&] { return collx_last_error(nullptr); });
  return out.read();
}

void tp_allreduce(float* values, size_t n, const Rank& r) {
  check(collx_tp_allreduce(values, n, COLLX_FLOAT32, r.tp_comm), "collx_tp_allreduce",
        [&] { return collx_last_error(nullptr); });
}

// One step without pipelining: (SP) gather, column-parallel layer 1, row-parallel layer 2
// with g (all-reduce) or the SP reduce-scatter, loss, and the conjugate backward.
double forward_backward(const Options& opt, const Rank& r, ParamStore& s, int step, float loss_scale) {
  const size_t dp_rows = kBatch / static_cast<size_t>(r.dp_size), hl = r.hidden();
  const size_t n_local = opt.sp ? dp_rows / static_cast<size_t>(r.tp_size) : dp_rows;
  const size_t first = static_cast<size_t>(r.dp) * dp_rows + (opt.sp ? static_cast<size_t>(r.tp) * n_local : 0);
  std::vector<float> x = batch_inputs(first, n_local, step), t = batch_targets(first, n_local, step);
  const std::vector<float> x_full = opt.sp ? sp_gather(x, n_local, kIn, r) : x;
  const std::vector<float> w1 = s.param_host(kW1), b1 = s.param_host(kB1), w2 = s.param_host(kW2),
                           b2 = s.param_host(kB2);
  std::vector<float> a = layer1_forward(x_full.data(), dp_rows, w1.data(), b1.data(), hl);
  std::vector<float> y_part = layer2_partial(a.data(), dp_rows, w2.data(), hl);
  std::vector<float> y, dy(n_local * kOut);
  if (opt.sp) {
    y = sp_reduce_scatter(y_part, dp_rows, kOut, r);
  } else if (r.tp_size > 1) {
    Buffer yb(y_part);
    tp_allreduce(yb.data(), yb.size(), r);
    y = yb.read();
  } else {
    y = y_part;
  }
  double loss = loss_and_grad(y.data(), t.data(), n_local, b2.data(), loss_scale / static_cast<float>(dp_rows), dy.data());
  const std::vector<float> dy_full = opt.sp ? sp_gather(dy, n_local, kOut, r) : dy;
  std::vector<float> gb2 = s.grad_host(kB2), gw2 = s.grad_host(kW2), gw1 = s.grad_host(kW1), gb1 = s.grad_host(kB1);
  bias_backward(dy.data(), n_local, kOut, gb2.data());
  std::vector<float> da = layer2_backward(dy_full.data(), a.data(), dp_rows, w2.data(), hl, gw2.data());
  layer1_backward(da.data(), a.data(), x_full.data(), dp_rows, hl, gw1.data(), gb1.data());
  s.set_grad(kB2, gb2);
  s.set_grad(kW2, gw2);
  s.set_grad(kW1, gw1);
  s.set_grad(kB1, gb1);
  if (opt.sp) tp_allreduce(s.grad(kB2), kOut, r);  // Megatron's all-reduce of sequence-parallel norm gradients
  return (opt.sp || r.tp == 0) ? loss : 0.0;  // each row's loss counted once
}

// Adds a backward pass's contribution into the tensors' gradients (through host copies).
void accumulate_grads(ParamStore& s, std::initializer_list<uint64_t> ids,
                      const std::function<void(std::map<uint64_t, std::vector<float>>&)>& backward) {
  std::map<uint64_t, std::vector<float>> g;
  for (uint64_t id : ids) g[id] = s.grad_host(id);
  backward(g);
  for (uint64_t id : ids) s.set_grad(id, g[id]);
}

// One step of a two-stage pipeline (tp = 1): 1F1B over micro-batches, each action's
// sends batched with the next action's receives. The messages (a forward, da backward)
// are Buffers: device memory with --device.
double pipeline_step(const Options& opt, const Rank& r, ParamStore& s, int step, float loss_scale) {
  const size_t dp_rows = kBatch / static_cast<size_t>(r.dp_size), m = static_cast<size_t>(opt.microbatches);
  const size_t rows = dp_rows / m, first = static_cast<size_t>(r.dp) * dp_rows;
  const bool stage0 = r.pp == 0;
  size_t n = 0;
  check(collx_pp_schedule_1f1b(r.pp_size, r.pp, opt.microbatches, nullptr, 0, &n), "collx_pp_schedule_1f1b");
  std::vector<collx_pp_action_t> acts(n);
  check(collx_pp_schedule_1f1b(r.pp_size, r.pp, opt.microbatches, acts.data(), n, &n), "collx_pp_schedule_1f1b");
  std::vector<std::vector<float>> x(m), a(m);
  std::vector<Buffer> a_msg, da_msg;
  for (size_t i = 0; i < m; ++i) {
    a_msg.emplace_back(rows * kHidden);
    da_msg.emplace_back(rows * kHidden);
  }
  double loss = 0;
  const float* send_next = nullptr;
  const float* send_prev = nullptr;
  for (size_t k = 0; k <= acts.size(); ++k) {
    const collx_pp_action_t* act = k < acts.size() ? &acts[k] : nullptr;
    float* recv_prev = act && act->kind == COLLX_PP_FORWARD && !stage0 ? a_msg[act->microbatch].data() : nullptr;
    float* recv_next = act && act->kind == COLLX_PP_BACKWARD && stage0 ? da_msg[act->microbatch].data() : nullptr;
    check(collx_pp_exchange(send_next, recv_prev, send_prev, recv_next, rows * kHidden, COLLX_FLOAT32, 0, r.pp_comm,
                            60000),
          "collx_pp_exchange", [&] { return collx_last_error(nullptr); });
    send_next = send_prev = nullptr;
    if (!act) break;
    const size_t mb = static_cast<size_t>(act->microbatch), row0 = first + mb * rows;
    if (stage0 && act->kind == COLLX_PP_FORWARD) {
      x[mb] = batch_inputs(row0, rows, step);
      a[mb] = layer1_forward(x[mb].data(), rows, s.param_host(kW1).data(), s.param_host(kB1).data(), kHidden);
      a_msg[mb].write(a[mb]);
      send_next = a_msg[mb].data();
    } else if (stage0) {
      const std::vector<float> da = da_msg[mb].read();
      accumulate_grads(s, {kW1, kB1}, [&](std::map<uint64_t, std::vector<float>>& g) {
        layer1_backward(da.data(), a[mb].data(), x[mb].data(), rows, kHidden, g[kW1].data(), g[kB1].data());
      });
    } else if (act->kind == COLLX_PP_FORWARD) {
      a[mb] = a_msg[mb].read();
      std::vector<float> y = layer2_partial(a[mb].data(), rows, s.param_host(kW2).data(), kHidden), dy(rows * kOut);
      std::vector<float> t = batch_targets(row0, rows, step);
      loss += loss_and_grad(y.data(), t.data(), rows, s.param_host(kB2).data(), loss_scale / static_cast<float>(dp_rows),
                            dy.data());
      x[mb] = dy;  // the last stage keeps dy for its backward
    } else {
      std::vector<float> da;
      accumulate_grads(s, {kB2, kW2}, [&](std::map<uint64_t, std::vector<float>>& g) {
        bias_backward(x[mb].data(), rows, kOut, g[kB2].data());
        da = layer2_backward(x[mb].data(), a[mb].data(), rows, s.param_host(kW2).data(), kHidden, g[kW2].data());
      });
      da_msg[mb].write(da);
      send_prev = da_msg[mb].data();
    }
  }
  return loss;
}

uint64_t fnv(const std::vector<float>& v, uint64_t h) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Replicas must stay bit-identical: every DP rank hashes its parameters, all compare.
std::map<uint64_t, std::vector<float>> check_replicas(const Rank& r, ParamStore& s,
                                                      const std::map<uint64_t, std::vector<float>>& ids, int step) {
  std::map<uint64_t, std::vector<float>> full;
  uint64_t h = 1469598103934665603ull;
  for (const auto& kv : ids) h = fnv(full[kv.first] = s.full_tensor(kv.first), h);
  std::vector<uint64_t> all(static_cast<size_t>(r.dp_size));
  check(collx_allgather(&h, all.data(), 1, COLLX_UINT64, r.dp_comm, nullptr), "collx_allgather");
  for (size_t i = 1; i < all.size(); ++i)
    if (all[i] != all[0])
      throw Failure{COLLX_ERR_INTERNAL, "step " + std::to_string(step) + ": DP replica " + std::to_string(i) +
                                            " holds different parameters than DP rank 0"};
  return full;
}

// Full parameters (W1, b1, W2, b2) on world rank 0: TP shards gathered, stage 1 sent over.
std::vector<float> consolidate(const Rank& r, std::map<uint64_t, std::vector<float>>& mine) {
  const size_t hl = r.hidden();
  std::vector<float> w1(kHidden * kIn), b1(kHidden), w2(kOut * kHidden), b2(kOut);
  if (r.has_layer1()) {
    check(collx_sp_gather_first(mine[kW1].data(), w1.data(), hl, kIn, COLLX_FLOAT32, r.tp_comm), "gather W1");
    check(collx_sp_gather_first(mine[kB1].data(), b1.data(), hl, 1, COLLX_FLOAT32, r.tp_comm), "gather b1");
  }
  if (r.has_layer2()) {
    check(collx_tp_gather_last(mine[kW2].data(), w2.data(), kOut, hl, COLLX_FLOAT32, r.tp_comm), "gather W2");
    b2 = mine[kB2];
  }
  if (r.pp_size > 1) {
    if (r.pp == 1) {
      check(collx_send(w2.data(), w2.size(), COLLX_FLOAT32, 0, 1, r.pp_comm, nullptr), "send W2");
      check(collx_send(b2.data(), b2.size(), COLLX_FLOAT32, 0, 1, r.pp_comm, nullptr), "send b2");
    } else {
      check(collx_recv(w2.data(), w2.size(), COLLX_FLOAT32, 1, 1, r.pp_comm, nullptr), "recv W2");
      check(collx_recv(b2.data(), b2.size(), COLLX_FLOAT32, 1, 1, r.pp_comm, nullptr), "recv b2");
    }
  }
  std::vector<float> all = w1;
  all.insert(all.end(), b1.begin(), b1.end());
  all.insert(all.end(), w2.begin(), w2.end());
  all.insert(all.end(), b2.begin(), b2.end());
  return all;
}

Rank locate(const Options& opt, collx_comm_t world, collx_grid_t* grid) {
  collx_grid_config_t gc;
  collx_grid_config_init(&gc, sizeof gc);
  gc.tp = opt.tp;
  gc.pp = opt.pp;
  check(collx_grid_create(world, &gc, grid), "collx_grid_create", [&] { return collx_grid_last_error(nullptr); });
  Rank r;
  r.world_comm = world;
  collx_comm_rank(world, &r.world);
  int32_t coords[COLLX_GRID_NUM_DIMS], dims[COLLX_GRID_NUM_DIMS];
  collx_grid_coords(*grid, r.world, coords);
  collx_grid_dims(*grid, dims);
  r.dp = coords[COLLX_DIM_DP];
  r.tp = coords[COLLX_DIM_TP];
  r.pp = coords[COLLX_DIM_PP];
  r.dp_size = dims[COLLX_DIM_DP];
  r.tp_size = dims[COLLX_DIM_TP];
  r.pp_size = dims[COLLX_DIM_PP];
  collx_grid_comm(*grid, COLLX_AXIS_TP, &r.tp_comm);
  collx_grid_comm(*grid, COLLX_AXIS_PP, &r.pp_comm);
  collx_grid_comm(*grid, COLLX_AXIS_DP, &r.dp_comm);
  return r;
}

// The dynamic loss scaler of --loss-scale: a small window so that a short run both grows
// and backs off.
collx_scaler_t make_scaler(const Options& opt) {
  if (!opt.loss_scale) return nullptr;
  collx_scaler_config_t c;
  collx_scaler_config_init(&c, sizeof c);
  c.init_scale = 1024;
  c.window = 2;
  c.hysteresis = 1;
  collx_scaler_t s = nullptr;
  check(collx_scaler_create(&c, &s), "collx_scaler_create", [] { return collx_scaler_last_error(nullptr); });
  return s;
}

int32_t world_size(collx_comm_t world) {
  int32_t n = 0;
  collx_comm_size(world, &n);
  return n;
}

uint64_t first_local_id(const std::map<uint64_t, std::vector<float>>& init) { return init.begin()->first; }

}  // namespace

void train(const Options& opt, collx_comm_t world) {
  collx_grid_t grid = nullptr;
  Rank r = locate(opt, world, &grid);
  std::unique_ptr<collx_grid_s, collx_status_t (*)(collx_grid_t)> grid_guard(grid, collx_grid_destroy);
  if (r.pp_size > 2 || (r.pp_size > 1 && (r.tp_size > 1 || opt.sp)))
    throw Failure{COLLX_ERR_INVALID_ARG, "this example pipelines 2 stages without tensor parallelism"};
  const int split = r.dp_size * (opt.sp ? r.tp_size : 1) * (r.pp_size > 1 ? opt.microbatches : 1);
  if (kBatch % static_cast<size_t>(split) != 0 || kHidden % static_cast<size_t>(r.tp_size) != 0)
    throw Failure{COLLX_ERR_INVALID_ARG, "the batch of " + std::to_string(kBatch) + " rows must split into " +
                                             std::to_string(split) + " equal parts and the " +
                                             std::to_string(kHidden) + " hidden units over TP " +
                                             std::to_string(r.tp_size)};
  std::map<uint64_t, std::vector<float>> init = initial_shards(r);
  collx_layout_t layout = build_layout(opt, r, init);
  std::unique_ptr<collx_layout_s, collx_status_t (*)(collx_layout_t)> layout_guard(layout, collx_layout_destroy);
  std::unique_ptr<ParamStore> store = make_store(opt, grid, layout, init);
  FILE* out = nullptr;
  if (r.world == 0 && !opt.out.empty()) out = std::fopen(opt.out.c_str(), "w");
  std::unique_ptr<collx_scaler_s, collx_status_t (*)(collx_scaler_t)> scaler(make_scaler(opt), collx_scaler_destroy);
  for (int step = 0; step < opt.steps; ++step) {
    double scale = 1.0;
    if (scaler) collx_scaler_scale(scaler.get(), &scale);
    store->begin_step();
    double loss = r.pp_size > 1 ? pipeline_step(opt, r, *store, step, static_cast<float>(scale))
                                : forward_backward(opt, r, *store, step, static_cast<float>(scale));
    check(collx_allreduce(&loss, &loss, 1, COLLX_FLOAT64, COLLX_SUM, world, nullptr), "collx_allreduce");
    if (step == opt.inf_at && r.world + 1 == world_size(world)) {
      std::vector<float> g = store->grad_host(first_local_id(init));
      g[0] = INFINITY;
      store->set_grad(first_local_id(init), g);
    }
    if (step == opt.die_at && r.world + 1 == world_size(world)) std::_Exit(3);  // a crash mid-step
    store->reduce_grads();
    int32_t skipped = 0;
    if (scaler) {
      // Every rank whose gradients differ takes part: the whole world here.
      int32_t found = store->unscale_and_check(static_cast<float>(1.0 / scale)) ? 1 : 0;
      check(collx_flag_any(&found, world), "collx_flag_any", [] { return collx_last_error(nullptr); });
      check(collx_scaler_update(scaler.get(), found, &skipped), "collx_scaler_update",
            [&] { return collx_scaler_last_error(scaler.get()); });
    }
    const double norm = skipped ? 0.0 : store->grad_norm(r.tp);
    if (skipped)
      store->skip();
    else
      store->step();
    std::map<uint64_t, std::vector<float>> mine = check_replicas(r, *store, init, step);
    std::vector<float> params = consolidate(r, mine);
    if (out) {
      std::fprintf(out, "step %d loss %.9e norm %.9e scale %.9e skipped %d params %zu", step, loss / kBatch, norm,
                   scale, skipped, params.size());
      for (float p : params) std::fprintf(out, " %.9e", static_cast<double>(p));
      std::fprintf(out, "\n");
    }
  }
  if (out) std::fclose(out);
}

}  // namespace mlp
