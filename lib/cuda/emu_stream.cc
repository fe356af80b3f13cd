// Streams and events of the emulated device (see emu_stream.h).
#include "lib/cuda/emu_stream.h"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "lib/cuda/backends.h"
#include "lib/cuda/emu_config.h"

namespace collx {
namespace cuda {
namespace emu {

namespace {

using Clock = std::chrono::steady_clock;

// Completion of the work queued before an event_record.
struct EventState {
  bool done = false;
  Status error;
  Clock::time_point at;
};

struct Event {
  std::shared_ptr<EventState> state;  // null: never recorded (counts as done, as in CUDA)
  bool timed = false;
};

struct Op {
  std::function<Status()> work;          // may be empty (a wait or a marker)
  std::shared_ptr<EventState> wait_for;  // run only once this is done
  std::shared_ptr<EventState> signal;    // set when this op has run
};

class Stream;

// One lock and one condition variable for every queue: a worker waits for its queue or for
// an event of another stream, and every completion wakes the waiters.
struct State {
  std::mutex mu;
  std::condition_variable cv;
  std::set<Stream*> streams;                       // live streams, to validate handles
  std::map<int, Stream*> legacy;                   // device -> legacy default stream
  std::set<Stream*> per_thread;                    // live per-thread default streams
  uint64_t generation = 0;                         // bumped in a forked child
};

State* g_state = nullptr;
std::once_flag g_once;

State& state() {
  std::call_once(g_once, [] {
    g_state = new State;  // never destroyed: workers may still run while the process exits
    // A forked child has none of the parent's worker threads: it starts with no streams
    // (handles from before the fork are unknown there, an error rather than a hang).
    pthread_atfork([] { g_state->mu.lock(); }, [] { g_state->mu.unlock(); },
                   [] {
                     const uint64_t gen = g_state->generation + 1;
                     g_state = new State;
                     g_state->generation = gen;
                   });
  });
  return *g_state;
}

void random_delay() {
  const int64_t max = config().delay_us;
  if (max <= 0) return;
  thread_local std::minstd_rand rng(static_cast<unsigned>(std::hash<std::thread::id>()(std::this_thread::get_id())));
  std::uniform_int_distribution<int64_t> pick(0, max);
  std::this_thread::sleep_for(std::chrono::microseconds(pick(rng)));
}

class Stream {
 public:
  enum class Kind { kCreated, kLegacy, kPerThread };
  Stream(int device, Kind kind) : device_(device), kind_(kind), worker_([this] { loop(); }) {}
  // Runs what is queued, then stops the worker.
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(state().mu);
      stop_ = true;
    }
    wake_.notify_one();
    worker_.join();
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  Kind kind() const { return kind_; }

  // Under state().mu. While the stream captures a graph, work is recorded, not run (as in
  // CUDA), and a marker fails at once: waiting on a capturing stream is an error there too.
  void push(Op op) {
    if (capturing_) {
      if (op.signal) {
        op.signal->error = make_status(COLLX_ERR_CUDA, "the stream is capturing a CUDA graph: its work cannot be "
                                                       "waited for (emulated cudaErrorStreamCaptureUnsupported)");
        op.signal->at = Clock::now();
        op.signal->done = true;
        state().cv.notify_all();
      }
      captured_.push_back(std::move(op));
      return;
    }
    queue_.push_back(std::move(op));
    wake_.notify_one();
  }
  // Under state().mu.
  bool capturing() const { return capturing_; }
  Status begin_capture() {
    if (kind_ == Kind::kLegacy) {
      return make_status(COLLX_ERR_CUDA, "the legacy default stream cannot be captured (emulated "
                                         "cudaErrorStreamCaptureUnsupported)");
    }
    if (capturing_) return make_status(COLLX_ERR_CUDA, "the stream is already capturing a graph");
    capturing_ = true;
    return Status::Ok();
  }
  // The recorded work goes to *graph, which the caller drops outside the lock.
  Status end_capture(std::vector<Op>* graph) {
    if (!capturing_) return make_status(COLLX_ERR_CUDA, "the stream is not capturing a graph");
    capturing_ = false;
    graph->swap(captured_);
    return Status::Ok();
  }
  // Under state().mu: a marker after everything queued so far.
  std::shared_ptr<EventState> mark() {
    auto ev = std::make_shared<EventState>();
    Op op;
    op.signal = ev;
    push(std::move(op));
    return ev;
  }

 private:
  bool ready() const { return !queue_.empty() && (!queue_.front().wait_for || queue_.front().wait_for->done); }

  void loop() {
    State& s = state();
    std::unique_lock<std::mutex> lock(s.mu);
    for (;;) {
      if (!ready()) {
        if (stop_ && queue_.empty()) return;
        // Idle: woken by a push or the stop. Front waiting for an event: woken by completions.
        if (queue_.empty()) {
          wake_.wait(lock);
        } else {
          s.cv.wait(lock);
        }
        continue;
      }
      Op op = std::move(queue_.front());
      queue_.pop_front();
      Status error = op.wait_for ? op.wait_for->error : Status::Ok();  // a failed event fails what waits on it
      lock.unlock();
      random_delay();
      if (error.ok() && op.work) error = op.work();
      op.work = nullptr;  // drop the references (mappings) it held before signalling
      lock.lock();
      if (!error.ok() && sticky_.ok()) sticky_ = error;
      if (op.signal) {  // only markers are waited for: only they wake the waiters
        op.signal->error = sticky_;
        op.signal->at = Clock::now();
        op.signal->done = true;
        s.cv.notify_all();
      }
    }
  }

  const int device_;
  const Kind kind_;
  std::deque<Op> queue_;
  std::condition_variable wake_;  // a push or the stop (with state().mu)
  bool stop_ = false;
  Status sticky_;  // the first failure: later events on this stream report it (as a CUDA error does)
  bool capturing_ = false;
  std::vector<Op> captured_;  // the work of the graph being captured (never run)
  std::thread worker_;
};

// The per-thread default streams of this thread, by device, with the State generation they
// belong to.
struct PerThreadStreams {
  std::map<int, std::unique_ptr<Stream>> by_device;
  uint64_t generation = 0;
  ~PerThreadStreams() {
    for (auto& entry : by_device) {
      {
        std::lock_guard<std::mutex> lock(state().mu);
        if (state().generation != generation) {
          entry.second.release();  // a forked child's copy: its worker never existed here
          continue;
        }
        state().per_thread.erase(entry.second.get());
        state().streams.erase(entry.second.get());
      }
      entry.second.reset();
    }
  }
};
thread_local PerThreadStreams t_streams;

constexpr uintptr_t kLegacyHandle = 1;     // cudaStreamLegacy
constexpr uintptr_t kPerThreadHandle = 2;  // cudaStreamPerThread

// The stream behind `handle` on the current device, under state().mu.
Status find_stream(void* handle, const char* what, Stream** out) {
  State& s = state();
  const auto h = reinterpret_cast<uintptr_t>(handle);
  const int device = current_index();
  if (h == 0 || h == kLegacyHandle) {
    Stream*& legacy = s.legacy[device];
    if (!legacy) {
      legacy = new Stream(device, Stream::Kind::kLegacy);  // lives as long as the process
      s.streams.insert(legacy);
    }
    *out = legacy;
    return Status::Ok();
  }
  if (h == kPerThreadHandle) {
    if (t_streams.generation != s.generation) {
      for (auto& entry : t_streams.by_device) entry.second.release();
      t_streams.by_device.clear();
      t_streams.generation = s.generation;
    }
    std::unique_ptr<Stream>& mine = t_streams.by_device[device];
    if (!mine) {
      mine = std::make_unique<Stream>(device, Stream::Kind::kPerThread);
      s.streams.insert(mine.get());
      s.per_thread.insert(mine.get());
    }
    *out = mine.get();
    return Status::Ok();
  }
  auto* stream = static_cast<Stream*>(handle);
  if (!s.streams.count(stream)) {
    return make_status(COLLX_ERR_INVALID_ARG, "%s: %p is not a live stream of the emulated device (destroyed, or "
                       "created before fork)", what, handle);
  }
  *out = stream;
  return Status::Ok();
}

// Before an op on a default stream (under state().mu): the legacy stream waits for the
// per-thread streams of its device, and a per-thread stream for the legacy stream.
void order_default_streams(Stream* target) {
  State& s = state();
  if (target->kind() == Stream::Kind::kLegacy) {
    for (Stream* other : s.per_thread) {
      if (other->device() != target->device()) continue;
      Op wait;
      wait.wait_for = other->mark();
      target->push(std::move(wait));
    }
  } else if (target->kind() == Stream::Kind::kPerThread) {
    auto it = s.legacy.find(target->device());
    if (it != s.legacy.end() && it->second) {
      Op wait;
      wait.wait_for = it->second->mark();
      target->push(std::move(wait));
    }
  }
}

Status push_op(void* handle, const char* what, Op op) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    Stream* stream = nullptr;
    COLLX_RETURN_IF_ERROR(find_stream(handle, what, &stream));
    order_default_streams(stream);
    stream->push(std::move(op));
  }
  return Status::Ok();
}

// Waits for `ev` until the deadline or abort.
Status wait_state(const std::shared_ptr<EventState>& ev, Deadline deadline, const std::atomic<bool>* abort,
                  const char* what) {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    if (ev->done) return ev->error;
    if (abort && abort->load(std::memory_order_acquire)) {
      return make_status(COLLX_ERR_ABORTED, "aborted while waiting for %s", what);
    }
    if (deadline.expired()) {
      return make_status(COLLX_ERR_TIMEOUT, "timed out waiting for %s on the emulated device (work queued on the "
                         "stream before it has not finished)", what);
    }
    // Wakes on every completion; the bound re-checks abort, which nothing signals.
    const auto bound = Clock::now() + std::chrono::milliseconds(20);
    s.cv.wait_until(lock, deadline.is_never() ? bound : std::min(bound, deadline.time_point()));
  }
}

Status marker(void* handle, const char* what, std::shared_ptr<EventState>* out) {
  *out = std::make_shared<EventState>();
  Op op;
  op.signal = *out;
  return push_op(handle, what, std::move(op));
}

}  // namespace

Status enqueue(void* handle, const char* what, std::function<Status()> work) {
  Op op;
  op.work = std::move(work);
  return push_op(handle, what, std::move(op));
}

Status run_blocking(const char* what, std::function<Status()> work) {
  auto done = std::make_shared<EventState>();
  Op op;
  op.work = std::move(work);
  op.signal = done;
  COLLX_RETURN_IF_ERROR(push_op(nullptr, what, std::move(op)));
  return wait_state(done, Deadline::after_ms(300000), nullptr, what);
}

Status stream_create(void** stream) {
  *stream = nullptr;
  auto* s = new Stream(current_index(), Stream::Kind::kCreated);
  std::lock_guard<std::mutex> lock(state().mu);
  state().streams.insert(s);
  *stream = s;
  return Status::Ok();
}

void stream_destroy(void* stream) {
  if (!stream) return;
  auto* s = static_cast<Stream*>(stream);
  {
    std::lock_guard<std::mutex> lock(state().mu);
    if (s->kind() != Stream::Kind::kCreated || !state().streams.erase(s)) return;  // not ours to destroy
  }
  delete s;  // runs what was queued first (CUDA also lets queued work finish)
}

Status event_create(void** event) {
  *event = new Event;
  return Status::Ok();
}

Status event_create_timed(void** event) {
  auto* e = new Event;
  e->timed = true;
  *event = e;
  return Status::Ok();
}

void event_destroy(void* event) { delete static_cast<Event*>(event); }

Status event_record(void* event, void* stream) {
  if (!event) return make_status(COLLX_ERR_INVALID_ARG, "event_record: NULL event");
  std::shared_ptr<EventState> ev;
  COLLX_RETURN_IF_ERROR(marker(stream, "event_record", &ev));
  static_cast<Event*>(event)->state = std::move(ev);
  return Status::Ok();
}

Status stream_wait_event(void* stream, void* event) {
  if (!event) return make_status(COLLX_ERR_INVALID_ARG, "stream_wait_event: NULL event");
  Op op;
  op.wait_for = static_cast<Event*>(event)->state;  // the latest record, as in CUDA
  return push_op(stream, "stream_wait_event", std::move(op));
}

Status event_done(void* event, bool* done) {
  if (!event) return make_status(COLLX_ERR_INVALID_ARG, "event_done: NULL event");
  const auto& ev = static_cast<Event*>(event)->state;
  std::lock_guard<std::mutex> lock(state().mu);
  *done = !ev || ev->done;
  return ev && ev->done ? ev->error : Status::Ok();
}

Status event_wait(void* event, Deadline deadline, const std::atomic<bool>* abort, const char* what) {
  if (!event) return make_status(COLLX_ERR_INVALID_ARG, "event_wait: NULL event");
  std::shared_ptr<EventState> ev = static_cast<Event*>(event)->state;
  if (!ev) return Status::Ok();
  return wait_state(ev, deadline, abort, what);
}

Status stream_wait(void* stream, Deadline deadline, const std::atomic<bool>* abort, const char* what) {
  std::shared_ptr<EventState> ev;
  COLLX_RETURN_IF_ERROR(marker(stream, what, &ev));
  return wait_state(ev, deadline, abort, what);
}

Status event_elapsed_ms(void* start, void* end, float* ms) {
  auto* a = static_cast<Event*>(start);
  auto* b = static_cast<Event*>(end);
  if (!a || !b || !a->timed || !b->timed) {
    return make_status(COLLX_ERR_INVALID_ARG, "event_elapsed_ms: both events must come from event_create_timed");
  }
  std::lock_guard<std::mutex> lock(state().mu);
  if (!a->state || !b->state || !a->state->done || !b->state->done) {
    return make_status(COLLX_ERR_INVALID_ARG, "event_elapsed_ms: an event is not recorded or not complete");
  }
  *ms = std::chrono::duration<float, std::milli>(b->state->at - a->state->at).count();
  return Status::Ok();
}

Status stream_capturing(void* stream, bool* capturing) {
  std::lock_guard<std::mutex> lock(state().mu);
  Stream* s = nullptr;
  COLLX_RETURN_IF_ERROR(find_stream(stream, "stream_capturing", &s));
  *capturing = s->capturing();
  return Status::Ok();
}

Status stream_begin_capture(void* stream) {
  std::lock_guard<std::mutex> lock(state().mu);
  Stream* s = nullptr;
  COLLX_RETURN_IF_ERROR(find_stream(stream, "stream_begin_capture", &s));
  return s->begin_capture();
}

Status stream_end_capture(void* stream) {
  std::vector<Op> graph;  // dropped after the lock: its work holds mappings
  std::lock_guard<std::mutex> lock(state().mu);
  Stream* s = nullptr;
  COLLX_RETURN_IF_ERROR(find_stream(stream, "stream_end_capture", &s));
  return s->end_capture(&graph);
}

Status device_synchronize() {
  std::vector<std::shared_ptr<EventState>> marks;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    for (Stream* s : state().streams) {
      if (s->device() == current_index()) marks.push_back(s->mark());
    }
  }
  const Deadline deadline = Deadline::after_ms(300000);
  for (const auto& ev : marks) COLLX_RETURN_IF_ERROR(wait_state(ev, deadline, nullptr, "device_synchronize"));
  return Status::Ok();
}

// --- Stream-ordered host work ---
Status launch_host_func(void* stream, void (*fn)(void*), void* arg) {
  if (!fn) return make_status(COLLX_ERR_INVALID_ARG, "launch_host_func: fn is NULL");
  return enqueue(stream, "launch_host_func", [fn, arg] {
    fn(arg);
    return Status::Ok();
  });
}

Status stream_wait_flag(void* stream, const uint32_t* flag, uint32_t value) {
  if (!flag) return make_status(COLLX_ERR_INVALID_ARG, "stream_wait_flag: flag is NULL");
  // The stream's worker waits as a GPU front end would (the stream stalls, the host does
  // not): polled, since host code sets the flag with a plain store.
  return enqueue(stream, "stream_wait_flag", [flag, value] {
    for (int polls = 0; __atomic_load_n(flag, __ATOMIC_ACQUIRE) < value; ++polls) {
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 100 ? 10 : 200));
    }
    return Status::Ok();
  });
}

}  // namespace emu
}  // namespace cuda
}  // namespace collx
