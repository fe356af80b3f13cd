// The example's model: a two-layer MLP, y = tanh(x W1^T + b1) W2^T + b2, with a squared-error
// loss, written as plain loops over row-major float buffers. The hidden dimension may be a
// tensor-parallel shard (W1 rows and W2 columns of this rank); t = 1 is the full model.
#pragma once

#include <cstddef>
#include <vector>

namespace mlp {

constexpr size_t kIn = 8;       // D
constexpr size_t kHidden = 12;  // H, divisible by every TP size used (1, 2, 3, 4)
constexpr size_t kOut = 4;      // O
constexpr size_t kBatch = 16;   // global batch, divisible by DP x TP and by the micro-batches

// Deterministic data of global row i at a step, and the initial full parameters.
float input(size_t row, size_t k, int step);
float target(size_t row, size_t o, int step);
std::vector<float> initial_w1();  // [H x D]
std::vector<float> initial_b1();  // [H]
std::vector<float> initial_w2();  // [O x H]
std::vector<float> initial_b2();  // [O]

// Rows [first, first + n) of the global batch.
std::vector<float> batch_inputs(size_t first, size_t n, int step);
std::vector<float> batch_targets(size_t first, size_t n, int step);

// Layer 1 on n rows with a hidden shard of hl units: a = tanh(x W1^T + b1), [n x hl].
std::vector<float> layer1_forward(const float* x, size_t n, const float* w1, const float* b1, size_t hl);
// Layer 2 without its bias: partial outputs a W2^T over the hidden shard, [n x O].
std::vector<float> layer2_partial(const float* a, size_t n, const float* w2, size_t hl);
// Adds b2, returns the loss sum over rows and writes dy = (y - t) * scale.
double loss_and_grad(float* y, const float* t, size_t n, const float* b2, float scale, float* dy);
// Layer 2 backward: dW2 += dy^T a, da = dy W2 ([n x hl]); db2 is added separately.
std::vector<float> layer2_backward(const float* dy, const float* a, size_t n, const float* w2, size_t hl, float* dw2);
void bias_backward(const float* dy, size_t n, size_t width, float* db);
// Layer 1 backward from da: dW1 += dz^T x, db1 += sum dz, with dz = da (1 - a^2).
void layer1_backward(const float* da, const float* a, const float* x, size_t n, size_t hl, float* dw1, float* db1);

}  // namespace mlp
