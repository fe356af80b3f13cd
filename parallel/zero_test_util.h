// Helpers of the ZeRO memory and resume tests: one rank's training loop over a handle with
// gradients from a function, and the whole model read back with collx_zero_full_tensor.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"

namespace collx {
namespace testing {

using ZeroModel = std::vector<std::vector<float>>;
// The gradient of element j of tensor t for (step, micro-step) on this rank.
using ZeroGradFn = std::function<float(size_t t, size_t j, int step, int micro)>;

inline collx_zero_config_t zero_test_config(int stage) {
  collx_zero_config_t c;
  EXPECT_EQ(collx_zero_config_init(&c, sizeof c), COLLX_OK);
  c.stage = stage;
  c.optimizer = COLLX_OPT_ADAMW;
  c.lr = 1e-2;
  c.weight_decay = 0.01;
  c.prefetch_depth = 0;
  c.timeout_ms = 20000;
  return c;
}

inline float zero_test_init(size_t t, size_t j) {
  return 0.01f * static_cast<float>(j % 13) - 0.06f + 0.003f * static_cast<float>(t);
}

inline void zero_test_load(collx_zero_t z, const std::vector<size_t>& sizes) {
  for (size_t t = 0; t < sizes.size(); ++t) {
    std::vector<float> v(sizes[t]);
    for (size_t j = 0; j < v.size(); ++j) v[j] = zero_test_init(t, j);
    ASSERT_EQ(collx_zero_load(z, t, 0, v.size(), v.data()), COLLX_OK) << collx_zero_last_error(z);
  }
}

// One micro-step, in backward's order (reverse registration: bucket order with the
// layout's default reverse = 1): stages 0-2 write the views and mark; stage 3 fetches,
// releases and reduce-scatters one tensor at a time.
inline void zero_test_backward(collx_zero_t z, int stage, const std::vector<size_t>& sizes, int step, int micro,
                               const ZeroGradFn& grad) {
  for (size_t t = sizes.size(); t-- > 0;) {
    std::vector<float> g(sizes[t]);
    for (size_t j = 0; j < g.size(); ++j) g[j] = grad(t, j, step, micro);
    if (stage == 3) {
      const uint64_t id = t;
      ASSERT_EQ(collx_zero3_fetch(z, &id, 1), COLLX_OK) << collx_zero_last_error(z);
      ASSERT_EQ(collx_zero3_release(z, &id, 1), COLLX_OK);
      ASSERT_EQ(collx_zero3_reduce_grad(z, t, g.data()), COLLX_OK) << collx_zero_last_error(z);
      continue;
    }
    float* view = nullptr;
    ASSERT_EQ(collx_zero_grad_ptr(z, t, &view), COLLX_OK) << collx_zero_last_error(z);
    for (size_t j = 0; j < g.size(); ++j) view[j] += g[j];
    ASSERT_EQ(collx_zero_mark_ready(z, t), COLLX_OK) << collx_zero_last_error(z);
  }
}

// The gradients of one optimizer step (micro micro-steps), reduced into the shard.
inline void zero_test_grads(collx_zero_t z, int stage, const std::vector<size_t>& sizes, int step, int micro,
                            const ZeroGradFn& grad) {
  for (int m = 0; m < micro; ++m) {
    ASSERT_EQ(collx_zero_set_boundary(z, m == micro - 1 ? 1 : 0), COLLX_OK);
    zero_test_backward(z, stage, sizes, step, m, grad);
    ASSERT_EQ(collx_zero_finish_grads(z, -1), COLLX_OK) << collx_zero_last_error(z);
  }
}

// Every tensor's float32 master, whole (collective).
inline ZeroModel zero_test_full(collx_zero_t z, const std::vector<size_t>& sizes) {
  ZeroModel m(sizes.size());
  for (size_t t = 0; t < sizes.size(); ++t) {
    m[t].resize(sizes[t]);
    EXPECT_EQ(collx_zero_full_tensor(z, t, m[t].data()), COLLX_OK) << collx_zero_last_error(z);
  }
  return m;
}

}  // namespace testing
}  // namespace collx
