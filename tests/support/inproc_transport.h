// An in-process transport: N ranks as threads of one process, connected by a shared
// InprocFabric. It implements transports/transport.h with the documented semantics (FIFO
// matching per (source, tag), size and OpDesc mismatches, deadlines naming pending peers,
// cancel, poison, abort, close), plus hooks that let tests see what a real network hides:
// requests still outstanding, buffers touched after a rank declared itself done, reused
// tags, injected failures.
//
// Messages are delivered under one fabric mutex; waiters sleep on a condition variable per
// endpoint, never spin.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "transports/transport.h"

namespace collx {
namespace testing {

struct InprocOptions {
  // Eager: a send copies its data and completes at once (unexpected messages are buffered
  // at the receiver). Rendezvous: a send stays pending until a receive matches it, and its
  // buffer is read only then, as with a zero-copy network. Algorithms must work with both.
  enum class SendMode { kEager, kRendezvous };
  SendMode send_mode = SendMode::kEager;
  // Renders OpDescs in error messages; a numeric rendering when empty.
  transport::DescribeFn describe;
  // Count collective messages reusing a (source, destination, tag) already used.
  bool track_tag_reuse = false;
};

class InprocFabric {
 public:
  explicit InprocFabric(int size, InprocOptions options = InprocOptions());
  ~InprocFabric();
  InprocFabric(const InprocFabric&) = delete;
  InprocFabric& operator=(const InprocFabric&) = delete;

  int size() const { return size_; }
  transport::Transport* endpoint(int rank);

  // Runs fn(rank) on one thread per rank and joins them.
  void run(const std::function<void(int rank)>& fn);

  // --- Observation and fault injection for tests ---
  // Requests posted by `rank` that are neither complete nor cancelled.
  size_t outstanding_requests(int rank) const;
  // Messages sent to `rank` that no receive has matched yet.
  size_t unexpected_messages(int rank) const;
  // Messages whose data reached one of `rank`'s receives.
  size_t deliveries(int rank) const;
  // The nth message (1-based, counted from now) reaching a receive of `rank` fails that
  // receive with `status`. With poison_rank, `rank` is then poisoned, notifying its peers
  // (a transport finding a connection broken mid-collective); without, only that receive
  // fails and the transport stays healthy, so the caller alone must clean up the rest.
  void fail_delivery(int rank, size_t nth, Status status, bool poison_rank = true);
  // Declare `rank` done with its buffers: from now on, every read or write of a buffer of
  // a request `rank` posted counts as a violation.
  void seal(int rank);
  size_t seal_violations() const;
  // Collective messages that reused a (source, destination, tag) (track_tag_reuse only).
  size_t tag_reuses() const;

 private:
  class Endpoint;
  struct Message;
  struct State;

  Status deliver_locked(int src, int dst, transport::Request* recv, const Message& msg);
  void complete_locked(int owner, transport::Request* req, const Status& status);
  void poison_locked(int rank, const Status& status, bool notify_peers);
  Status mismatch_status(int sender, int receiver, uint64_t tag, size_t sent_bytes,
                         const transport::OpDesc& sent, size_t expected_bytes,
                         const transport::OpDesc& expected) const;
  std::string describe(const transport::OpDesc& desc) const;
  void note_touch_locked(int owner);

  const int size_;
  const InprocOptions options_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<State>> states_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  size_t seal_violations_ = 0;
  size_t tag_reuses_ = 0;
  std::set<std::tuple<int, int, uint64_t>> used_tags_;
};

}  // namespace testing
}  // namespace collx
