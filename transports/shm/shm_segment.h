// The shared-memory segment of one rank: its receive rings (one data ring and one control
// ring per sender), its state word (ALIVE / LEFT / POISONED / ABORTED, with a reason) and
// the futex word its waiting thread sleeps on. Created by its owner, mapped by every peer,
// unlinked as soon as every peer has mapped it (so a killed job leaves nothing in /dev/shm).
//
// Everything a peer writes here is untrusted: geometry is fixed at compile time and checked
// on mapping, and ring indices / cell contents are validated by their readers.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {
namespace shm {

constexpr uint64_t kSegmentMagic = 0x636f6c6c78534d31ull;  // "collxSM1"
constexpr uint32_t kSegmentVersion = 3;  // 2: shared boards; 3: one line per board counter
constexpr uint32_t kCellBytes = 4096;                        // one ring cell, header included
constexpr uint32_t kDataCells = 32;                          // per sender: 128 KiB in flight
constexpr uint32_t kCtrlCells = 8;                           // per sender: ACK / SEND_CHUNKS
constexpr size_t kReasonBytes = 1024;
constexpr uint32_t kBoardHalfBytes = 512u << 10;               // one half of a shared board
constexpr int kMaxRanks = 4096;

enum class RankState : uint32_t { kAlive = 0, kLeft = 1, kPoisoned = 2, kAborted = 3 };

// Producer and consumer indices on separate cache lines. Indices count cells forever
// (never wrap in practice); cell i lives at slot i % ncells.
struct alignas(64) RingHeader {
  alignas(64) std::atomic<uint64_t> head;              // next cell to consume (consumer writes)
  alignas(64) std::atomic<uint64_t> tail;              // next cell to produce (producer writes)
  alignas(64) std::atomic<uint32_t> producer_waiting;  // producer found the ring full
};
static_assert(sizeof(RingHeader) == 192, "ring header layout");

struct alignas(64) SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t nranks;
  uint64_t comm_id;
  int32_t rank;
  int32_t pid;
  uint32_t cell_bytes, data_cells, ctrl_cells, board_half_bytes;
  uint64_t owner_address;  // this header's address in its owner's process (CMA probe)
  alignas(64) std::atomic<uint32_t> state;     // RankState
  std::atomic<int32_t> reason_code;            // collx_status_t of a POISONED rank
  alignas(64) std::atomic<uint32_t> futex;     // bumped by anyone with news for the owner
  std::atomic<uint32_t> sleepers;              // owner threads inside futex_wait
  alignas(64) char reason[kReasonBytes];       // NUL-terminated text of a POISONED rank
};

// The counters of this rank's shared board (transport::SharedBoards), each with the value
// and operation of its last two publications: a peer checking value v reads the stamp
// v & 1, which the owner cannot overwrite before that peer published its own progress past
// v. One cache line per counter: a peer's check is a single line hand-off.
struct alignas(64) BoardCounter {
  std::atomic<uint64_t> value;
  transport::OpDesc stamp_desc[2];
  uint32_t stamp_value[2];  // low 32 bits of the value each stamp is for
  bool stamped(uint64_t v) const { return stamp_value[v & 1] == static_cast<uint32_t>(v); }
  const transport::OpDesc& stamp_of(uint64_t v) const { return stamp_desc[v & 1]; }
};
static_assert(sizeof(BoardCounter) == 64, "a board counter is one cache line");
// A tiny payload published with its round and operation in one cache line
// (SharedBoards::publish_inline): a peer's check and its read are one hand-off.
struct alignas(64) InlineSlot {
  std::atomic<uint64_t> round;
  transport::OpDesc desc;
  uint8_t data[transport::SharedBoards::kInlineBytes];
};
static_assert(sizeof(InlineSlot) == 64, "an inline slot is one cache line");
struct alignas(64) BoardHeader {
  BoardCounter counters[transport::SharedBoards::kNumCounters];
  InlineSlot inline_slots[2];  // by round parity, reused as the board halves are
  // The collective this rank runs now or ran last, as a seqlock (version odd while it is
  // written; the words are the OpDesc's bytes): a peer waiting for something this rank will
  // never do (a message, a board counter) compares it with its own and reports the mismatch
  // instead of waiting for its deadline.
  alignas(64) std::atomic<uint64_t> active_version;
  std::atomic<uint64_t> active_words[3];
};
static_assert(sizeof(transport::OpDesc) == 3 * sizeof(uint64_t), "OpDesc fits the active_words");

// Byte offsets of the parts of a segment for `nranks` ranks.
size_t segment_bytes(int nranks);
size_t data_ring_offset(int nranks, int sender);
size_t ctrl_ring_offset(int nranks, int sender);
size_t board_offset(int nranks);  // BoardHeader, then the two halves (page aligned)

// "/collx-<comm_id hex>-<rank>-<pid>-<32 random hex digits>": the random part (from the
// kernel's CSPRNG) makes the name unguessable, so no other local user can pre-create it (to
// make this rank fail, or to hand a peer a segment of theirs); peers learn it only through
// the bootstrap exchange. COLLX_ERR_SYSTEM when no randomness is available.
Status make_segment_name(uint64_t comm_id, int rank, pid_t pid, std::string* out);

// An mmap'ed segment (owned or a peer's). Unmaps on destruction; an owner whose name is
// still linked unlinks it too (creation failed before the "mapped" allgather).
class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Creates, sizes and initializes this rank's segment.
  Status create(const std::string& name, uint64_t comm_id, int rank, int nranks);
  // Maps a peer's segment after checking that the object is this user's and that group and
  // others have no access to it (an object of another user is never mapped), then checks
  // its header (magic, version, comm, rank, geometry).
  Status open(const std::string& name, uint64_t comm_id, int rank, int nranks, pid_t pid);
  // Removes the name (the memory lives on while mapped).
  void unlink();

  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base_); }
  RingHeader* data_ring(int sender) const;
  RingHeader* ctrl_ring(int sender) const;
  BoardHeader* board_header() const;
  uint8_t* board_half(int parity) const;
  uint8_t* ring_cells(RingHeader* ring) const { return reinterpret_cast<uint8_t*>(ring) + sizeof(RingHeader); }
  bool mapped() const { return base_ != nullptr; }

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
  int nranks_ = 0;
  std::string name_;
  bool linked_ = false;
};

// Futex helpers on a shared mapping (no FUTEX_PRIVATE_FLAG: waker and sleeper may be
// different processes, or one process through different mappings of the same page).
void futex_wake_all(std::atomic<uint32_t>* word);
// Sleeps while *word == expected, at most timeout_us.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_us);
// Bumps a segment's futex word and wakes its owner if it sleeps.
void notify_segment(SegmentHeader* h);

}  // namespace shm
}  // namespace collx
