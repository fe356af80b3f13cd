// Where the example's parameters and gradients live, and how they are reduced and
// stepped: plain data parallelism (collx_dp_* plus SGD in the engine) or ZeRO 1/2/3
// (collx_zero_* with its built-in SGD). Both speak only the public C API.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "examples/mlp/buffers.h"

namespace mlp {

struct Options {
  int tp = 1;
  int pp = 1;
  bool sp = false;
  int zero = 0;  // 0 = plain DP, else the ZeRO stage
  int32_t comm_dtype = COLLX_FLOAT32;
  int steps = 5;
  int microbatches = 2;
  float lr = 0.1f;
  bool skew_layout = false;  // rank 1 registers a different layout (the mismatch test)
  bool device = false;       // parameters, gradients and collx's activations in device memory
  int32_t param_dtype = COLLX_FLOAT32;  // ZeRO's parameter view (bf16: --zero and --device)
  bool loss_scale = false;   // fp16-style dynamic loss scaling (collx_scaler_*)
  int inf_at = -1;           // step at which the last rank's gradient overflows (a test)
  int die_at = -1;           // step at which the last rank exits during backward (a test)
  std::string out;
};

// A failed call, with the message to print.
struct Failure {
  collx_status_t status;
  std::string message;
};

class ParamStore {
 public:
  virtual ~ParamStore() = default;
  // Before forward: make every local parameter readable (ZeRO-3 gathers).
  virtual void begin_step() = 0;
  virtual float* param(uint64_t id) = 0;
  // Where backward accumulates the tensor's gradient (zero at the start of a step).
  virtual float* grad(uint64_t id) = 0;
  // After backward: the DP reduction.
  virtual void reduce_grads() = 0;
  // Global gradient norm over the whole instance, each element counted once.
  virtual double grad_norm(int32_t tp_rank) = 0;
  // Loss scaling: unscale the reduced gradients in place; true when one is inf or NaN.
  virtual bool unscale_and_check(float inv_scale) = 0;
  virtual void step() = 0;
  // An overflow: drop this step's gradients without stepping.
  virtual void skip() = 0;
  // The tensor's current values on this TP/PP shard, identical on every DP rank.
  virtual std::vector<float> full_tensor(uint64_t id) = 0;

  // param() and grad() point at device memory with --device: the host math works on these
  // copies, and writes an accumulated gradient back with set_grad.
  size_t numel(uint64_t id) const { return sizes_.at(id); }
  virtual std::vector<float> param_host(uint64_t id) { return read(param(id), numel(id)); }
  std::vector<float> grad_host(uint64_t id) { return read(grad(id), numel(id)); }
  void set_grad(uint64_t id, const std::vector<float>& g) { write(grad(id), g); }

 protected:
  std::map<uint64_t, size_t> sizes_;
};

// ids: the local tensors (registration order); the layout is finalized and verified over
// the DP communicator before this is called.
std::unique_ptr<ParamStore> make_store(const Options& opt, collx_grid_t grid, collx_layout_t layout,
                                       const std::map<uint64_t, std::vector<float>>& initial);

// Throws Failure when st is not COLLX_OK, with detail() (read after the call failed, as
// the message belongs to the failed call).
void check(collx_status_t st, const std::string& what, const std::function<const char*()>& detail = {});

}  // namespace mlp
