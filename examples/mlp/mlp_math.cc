// Plain-loop MLP math; gradients are accumulated row by row so that splitting the rows into
// micro-batches (pipeline) keeps the same summation order.
#include "examples/mlp/mlp_math.h"

#include <cmath>

namespace mlp {

float input(size_t row, size_t k, int step) {
  return std::sin(0.37f * static_cast<float>((row + 1) * (k + 1)) + 0.11f * static_cast<float>(step));
}

float target(size_t row, size_t o, int step) {
  return std::cos(0.23f * static_cast<float>(row + 1) + 0.5f * static_cast<float>(o) + 0.07f * static_cast<float>(step));
}

std::vector<float> initial_w1() {
  std::vector<float> w(kHidden * kIn);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.3f * std::sin(static_cast<float>(i + 1));
  return w;
}
std::vector<float> initial_b1() {
  std::vector<float> b(kHidden);
  for (size_t h = 0; h < kHidden; ++h) b[h] = 0.01f * static_cast<float>(h);
  return b;
}
std::vector<float> initial_w2() {
  std::vector<float> w(kOut * kHidden);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.3f * std::cos(static_cast<float>(i + 1));
  return w;
}
std::vector<float> initial_b2() { return std::vector<float>(kOut, 0.0f); }

std::vector<float> batch_inputs(size_t first, size_t n, int step) {
  std::vector<float> x(n * kIn);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < kIn; ++k) x[i * kIn + k] = input(first + i, k, step);
  return x;
}

std::vector<float> batch_targets(size_t first, size_t n, int step) {
  std::vector<float> t(n * kOut);
  for (size_t i = 0; i < n; ++i)
    for (size_t o = 0; o < kOut; ++o) t[i * kOut + o] = target(first + i, o, step);
  return t;
}

std::vector<float> layer1_forward(const float* x, size_t n, const float* w1, const float* b1, size_t hl) {
  std::vector<float> a(n * hl);
  for (size_t i = 0; i < n; ++i)
    for (size_t h = 0; h < hl; ++h) {
      float z = b1[h];
      for (size_t k = 0; k < kIn; ++k) z += x[i * kIn + k] * w1[h * kIn + k];
      a[i * hl + h] = std::tanh(z);
    }
  return a;
}

std::vector<float> layer2_partial(const float* a, size_t n, const float* w2, size_t hl) {
  std::vector<float> y(n * kOut, 0.0f);
  for (size_t i = 0; i < n; ++i)
    for (size_t o = 0; o < kOut; ++o) {
      float s = 0;
      for (size_t h = 0; h < hl; ++h) s += a[i * hl + h] * w2[o * hl + h];
      y[i * kOut + o] = s;
    }
  return y;
}

double loss_and_grad(float* y, const float* t, size_t n, const float* b2, float scale, float* dy) {
  double loss = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t o = 0; o < kOut; ++o) {
      y[i * kOut + o] += b2[o];
      const float d = y[i * kOut + o] - t[i * kOut + o];
      loss += 0.5 * static_cast<double>(d) * d;
      dy[i * kOut + o] = d * scale;
    }
  return loss;
}

std::vector<float> layer2_backward(const float* dy, const float* a, size_t n, const float* w2, size_t hl, float* dw2) {
  std::vector<float> da(n * hl, 0.0f);
  for (size_t i = 0; i < n; ++i)
    for (size_t o = 0; o < kOut; ++o)
      for (size_t h = 0; h < hl; ++h) {
        dw2[o * hl + h] += dy[i * kOut + o] * a[i * hl + h];
        da[i * hl + h] += dy[i * kOut + o] * w2[o * hl + h];
      }
  return da;
}

void bias_backward(const float* dy, size_t n, size_t width, float* db) {
  for (size_t i = 0; i < n; ++i)
    for (size_t o = 0; o < width; ++o) db[o] += dy[i * width + o];
}

void layer1_backward(const float* da, const float* a, const float* x, size_t n, size_t hl, float* dw1, float* db1) {
  for (size_t i = 0; i < n; ++i)
    for (size_t h = 0; h < hl; ++h) {
      const float dz = da[i * hl + h] * (1.0f - a[i * hl + h] * a[i * hl + h]);
      db1[h] += dz;
      for (size_t k = 0; k < kIn; ++k) dw1[h * kIn + k] += dz * x[i * kIn + k];
    }
}

}  // namespace mlp
