// The element-wise device math of lib/cuda (cast_scale, accumulate, sum_squares,
// nonfinite_unscale, adamw_step, sgd_step, copy2d_async) against host loops written here
// the way parallel/ writes them (zero_step.cc, grad_norm.cc): bit for bit, except
// sum_squares on a GPU (a different summation order, within the documented 1e-12). Every
// datatype pair, n = 0, odd sizes, misaligned offsets, created streams (the emulated tier adds
// random delays per queued operation) and the argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"
#include "tests/gpu/gpu_test_util.h"

namespace collx {
namespace testing {
namespace {

const collx_datatype_t kTypes[] = {COLLX_FLOAT32, COLLX_BFLOAT16, COLLX_FLOAT16};
const size_t kCounts[] = {1, 7, 4097, 100003};

float load(const std::vector<uint8_t>& b, collx_datatype_t dt, size_t i) {
  if (dt == COLLX_FLOAT32) {
    float f;
    std::memcpy(&f, b.data() + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, b.data() + i * 2, 2);
  return dt == COLLX_BFLOAT16 ? bfloat16_to_float(h) : half_to_float(h);
}

void store(std::vector<uint8_t>* b, collx_datatype_t dt, size_t i, float v) {
  if (dt == COLLX_FLOAT32) {
    std::memcpy(b->data() + i * 4, &v, 4);
    return;
  }
  const uint16_t h = dt == COLLX_BFLOAT16 ? float_to_bfloat16(v) : float_to_half(v);
  std::memcpy(b->data() + i * 2, &h, 2);
}

// n random values of dt in [lo, hi), as stored.
std::vector<uint8_t> random_values(collx_datatype_t dt, size_t n, unsigned seed, float lo = -8.0f, float hi = 8.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> real(lo, hi);
  std::vector<uint8_t> out(n * datatype_size(dt));
  for (size_t i = 0; i < n; ++i) store(&out, dt, i, real(rng));
  return out;
}

std::vector<float> as_floats(const std::vector<uint8_t>& b) {
  std::vector<float> f(b.size() / 4);
  if (!f.empty()) std::memcpy(f.data(), b.data(), b.size());
  return f;
}

std::vector<uint8_t> as_bytes(const std::vector<float>& f) {
  std::vector<uint8_t> b(f.size() * 4);
  if (!b.empty()) std::memcpy(b.data(), f.data(), b.size());
  return b;
}

// A created stream (non-blocking: ordered only by itself), destroyed on scope exit.
class Stream {
 public:
  Stream() { ok_ = cuda::stream_create(&s_).ok(); }
  ~Stream() { cuda::stream_destroy(s_); }
  void* get() const { return s_; }
  bool ok() const { return ok_; }
  bool wait() const { return cuda::stream_wait(s_, Deadline::after_ms(60000), nullptr, "the test stream").ok(); }

 private:
  void* s_ = nullptr;
  bool ok_ = false;
};

std::string label(const char* op, collx_datatype_t a, collx_datatype_t b, size_t n, size_t off) {
  return std::string(op) + " " + datatype_name(a) + " <- " + datatype_name(b) + " n " + std::to_string(n) +
         " offset " + std::to_string(off);
}

TEST(DeviceElementwise, CastScaleMatchesTheHostForEveryDatatypePair) {
  Stream stream;
  ASSERT_TRUE(stream.ok());
  for (collx_datatype_t dt : kTypes) {
    for (collx_datatype_t st : kTypes) {
      for (size_t n : kCounts) {
        for (size_t off : {size_t{0}, size_t{1}}) {  // elements: 1 misaligns every buffer
          const std::string what = label("cast_scale", dt, st, n, off);
          const float scale = 0.37f;
          auto src = random_values(st, n + off, static_cast<unsigned>(n + dt * 3 + st));
          std::vector<uint8_t> want((n + off) * datatype_size(dt));
          for (size_t i = 0; i < n; ++i) store(&want, dt, off + i, load(src, st, off + i) * scale);
          DeviceBuffer ds(src.size(), src.data()), dd(want.size());
          ASSERT_TRUE(ds.ok() && dd.ok()) << what;
          Status s = cuda::cast_scale(dd.get() + off * datatype_size(dt), dt, ds.get() + off * datatype_size(st), st,
                                      n, scale, stream.get());
          ASSERT_TRUE(s.ok()) << what << ": " << s.message();
          ASSERT_TRUE(stream.wait()) << what;
          auto got = dd.read(off * datatype_size(dt), n * datatype_size(dt));
          ASSERT_EQ(got.size(), n * datatype_size(dt)) << what;
          EXPECT_EQ(0, std::memcmp(got.data(), want.data() + off * datatype_size(dt), got.size())) << what;
        }
      }
    }
  }
}

TEST(DeviceElementwise, CastScaleInPlaceScalesEachElementOnce) {
  Stream stream;
  for (collx_datatype_t dt : kTypes) {
    auto v = random_values(dt, 1001, 5);
    std::vector<uint8_t> want(v.size());
    for (size_t i = 0; i < 1001; ++i) store(&want, dt, i, load(v, dt, i) * 0.5f);
    DeviceBuffer d(v.size(), v.data());
    ASSERT_TRUE(cuda::cast_scale(d.get(), dt, d.get(), dt, 1001, 0.5f, stream.get()).ok());
    ASSERT_TRUE(stream.wait());
    EXPECT_EQ(d.read(0, v.size()), want) << datatype_name(dt);
  }
}

TEST(DeviceElementwise, AccumulateAddsScaledSourcesInFloat32) {
  Stream stream;
  for (collx_datatype_t st : kTypes) {
    for (size_t n : kCounts) {
      for (size_t off : {size_t{0}, size_t{3}}) {
        const std::string what = label("accumulate", COLLX_FLOAT32, st, n, off);
        auto dst = random_values(COLLX_FLOAT32, n + off, 17);
        auto src = random_values(st, n + off, 19);
        std::vector<float> want = as_floats(dst);
        for (size_t i = off; i < n + off; ++i) want[i] += 0.25f * load(src, st, i);
        // Twice, the second with scale 1 (no multiply), on one stream: ordered.
        for (size_t i = off; i < n + off; ++i) want[i] += load(src, st, i);
        DeviceBuffer dd(dst.size(), dst.data()), ds(src.size(), src.data());
        auto* d = reinterpret_cast<float*>(dd.get()) + off;
        const char* s = ds.get() + off * datatype_size(st);
        ASSERT_TRUE(cuda::accumulate(d, s, st, n, 0.25f, stream.get()).ok()) << what;
        ASSERT_TRUE(cuda::accumulate(d, s, st, n, 1.0f, stream.get()).ok()) << what;
        ASSERT_TRUE(stream.wait()) << what;
        EXPECT_EQ(dd.read(0, dst.size()), as_bytes(want)) << what;
      }
    }
  }
}

TEST(DeviceElementwise, SumSquaresAddsTheDoubleSumToTheOutput) {
  Stream stream;
  for (collx_datatype_t dt : kTypes) {
    for (size_t n : kCounts) {
      const std::string what = label("sum_squares", dt, dt, n, 1);
      auto src = random_values(dt, n + 1, 23);
      double sum = 0;
      for (size_t i = 1; i <= n; ++i) sum += static_cast<double>(load(src, dt, i)) * load(src, dt, i);
      const double want = 1.5 + sum;  // 1.5: the value already there
      const double start = 1.5;
      DeviceBuffer ds(src.size(), src.data()), dout(sizeof(double), &start);
      ASSERT_TRUE(cuda::sum_squares(ds.get() + datatype_size(dt), dt, n, reinterpret_cast<double*>(dout.get()),
                                    stream.get()).ok()) << what;
      ASSERT_TRUE(stream.wait()) << what;
      double got = 0;
      auto bytes = dout.read(0, sizeof got);
      ASSERT_EQ(bytes.size(), sizeof got);
      std::memcpy(&got, bytes.data(), sizeof got);
      if (cuda::emulated()) {
        EXPECT_EQ(got, want) << what;  // index order: the host loop exactly
      }
      EXPECT_NEAR(got, want, 1e-12 * want) << what;
    }
  }
}

TEST(DeviceElementwise, NonfiniteUnscaleFlagsInfAndNanAndScales) {
  Stream stream;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (collx_datatype_t dt : kTypes) {
    for (float bad : {0.0f, inf, -inf, nan}) {  // 0: no bad value
      const size_t n = 4097;
      auto v = random_values(dt, n, 29);
      if (bad != 0.0f) store(&v, dt, 4000, bad);
      std::vector<uint8_t> want(v.size());
      for (size_t i = 0; i < n; ++i) store(&want, dt, i, load(v, dt, i) * 0.125f);
      const int32_t zero = 0;
      DeviceBuffer dv(v.size(), v.data()), dflag(4, &zero);
      ASSERT_TRUE(cuda::nonfinite_unscale(dv.get(), dt, n, 0.125f, reinterpret_cast<int32_t*>(dflag.get()),
                                          stream.get()).ok());
      ASSERT_TRUE(stream.wait());
      int32_t flag = -1;
      std::memcpy(&flag, dflag.read(0, 4).data(), 4);
      EXPECT_EQ(flag, bad != 0.0f ? 1 : 0) << datatype_name(dt) << " " << bad;
      auto got = dv.read(0, v.size());
      for (size_t i = 0; i < n; ++i) {
        const float g = load(got, dt, i), w = load(want, dt, i);
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(g)) << i;
        } else {
          ASSERT_EQ(g, w) << datatype_name(dt) << " element " << i;
        }
      }
    }
  }
}

TEST(DeviceElementwise, NonfiniteUnscaleLeavesASetFlagSet) {
  Stream stream;
  auto v = random_values(COLLX_FLOAT32, 10, 31);
  const int32_t one = 1;
  DeviceBuffer dv(v.size(), v.data()), dflag(4, &one);
  ASSERT_TRUE(cuda::nonfinite_unscale(dv.get(), COLLX_FLOAT32, 10, 1.0f, reinterpret_cast<int32_t*>(dflag.get()),
                                      stream.get()).ok());
  ASSERT_TRUE(stream.wait());
  EXPECT_EQ(dflag.read(0, 4), std::vector<uint8_t>({1, 0, 0, 0}));
  EXPECT_EQ(dv.read(0, v.size()), v);  // inv_scale 1: untouched
}

// The host optimizer of parallel/zero_step.cc, restated.
struct HostAdam {
  std::vector<float> p, g, m, v;
  void step(const cuda::OptimizerStep& s) {
    const double t = static_cast<double>(s.step);
    const float lr = static_cast<float>(s.lr), wd = static_cast<float>(s.weight_decay);
    const float b1 = static_cast<float>(s.beta1), b2 = static_cast<float>(s.beta2), eps = static_cast<float>(s.eps);
    const float step_size = static_cast<float>(s.lr / (1.0 - std::pow(s.beta1, t)));
    const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(s.beta2, t)));
    for (size_t i = 0; i < p.size(); ++i) {
      const float gi = s.grad_scale == 1.0f ? g[i] : g[i] * s.grad_scale;
      if (wd != 0.0f) p[i] *= 1.0f - lr * wd;
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      p[i] -= step_size * (m[i] / denom);
      if (s.zero_grad) g[i] = 0.0f;
    }
  }
};

struct HostSgd {
  std::vector<float> p, g, buf;
  void step(const cuda::OptimizerStep& s) {
    const float lr = static_cast<float>(s.lr), wd = static_cast<float>(s.weight_decay);
    const float mom = static_cast<float>(s.momentum);
    for (size_t i = 0; i < p.size(); ++i) {
      float gi = s.grad_scale == 1.0f ? g[i] : g[i] * s.grad_scale;
      if (wd != 0.0f) gi += wd * p[i];
      if (mom != 0.0f) {
        buf[i] = s.step == 1 ? gi : mom * buf[i] + gi;
        gi = buf[i];
      }
      p[i] -= lr * gi;
      if (s.zero_grad) g[i] = 0.0f;
    }
  }
};

std::vector<uint8_t> rounded(const std::vector<float>& p, collx_datatype_t dt) {
  std::vector<uint8_t> out(p.size() * datatype_size(dt));
  for (size_t i = 0; i < p.size(); ++i) store(&out, dt, i, p[i]);
  return out;
}

float* floats(const DeviceBuffer& b) { return reinterpret_cast<float*>(b.get()); }

TEST(DeviceElementwise, AdamWStepsMatchTheHostOptimizer) {
  Stream stream;
  for (collx_datatype_t pt : kTypes) {
    for (size_t n : {size_t{1}, size_t{4097}, size_t{30011}}) {
      for (double wd : {0.0, 0.01}) {
        const std::string what = std::string("adamw param ") + datatype_name(pt) + " n " + std::to_string(n) +
                                 " wd " + std::to_string(wd);
        HostAdam h{as_floats(random_values(COLLX_FLOAT32, n, 37)), as_floats(random_values(COLLX_FLOAT32, n, 41, -1, 1)),
                   std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f)};
        DeviceBuffer dp(n * 4, h.p.data()), dg(n * 4, h.g.data()), dm(n * 4, h.m.data()), dv(n * 4, h.v.data()),
            dout(n * datatype_size(pt));
        cuda::OptimizerStep s;
        s.lr = 1e-3;
        s.weight_decay = wd;
        for (int64_t t = 1; t <= 3; ++t) {
          s.step = t;
          s.grad_scale = t == 2 ? 0.5f : 1.0f;
          s.zero_grad = t == 3;
          h.step(s);
          ASSERT_TRUE(cuda::adamw_step(floats(dp), floats(dg), floats(dm), floats(dv), n, s, dout.get(), pt,
                                       stream.get()).ok()) << what;
        }
        ASSERT_TRUE(stream.wait()) << what;
        EXPECT_EQ(dp.read(0, n * 4), as_bytes(h.p)) << what << " master";
        EXPECT_EQ(dm.read(0, n * 4), as_bytes(h.m)) << what << " exp_avg";
        EXPECT_EQ(dv.read(0, n * 4), as_bytes(h.v)) << what << " exp_avg_sq";
        EXPECT_EQ(dg.read(0, n * 4), as_bytes(h.g)) << what << " grad (zeroed)";
        EXPECT_EQ(dout.read(0, n * datatype_size(pt)), rounded(h.p, pt)) << what << " param_out";
      }
    }
  }
}

TEST(DeviceElementwise, SgdStepsMatchTheHostOptimizer) {
  Stream stream;
  for (collx_datatype_t pt : kTypes) {
    for (double mom : {0.0, 0.9}) {
      const size_t n = 5003;
      const std::string what = std::string("sgd param ") + datatype_name(pt) + " momentum " + std::to_string(mom);
      HostSgd h{as_floats(random_values(COLLX_FLOAT32, n, 43)), as_floats(random_values(COLLX_FLOAT32, n, 47, -1, 1)),
                std::vector<float>(n, 0.0f)};
      DeviceBuffer dp(n * 4, h.p.data()), dg(n * 4, h.g.data()), db(n * 4, h.buf.data()), dout(n * datatype_size(pt));
      cuda::OptimizerStep s;
      s.lr = 0.05;
      s.weight_decay = 1e-4;
      s.momentum = mom;
      for (int64_t t = 1; t <= 3; ++t) {
        s.step = t;
        s.grad_scale = t == 2 ? 0.25f : 1.0f;
        h.step(s);
        ASSERT_TRUE(cuda::sgd_step(floats(dp), floats(dg), mom != 0 ? floats(db) : nullptr, n, s, dout.get(), pt,
                                   stream.get()).ok()) << what;
      }
      ASSERT_TRUE(stream.wait()) << what;
      EXPECT_EQ(dp.read(0, n * 4), as_bytes(h.p)) << what << " master";
      if (mom != 0) {
        EXPECT_EQ(db.read(0, n * 4), as_bytes(h.buf)) << what << " momentum";
      }
      EXPECT_EQ(dout.read(0, n * datatype_size(pt)), rounded(h.p, pt)) << what << " param_out";
    }
  }
}

TEST(DeviceElementwise, OptimizerStepWithoutParamOutLeavesOnlyTheState) {
  Stream stream;
  const size_t n = 33;
  HostSgd h{as_floats(random_values(COLLX_FLOAT32, n, 53)), as_floats(random_values(COLLX_FLOAT32, n, 59)), {}};
  DeviceBuffer dp(n * 4, h.p.data()), dg(n * 4, h.g.data());
  cuda::OptimizerStep s;
  s.lr = 0.1;
  h.step(s);
  ASSERT_TRUE(cuda::sgd_step(floats(dp), floats(dg), nullptr, n, s, nullptr, COLLX_INT32, stream.get()).ok());
  ASSERT_TRUE(stream.wait());
  EXPECT_EQ(dp.read(0, n * 4), as_bytes(h.p));
}

// A status COLLX_ERR_INVALID_ARG whose message names `word`.
void expect_invalid(const Status& s, const char* word) {
  EXPECT_EQ(s.code(), COLLX_ERR_INVALID_ARG) << s.message();
  EXPECT_NE(s.message().find(word), std::string::npos) << s.message() << " (should name " << word << ")";
}

// A float32 device result against the host's: the same bits on the emulated device, within a
// few ulp on a GPU (expf/logf differ there).
void expect_floats(const std::vector<uint8_t>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size() * 4) << what;
  const std::vector<float> g = as_floats(got);
  for (size_t i = 0; i < want.size(); ++i) {
    if (cuda::emulated()) {
      ASSERT_EQ(g[i], want[i]) << what << " element " << i;
    } else {
      ASSERT_NEAR(g[i], want[i], 1e-5f * std::fabs(want[i]) + 1e-30f) << what << " element " << i;
    }
  }
}

// The cross-entropy steps of parallel/tp_vocab_ce.cc (one rank: no all-reduces between).
TEST(DeviceElementwise, CrossEntropyStepsMatchTheHostLoops) {
  Stream stream;
  for (size_t v : {size_t{0}, size_t{1}, size_t{1001}}) {
    const size_t n = 37;
    const int64_t start = 100;
    const std::string what = "v_local " + std::to_string(v);
    std::vector<float> logits = as_floats(random_values(COLLX_FLOAT32, n * v, 61, -6, 6));
    std::vector<int64_t> targets(n);
    for (size_t i = 0; i < n; ++i) targets[i] = start - 3 + static_cast<int64_t>((i * 37) % (v + 6));  // some not ours
    std::vector<float> dloss = as_floats(random_values(COLLX_FLOAT32, n, 67, 0, 2));
    std::vector<float> max(n, -INFINITY), tl(n, 0.0f), se(n, 0.0f), loss(n), sm(n * v), dl(n * v);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < v; ++j) max[i] = std::max(max[i], logits[i * v + j]);
      const int64_t local = targets[i] - start;
      if (local >= 0 && local < static_cast<int64_t>(v)) tl[i] = logits[i * v + static_cast<size_t>(local)] - max[i];
      for (size_t j = 0; j < v; ++j) se[i] += std::exp(logits[i * v + j] - max[i]);
      loss[i] = std::log(se[i]) - tl[i];
      for (size_t j = 0; j < v; ++j) sm[i * v + j] = std::exp(logits[i * v + j] - max[i]) / se[i];
      for (size_t j = 0; j < v; ++j)
        dl[i * v + j] = (sm[i * v + j] - (start + static_cast<int64_t>(j) == targets[i] ? 1.0f : 0.0f)) * dloss[i];
    }
    // One float more than the data (never an empty allocation); the upload reads as much.
    std::vector<float> padded_logits(logits);
    padded_logits.push_back(0.0f);
    DeviceBuffer dlog(n * v * 4 + 4, padded_logits.data()), dtar(n * 8, targets.data()), dmax(n * 4), dtl(n * 4), dse(n * 4),
        dloss_out(n * 4), dsm(n * v * 4 + 4), ddl(n * v * 4 + 4), ddloss(n * 4, dloss.data());
    auto f = [](const DeviceBuffer& b) { return reinterpret_cast<float*>(b.get()); };
    const auto* t = reinterpret_cast<const int64_t*>(dtar.get());
    ASSERT_TRUE(cuda::ce_row_max(f(dlog), n, v, f(dmax), stream.get()).ok()) << what;
    ASSERT_TRUE(cuda::ce_target_sum_exp(f(dlog), t, n, v, start, f(dmax), f(dtl), f(dse), stream.get()).ok()) << what;
    ASSERT_TRUE(
        cuda::ce_loss_softmax(f(dlog), n, v, f(dmax), f(dtl), f(dse), f(dloss_out), f(dsm), stream.get()).ok())
        << what;
    // The backward from the host's softmax, so a GPU's rounding of the forward does not carry.
    ASSERT_TRUE(cuda::copy(dsm.get(), sm.data(), sm.size() * 4, cuda::CopyKind::kHostToDevice).ok() || sm.empty());
    ASSERT_TRUE(stream.wait());
    ASSERT_TRUE(cuda::ce_backward(f(dsm), t, f(ddloss), n, v, start, f(ddl), stream.get()).ok()) << what;
    ASSERT_TRUE(stream.wait());
    EXPECT_EQ(dmax.read(0, n * 4), as_bytes(max)) << what;  // max and the subtraction are exact
    EXPECT_EQ(dtl.read(0, n * 4), as_bytes(tl)) << what;
    expect_floats(dse.read(0, n * 4), se, what + " sum_exp");
    expect_floats(dloss_out.read(0, n * 4), loss, what + " loss");
    expect_floats(ddl.read(0, n * v * 4), dl, what + " dlogits");
  }
}

TEST(DeviceElementwise, CrossEntropyStepsRefuseHostBuffers) {
  DeviceBuffer a(64), b(64);
  std::vector<int64_t> host_targets(4);
  auto* f = reinterpret_cast<float*>(a.get());
  expect_invalid(cuda::ce_target_sum_exp(f, host_targets.data(), 4, 2, 0, f + 8, f + 12, reinterpret_cast<float*>(b.get()),
                                         nullptr),
                 "targets");
  expect_invalid(cuda::ce_row_max(f, 4, 2, f + 4, nullptr), "overlaps");
}

TEST(DeviceElementwise, Copy2dMovesRowsBetweenPitches) {
  Stream stream;
  const size_t rows = 5, width = 12, spitch = 20, dpitch = 16;
  std::vector<uint8_t> host(rows * spitch);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i);
  DeviceBuffer d1(rows * dpitch), d2(rows * width);
  std::vector<uint8_t> back(rows * width + 1, 0xEE);
  ASSERT_TRUE(cuda::memset_async(d1.get(), 0, rows * dpitch, stream.get()).ok());
  ASSERT_TRUE(cuda::copy2d_async(d1.get(), dpitch, host.data(), spitch, width, rows, cuda::CopyKind::kHostToDevice,
                                 stream.get()).ok());
  ASSERT_TRUE(cuda::copy2d_async(d2.get(), width, d1.get(), dpitch, width, rows, cuda::CopyKind::kDeviceToDevice,
                                 stream.get()).ok());
  ASSERT_TRUE(cuda::copy2d_async(back.data(), width, d2.get(), width, width, rows, cuda::CopyKind::kDeviceToHost,
                                 stream.get()).ok());
  ASSERT_TRUE(stream.wait());
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < width; ++c) ASSERT_EQ(back[r * width + c], host[r * spitch + c]) << r << "," << c;
  }
  EXPECT_EQ(back[rows * width], 0xEE);  // nothing past the last row
  auto pad = d1.read(width, dpitch - width);
  EXPECT_EQ(pad, std::vector<uint8_t>(dpitch - width, 0));  // the pitch gap untouched
}

TEST(DeviceElementwise, ZeroElementsQueueNothingAndNeedNoBuffers) {
  EXPECT_TRUE(cuda::cast_scale(nullptr, COLLX_INT8, nullptr, COLLX_FLOAT32, 0, 1.0f, nullptr).ok());
  EXPECT_TRUE(cuda::accumulate(nullptr, nullptr, COLLX_FLOAT16, 0, 1.0f, nullptr).ok());
  EXPECT_TRUE(cuda::sum_squares(nullptr, COLLX_FLOAT32, 0, nullptr, nullptr).ok());
  EXPECT_TRUE(cuda::nonfinite_unscale(nullptr, COLLX_FLOAT32, 0, 2.0f, nullptr, nullptr).ok());
  cuda::OptimizerStep s;
  EXPECT_TRUE(cuda::adamw_step(nullptr, nullptr, nullptr, nullptr, 0, s, nullptr, COLLX_FLOAT32, nullptr).ok());
  EXPECT_TRUE(cuda::sgd_step(nullptr, nullptr, nullptr, 0, s, nullptr, COLLX_FLOAT32, nullptr).ok());
  EXPECT_TRUE(cuda::copy2d_async(nullptr, 0, nullptr, 0, 4, 0, cuda::CopyKind::kDeviceToDevice, nullptr).ok());
}

TEST(DeviceElementwise, BadArgumentsReturnAStatusNamingThem) {
  DeviceBuffer a(64 * 4), b(64 * 4), c(64 * 4), d(64 * 4), f(8);
  std::vector<float> host(64);
  float *fa = floats(a), *fb = floats(b), *fc = floats(c), *fd = floats(d);
  expect_invalid(cuda::cast_scale(fa, COLLX_INT32, fb, COLLX_FLOAT32, 4, 1.0f, nullptr), "dst_dtype");
  expect_invalid(cuda::cast_scale(fa, COLLX_FLOAT32, fb, COLLX_FLOAT64, 4, 1.0f, nullptr), "src_dtype");
  expect_invalid(cuda::cast_scale(fa, COLLX_FLOAT32, host.data(), COLLX_FLOAT32, 4, 1.0f, nullptr), "src");
  expect_invalid(cuda::cast_scale(nullptr, COLLX_FLOAT32, fb, COLLX_FLOAT32, 4, 1.0f, nullptr), "dst");
  // Same buffer, different datatypes (a 16-bit write would land on unread float32 input).
  expect_invalid(cuda::cast_scale(fa, COLLX_BFLOAT16, fa, COLLX_FLOAT32, 4, 1.0f, nullptr), "overlaps");
  expect_invalid(cuda::cast_scale(fa + 1, COLLX_FLOAT32, fa, COLLX_FLOAT32, 4, 1.0f, nullptr), "overlaps");
  expect_invalid(cuda::accumulate(host.data(), fb, COLLX_FLOAT32, 4, 1.0f, nullptr), "dst");
  expect_invalid(cuda::accumulate(fa, fb, COLLX_UINT8, 4, 1.0f, nullptr), "src_dtype");
  expect_invalid(cuda::sum_squares(fa, COLLX_FLOAT32, 4, nullptr, nullptr), "dev_out");
  double host_out = 0;
  expect_invalid(cuda::sum_squares(fa, COLLX_FLOAT32, 4, &host_out, nullptr), "dev_out");
  expect_invalid(cuda::nonfinite_unscale(fa, COLLX_FLOAT32, 4, 1.0f, nullptr, nullptr), "dev_flag");
  cuda::OptimizerStep s;
  expect_invalid(cuda::adamw_step(fa, fb, fc, host.data(), 4, s, nullptr, COLLX_FLOAT32, nullptr), "exp_avg_sq");
  expect_invalid(cuda::adamw_step(fa, fb, fc, fd, 4, s, f.get(), COLLX_INT64, nullptr), "param_dtype");
  expect_invalid(cuda::adamw_step(fa, fa + 2, fc, fd, 4, s, nullptr, COLLX_FLOAT32, nullptr), "overlaps");
  s.step = 0;
  expect_invalid(cuda::adamw_step(fa, fb, fc, fd, 4, s, nullptr, COLLX_FLOAT32, nullptr), "step");
  s.step = 1;
  s.grad_scale = std::numeric_limits<float>::infinity();
  expect_invalid(cuda::sgd_step(fa, fb, nullptr, 4, s, nullptr, COLLX_FLOAT32, nullptr), "grad_scale");
  s.grad_scale = 1.0f;
  s.momentum = 0.9;
  expect_invalid(cuda::sgd_step(fa, fb, nullptr, 4, s, nullptr, COLLX_FLOAT32, nullptr), "momentum_buf");
  expect_invalid(cuda::copy2d_async(fa, 8, fb, 16, 12, 2, cuda::CopyKind::kDeviceToDevice, nullptr), "width");
}

}  // namespace
}  // namespace testing
}  // namespace collx
