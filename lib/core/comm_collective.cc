// Running collectives: validation, algorithm choice, sequence numbers, AVG and PREMUL_SUM
// expressed as SUM plus a scale, ordering with nonblocking calls, failure handling.
#include <chrono>
#include <cstring>

#include "algorithms/registry.h"
#include "lib/common/exception_status.h"
#include "lib/common/log.h"
#include "lib/core/comm.h"
#include "lib/core/comm_device.h"  // CUDA hook (device_buffers, capture_check)
#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {

namespace {

// Elements of every rank's block together (validated: no overflow).
size_t total_count(const CollCall& call) {
  size_t total = 0;
  for (size_t c : call.counts) total += c;
  return total;
}

// FNV-1a over the counts, position by position (so [1, 2] and [2, 1] differ).
uint64_t counts_hash(const std::vector<size_t>& counts) {
  uint64_t h = 14695981039346656037ull;
  for (size_t c : counts) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (static_cast<uint64_t>(c) >> (8 * byte)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace

int64_t Communicator::timeout_for(int64_t call_timeout_ms) const {
  return call_timeout_ms >= 0 ? call_timeout_ms : settings_.timeout_ms;
}

Deadline Communicator::deadline_for(int64_t call_timeout_ms) const {
  return Deadline::after_ms(timeout_for(call_timeout_ms));
}

std::string Communicator::context_of(const transport::OpDesc& desc) const {
  return string_printf("%s on rank %d of '%s': ", describe_op(desc).c_str(), rank_, name_.c_str());
}

collx_algorithm_t Communicator::choose_algorithm(collx_coll_t coll, size_t count, int32_t datatype,
                                                 int32_t forced) const {
  const size_t element = coll == COLLX_COLL_BARRIER ? 0 : datatype_size(datatype);
  const uint64_t bytes = selection_bytes(coll, count, element, size_);
  const collx_algorithm_t chosen = settings_.selector.choose(coll, bytes, size_, static_cast<collx_algorithm_t>(forced),
                                                             model_, settings_.chunk_bytes);
  if (chosen == COLLX_ALGO_SHARED_MEMORY && model_.shared_board_half_bytes() == 0) {
    // A COLLX_ALGO rule naming it, on a communicator that spans hosts: the rule cannot
    // apply here, so the model chooses (a forced call was refused by check_forced()).
    return model_.best(coll, bytes, size_, settings_.chunk_bytes);
  }
  return chosen;
}

collx_algorithm_t Communicator::chosen_algorithm(const CollCall& call) const {
  // The choice depends on (coll, count, datatype, forced) only; a v-collective chooses by
  // the total of its counts.
  const size_t count = coll_is_v(call.coll) ? total_count(call) : call.count;
  LastChoice& last = last_choice_;
  if (!last.valid || last.coll != call.coll || last.count != count || last.datatype != call.datatype ||
      last.forced != call.algorithm) {
    last = LastChoice{true, call.coll, count, call.datatype, call.algorithm,
                      choose_algorithm(call.coll, count, call.datatype, call.algorithm)};
  }
  return last.algorithm;
}

Status Communicator::prepare(CollCall* accepted, transport::OpDesc* desc) const {
  const CollCall& call = *accepted;
  // validate() depends only on the fields LastValidated keeps (and on rank, size and the
  // transport, which never change): a call equal to the last one it accepted is accepted
  // again without it. A v-collective's arrays may hold new values at the same addresses:
  // always validated.
  LastValidated& same = last_validated_;
  const bool v_layout = coll_is_v(call.coll);
  const bool repeat = !v_layout && same.valid && same.coll == call.coll && same.count == call.count &&
                      same.sendbuf == call.sendbuf && same.recvbuf == call.recvbuf &&
                      same.datatype == call.datatype && same.op == call.op && same.algorithm == call.algorithm &&
                      same.root == call.root && same.peer == call.peer && same.tag == call.tag &&
                      same.mem_kind == call.mem_kind;
  if (!repeat) {
    COLLX_RETURN_IF_ERROR(validate(call));
    if (!v_layout) {
      same = LastValidated{true,          call.coll, call.sendbuf, call.recvbuf, call.count, call.datatype,
                           call.op,       call.algorithm, call.root, call.peer, call.tag, call.mem_kind};
    }
  }
  // After validation (a bad kind is refused as the caller stated it), before anything that
  // asks whether the buffers are device memory: from here on that is read, never probed.
  resolve_mem_kind(accepted);
  COLLX_RETURN_IF_ERROR(capture_check(call));  // the stream's state, not an argument: every call
  if (failed_.load(std::memory_order_acquire)) return unusable();
  const collx_algorithm_t algorithm = chosen_algorithm(call);
  desc->kind = static_cast<uint8_t>(call.coll);
  desc->datatype = call.coll == COLLX_COLL_BARRIER ? 0 : static_cast<uint8_t>(call.datatype);
  desc->op = coll_reduces(call.coll) ? static_cast<uint8_t>(call.op) : 0;
  desc->algorithm = static_cast<uint8_t>(algorithm);
  desc->root = coll_has_root(call.coll) ? call.root : -1;
  // Ranks compare OpDescs, so a v-collective's counts array, where every rank passes the
  // same one, is carried as its hash: ranks that passed different arrays fail with a
  // mismatch instead of receiving wrong sizes. The others' arrays differ by rank; their
  // sizes are checked message by message (each pair exchanges one message per block).
  desc->count = coll_counts_hashed(call.coll) ? counts_hash(call.counts) : v_layout ? 0 : call.count;
  return Status::Ok();
}

Status Communicator::run(CollCall call) {
  LogRankScope log_rank(rank_);
  transport::OpDesc desc;
  COLLX_RETURN_IF_ERROR(prepare(&call, &desc));
  desc.seq = ++coll_seq_;
  if (executor_.idle()) return execute(call, desc);
  // Earlier nonblocking collectives are still queued: keep the order by queueing behind them.
  auto request = std::make_shared<RequestImpl>(shared_from_this(), /*is_p2p=*/false);
  COLLX_RETURN_IF_ERROR(enqueue(call, desc, request));
  return request->wait(Deadline::never());
}

Status Communicator::submit(CollCall call, std::shared_ptr<RequestImpl>* out) {
  LogRankScope log_rank(rank_);
  transport::OpDesc desc;
  COLLX_RETURN_IF_ERROR(prepare(&call, &desc));
  desc.seq = ++coll_seq_;
  flight_.post(desc, -1);  // flight recorder
  auto request = std::make_shared<RequestImpl>(shared_from_this(), /*is_p2p=*/false);
  // Device buffers on the staged route: queued on the caller's stream now (comm_device_async.cc).
  bool gated = false;
  COLLX_RETURN_IF_ERROR(stream_ordered(call, &gated) ? enqueue_stream_ordered(call, desc, request, gated)
                                                     : enqueue(call, desc, request));
  *out = std::move(request);
  return Status::Ok();
}

Status Communicator::enqueue(const CollCall& call, const transport::OpDesc& desc,
                             const std::shared_ptr<RequestImpl>& request) {
  try {
    executor_.submit([this, call, desc, request] { request->finish(execute(call, desc)); },
                     [this, request](const Status& status) {
                       // execute() threw past its own guard (or finish did): the request must
                       // still end, and the communicator cannot be trusted to be in step.
                       request->finish(status);
                       fail(status);
                     },
                     rank_);
  } catch (...) {
    Status st = current_exception_status("queueing a nonblocking collective");
    fail(st);
    return st;
  }
  return Status::Ok();
}

Status Communicator::execute(const CollCall& call, const transport::OpDesc& desc) {
  if (failed_.load(std::memory_order_acquire)) return unusable();
  // One clock reading is the start of the deadline and of the flight record (none when
  // neither needs it).
  const int64_t timeout_ms = timeout_for(call.timeout_ms);
  const Deadline::Clock::time_point now =
      timeout_ms >= 0 || flight_.enabled() ? Deadline::Clock::now() : Deadline::Clock::time_point();
  const Deadline deadline = Deadline::after_ms(timeout_ms, now);
  COLLX_TRACE(COLL, "start %s", describe_op(desc).c_str());
  const uint64_t fr_id = flight_.start_at(  // flight recorder
      desc, -1, -1, std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
  transport_->set_active_op(&desc);
  Status st;
  try {
    st = dispatch(call, desc, deadline);
  } catch (...) {
    // An allocation failed half-way through. The algorithm's request sets cancelled what they
    // had posted while unwinding; failing the communicator below tells the peers.
    st = current_exception_status("running it");
  }
  transport_->set_active_op(nullptr);
  flight_.end(fr_id, st.code());  // flight recorder
  if (st.ok()) {
    COLLX_TRACE(COLL, "done %s", describe_op(desc).c_str());
    return st;
  }
  if (st.code() == COLLX_ERR_INVALID_ARG || st.code() == COLLX_ERR_NO_MEMORY) {
    // Detected before anything reached the wire? Not guaranteed here: peers may be waiting
    // for this rank, so the communicator cannot stay in step. Fail it like any other error.
    st = Status(st.code() == COLLX_ERR_NO_MEMORY ? COLLX_ERR_NO_MEMORY : COLLX_ERR_INTERNAL, st.message());
  }
  if (aborted_.load(std::memory_order_acquire)) {
    st = Status(COLLX_ERR_ABORTED, "collx_comm_abort was called while it ran (" + st.message() + ")");
  }
  st = st.with_context(context_of(desc));
  fail(st);
  return st;
}

algo::Context Communicator::host_context() const {
  algo::Context ctx;
  ctx.transport = transport_.get();
  ctx.rank = rank_;
  ctx.size = size_;
  ctx.chunk_bytes = settings_.chunk_bytes;
  ctx.scratch = &algo_scratch_;
  return ctx;
}

Status Communicator::run_algorithm(const algo::CollArgs& args) const {
  const algo::Implementation* entry = algo::find_implementation(args.desc.algorithm, args.desc.kind);
  algo::Context ctx = host_context();
  if (!ring_order_.empty() && entry && entry->on_ring_positions) {
    ctx.rank = ring_position_;  // the registry says the result does not depend on rank order
    ctx.rank_at = ring_order_.data();
  }
  // All-to-allv, gatherv and scatterv: a rank's own count says nothing of its peers'; their
  // schedules exchange (empty) messages with every peer they would meet anyway.
  const bool own_counts = args.desc.kind == COLLX_COLL_ALLTOALLV || args.desc.kind == COLLX_COLL_GATHERV ||
                          args.desc.kind == COLLX_COLL_SCATTERV;
  if (args.count == 0 && args.desc.kind != COLLX_COLL_BARRIER && !own_counts) {
    // Nothing to move, but the ranks still meet: a rank that passed 0 while another passed
    // 5 (or called something else) must fail with a mismatch, not leave its peers waiting.
    // The empty messages of a barrier carry this call's OpDesc, which is what gets compared.
    return algo::barrier_dissemination(ctx, args);
  }
  if (entry && entry->run) return entry->run(ctx, args);
  if (entry && entry->algorithm == COLLX_ALGO_HIERARCHICAL) return allreduce_hierarchical(ctx, args);  // comm_hierarchy.cc
  return make_status(COLLX_ERR_INTERNAL, "no schedule for algorithm '%s' of %s in the registry",
                     algorithm_name(args.desc.algorithm), coll_name(args.desc.kind));
}

Status Communicator::dispatch(const CollCall& call, const transport::OpDesc& desc, Deadline deadline) {
  if (device_buffers(call)) return dispatch_device(call, desc, deadline);  // CUDA hook (comm_device.cc)
  algo::CollArgs args;
  args.sendbuf = call.sendbuf;
  args.recvbuf = call.recvbuf;
  args.count = call.count;
  args.datatype = static_cast<collx_datatype_t>(call.datatype);
  args.op = static_cast<collx_op_t>(call.op);
  args.root = call.root;
  if (coll_is_v(call.coll)) {
    // Gatherv and scatterv keep count = this rank's block; the others run on the total.
    if (call.coll != COLLX_COLL_GATHERV && call.coll != COLLX_COLL_SCATTERV) args.count = total_count(call);
    args.counts = call.counts.empty() ? nullptr : call.counts.data();
    args.displs = call.displs.empty() ? nullptr : call.displs.data();
    args.send_counts = call.send_counts.empty() ? nullptr : call.send_counts.data();
    args.send_displs = call.send_displs.empty() ? nullptr : call.send_displs.data();
  }
  args.desc = desc;
  args.deadline = deadline;
  if (!coll_reduces(call.coll)) return run_algorithm(args);

  // PREMUL_SUM: scale this rank's input into scratch, then sum out of place. AVG: sum,
  // then divide the part of the result this rank holds.
  const size_t element = datatype_size(call.datatype);
  size_t input_count = call.coll == COLLX_COLL_REDUCE_SCATTER ? call.count * static_cast<size_t>(size_) : call.count;
  if (call.coll == COLLX_COLL_REDUCE_SCATTERV) input_count = total_count(call);  // call.count: this rank's block
  if (call.op == COLLX_PREMUL_SUM && input_count > 0) {
    void* scaled = core_scratch_.get(0, input_count * element);
    if (!scaled) {
      return make_status(COLLX_ERR_NO_MEMORY, "cannot allocate %zu bytes to scale the input", input_count * element);
    }
    scale(scaled, call.sendbuf, input_count, args.datatype, call.premul_scalar);
    args.sendbuf = scaled;
  }
  if (call.op == COLLX_PREMUL_SUM || call.op == COLLX_AVG) args.op = COLLX_SUM;
  COLLX_RETURN_IF_ERROR(run_algorithm(args));
  if (call.op == COLLX_AVG && call.count > 0 && (call.coll != COLLX_COLL_REDUCE || call.root == rank_)) {
    divide(call.recvbuf, call.count, args.datatype, size_);
  }
  return Status::Ok();
}

}  // namespace collx
