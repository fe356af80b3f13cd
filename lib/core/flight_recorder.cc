// Flight recorder ring, the process registry of recorders, dumps and the dump signal.
#include "lib/core/flight_recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "lib/common/strings.h"
#include "lib/core/names.h"
#include "lib/core/private_dir.h"
#include "lib/core/trace_writer.h"
#include "lib/dtype/datatype.h"

namespace collx {

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every live recorder of the process: a dump writes them all into one file per rank.
struct Registry {
  std::mutex mutex;
  std::vector<FlightRecorder*> recorders;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: recorders may close during exit
  return *r;
}

// The dump signal: the handler only writes a byte to a pipe; a thread reads it and dumps.
int g_signal_pipe[2] = {-1, -1};

void on_dump_signal(int) {
  const int saved = errno;
  const char byte = 1;
  ssize_t ignored = write(g_signal_pipe[1], &byte, 1);  // async-signal-safe; full pipe = dump pending
  (void)ignored;
  errno = saved;
}

int parse_signal(const std::string& text) {
  std::string name = trim(text);
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  if (name == "USR1") return SIGUSR1;
  if (name == "USR2") return SIGUSR2;
  if (name == "HUP") return SIGHUP;
  char* end = nullptr;
  const long number = std::strtol(name.c_str(), &end, 10);
  if (!name.empty() && end && *end == '\0' && number > 0 && number < NSIG) return static_cast<int>(number);
  return -1;
}

void install_dump_signal() {
  const std::string value = setting_raw(SettingId::FR_SIGNAL);
  if (trim(value).empty()) return;
  const int sig = parse_signal(value);
  if (sig < 0) {
    COLLX_WARN(INIT, "COLLX_FR_SIGNAL='%s' is not a signal (use SIGUSR1, SIGUSR2, SIGHUP or a number); ignored",
               value.c_str());
    return;
  }
  if (pipe(g_signal_pipe) != 0) {
    COLLX_WARN(INIT, "COLLX_FR_SIGNAL: cannot create a pipe: %s", std::strerror(errno));
    return;
  }
  fcntl(g_signal_pipe[1], F_SETFL, O_NONBLOCK);
  fcntl(g_signal_pipe[0], F_SETFD, FD_CLOEXEC);
  fcntl(g_signal_pipe[1], F_SETFD, FD_CLOEXEC);
  std::thread([] {
    char byte;
    for (;;) {
      const ssize_t n = read(g_signal_pipe[0], &byte, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      Status st = dump_flight_records("");
      if (!st.ok()) COLLX_WARN(COLL, "flight record dump on signal failed: %s", st.message().c_str());
    }
  }).detach();
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_dump_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(sig, &action, nullptr);
}

// The default is per user (the uid) and per job (the store address), under /tmp: another
// user can predict the name, so dump_flight_records refuses it unless it is this user's own
// private directory (private_dir.h).
std::string default_dump_dir(const std::string& store_addr) {
  const std::string value = trim(setting_raw(SettingId::FR_DIR));
  if (!value.empty()) return value;
  const size_t hash = std::hash<std::string>()(store_addr.empty() ? std::string("local") : store_addr);
  return string_printf("/tmp/collx-fr-%u-%08llx", static_cast<unsigned>(geteuid()),
                       static_cast<unsigned long long>(hash & 0xffffffffull));
}

}  // namespace

const char* fr_state_name(FrState state) {
  switch (state) {
    case FrState::kPosted: return "posted";
    case FrState::kRunning: return "running";
    case FrState::kCompleted: return "completed";
    case FrState::kFailed: return "failed";
  }
  return "unknown";
}

FlightRecorder::~FlightRecorder() { close(); }

Status FlightRecorder::init(const std::string& comm_name, int rank, int size, int world_rank,
                            const std::string& store_addr, const char* transport_name) {
  int64_t capacity = 256;
  COLLX_RETURN_IF_ERROR(setting_int(SettingId::FR_SIZE, &capacity));
  if (capacity < 0 || capacity > (1 << 20)) {  // 2^20 records are 80 MiB
    return make_status(COLLX_ERR_INVALID_ARG, "COLLX_FR_SIZE=%lld is outside 0..1048576",
                       static_cast<long long>(capacity));
  }
  name_ = comm_name;
  rank_ = rank;
  size_ = size;
  world_rank_ = world_rank;
  transport_ = transport_name ? transport_name : "none";
  dump_dir_ = default_dump_dir(store_addr);
  ring_.assign(static_cast<size_t>(capacity), FrRecord());
  wall_offset_us_ = wall_us() - steady_ns() / 1000;
  trace_ = TraceWriter::for_rank(world_rank);
  static std::once_flag signal_once;
  std::call_once(signal_once, install_dump_signal);
  if (!ring_.empty()) {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().recorders.push_back(this);
    registered_ = true;
  }
  return Status::Ok();
}

void FlightRecorder::close() {
  if (registered_) {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto& all = registry().recorders;
    all.erase(std::remove(all.begin(), all.end(), this), all.end());
    registered_ = false;
  }
  flush_trace();
}

void FlightRecorder::dump_after_timeout() const {
  if (ring_.empty()) return;
  Status st = dump_flight_records(dump_dir_);
  if (!st.ok()) COLLX_WARN(COLL, "flight record dump after a timeout failed: %s", st.message().c_str());
}

void FlightRecorder::record_failure(const Status& why) noexcept {
  if (ring_.empty() || why.ok()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_.empty()) return;
  try {
    failure_ = string_printf("%s: %s", status_name(why.code()), why.message().c_str());
  } catch (...) {
    failure_.clear();  // out of memory: the dump goes without the reason
  }
}

void FlightRecorder::flush_trace() {
  if (trace_) trace_->flush();
}

FrRecord* FlightRecorder::slot_for_new(uint64_t* id, int64_t now_ns) {
  *id = ++next_id_;
  next_slot_ = next_slot_ + 1 == ring_.size() ? 0 : next_slot_ + 1;  // == *id % ring_.size()
  FrRecord* slot = &ring_[next_slot_];
  if (slot->id != 0 && slot->state == FrState::kPosted) --posted_;
  *slot = FrRecord();
  slot->id = *id;
  slot->enqueue_ns = now_ns;
  slot->enqueue_wall_us = wall_offset_us_ + now_ns / 1000;
  return slot;
}

static void fill(FrRecord* slot, const transport::OpDesc& desc, int peer, int kind) {
  slot->seq = desc.seq;
  slot->count = desc.count;
  slot->kind = kind >= 0 ? static_cast<uint8_t>(kind) : desc.kind;
  slot->datatype = desc.datatype;
  slot->op = desc.op;
  slot->algorithm = desc.algorithm;
  slot->root = desc.root;
  slot->peer = peer;
}

uint64_t FlightRecorder::post(const transport::OpDesc& desc, int peer) {
  if (ring_.empty()) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t id;
  FrRecord* slot = slot_for_new(&id, steady_ns());
  fill(slot, desc, peer, -1);
  ++posted_;
  return id;
}

uint64_t FlightRecorder::start(const transport::OpDesc& desc, int peer, int kind) {
  if (ring_.empty()) return 0;
  return start_at(desc, peer, kind, steady_ns());
}

uint64_t FlightRecorder::start_at(const transport::OpDesc& desc, int peer, int kind, int64_t now_ns) {
  if (ring_.empty()) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  if (posted_ > 0 && desc.seq != 0) {
    for (FrRecord& r : ring_) {
      if (r.id != 0 && r.state == FrState::kPosted && r.seq == desc.seq) {
        r.state = FrState::kRunning;
        r.start_ns = now_ns;
        --posted_;
        started_id_ = r.id;
        started_slot_ = static_cast<size_t>(&r - ring_.data());
        return r.id;
      }
    }
  }
  uint64_t id;
  FrRecord* slot = slot_for_new(&id, now_ns);
  fill(slot, desc, peer, kind);
  slot->state = FrState::kRunning;
  slot->start_ns = now_ns;
  started_id_ = id;
  started_slot_ = next_slot_;
  return id;
}

void FlightRecorder::end(uint64_t id, collx_status_t status) {
  if (id == 0 || ring_.empty()) return;
  const int64_t now = steady_ns();  // read outside the lock
  FrRecord copy;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    FrRecord& r = ring_[id == started_id_ ? started_slot_ : static_cast<size_t>(id % ring_.size())];
    if (r.id != id) return;  // overwritten by newer operations
    if (r.state == FrState::kPosted) --posted_;
    r.state = status == COLLX_OK ? FrState::kCompleted : FrState::kFailed;
    r.status = status;
    r.end_ns = now;
    if (r.start_ns == 0) r.start_ns = r.end_ns;
    if (!trace_) return;  // the copy is only for the trace
    copy = r;
  }
  trace_->add(name_, copy, transport_.c_str());
}

std::vector<FrRecord> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FrRecord> out;
  for (const FrRecord& r : ring_) {
    if (r.id != 0) out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const FrRecord& a, const FrRecord& b) { return a.id < b.id; });
  return out;
}

std::string FlightRecorder::to_json() const {
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failure = failure_;
  }
  std::string out = string_printf(
      "{\"name\": %s, \"rank\": %d, \"size\": %d, \"transport\": %s, \"failure\": %s, \"records\": [\n",
      json_quote(name_).c_str(), rank_, size_, json_quote(transport_).c_str(), json_quote(failure).c_str());
  const std::vector<FrRecord> records = snapshot();
  for (size_t i = 0; i < records.size(); ++i) {
    const FrRecord& r = records[i];
    // One record per line, keys in a fixed order: collx-info hang reads it line by line.
    out += string_printf(
        "  {\"id\": %llu, \"seq\": %llu, \"kind\": \"%s\", \"count\": %llu, \"datatype\": \"%s\", "
        "\"op\": \"%s\", \"root\": %d, \"peer\": %d, \"algorithm\": \"%s\", \"state\": \"%s\", "
        "\"status\": \"%s\", \"enqueue_ns\": %lld, \"start_ns\": %lld, \"end_ns\": %lld, "
        "\"enqueue_wall_us\": %lld}%s\n",
        static_cast<unsigned long long>(r.id), static_cast<unsigned long long>(r.seq), coll_name(r.kind),
        static_cast<unsigned long long>(r.count), datatype_name(r.datatype), op_name(r.op),
        static_cast<int>(r.root), static_cast<int>(r.peer), algorithm_name(r.algorithm), fr_state_name(r.state),
        status_name(static_cast<collx_status_t>(r.status)), static_cast<long long>(r.enqueue_ns),
        static_cast<long long>(r.start_ns), static_cast<long long>(r.end_ns),
        static_cast<long long>(r.enqueue_wall_us), i + 1 < records.size() ? "," : "");
  }
  return out + "]}";
}

Status dump_flight_records(const std::string& dir_arg) {
  std::string body;
  std::string dir = dir_arg;
  int world_rank = 0;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    const auto& all = registry().recorders;
    if (all.empty()) return Status(COLLX_ERR_INVALID_USAGE, "no communicator with a flight recorder (COLLX_FR_SIZE=0?)");
    if (dir.empty()) dir = all.front()->dump_dir();
    world_rank = all.front()->world_rank();
    for (size_t i = 0; i < all.size(); ++i) {
      body += all[i]->to_json();
      body += i + 1 < all.size() ? ",\n" : "\n";
      all[i]->flush_trace();
    }
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::string text = string_printf(
                               "{\"collx_flight_record\": 1, \"host\": %s, \"pid\": %d, \"rank\": %d, "
                               "\"dumped_ns\": %lld, \"dumped_wall_us\": %lld, \"communicators\": [\n",
                               json_quote(host).c_str(), static_cast<int>(getpid()), world_rank,
                               static_cast<long long>(steady_ns()), static_cast<long long>(wall_us())) +
                           body + "]}\n";
  UniqueFd dir_fd;
  COLLX_RETURN_IF_ERROR(open_private_dir(dir, &dir_fd).with_context("flight record: "));
  const std::string name = string_printf("rank%d.json", world_rank);
  COLLX_RETURN_IF_ERROR(write_private_file(dir_fd, dir, name, text).with_context("flight record: "));
  const std::string path = dir + "/" + name;
  COLLX_WARN(COLL, "flight record written to %s", path.c_str());
  return Status::Ok();
}

}  // namespace collx
