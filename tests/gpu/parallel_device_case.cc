// The parallel ops on device against host buffers, one rank's part (parallel_device_case.h).
#include "tests/gpu/parallel_device_case.h"

#include <cmath>
#include <memory>

#include "collx/parallel.h"
#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"
#include "tests/gpu/gpu_test_util.h"

namespace collx {
namespace testing {

RankStream::RankStream() { ok_ = cuda::stream_create(&s_).ok() && collx_parallel_set_stream(s_) == COLLX_OK; }

RankStream::~RankStream() {
  collx_parallel_set_stream(nullptr);
  cuda::stream_destroy(s_);
}

bool RankStream::wait() const {
  return cuda::stream_wait(s_, Deadline::after_ms(60000), nullptr, "the rank's stream").ok();
}

Bytes parallel_data(collx_datatype_t dt, size_t count, int rank, unsigned salt) {
  Bytes out(count * datatype_size(dt));
  for (size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(static_cast<int>((i * 5 + static_cast<size_t>(rank) * 11 + salt) % 31) - 15);
    if (dt == COLLX_FLOAT32) {
      std::memcpy(out.data() + i * 4, &v, 4);
    } else {
      const uint16_t h = dt == COLLX_BFLOAT16 ? float_to_bfloat16(v) : float_to_half(v);
      std::memcpy(out.data() + i * 2, &h, 2);
    }
  }
  return out;
}

namespace {

// "" when the device result equals the host's (see same_on_device for gpu_rel_tol).
std::string compare(const Bytes& got, const Bytes& want, float gpu_rel_tol) {
  if (got == want) return "";
  if (gpu_rel_tol <= 0 || cuda::emulated() || got.size() != want.size() || got.size() % 4) return "the bytes differ";
  for (size_t i = 0; i < got.size() / 4; ++i) {
    float g, w;
    std::memcpy(&g, got.data() + i * 4, 4);
    std::memcpy(&w, want.data() + i * 4, 4);
    if (!(std::fabs(g - w) <= gpu_rel_tol * std::fabs(w) + 1e-30f))
      return "float " + std::to_string(i) + ": " + std::to_string(g) + " vs " + std::to_string(w);
  }
  return "";
}

}  // namespace

std::string same_on_device(const std::string& what, const std::vector<Bytes>& buffers, const RankStream& stream,
                           const BufferOp& op, float gpu_rel_tol) {
  std::vector<Bytes> host = buffers;
  std::vector<void*> hp, dp;
  for (Bytes& b : host) hp.push_back(b.data());
  if (op(hp) != COLLX_OK) return what + " (host): " + collx_last_error(nullptr) + "\n";
  std::vector<std::unique_ptr<DeviceBuffer>> dev;
  for (const Bytes& b : buffers) {
    dev.push_back(std::make_unique<DeviceBuffer>(b.size(), b.data()));
    if (!dev.back()->ok()) return what + ": no device buffer\n";
    dp.push_back(dev.back()->get());
  }
  if (op(dp) != COLLX_OK) return what + " (device): " + collx_last_error(nullptr) + "\n";
  if (!stream.wait()) return what + ": waiting for the stream failed\n";
  std::string failures;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const std::string diff = compare(dev[i]->read(0, buffers[i].size()), host[i], gpu_rel_tol);
    if (!diff.empty()) failures += what + ": buffer " + std::to_string(i) + ": " + diff + "\n";
  }
  return failures;
}

namespace {

std::string tp_sp_cases(int rank, int t, collx_comm_t comm, const std::string& label, const RankStream& stream) {
  const size_t ts = static_cast<size_t>(t);
  std::string failures;
  for (collx_datatype_t dt : {COLLX_FLOAT32, COLLX_BFLOAT16, COLLX_FLOAT16}) {
    const std::string suffix = std::string(" ") + datatype_name(dt) + " " + label;
    const size_t es = datatype_size(dt), rows = 3 * ts, cols = 2 * ts;
    const Bytes x = parallel_data(dt, rows * cols, rank, 1);
    failures += same_on_device("tp_allreduce" + suffix, {x}, stream, [&](const std::vector<void*>& p) {
      return collx_tp_allreduce(p[0], rows * cols, dt, comm);
    });
    failures += same_on_device("tp_allreduce_async" + suffix, {x}, stream, [&](const std::vector<void*>& p) {
      collx_request_t r = nullptr;
      collx_status_t st = collx_tp_iallreduce(p[0], rows * cols, dt, comm, &r);
      if (st != COLLX_OK) return st;
      st = collx_wait(r, 60000);
      collx_request_free(r);
      return st;
    });
    // Out-of-place ops: (name, output elements, call).
    using Call = collx_status_t (*)(const void*, void*, size_t, size_t, collx_datatype_t, collx_comm_t);
    const struct {
      const char* name;
      size_t out_elems;
      Call call;
    } ops[] = {{"tp_split_last", rows * cols / ts, collx_tp_split_last},
               {"tp_gather_last", rows * cols * ts, collx_tp_gather_last},
               {"sp_split_first", rows / ts * cols, collx_sp_split_first},
               {"sp_gather_first", rows * cols * ts, collx_sp_gather_first},
               {"sp_reduce_scatter_first", rows / ts * cols, collx_sp_reduce_scatter_first}};
    for (const auto& op : ops) {
      failures += same_on_device(op.name + suffix, {x, Bytes(op.out_elems * es)}, stream,
                                 [&](const std::vector<void*>& p) { return op.call(p[0], p[1], rows, cols, dt, comm); });
    }
    const size_t count = 1031, bytes = count * es;
    failures += same_on_device(
        "pp_exchange_ring" + suffix,
        {parallel_data(dt, count, rank, 5), Bytes(bytes), parallel_data(dt, count, rank, 6), Bytes(bytes)}, stream,
        [&](const std::vector<void*>& p) {
          return collx_pp_exchange_ring(p[0], p[1], p[2], p[3], count, dt, 3, comm, 60000);
        });
  }
  return failures;
}

std::string vocab_ce_cases(int rank, int t, collx_comm_t comm, const std::string& label, const RankStream& stream) {
  const int64_t vocab = 5 * t + 1;  // the last rank's block is shorter
  int64_t start = 0, end = 0;
  if (collx_tp_vocab_range(vocab, t, rank, &start, &end) != COLLX_OK) return "collx_tp_vocab_range failed\n";
  const size_t n = 7, v = static_cast<size_t>(end - start);
  std::vector<float> logits(n * v);
  for (size_t k = 0; k < logits.size(); ++k) logits[k] = static_cast<float>((k * 5 + rank * 3) % 11) * 0.25f - 1;
  std::vector<int64_t> targets(n);
  for (size_t i = 0; i < n; ++i) targets[i] = static_cast<int64_t>((i * 4 + 1) % static_cast<size_t>(vocab));
  std::vector<float> dloss(n);
  for (size_t i = 0; i < n; ++i) dloss[i] = 0.5f + static_cast<float>(i);
  const std::string what = "tp_vocab_ce " + label;
  // Forward (loss and softmax), then backward.
  std::string failures = same_on_device(
      what + " fwd", {bytes_of(logits), bytes_of(targets), Bytes(n * 4), Bytes(n * v * 4)}, stream,
      [&](const std::vector<void*>& p) {
        return collx_tp_vocab_ce_fwd(static_cast<float*>(p[0]), static_cast<int64_t*>(p[1]), n, v, start, vocab,
                                     static_cast<float*>(p[2]), static_cast<float*>(p[3]), comm);
      },
      1e-5f);
  failures += same_on_device(
      what + " bwd", {bytes_of(logits), bytes_of(targets), bytes_of(dloss), Bytes(n * v * 4)}, stream,
      [&](const std::vector<void*>& p) {
        return collx_tp_vocab_ce_bwd(static_cast<float*>(p[0]), static_cast<int64_t*>(p[1]),
                                     static_cast<float*>(p[2]), n, v, start, static_cast<float*>(p[3]));
      });
  // A target outside the vocabulary: refused on every rank before any communication.
  targets[3] = vocab;
  std::vector<float> padded_logits(logits);  // one float more: never an empty allocation
  padded_logits.push_back(0.0f);
  DeviceBuffer dl(padded_logits.size() * 4, padded_logits.data()), dt(n * 8, targets.data()), dloss_out(n * 4);
  const collx_status_t st =
      collx_tp_vocab_ce_fwd(reinterpret_cast<float*>(dl.get()), reinterpret_cast<int64_t*>(dt.get()), n, v, start,
                            vocab, reinterpret_cast<float*>(dloss_out.get()), nullptr, comm);
  if (st != COLLX_ERR_INVALID_ARG || std::string(collx_last_error(nullptr)).find("targets[3]") == std::string::npos)
    failures += what + " bad target: status " + std::to_string(st) + ", " + collx_last_error(nullptr) + "\n";
  return failures;
}

}  // namespace

std::string run_parallel_device_cases(int rank, int size, collx_comm_t comm, const std::string& label,
                                      const RankStream& stream) {
  return tp_sp_cases(rank, size, comm, label, stream) + vocab_ce_cases(rank, size, comm, label, stream);
}

}  // namespace testing
}  // namespace collx
