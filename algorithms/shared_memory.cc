// Collectives that read the peers' data in place, in the shared boards of the shm transport
// (transport::SharedBoards), instead of passing messages. One host only.
//
// A collective runs in rounds of at most one board half. In a round every rank copies its
// part of the input into its own board and publishes "arrived"; then every rank reads what it
// needs straight from the peers' boards. All-reduce has two shapes:
//  - small (one round, a few KiB): every rank reduces the whole vector from every board, in
//    rank order, so every rank computes the same bits; one meeting per round.
//  - large: rank j reduces slice j of the round into its own board and publishes "reduced";
//    every rank then copies the n reduced slices out. Two meetings per round, and each
//    element is reduced once, by one rank, so the ranks agree bit for bit.
// From kSharedMemoryDirectReadBytes per peer, where the transport can read peers' memory
// (cross-memory attach), a rank's board carries only the addresses of its buffers, and peers
// read its user buffers in place with one copy; a last meeting ("done") keeps every buffer
// untouched until all reads of it are over. A buffer from collx_mem_alloc is mapped by the
// peers (SharedBoards::map_peer): they reduce and copy straight from it, no copy through the
// kernel and no scratch (zero-copy).
// A board half is reused by round r + 2. No wait is needed for that: every round starts with
// a meeting on "arrived", and a rank arrives at round r + 1 only after it finished reading
// round r, so once a rank met everyone at round r + 1, nobody reads its round-r half any more.
// (An earlier version waited for a "done" counter here: one more cache-line hand-off per peer
// per call, for nothing.)
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/local_ops.h"

namespace collx {
namespace algo {

namespace {

using transport::SharedBoards;

// Meets the peers: returns once every peer's `counter` reached `value` (and, with `desc`,
// published it for this very operation), or with the first failure.
class Meeting {
 public:
  Meeting(const Context& ctx, SharedBoards* boards, const Deadline& deadline)
      : ctx_(ctx), boards_(boards), deadline_(deadline) {}

  Status all_reached(SharedBoards::Counter counter, uint64_t value, const transport::OpDesc* desc) {
    if (spin_until([&](int peer) { return boards_->reached(peer, counter, value, desc); })) return Status::Ok();
    return wait_for_all(counter, value, desc);
  }

  // Every peer's inline payload of `round` is there (SharedBoards::publish_inline).
  Status all_inline(uint64_t round, const transport::OpDesc& desc) {
    if (spin_until([&](int peer) { return boards_->inline_payload(peer, round, desc) != nullptr; })) {
      return Status::Ok();
    }
    return wait_for_all(SharedBoards::kArrived, round, &desc);
  }

 private:
  Status wait_for_all(SharedBoards::Counter counter, uint64_t value, const transport::OpDesc* desc) {
    transport::Request* pending[kMaxListed];
    size_t npending = 0;
    Status status;
    for (int peer = 0; peer < ctx_.size; ++peer) {
      if (peer == ctx_.rank) continue;
      // Already there for this operation (the usual case once the ranks run in step): no
      // request, no lock. Otherwise the request path waits, or reports the mismatch.
      if (boards_->reached(peer, counter, value, desc)) continue;
      // Made on the first wait only: peers in step never need one.
      if (requests_ == nullptr) requests_ = thread_requests(ctx_.size);
      transport::Request* req = &requests_[peer];
      status = boards_->post_wait(req, peer, counter, value, desc);
      if (!status.ok()) break;
      pending[npending++] = req;
      if (npending == kMaxListed) {
        status = wait(pending, &npending);
        if (!status.ok()) break;
      }
    }
    if (status.ok()) status = wait(pending, &npending);
    // Whatever way the meeting failed, the engine must forget every wait still listed: the
    // requests die with this Meeting, and a later poison would complete them.
    if (!status.ok()) ctx_.transport->cancel(pending, npending);
    return status;
  }

  // One request per rank, kept by the thread between its calls: a meeting that waits (a peer
  // not yet there after the spin, the usual case on a loaded machine) then allocates nothing.
  // Reuse is safe: a thread runs one meeting at a time, and every request a meeting listed
  // has completed or been cancelled (the engine forgets it) before the meeting returns.
  static transport::Request* thread_requests(int size) {
    thread_local std::unique_ptr<transport::Request[]> requests;
    thread_local int capacity = 0;
    if (capacity < size) {
      requests.reset(new transport::Request[size]);
      capacity = size;
    }
    return requests.get();
  }

  static constexpr size_t kMaxListed = 64;
  // Peers running in step publish within a microsecond or so: look for that long without a
  // system call or a lock (bounded, then the transport's wait yields and sleeps).
  static constexpr int64_t kSpinNs = 1500;
  // True once ready(peer) holds for every peer (checked in rank order, each until it holds).
  template <typename Ready>
  bool spin_until(Ready ready) {
    int64_t start_ns = 0;
    int peer = 0;
    // More ranks than CPUs: the peer we wait for may need our CPU to get there, so give it
    // up at once (sched_yield, as MPI does when oversubscribed) instead of spinning on it.
    const bool crowded = ctx_.size > online_cpus();
    const int64_t limit_ns = crowded ? kCrowdedSpinNs : kSpinNs;
    for (int polls = 0;; ++polls) {
      while (peer < ctx_.size && (peer == ctx_.rank || ready(peer))) ++peer;
      if (peer == ctx_.size) return true;
      if ((polls & 15) == 0 || crowded) {
        const int64_t now = monotonic_ns();
        if (start_ns == 0) start_ns = now;
        if (now - start_ns > limit_ns) return false;
      }
      if (crowded) {
        sched_yield();
      } else {
        cpu_relax();
      }
    }
  }
  // Yielding costs a system call per poll; for this long, then the transport's wait (which
  // yields a while longer, then sleeps).
  static constexpr int64_t kCrowdedSpinNs = 20000;
  static int online_cpus() {
    static const int cpus = [] {
      const long n = sysconf(_SC_NPROCESSORS_ONLN);
      return n > 0 ? static_cast<int>(n) : 1;
    }();
    return cpus;
  }
  static int64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  Status wait(transport::Request** pending, size_t* npending) {
    if (*npending == 0) return Status::Ok();
    Status status = ctx_.transport->wait_all(pending, *npending, deadline_);
    if (status.ok()) *npending = 0;
    return status;
  }

  const Context& ctx_;
  SharedBoards* boards_;
  const Deadline deadline_;
  transport::Request* requests_ = nullptr;  // thread_requests(), once this meeting waits
};

Status boards_of(const Context& ctx, SharedBoards** out) {
  *out = ctx.transport ? ctx.transport->shared_boards() : nullptr;
  if (*out == nullptr) {
    return make_status(COLLX_ERR_INVALID_ARG,
                       "the shared_memory algorithm needs the shm transport (ranks on one host); this communicator "
                       "uses %s",
                       ctx.transport ? ctx.transport->name() : "no transport");
  }
  if (ctx.rank_at != nullptr) return make_status(COLLX_ERR_INTERNAL, "shared_memory algorithm given a ring order");
  return Status::Ok();
}

// Elements [lo, hi) of `count` that rank `j` of `n` owns (balanced, contiguous).
inline void slice_of(size_t count, int n, int j, size_t* lo, size_t* hi) {
  const size_t base = count / n, extra = count % n;
  *lo = j * base + std::min<size_t>(j, extra);
  *hi = *lo + base + (static_cast<size_t>(j) < extra ? 1 : 0);
}

// One shared-memory collective: the call checked and unpacked, and the schedules.
class SharedCollective {
 public:
  SharedCollective(const Context& ctx, const CollArgs& args) : ctx_(ctx), args_(args) {}

  // Checks and unpacks the call; *alone when this is the only rank (its result is a copy
  // of `own_count` elements, made here).
  Status start(bool reduces, size_t own_count, bool* alone) {
    COLLX_RETURN_IF_ERROR(boards_of(ctx_, &boards));
    COLLX_RETURN_IF_ERROR(get_elem_size(args_, &es));
    if (reduces) COLLX_RETURN_IF_ERROR(get_reducer(args_, &reducer));
    send = static_cast<const char*>(args_.sendbuf);
    out = static_cast<char*>(args_.recvbuf);
    n = ctx_.size;
    me = ctx_.rank;
    *alone = n == 1;
    if (*alone) copy_if_distinct(out, send, own_count * es);
    return Status::Ok();
  }
  Status allreduce();
  Status reduce_scatter();
  Status allgather();

 private:
  // Direct reads: peers' user buffers read in place with one cross-memory-attach copy
  // (SharedBoards::read_peer) instead of through the boards; the boards carry only the
  // buffers' addresses. For pieces of kSharedMemoryDirectReadBytes and more per peer.
  Status allreduce_direct();
  Status reduce_scatter_direct();
  Status allgather_direct();
  bool direct_reads(size_t bytes_per_peer) const {
    return boards->can_read_peers() && bytes_per_peer >= kSharedMemoryDirectReadBytes;
  }
  // Where this rank's buffers are, for its peers: the first bytes of its board half. Buffers
  // from collx_mem_alloc carry their memory file, so peers map them and read in place.
  struct Note {
    SharedBoards::BufferNote send, recv;
  };
  void write_note(int half, size_t send_bytes, size_t recv_bytes) {
    const Note note{boards->describe_buffer(send, send_bytes), boards->describe_buffer(out, recv_bytes)};
    std::memcpy(boards->board(me, half), &note, sizeof note);
  }
  Note note_of(int rank, int half) const {
    Note note;
    std::memcpy(&note, boards->board(rank, half), sizeof note);
    return note;
  }
  // `bytes` of peer j's buffer `buffer` from `byte_offset` on: mapped in place (zero-copy),
  // else nullptr (copy them with read_peer).
  const uint8_t* mapped(int j, const SharedBoards::BufferNote& buffer, size_t byte_offset, size_t bytes) {
    return boards->map_peer(j, buffer, buffer.address + byte_offset, bytes);
  }
  // dst = `bytes` of peer j's buffer from `byte_offset`, straight from its mapping or read.
  Status copy_from_peer(int j, const SharedBoards::BufferNote& buffer, size_t byte_offset, char* dst, size_t bytes) {
    if (const uint8_t* src = mapped(j, buffer, byte_offset, bytes)) {
      std::memcpy(dst, src, bytes);
      return Status::Ok();
    }
    return boards->read_peer(j, buffer.address + byte_offset, dst, bytes);
  }
  // Starts a direct-read round: addresses published, every peer's known.
  Status direct_round(Meeting& meeting, size_t send_bytes, size_t recv_bytes, uint64_t* round, int* half) {
    *round = boards->next_round();
    *half = static_cast<int>(*round & 1);
    write_note(*half, send_bytes, recv_bytes);
    boards->publish(SharedBoards::kArrived, *round, args_.desc);
    return meeting.all_reached(SharedBoards::kArrived, *round, &args_.desc);
  }
  // Ends it: our buffers stay untouched by us until every peer has read what it needed.
  Status finish_direct_round(Meeting& meeting, uint64_t round) {
    boards->publish(SharedBoards::kDone, round, args_.desc);
    return meeting.all_reached(SharedBoards::kDone, round, &args_.desc);
  }
  // dst[0, count) = own OP (every peer's `remote` + byte offset, in rank order), read in
  // pieces through scratch. `dst` may be `own` (in place).
  Status reduce_from_peers(char* dst, const char* own, size_t count, int half, size_t byte_offset, bool of_send);
  const Context& ctx_;
  const CollArgs& args_;
  SharedBoards* boards = nullptr;
  size_t es = 0;    // element size
  Reducer reducer;  // reductions only
  const char* send = nullptr;
  char* out = nullptr;
  int n = 1, me = 0;
};

}  // namespace

Status SharedCollective::allreduce() {
  if (direct_reads(args_.count / n * es)) return allreduce_direct();
  Meeting meeting(ctx_, boards, args_.deadline);
  const size_t total_bytes = args_.count * es;
  if (total_bytes <= SharedBoards::kInlineBytes) {
    // A few elements: the payload travels with the round in one cache line per rank.
    const uint64_t round = boards->next_round();
    boards->publish_inline(round, args_.desc, send, total_bytes);
    COLLX_RETURN_IF_ERROR(meeting.all_inline(round, args_.desc));
    const uint8_t* in[2] = {boards->inline_payload(0, round, args_.desc), boards->inline_payload(1, round, args_.desc)};
    if (in[0] == nullptr || in[1] == nullptr) {
      return make_status(COLLX_ERR_INTERNAL, "rank %d: shared-memory round %llu arrived without its payload", me,
                         static_cast<unsigned long long>(round));
    }
    reducer.reduce3(out, in[0], in[1], args_.count);
    for (int j = 2; j < n; ++j) {
      const uint8_t* theirs = boards->inline_payload(j, round, args_.desc);
      if (theirs == nullptr) return make_status(COLLX_ERR_INTERNAL, "rank %d: rank %d's payload is missing", me, j);
      reducer.reduce(out, theirs, args_.count);
    }
    return Status::Ok();
  }
  if (total_bytes <= kSharedMemorySmallAllreduceBytes && total_bytes <= boards->half_bytes()) {
    const uint64_t round = boards->next_round();
    const int half = static_cast<int>(round & 1);
    std::memcpy(boards->board(me, half), send, total_bytes);
    boards->publish(SharedBoards::kArrived, round, args_.desc);
    COLLX_RETURN_IF_ERROR(meeting.all_reached(SharedBoards::kArrived, round, &args_.desc));
    reducer.reduce3(out, boards->board(0, half), boards->board(1, half), args_.count);
    for (int j = 2; j < n; ++j) reducer.reduce(out, boards->board(j, half), args_.count);
    return Status::Ok();
  }
  const size_t round_count = std::max<size_t>(1, boards->half_bytes() / es);
  for (size_t off = 0; off < args_.count; off += round_count) {
    const size_t c = std::min(round_count, args_.count - off);
    const uint64_t round = boards->next_round();
    const int half = static_cast<int>(round & 1);
    char* mine = reinterpret_cast<char*>(boards->board(me, half));
    size_t lo = 0, hi = 0;
    slice_of(c, n, me, &lo, &hi);
    // Peers need every part of our input but our own slice, which we reduce from `send`.
    std::memcpy(mine, send + off * es, lo * es);
    std::memcpy(mine + hi * es, send + (off + hi) * es, (c - hi) * es);
    boards->publish(SharedBoards::kArrived, round, args_.desc);
    COLLX_RETURN_IF_ERROR(meeting.all_reached(SharedBoards::kArrived, round, &args_.desc));
    if (hi > lo) {
      const int first = me == 0 ? 1 : 0;
      reducer.reduce3(mine + lo * es, send + (off + lo) * es, boards->board(first, half) + lo * es, hi - lo);
      for (int j = first + 1; j < n; ++j) {
        if (j != me) reducer.reduce(mine + lo * es, boards->board(j, half) + lo * es, hi - lo);
      }
    }
    boards->publish(SharedBoards::kReduced, round, args_.desc);
    COLLX_RETURN_IF_ERROR(meeting.all_reached(SharedBoards::kReduced, round, &args_.desc));
    for (int j = 0; j < n; ++j) {
      size_t jlo = 0, jhi = 0;
      slice_of(c, n, j, &jlo, &jhi);
      std::memcpy(out + (off + jlo) * es, boards->board(j, half) + jlo * es, (jhi - jlo) * es);
    }
  }
  return Status::Ok();
}

Status SharedCollective::reduce_scatter() {
  if (direct_reads(args_.count * es)) return reduce_scatter_direct();
  const size_t rc = args_.count;  // elements per rank
  Meeting meeting(ctx_, boards, args_.deadline);
  // A round carries `c` elements of every rank's block: block j of the round at j * c.
  const size_t round_count = std::max<size_t>(1, boards->half_bytes() / (es * n));
  for (size_t off = 0; off < rc; off += round_count) {
    const size_t c = std::min(round_count, rc - off);
    const uint64_t round = boards->next_round();
    const int half = static_cast<int>(round & 1);
    char* mine = reinterpret_cast<char*>(boards->board(me, half));
    for (int j = 0; j < n; ++j) {
      if (j != me) std::memcpy(mine + j * c * es, send + (j * rc + off) * es, c * es);
    }
    boards->publish(SharedBoards::kArrived, round, args_.desc);
    COLLX_RETURN_IF_ERROR(meeting.all_reached(SharedBoards::kArrived, round, &args_.desc));
    // Our block: our own input (in place, recvbuf is that very block) then each peer's.
    const char* own_input = send + (me * rc + off) * es;
    char* dst = out + off * es;
    const int first = me == 0 ? 1 : 0;
    reducer.combine(dst, own_input, boards->board(first, half) + me * c * es, c);
    for (int j = first + 1; j < n; ++j) {
      if (j != me) reducer.reduce(dst, boards->board(j, half) + me * c * es, c);
    }
  }
  return Status::Ok();
}

Status SharedCollective::allgather() {
  if (direct_reads(args_.count * es)) return allgather_direct();
  const size_t rc = args_.count;
  Meeting meeting(ctx_, boards, args_.deadline);
  const size_t round_count = std::max<size_t>(1, boards->half_bytes() / es);
  for (size_t off = 0; off < rc; off += round_count) {
    const size_t c = std::min(round_count, rc - off);
    const uint64_t round = boards->next_round();
    const int half = static_cast<int>(round & 1);
    std::memcpy(boards->board(me, half), send + off * es, c * es);
    boards->publish(SharedBoards::kArrived, round, args_.desc);
    COLLX_RETURN_IF_ERROR(meeting.all_reached(SharedBoards::kArrived, round, &args_.desc));
    for (int j = 0; j < n; ++j) {
      char* dst = out + (j * rc + off) * es;
      if (j == me) {
        copy_if_distinct(dst, send + off * es, c * es);  // in place: already there
      } else {
        std::memcpy(dst, boards->board(j, half), c * es);
      }
    }
  }
  return Status::Ok();
}


Status SharedCollective::reduce_from_peers(char* dst, const char* own, size_t count, int half, size_t byte_offset,
                                           bool of_send) {
  // Peers whose buffer is mapped here are reduced from in place; the others are read piece
  // by piece into scratch. Pieces keep `dst` in cache across the peers.
  std::vector<const uint8_t*> in_place(n, nullptr);
  bool any_read = false;
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    const Note note = note_of(j, half);
    in_place[j] = mapped(j, of_send ? note.send : note.recv, byte_offset, count * es);
    any_read |= in_place[j] == nullptr;
  }
  const size_t piece_count = std::max<size_t>(1, kSharedMemoryPieceBytes / es);
  char* incoming = nullptr;
  if (any_read) {
    COLLX_RETURN_IF_ERROR(get_scratch(ctx_, kScratchIncoming, std::min(count, piece_count) * es, &incoming));
  }
  for (size_t off = 0; off < count; off += piece_count) {
    const size_t c = std::min(piece_count, count - off);
    bool first = true;
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      const void* src = nullptr;
      if (in_place[j] != nullptr) {
        src = in_place[j] + off * es;
      } else {
        const Note note = note_of(j, half);
        const uint64_t remote = (of_send ? note.send : note.recv).address + byte_offset + off * es;
        COLLX_RETURN_IF_ERROR(boards->read_peer(j, remote, incoming, c * es));
        src = incoming;
      }
      if (first) {
        reducer.combine(dst + off * es, own + off * es, src, c);
        first = false;
      } else {
        reducer.reduce(dst + off * es, src, c);
      }
    }
  }
  return Status::Ok();
}

Status SharedCollective::allreduce_direct() {
  Meeting meeting(ctx_, boards, args_.deadline);
  uint64_t round = 0;
  int half = 0;
  const size_t bytes = args_.count * es;
  COLLX_RETURN_IF_ERROR(direct_round(meeting, bytes, bytes, &round, &half));
  // Our slice, from every rank's input; each element reduced once, by its slice's owner.
  size_t lo = 0, hi = 0;
  slice_of(args_.count, n, me, &lo, &hi);
  COLLX_RETURN_IF_ERROR(reduce_from_peers(out + lo * es, send + lo * es, hi - lo, half, lo * es, /*of_send=*/true));
  boards->publish(SharedBoards::kReduced, round, args_.desc);
  COLLX_RETURN_IF_ERROR(meeting.all_reached(SharedBoards::kReduced, round, &args_.desc));
  // Every other slice, from its owner's result.
  for (int k = 1; k < n; ++k) {
    const int j = (me + k) % n;  // spread the readers over the owners
    size_t jlo = 0, jhi = 0;
    slice_of(args_.count, n, j, &jlo, &jhi);
    COLLX_RETURN_IF_ERROR(copy_from_peer(j, note_of(j, half).recv, jlo * es, out + jlo * es, (jhi - jlo) * es));
  }
  return finish_direct_round(meeting, round);
}

Status SharedCollective::reduce_scatter_direct() {
  Meeting meeting(ctx_, boards, args_.deadline);
  uint64_t round = 0;
  int half = 0;
  const size_t block = args_.count * es;
  COLLX_RETURN_IF_ERROR(direct_round(meeting, n * block, block, &round, &half));
  COLLX_RETURN_IF_ERROR(reduce_from_peers(out, send + me * block, args_.count, half, me * block, /*of_send=*/true));
  return finish_direct_round(meeting, round);
}

Status SharedCollective::allgather_direct() {
  Meeting meeting(ctx_, boards, args_.deadline);
  uint64_t round = 0;
  int half = 0;
  const size_t block = args_.count * es;
  COLLX_RETURN_IF_ERROR(direct_round(meeting, block, n * block, &round, &half));
  copy_if_distinct(out + me * block, send, block);  // in place: already there
  for (int k = 1; k < n; ++k) {
    const int j = (me + k) % n;
    COLLX_RETURN_IF_ERROR(copy_from_peer(j, note_of(j, half).send, 0, out + j * block, block));
  }
  return finish_direct_round(meeting, round);
}

namespace {
// Checks and unpacks the call, then runs `schedule` unless this rank is alone (its result is
// then a local copy, made by start()).
Status run_shared(const Context& ctx, const CollArgs& args, bool reduces, Status (SharedCollective::*schedule)()) {
  SharedCollective collective(ctx, args);
  bool alone = false;
  COLLX_RETURN_IF_ERROR(collective.start(reduces, args.count, &alone));
  return alone ? Status::Ok() : (collective.*schedule)();
}
}  // namespace

Status allreduce_shared_memory(const Context& ctx, const CollArgs& args) {
  return run_shared(ctx, args, /*reduces=*/true, &SharedCollective::allreduce);
}

Status reduce_scatter_shared_memory(const Context& ctx, const CollArgs& args) {
  return run_shared(ctx, args, /*reduces=*/true, &SharedCollective::reduce_scatter);
}

Status allgather_shared_memory(const Context& ctx, const CollArgs& args) {
  return run_shared(ctx, args, /*reduces=*/false, &SharedCollective::allgather);
}

}  // namespace algo
}  // namespace collx
