// The small MoE model of collx-example-moe, in double precision: a dense tanh layer, a
// softmax top-k router, E linear experts, squared-error loss averaged over the global
// batch. The per-token math is shared by the one-process reference and the EP run; only
// the movement of token copies to the experts differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moe {

constexpr size_t kDim = 6;            // D: hidden size
constexpr int32_t kExperts = 4;       // E
constexpr int32_t kTopK = 2;          // k
constexpr size_t kTokensPerRank = 8;  // N
constexpr double kLearningRate = 0.2;

struct Params {
  std::vector<double> w_in;                  // D x D, row-major (input i, output o)
  std::vector<double> w_router;              // D x E
  std::vector<std::vector<double>> experts;  // E of D x D
};

Params init_params();
// Token g of the global batch at `step`: input and target rows of D.
void sample(int step, size_t g, double* x, double* y);

// Dense layer and router for one token: h = tanh(x W_in), p = softmax(h W_router), the k
// largest p (ties: lower expert) as idx[k] with gates g[k] = p[idx] rounded to float (the
// gate type of collx_moe_combine; the backward treats the rounding as identity).
void dense_router_forward(const Params& w, const double* x, double* h, double* p, int32_t* idx, double* gates);
// Backward of the above for one token given dL/dgates and dL/dh from the MoE layer
// (dh is updated in place with the router's share): accumulates dW_in and dW_router.
void dense_router_backward(const Params& w, const double* x, const double* h, const double* p, const int32_t* idx,
                           const double* dgates, double* dh, Params* grad);

// Expert: out = in W_e; backward accumulates dW_e += in^T dout and sets din = dout W_e^T.
void expert_forward(const std::vector<double>& w, const double* in, double* out);
void expert_backward(const std::vector<double>& w, const double* in, const double* dout, std::vector<double>* dw,
                     double* din);

Params zero_like(const Params& w);
void sgd(Params* w, const Params& grad);

// One training step of the whole global batch (world * N tokens) on one process; returns
// the loss.
double reference_step(Params* w, int step, int world);

}  // namespace moe
