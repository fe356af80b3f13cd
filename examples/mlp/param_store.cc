// The two parameter stores of the example: DP (engine-owned parameters, gradient buckets
// reduced by collx_dp, SGD here) and ZeRO (collx_zero owns everything, steps with SGD).
#include "examples/mlp/param_store.h"

#include <algorithm>

namespace mlp {

void check(collx_status_t st, const std::string& what, const std::function<const char*()>& detail) {
  if (st == COLLX_OK) return;
  throw Failure{st, what + ": " + collx_status_name(st) + (detail ? std::string(": ") + detail() : std::string())};
}

namespace {

collx_comm_t axes_comm(collx_grid_t grid, uint32_t axes) {
  collx_comm_t c = nullptr;
  check(collx_grid_comm(grid, axes, &c), "collx_grid_comm", [&] { return collx_grid_last_error(grid); });
  return c;
}

int32_t mem_kind() { return device_memory() ? COLLX_MEM_CUDA : COLLX_MEM_HOST; }

constexpr uint32_t kInstance = COLLX_AXIS_TP | COLLX_AXIS_CP | COLLX_AXIS_DP | COLLX_AXIS_PP;

class DpStore : public ParamStore {
 public:
  DpStore(const Options& opt, collx_grid_t grid, collx_layout_t layout,
          const std::map<uint64_t, std::vector<float>>& initial)
      : grid_(grid), layout_(layout), lr_(opt.lr) {
    for (const auto& kv : initial) {
      params_.emplace(kv.first, Buffer(kv.second));
      sizes_[kv.first] = kv.second.size();
    }
    collx_dp_config_t c;
    collx_dp_config_init(&c, sizeof c);
    c.comm_dtype = opt.comm_dtype;
    c.mem_kind = mem_kind();  // stream NULL: the default stream, as buffers.cc copies on
    check(collx_dp_create(axes_comm(grid, COLLX_AXIS_DP), layout, &c, nullptr, &dp_), "collx_dp_create", [&] { return collx_dp_last_error(nullptr); });
  }
  ~DpStore() override { collx_dp_destroy(dp_); }
  void begin_step() override { check(collx_dp_zero(dp_), "collx_dp_zero", [&] { return collx_dp_last_error(dp_); }); }
  float* param(uint64_t id) override { return params_.at(id).data(); }
  float* grad(uint64_t id) override {
    float* g = nullptr;
    check(collx_dp_grad_ptr(dp_, id, &g), "collx_dp_grad_ptr", [&] { return collx_dp_last_error(dp_); });
    return g;
  }
  void reduce_grads() override {
    // Reverse registration order, as backward produces them; buckets still launch in order.
    for (auto it = params_.rbegin(); it != params_.rend(); ++it)
      check(collx_dp_mark_ready(dp_, it->first), "collx_dp_mark_ready", [&] { return collx_dp_last_error(dp_); });
    check(collx_dp_finish(dp_, -1), "collx_dp_finish", [&] { return collx_dp_last_error(dp_); });
  }
  double grad_norm(int32_t tp_rank) override {
    // Reduced DP gradients are whole on every DP rank: sum over the model-parallel group
    // only (TP x PP), never over DP.
    float* buf = nullptr;
    collx_dp_buffer(dp_, &buf, nullptr);
    double local = 0, norm = 0;
    check(collx_norm_sq_local(layout_, buf, -1, tp_rank, 1, &local), "collx_norm_sq_local", [&] { return collx_layout_last_error(layout_); });
    check(collx_global_norm(local, &norm, axes_comm(grid_, COLLX_AXIS_TP | COLLX_AXIS_PP)), "collx_global_norm", [&] { return collx_last_error(nullptr); });
    return norm;
  }
  bool unscale_and_check(float inv_scale) override {
    float* buf = nullptr;
    size_t n = 0;
    collx_dp_buffer(dp_, &buf, &n);
    int32_t found = 0;
    check(collx_found_nonfinite(buf, n, inv_scale, &found), "collx_found_nonfinite");
    return found != 0;
  }
  void skip() override {}  // begin_step zeroes the buffer
  void step() override {
    for (auto& kv : params_) {
      std::vector<float> p = kv.second.read();
      const std::vector<float> g = grad_host(kv.first);
      for (size_t i = 0; i < p.size(); ++i) p[i] -= lr_ * g[i];
      kv.second.write(p);
    }
  }
  std::vector<float> full_tensor(uint64_t id) override { return params_.at(id).read(); }

 private:
  collx_grid_t grid_;
  collx_layout_t layout_;
  std::map<uint64_t, Buffer> params_;
  float lr_;
  collx_dp_t dp_ = nullptr;
};

class ZeroStore : public ParamStore {
 public:
  ZeroStore(const Options& opt, collx_grid_t grid, collx_layout_t layout,
            const std::map<uint64_t, std::vector<float>>& initial)
      : grid_(grid), stage_(opt.zero), param_dtype_(opt.param_dtype) {
    collx_zero_config_t c;
    collx_zero_config_init(&c, sizeof c);
    c.stage = opt.zero;
    c.optimizer = COLLX_OPT_SGD;
    c.lr = opt.lr;
    c.comm_dtype = opt.comm_dtype;
    c.max_live_elems = 4096;
    c.mem_kind = mem_kind();
    c.param_dtype = opt.param_dtype;  // a 16-bit view of the float32 master (device only)
    check(collx_zero_create(axes_comm(grid, COLLX_AXIS_DP), layout, &c, &z_), "collx_zero_create", [&] { return collx_zero_last_error(nullptr); });
    for (const auto& kv : initial) {
      ids_.push_back(kv.first);
      sizes_[kv.first] = kv.second.size();
      check(collx_zero_load(z_, kv.first, 0, kv.second.size(), kv.second.data()), "collx_zero_load", [&] { return collx_zero_last_error(z_); });
      if (stage_ == 3) grads_.emplace(kv.first, Buffer(kv.second.size()));
    }
    check(collx_zero_publish(z_), "collx_zero_publish", [&] { return collx_zero_last_error(z_); });
  }
  ~ZeroStore() override { collx_zero_destroy(z_); }
  void begin_step() override {
    if (stage_ != 3) return;
    check(collx_zero3_fetch(z_, ids_.data(), ids_.size()), "collx_zero3_fetch", [&] { return collx_zero_last_error(z_); });
    for (auto& kv : grads_) kv.second.write(std::vector<float>(kv.second.size(), 0.0f));
  }
  float* param(uint64_t id) override {
    float* p = nullptr;
    check(collx_zero_param_ptr(z_, id, &p), "collx_zero_param_ptr", [&] { return collx_zero_last_error(z_); });
    return p;
  }
  std::vector<float> param_host(uint64_t id) override {
    if (param_dtype_ == COLLX_FLOAT32) return ParamStore::param_host(id);
    void* view = nullptr;
    check(collx_zero_param_view(z_, id, &view, nullptr), "collx_zero_param_view", [&] { return collx_zero_last_error(z_); });
    return read_bf16(view, numel(id));
  }
  float* grad(uint64_t id) override {
    if (stage_ == 3) return grads_.at(id).data();
    float* g = nullptr;
    check(collx_zero_grad_ptr(z_, id, &g), "collx_zero_grad_ptr", [&] { return collx_zero_last_error(z_); });
    return g;
  }
  void reduce_grads() override {
    if (stage_ == 3) {
      // One reduce-scatter per tensor: every rank in the same (id) order.
      for (uint64_t id : ids_)
        check(collx_zero3_reduce_grad(z_, id, grads_.at(id).data()), "collx_zero3_reduce_grad", [&] { return collx_zero_last_error(z_); });
      check(collx_zero3_release(z_, ids_.data(), ids_.size()), "collx_zero3_release", [&] { return collx_zero_last_error(z_); });
      return;
    }
    for (auto it = ids_.rbegin(); it != ids_.rend(); ++it)
      check(collx_zero_mark_ready(z_, *it), "collx_zero_mark_ready", [&] { return collx_zero_last_error(z_); });
    check(collx_zero_finish_grads(z_, -1), "collx_zero_finish_grads", [&] { return collx_zero_last_error(z_); });
  }
  double grad_norm(int32_t tp_rank) override {
    // Sharded gradients: the shards' squares summed over the whole DP x TP x PP instance.
    double local = 0, norm = 0;
    check(collx_zero_grad_norm_sq(z_, tp_rank, 1, &local), "collx_zero_grad_norm_sq", [&] { return collx_zero_last_error(z_); });
    check(collx_global_norm(local, &norm, axes_comm(grid_, kInstance)), "collx_global_norm", [&] { return collx_last_error(nullptr); });
    return norm;
  }
  bool unscale_and_check(float inv_scale) override {
    float* grad = nullptr;
    size_t n = 0;
    collx_zero_shard(z_, nullptr, &grad, &n);
    int32_t found = 0;
    check(collx_found_nonfinite(grad, n, inv_scale, &found), "collx_found_nonfinite");
    return found != 0;
  }
  void skip() override {
    float* grad = nullptr;
    size_t n = 0;
    collx_zero_shard(z_, nullptr, &grad, &n);
    write(grad, std::vector<float>(n, 0.0f));
  }
  void step() override {
    check(collx_zero_step(z_, 1.0), "collx_zero_step", [&] { return collx_zero_last_error(z_); });
    check(collx_zero_publish(z_), "collx_zero_publish", [&] { return collx_zero_last_error(z_); });
  }
  std::vector<float> full_tensor(uint64_t id) override {
    std::vector<float> out(sizes_.at(id));
    if (stage_ != 3) return param_host(id);  // the published parameters: a real replica check
    check(collx_zero_full_tensor(z_, id, out.data()), "collx_zero_full_tensor", [&] { return collx_zero_last_error(z_); });
    return out;
  }

 private:
  collx_grid_t grid_;
  int stage_;
  int32_t param_dtype_;
  collx_zero_t z_ = nullptr;
  std::vector<uint64_t> ids_;
  std::map<uint64_t, Buffer> grads_;
};

}  // namespace

std::unique_ptr<ParamStore> make_store(const Options& opt, collx_grid_t grid, collx_layout_t layout,
                                       const std::map<uint64_t, std::vector<float>>& initial) {
  if (opt.param_dtype != COLLX_FLOAT32 && (opt.zero == 0 || !opt.device))
    throw Failure{COLLX_ERR_INVALID_ARG, "--param-dtype bf16 needs --zero 1-3 and --device (ZeRO's 16-bit views)"};
  if (opt.zero == 0) return std::make_unique<DpStore>(opt, grid, layout, initial);
  return std::make_unique<ZeroStore>(opt, grid, layout, initial);
}

}  // namespace mlp
