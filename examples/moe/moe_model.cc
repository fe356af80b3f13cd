// The MoE model's per-token math and the one-process reference step.
#include "examples/moe/moe_model.h"

#include <algorithm>
#include <cmath>

namespace moe {

Params init_params() {
  Params w;
  auto fill = [](std::vector<double>* v, size_t n, double seed) {
    v->resize(n);
    for (size_t i = 0; i < n; ++i) (*v)[i] = 0.5 * std::sin(seed + 0.37 * static_cast<double>(i * i % 97));
  };
  fill(&w.w_in, kDim * kDim, 0.1);
  fill(&w.w_router, kDim * kExperts, 1.7);
  w.experts.resize(kExperts);
  for (int32_t e = 0; e < kExperts; ++e) fill(&w.experts[static_cast<size_t>(e)], kDim * kDim, 3.0 + e);
  return w;
}

void sample(int step, size_t g, double* x, double* y) {
  for (size_t i = 0; i < kDim; ++i) {
    const double a = static_cast<double>(g) * 0.91 + static_cast<double>(i) * 1.37 + step * 0.53;
    x[i] = std::sin(a) + 0.3 * std::cos(2.1 * a);
    y[i] = 0.5 * std::cos(a * 0.77 + static_cast<double>(g % 3));
  }
}

void dense_router_forward(const Params& w, const double* x, double* h, double* p, int32_t* idx, double* gates) {
  for (size_t o = 0; o < kDim; ++o) {
    double s = 0;
    for (size_t i = 0; i < kDim; ++i) s += x[i] * w.w_in[i * kDim + o];
    h[o] = std::tanh(s);
  }
  double zmax = -1e300;
  double z[kExperts];
  for (int32_t e = 0; e < kExperts; ++e) {
    double s = 0;
    for (size_t i = 0; i < kDim; ++i) s += h[i] * w.w_router[i * kExperts + static_cast<size_t>(e)];
    z[e] = s;
    zmax = std::max(zmax, s);
  }
  double sum = 0;
  for (int32_t e = 0; e < kExperts; ++e) sum += (p[e] = std::exp(z[e] - zmax));
  for (int32_t e = 0; e < kExperts; ++e) p[e] /= sum;
  bool taken[kExperts] = {};
  for (int32_t j = 0; j < kTopK; ++j) {
    int32_t best = -1;
    for (int32_t e = 0; e < kExperts; ++e)
      if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
    taken[best] = true;
    idx[j] = best;
    gates[j] = static_cast<float>(p[best]);  // collx_moe_* take float gate weights
  }
}

void dense_router_backward(const Params& w, const double* x, const double* h, const double* p, const int32_t* idx,
                           const double* dgates, double* dh, Params* grad) {
  // gates[j] = p[idx[j]]: dz_i = sum_j dgates[j] * p[idx[j]] * (delta(i, idx[j]) - p[i]).
  double dz[kExperts] = {};
  for (int32_t j = 0; j < kTopK; ++j)
    for (int32_t e = 0; e < kExperts; ++e)
      dz[e] += dgates[j] * p[idx[j]] * ((e == idx[j] ? 1.0 : 0.0) - p[e]);
  for (size_t i = 0; i < kDim; ++i)
    for (int32_t e = 0; e < kExperts; ++e) {
      grad->w_router[i * kExperts + static_cast<size_t>(e)] += h[i] * dz[e];
      dh[i] += dz[e] * w.w_router[i * kExperts + static_cast<size_t>(e)];
    }
  for (size_t o = 0; o < kDim; ++o) {
    const double da = dh[o] * (1.0 - h[o] * h[o]);
    for (size_t i = 0; i < kDim; ++i) grad->w_in[i * kDim + o] += x[i] * da;
  }
}

void expert_forward(const std::vector<double>& w, const double* in, double* out) {
  for (size_t o = 0; o < kDim; ++o) {
    double s = 0;
    for (size_t i = 0; i < kDim; ++i) s += in[i] * w[i * kDim + o];
    out[o] = s;
  }
}

void expert_backward(const std::vector<double>& w, const double* in, const double* dout, std::vector<double>* dw,
                     double* din) {
  for (size_t i = 0; i < kDim; ++i) {
    double s = 0;
    for (size_t o = 0; o < kDim; ++o) {
      (*dw)[i * kDim + o] += in[i] * dout[o];
      s += dout[o] * w[i * kDim + o];
    }
    din[i] = s;
  }
}

Params zero_like(const Params& w) {
  Params z;
  z.w_in.assign(w.w_in.size(), 0.0);
  z.w_router.assign(w.w_router.size(), 0.0);
  for (const auto& e : w.experts) z.experts.emplace_back(e.size(), 0.0);
  return z;
}

void sgd(Params* w, const Params& grad) {
  auto step = [](std::vector<double>* v, const std::vector<double>& g) {
    for (size_t i = 0; i < v->size(); ++i) (*v)[i] -= kLearningRate * g[i];
  };
  step(&w->w_in, grad.w_in);
  step(&w->w_router, grad.w_router);
  for (size_t e = 0; e < w->experts.size(); ++e)
    if (!grad.experts[e].empty()) step(&w->experts[e], grad.experts[e]);
}

double reference_step(Params* w, int step, int world) {
  const size_t tokens = kTokensPerRank * static_cast<size_t>(world);
  Params grad = zero_like(*w);
  double loss = 0;
  for (size_t t = 0; t < tokens; ++t) {
    double x[kDim], y[kDim], h[kDim], p[kExperts], gates[kTopK], out[kDim] = {}, u[kTopK][kDim];
    int32_t idx[kTopK];
    sample(step, t, x, y);
    dense_router_forward(*w, x, h, p, idx, gates);
    for (int32_t j = 0; j < kTopK; ++j) {
      expert_forward(w->experts[static_cast<size_t>(idx[j])], h, u[j]);
      for (size_t i = 0; i < kDim; ++i) out[i] += gates[j] * u[j][i];
    }
    double dout[kDim], dh[kDim] = {}, dgates[kTopK] = {};
    for (size_t i = 0; i < kDim; ++i) {
      loss += 0.5 * (out[i] - y[i]) * (out[i] - y[i]) / static_cast<double>(tokens);
      dout[i] = (out[i] - y[i]) / static_cast<double>(tokens);
    }
    for (int32_t j = 0; j < kTopK; ++j) {
      double dexp[kDim], din[kDim];
      for (size_t i = 0; i < kDim; ++i) {
        dexp[i] = gates[j] * dout[i];
        dgates[j] += dout[i] * u[j][i];
      }
      expert_backward(w->experts[static_cast<size_t>(idx[j])], h, dexp, &grad.experts[static_cast<size_t>(idx[j])], din);
      for (size_t i = 0; i < kDim; ++i) dh[i] += din[i];
    }
    dense_router_backward(*w, x, h, p, idx, dgates, dh, &grad);
  }
  sgd(w, grad);
  return loss;
}

}  // namespace moe
