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
// untouched until all reads of it are over.
// "done" says a rank has finished reading round r; a board half is reused by round r + 2,
// so a rank fills it only once every peer is done with round r (slower peers may still read
// the other half while faster ones run ahead by one round).
#include <time.h>

#include <algorithm>
#include <cstring>
#include <memory>

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
      : ctx_(ctx), boards_(boards), deadline_(deadline), requests_(new transport::Request[ctx.size]) {}

  Status all_reached(SharedBoards::Counter counter, uint64_t value, const transport::OpDesc* desc) {
    if (spin_until_reached(counter, value, desc)) return Status::Ok();
    transport::Request* pending[kMaxListed];
    size_t npending = 0;
    Status status;
    for (int peer = 0; peer < ctx_.size; ++peer) {
      if (peer == ctx_.rank) continue;
      // Already there for this operation (the usual case once the ranks run in step): no
      // request, no lock. Otherwise the request path waits, or reports the mismatch.
      if (boards_->reached(peer, counter, value, desc)) continue;
      transport::Request* req = &requests_[peer];
      status = boards_->post_wait(req, peer, counter, value, desc);
      if (!status.ok()) break;
      pending[npending++] = req;
      if (npending == kMaxListed) {
        status = wait(pending, &npending);
        if (!status.ok()) return status;
      }
    }
    if (status.ok()) status = wait(pending, &npending);
    if (!status.ok()) ctx_.transport->cancel(pending, npending);
    return status;
  }

 private:
  static constexpr size_t kMaxListed = 64;
  // Peers running in step publish within a microsecond or so: look for that long without a
  // system call or a lock (bounded, then the transport's wait yields and sleeps).
  static constexpr int64_t kSpinNs = 1500;
  bool spin_until_reached(SharedBoards::Counter counter, uint64_t value, const transport::OpDesc* desc) {
    int64_t start_ns = 0;
    for (int polls = 0;; ++polls) {
      int peer = 0;
      while (peer < ctx_.size && (peer == ctx_.rank || boards_->reached(peer, counter, value, desc))) ++peer;
      if (peer == ctx_.size) return true;
      if ((polls & 15) == 0) {
        const int64_t now = monotonic_ns();
        if (start_ns == 0) start_ns = now;
        if (now - start_ns > kSpinNs) return false;
      }
      cpu_relax();
    }
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
  std::unique_ptr<transport::Request[]> requests_;
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

// Starts round `round`: waits until no peer still reads this round's board half (round - 2).
Status begin_round(Meeting& meeting, uint64_t round) {
  if (round <= 2) return Status::Ok();
  return meeting.all_reached(SharedBoards::kDone, round - 2, nullptr);
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
  // Where this rank's buffers are, for its peers: the first bytes of its board half.
  struct Note {
    uint64_t send, recv;
  };
  void write_note(int half) {
    const Note note{reinterpret_cast<uintptr_t>(send), reinterpret_cast<uintptr_t>(out)};
    std::memcpy(boards->board(me, half), &note, sizeof note);
  }
  Note note_of(int rank, int half) const {
    Note note;
    std::memcpy(&note, boards->board(rank, half), sizeof note);
    return note;
  }
  // Starts a direct-read round: addresses published, every peer's known.
  Status direct_round(Meeting& meeting, uint64_t* round, int* half) {
    *round = boards->next_round();
    *half = static_cast<int>(*round & 1);
    COLLX_RETURN_IF_ERROR(begin_round(meeting, *round));
    write_note(*half);
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
  if (total_bytes <= kSharedMemorySmallAllreduceBytes && total_bytes <= boards->half_bytes()) {
    const uint64_t round = boards->next_round();
    const int half = static_cast<int>(round & 1);
    COLLX_RETURN_IF_ERROR(begin_round(meeting, round));
    std::memcpy(boards->board(me, half), send, total_bytes);
    boards->publish(SharedBoards::kArrived, round, args_.desc);
    COLLX_RETURN_IF_ERROR(meeting.all_reached(SharedBoards::kArrived, round, &args_.desc));
    reducer.reduce3(out, boards->board(0, half), boards->board(1, half), args_.count);
    for (int j = 2; j < n; ++j) reducer.reduce(out, boards->board(j, half), args_.count);
    boards->publish(SharedBoards::kDone, round, args_.desc);
    return Status::Ok();
  }
  const size_t round_count = std::max<size_t>(1, boards->half_bytes() / es);
  for (size_t off = 0; off < args_.count; off += round_count) {
    const size_t c = std::min(round_count, args_.count - off);
    const uint64_t round = boards->next_round();
    const int half = static_cast<int>(round & 1);
    COLLX_RETURN_IF_ERROR(begin_round(meeting, round));
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
    boards->publish(SharedBoards::kDone, round, args_.desc);
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
    COLLX_RETURN_IF_ERROR(begin_round(meeting, round));
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
    boards->publish(SharedBoards::kDone, round, args_.desc);
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
    COLLX_RETURN_IF_ERROR(begin_round(meeting, round));
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
    boards->publish(SharedBoards::kDone, round, args_.desc);
  }
  return Status::Ok();
}


Status SharedCollective::reduce_from_peers(char* dst, const char* own, size_t count, int half, size_t byte_offset,
                                           bool of_send) {
  const size_t piece_count = std::max<size_t>(1, kSharedMemoryPieceBytes / es);
  char* incoming = nullptr;
  COLLX_RETURN_IF_ERROR(get_scratch(ctx_, kScratchIncoming, std::min(count, piece_count) * es, &incoming));
  for (size_t off = 0; off < count; off += piece_count) {
    const size_t c = std::min(piece_count, count - off);
    bool first = true;
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      const Note note = note_of(j, half);
      const uint64_t remote = (of_send ? note.send : note.recv) + byte_offset + off * es;
      COLLX_RETURN_IF_ERROR(boards->read_peer(j, remote, incoming, c * es));
      if (first) {
        reducer.combine(dst + off * es, own + off * es, incoming, c);
        first = false;
      } else {
        reducer.reduce(dst + off * es, incoming, c);
      }
    }
  }
  return Status::Ok();
}

Status SharedCollective::allreduce_direct() {
  Meeting meeting(ctx_, boards, args_.deadline);
  uint64_t round = 0;
  int half = 0;
  COLLX_RETURN_IF_ERROR(direct_round(meeting, &round, &half));
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
    COLLX_RETURN_IF_ERROR(
        boards->read_peer(j, note_of(j, half).recv + jlo * es, out + jlo * es, (jhi - jlo) * es));
  }
  return finish_direct_round(meeting, round);
}

Status SharedCollective::reduce_scatter_direct() {
  Meeting meeting(ctx_, boards, args_.deadline);
  uint64_t round = 0;
  int half = 0;
  COLLX_RETURN_IF_ERROR(direct_round(meeting, &round, &half));
  const size_t block = args_.count * es;
  COLLX_RETURN_IF_ERROR(reduce_from_peers(out, send + me * block, args_.count, half, me * block, /*of_send=*/true));
  return finish_direct_round(meeting, round);
}

Status SharedCollective::allgather_direct() {
  Meeting meeting(ctx_, boards, args_.deadline);
  uint64_t round = 0;
  int half = 0;
  COLLX_RETURN_IF_ERROR(direct_round(meeting, &round, &half));
  const size_t block = args_.count * es;
  copy_if_distinct(out + me * block, send, block);  // in place: already there
  for (int k = 1; k < n; ++k) {
    const int j = (me + k) % n;
    COLLX_RETURN_IF_ERROR(boards->read_peer(j, note_of(j, half).send, out + j * block, block));
  }
  return finish_direct_round(meeting, round);
}

Status allreduce_shared_memory(const Context& ctx, const CollArgs& args) {
  SharedCollective collective(ctx, args);
  bool alone = false;
  COLLX_RETURN_IF_ERROR(collective.start(/*reduces=*/true, args.count, &alone));
  return alone ? Status::Ok() : collective.allreduce();
}

Status reduce_scatter_shared_memory(const Context& ctx, const CollArgs& args) {
  SharedCollective collective(ctx, args);
  bool alone = false;
  COLLX_RETURN_IF_ERROR(collective.start(/*reduces=*/true, args.count, &alone));
  return alone ? Status::Ok() : collective.reduce_scatter();
}

Status allgather_shared_memory(const Context& ctx, const CollArgs& args) {
  SharedCollective collective(ctx, args);
  bool alone = false;
  COLLX_RETURN_IF_ERROR(collective.start(/*reduces=*/false, args.count, &alone));
  return alone ? Status::Ok() : collective.allgather();
}

}  // namespace algo
}  // namespace collx
