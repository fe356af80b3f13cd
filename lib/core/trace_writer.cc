// Trace events in the Chrome trace-event format ("ph":"X" complete events, µs).
#include "lib/core/trace_writer.h"

#include <errno.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>

#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "lib/common/strings.h"
#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {

std::string TraceWriter::expand_path(const std::string& pattern, int world_rank, int pid) {
  std::string out;
  bool has_rank = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && (pattern[i + 1] == 'r' || pattern[i + 1] == 'p')) {
      has_rank = has_rank || pattern[i + 1] == 'r';
      out += std::to_string(pattern[i + 1] == 'r' ? world_rank : pid);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  if (!has_rank) out += ".rank" + std::to_string(world_rank) + ".json";
  return out;
}

std::shared_ptr<TraceWriter> TraceWriter::for_rank(int world_rank) {
  const std::string pattern = trim(setting_raw(SettingId::TRACE));
  if (pattern.empty()) return nullptr;
  // Communicators of one rank share the writer; the last one released writes the file.
  static std::mutex mutex;
  static std::map<int, std::weak_ptr<TraceWriter>> writers;
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<TraceWriter> writer = writers[world_rank].lock();
  if (!writer) {
    writer = std::make_shared<TraceWriter>(expand_path(pattern, world_rank, static_cast<int>(getpid())), world_rank);
    writers[world_rank] = writer;
  }
  return writer;
}

TraceWriter::~TraceWriter() { flush(); }

void TraceWriter::add(const std::string& comm_name, const FrRecord& r, const char* transport) {
  const double ts = static_cast<double>(r.enqueue_wall_us) + static_cast<double>(r.start_ns - r.enqueue_ns) / 1e3;
  const double dur = static_cast<double>(r.end_ns - r.start_ns) / 1e3;
  const bool p2p = r.kind == COLLX_COLL_SEND || r.kind == COLLX_COLL_RECV;
  const unsigned long long bytes =
      r.kind == COLLX_COLL_BARRIER ? 0ull : static_cast<unsigned long long>(r.count) * datatype_size(r.datatype);
  std::string event = string_printf(
      "{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %s, "
      "\"args\": {\"bytes\": %llu, \"count\": %llu, \"datatype\": \"%s\", \"algorithm\": \"%s\", "
      "\"transport\": %s, \"seq\": %llu, \"peer\": %d, \"status\": \"%s\"}}",
      coll_name(r.kind), p2p ? "p2p" : "collective", ts, dur, rank_, json_quote(comm_name).c_str(), bytes,
      static_cast<unsigned long long>(r.count), datatype_name(r.datatype), algorithm_name(r.algorithm),
      json_quote(transport).c_str(), static_cast<unsigned long long>(r.seq), static_cast<int>(r.peer),
      status_name(static_cast<collx_status_t>(r.status)));
  std::lock_guard<std::mutex> lock(mutex_);
  if (!events_.empty()) events_ += ",\n";
  events_ += event;
  dirty_ = true;
}

void TraceWriter::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!dirty_) return;
  FILE* f = std::fopen(path_.c_str(), "w");
  if (!f) {
    COLLX_WARN(COLL, "COLLX_TRACE: cannot write '%s': %s", path_.c_str(), std::strerror(errno));
    dirty_ = false;  // warn once per batch, not on every flush
    return;
  }
  std::fputs("[\n", f);
  std::fwrite(events_.data(), 1, events_.size(), f);
  std::fputs("\n]\n", f);
  std::fclose(f);
  dirty_ = false;
}

}  // namespace collx
