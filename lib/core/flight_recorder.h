// Flight recorder: each communicator's last N operations in a fixed ring, so that when a job
// hangs or times out every rank can say what it was doing (docs/debugging.md). Recording is
// one short mutex-held slot write with no allocation; the ring is allocated once.
//
// Dumps: rank<R>.json per process (R = world rank), holding every live communicator of the
// process, written on a timeout, by collx_comm_dump_flight_record, or on COLLX_FR_SIGNAL.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {

class TraceWriter;

enum class FrState : uint8_t { kPosted, kRunning, kCompleted, kFailed };
const char* fr_state_name(FrState state);

struct FrRecord {
  uint64_t id = 0;   // 1, 2, ... in the order operations were recorded (0 = empty slot)
  uint64_t seq = 0;  // collective sequence number; 0 for send/recv
  uint64_t count = 0;
  uint8_t kind = 0;  // collx_coll_t
  uint8_t datatype = 0;
  uint8_t op = 0;
  uint8_t algorithm = 0;
  int32_t root = -1;
  int32_t peer = -1;  // send/recv
  FrState state = FrState::kPosted;
  int32_t status = 0;          // collx_status_t once completed or failed
  int64_t enqueue_ns = 0;      // steady clock
  int64_t start_ns = 0;        // steady clock; 0 while posted
  int64_t end_ns = 0;          // steady clock; 0 while not ended
  int64_t enqueue_wall_us = 0; // wall clock (epoch µs) at enqueue; other wall times derive from it
};

class FlightRecorder {
 public:
  FlightRecorder() = default;
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Reads COLLX_FR_SIZE / COLLX_TRACE / COLLX_FR_SIGNAL and registers for process dumps.
  // `world_rank` names the dump and trace files.
  Status init(const std::string& comm_name, int rank, int size, int world_rank, const std::string& store_addr,
              const char* transport_name);

  // Nonblocking collective queued (state posted). Returns the record id.
  uint64_t post(const transport::OpDesc& desc, int peer);
  // The operation starts running: the posted record with this collective seq when there is
  // one, else a new record. Returns the record id.
  // `kind` >= 0 overrides desc.kind (a receive's desc says send: both sides describe one message).
  uint64_t start(const transport::OpDesc& desc, int peer, int kind = -1);
  // The same with the start time given (steady clock, ns since its epoch): a caller that
  // already read the clock for the call's deadline reuses that reading.
  uint64_t start_at(const transport::OpDesc& desc, int peer, int kind, int64_t now_ns);
  // Ends record `id` (no-op when it was overwritten meanwhile or id is 0).
  void end(uint64_t id, collx_status_t status);

  // Copies of the live records, oldest first.
  std::vector<FrRecord> snapshot() const;
  // JSON object of this communicator (name, rank, size, transport, records).
  std::string to_json() const;
  // Unregister (called by destroy; also by the destructor) and flush the trace.
  void close();

  // False when COLLX_FR_SIZE=0: nothing is recorded (and no clock needs reading for it).
  bool enabled() const { return !ring_.empty(); }
  const std::string& dump_dir() const { return dump_dir_; }
  int world_rank() const { return world_rank_; }
  // Dump of the whole process into dump_dir(); a failure is only logged.
  void dump_after_timeout() const;
  // The communicator failed: dumps carry `why` (which names the peer it waited for, the one
  // that died or became unreachable) as "failure". The first call wins. Never throws: without
  // memory for the copy the dump only lacks the reason.
  void record_failure(const Status& why) noexcept;
  // Writes the trace file (COLLX_TRACE) so far, if tracing.
  void flush_trace();

 private:
  FrRecord* slot_for_new(uint64_t* id, int64_t now_ns);

  mutable std::mutex mutex_;
  std::vector<FrRecord> ring_;  // empty: disabled
  uint64_t next_id_ = 0;
  // Slot of next_id_ (next_id_ % ring size, kept without a division), and the slot of the
  // record start*() returned last: end() of that record, the usual case, finds it without one.
  size_t next_slot_ = 0;
  uint64_t started_id_ = 0;
  size_t started_slot_ = 0;
  int posted_ = 0;
  // Wall clock minus steady clock (µs) at init: a record's wall time without a second clock read.
  int64_t wall_offset_us_ = 0;  // records in state posted (start() only searches when > 0)
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  int world_rank_ = 0;
  std::string transport_;
  std::string failure_;  // record_failure; under mutex_
  std::string dump_dir_;
  std::shared_ptr<TraceWriter> trace_;
  bool registered_ = false;
};

// Writes rank<world rank>.json with every registered communicator of this process into
// `dir` (created when missing; empty = the first communicator's COLLX_FR_DIR default).
Status dump_flight_records(const std::string& dir);

}  // namespace collx
