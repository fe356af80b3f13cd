// Step-by-step comparison of two output files of collx-example-mlp.
#include "examples/mlp/compare.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace mlp {
namespace {

struct Step {
  double loss = 0, norm = 0, scale = 0;
  int skipped = 0;
  std::vector<double> params;
};

bool read_run(const char* path, std::vector<Step>* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string w;
    int step = 0;
    size_t n = 0;
    Step s;
    ls >> w >> step >> w >> s.loss >> w >> s.norm >> w >> s.scale >> w >> s.skipped >> w >> n;
    s.params.resize(n);
    for (double& p : s.params) ls >> p;
    if (!ls) return false;
    out->push_back(s);
  }
  return !out->empty();
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(1e-12, std::fabs(b)); }

}  // namespace

int compare_runs(const char* reference, const char* run, double tol) {
  std::vector<Step> ref, got;
  if (!read_run(reference, &ref) || !read_run(run, &got)) {
    std::fprintf(stderr, "compare: cannot read %s or %s\n", reference, run);
    return 1;
  }
  if (ref.size() != got.size()) {
    std::fprintf(stderr, "compare: %zu steps in the reference, %zu in the run\n", ref.size(), got.size());
    return 1;
  }
  int bad = 0;
  for (size_t s = 0; s < ref.size(); ++s) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref[s].params.size() && i < got[s].params.size(); ++i) {
      num += (got[s].params[i] - ref[s].params[i]) * (got[s].params[i] - ref[s].params[i]);
      den += ref[s].params[i] * ref[s].params[i];
    }
    const double perr = std::sqrt(num / std::max(den, 1e-30));
    const double lerr = rel(got[s].loss, ref[s].loss), nerr = rel(got[s].norm, ref[s].norm);
    // The loss-scale trajectory and the skipped steps must match exactly.
    const bool same_scaling = ref[s].scale == got[s].scale && ref[s].skipped == got[s].skipped;
    const bool ok = ref[s].params.size() == got[s].params.size() && perr <= tol && lerr <= tol && nerr <= tol &&
                    same_scaling;
    std::printf("step %zu: params %.3g loss %.3g norm %.3g scale %g%s %s\n", s, perr, lerr, nerr, got[s].scale,
                got[s].skipped ? " (skipped)" : "", ok ? "ok" : "FAIL");
    bad += ok ? 0 : 1;
  }
  return bad ? 1 : 0;
}

}  // namespace mlp
