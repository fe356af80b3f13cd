#include "bench/collx_bench/runner.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/collx_bench/sweep.h"  // allgatherv_shard

namespace collx_bench {

void BufferFree::operator()(void* p) const {
  if (from_collx) {
    collx_mem_free(p);
  } else {
    std::free(p);
  }
}

bool Buffers::allocate(size_t bytes, bool zero_copy, std::string* error) {
  // Never zero bytes: collx accepts NULL only with count 0, and rows of count 0 still run.
  const size_t size = (bytes + 4095) / 4096 * 4096 + 4096;
  for (std::unique_ptr<void, BufferFree>* b : {&send_, &recv_}) {
    void* p = nullptr;
    if (zero_copy) {
      if (collx_mem_alloc(size, &p) != COLLX_OK) {
        *error = "collx_mem_alloc(" + std::to_string(size) + "): " + collx_last_error(nullptr);
        return false;
      }
    } else if (posix_memalign(&p, 4096, size) != 0 || p == nullptr) {
      *error = "cannot allocate " + std::to_string(size) + " bytes of host memory";
      return false;
    }
    std::memset(p, 0, size);
    *b = std::unique_ptr<void, BufferFree>(p, BufferFree{zero_copy});
  }
  return true;
}

namespace {

collx_status_t run_sendrecv(const RankContext& ctx, const CallShape& s, const void* send, void* recv) {
  // Ring exchange: post the receive from rank-1, then the send to rank+1, then wait both,
  // so no rank blocks in a send while its peer is also sending.
  const int next = (ctx.rank + 1) % ctx.nranks;
  const int prev = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
  collx_request_t rreq = nullptr, sreq = nullptr;
  collx_status_t st = collx_irecv(recv, s.count, s.datatype, prev, 0, ctx.comm, &ctx.opts, &rreq);
  if (st != COLLX_OK) return st;
  st = collx_isend(send, s.count, s.datatype, next, 0, ctx.comm, &ctx.opts, &sreq);
  if (st != COLLX_OK) {
    collx_request_free(rreq);
    return st;
  }
  const collx_status_t rst = collx_wait(rreq, -1);
  const collx_status_t sst = collx_wait(sreq, -1);
  collx_request_free(rreq);
  collx_request_free(sreq);
  return rst != COLLX_OK ? rst : sst;
}

// The v-collectives added with all-to-allv, with the shard patterns of sweep.h (packed
// buffers: NULL displacements). The arrays are rebuilt per call, as an engine would.
collx_status_t run_v_collective(const RankContext& ctx, const CallShape& s, void* send, void* recv, bool in_place) {
  const collx_opts_t* opts = &ctx.opts;
  const size_t n = static_cast<size_t>(ctx.nranks);
  std::vector<size_t> counts(n), recv_counts(n);
  for (int q = 0; q < ctx.nranks; ++q) {
    const size_t i = static_cast<size_t>(q);
    counts[i] = s.coll == BenchColl::kAlltoallv ? alltoallv_block(s.count, ctx.rank, q) : allgatherv_shard(s.count, q);
    recv_counts[i] = alltoallv_block(s.count, q, ctx.rank);
  }
  const size_t mine = counts[static_cast<size_t>(ctx.rank)];
  switch (s.coll) {
    case BenchColl::kAlltoallv:
      return collx_alltoallv(send, counts.data(), nullptr, recv, recv_counts.data(), nullptr, s.datatype, ctx.comm,
                             opts);
    case BenchColl::kReduceScatterv: {
      if (!in_place) return collx_reduce_scatterv(send, recv, counts.data(), s.datatype, s.op, ctx.comm, opts);
      char* buf = static_cast<char*>(recv);
      char* own = buf + shard_offset(s.count, ctx.rank) * datatype_bytes(s.datatype);
      return collx_reduce_scatterv(buf, own, counts.data(), s.datatype, s.op, ctx.comm, opts);
    }
    case BenchColl::kGatherv:
      return collx_gatherv(send, mine, recv, counts.data(), nullptr, s.datatype, s.root, ctx.comm, opts);
    case BenchColl::kScatterv:
      return collx_scatterv(send, counts.data(), nullptr, recv, mine, s.datatype, s.root, ctx.comm, opts);
    default:
      return COLLX_ERR_INVALID_ARG;
  }
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

collx_status_t run_collective(const RankContext& ctx, const CallShape& s, void* send, void* recv,
                              bool in_place) {
  const collx_opts_t* opts = &ctx.opts;
  const size_t block = s.count * datatype_bytes(s.datatype) * static_cast<size_t>(ctx.rank);
  char* buf = static_cast<char*>(recv);
  switch (s.coll) {
    case BenchColl::kAllreduce:
      return collx_allreduce(in_place ? buf : send, recv, s.count, s.datatype, s.op, ctx.comm, opts);
    case BenchColl::kReduceScatter:
      return in_place ? collx_reduce_scatter(buf, buf + block, s.count, s.datatype, s.op, ctx.comm, opts)
                      : collx_reduce_scatter(send, recv, s.count, s.datatype, s.op, ctx.comm, opts);
    case BenchColl::kAllgather:
      return in_place ? collx_allgather(buf + block, buf, s.count, s.datatype, ctx.comm, opts)
                      : collx_allgather(send, recv, s.count, s.datatype, ctx.comm, opts);
    case BenchColl::kBroadcast:
      return collx_broadcast(in_place ? buf : send, recv, s.count, s.datatype, s.root, ctx.comm, opts);
    case BenchColl::kReduce:
      return collx_reduce(in_place ? buf : send, recv, s.count, s.datatype, s.op, s.root, ctx.comm, opts);
    case BenchColl::kAlltoall:
      return collx_alltoall(send, recv, s.count, s.datatype, ctx.comm, opts);
    case BenchColl::kGather:
      return collx_gather(send, recv, s.count, s.datatype, s.root, ctx.comm, opts);
    case BenchColl::kScatter:
      return collx_scatter(send, recv, s.count, s.datatype, s.root, ctx.comm, opts);
    case BenchColl::kAllgatherv: {
      std::vector<size_t> counts(static_cast<size_t>(ctx.nranks));
      for (int q = 0; q < ctx.nranks; ++q) counts[static_cast<size_t>(q)] = allgatherv_shard(s.count, q);
      return collx_allgatherv(send, counts[static_cast<size_t>(ctx.rank)], recv, counts.data(), nullptr, s.datatype,
                              ctx.comm, opts);
    }
    case BenchColl::kAlltoallv:
    case BenchColl::kReduceScatterv:
    case BenchColl::kGatherv:
    case BenchColl::kScatterv:
      return run_v_collective(ctx, s, send, recv, in_place);
    case BenchColl::kSendrecv:
      return run_sendrecv(ctx, s, send, recv);
  }
  return COLLX_ERR_INVALID_ARG;
}

collx_status_t measure(const RankContext& ctx, const CallShape& s, const Buffers& buffers, bool in_place,
                       int warmup_iters, int iters, int check_iters, Cell* cell, std::string* what) {
  void* send = buffers.send();
  void* recv = buffers.recv();
  const char* placement = in_place ? "in-place" : "out-of-place";
  // Start from valid inputs (the timed calls themselves are not checked).
  if (in_place) fill_in_place(s, recv);
  else fill_out_of_place(s, send, recv);

  collx_status_t st = COLLX_OK;
  for (int i = 0; i < warmup_iters; ++i) {
    if ((st = run_collective(ctx, s, send, recv, in_place)) != COLLX_OK) {
      *what = std::string(placement) + " warm-up call";
      return st;
    }
  }
  // The barrier takes default options: a forced algorithm is meant for the measured calls.
  if ((st = collx_barrier(ctx.comm, nullptr)) != COLLX_OK) {
    *what = "collx_barrier before timing";
    return st;
  }
  const double start = now_us();
  for (int i = 0; i < iters; ++i) {
    if ((st = run_collective(ctx, s, send, recv, in_place)) != COLLX_OK) {
      *what = std::string(placement) + " timed call";
      return st;
    }
  }
  cell->time_us = (now_us() - start) / iters;
  cell->measured = true;

  cell->checked = check_iters > 0;
  cell->wrong = 0;
  for (int c = 0; c < check_iters; ++c) {
    if (in_place) fill_in_place(s, recv);
    else fill_out_of_place(s, send, recv);
    if ((st = run_collective(ctx, s, send, recv, in_place)) != COLLX_OK) {
      *what = std::string(placement) + " checked call";
      return st;
    }
    cell->wrong += in_place ? count_wrong_in_place(s, recv) : count_wrong_out_of_place(s, recv);
  }
  return COLLX_OK;
}

}  // namespace collx_bench
