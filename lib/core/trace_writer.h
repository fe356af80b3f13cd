// COLLX_TRACE: a Chrome-trace / Perfetto JSON timeline per rank (docs/debugging.md). One
// writer per process and world rank, shared by every communicator of the process: events are
// buffered in memory and the whole file is rewritten on flush (destroy, flight-record dump),
// so the file on disk is always a complete JSON array.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "lib/core/flight_recorder.h"

namespace collx {

class TraceWriter {
 public:
  // The process's writer for `world_rank`, or null when COLLX_TRACE is unset.
  static std::shared_ptr<TraceWriter> for_rank(int world_rank);
  // "%r" -> rank, "%p" -> pid; without "%r", ".rank<R>.json" is appended.
  static std::string expand_path(const std::string& pattern, int world_rank, int pid);

  explicit TraceWriter(std::string path, int world_rank) : path_(std::move(path)), rank_(world_rank) {}
  ~TraceWriter();

  // One complete ("ph":"X") event for an ended record.
  void add(const std::string& comm_name, const FrRecord& record, const char* transport);
  void flush();

 private:
  std::mutex mutex_;
  const std::string path_;
  const int rank_;
  std::string events_;  // ",\n"-separated event objects
  bool dirty_ = true;
};

}  // namespace collx
