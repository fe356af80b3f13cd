// Argument checks of every call, each rule here once: nothing is sent and no sequence number
// is used when one fails, so the communicator stays usable (COLLX_ERR_INVALID_ARG). The API
// layer checked handles, output pointers and the options' size before.
#include <cstdint>

#include "algorithms/registry.h"
#include "lib/core/comm.h"
#include "lib/core/comm_device.h"
#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {

namespace {

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  if (a_bytes == 0 || b_bytes == 0) return false;
  auto pa = reinterpret_cast<uintptr_t>(a);
  auto pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

Status invalid(const char* coll, const char* format, const std::string& detail) {
  return make_status(COLLX_ERR_INVALID_ARG, "%s: %s", coll, string_printf(format, detail.c_str()).c_str());
}

// Layouts whose in-place form puts the one-block buffer at block `block` of the buffer of
// every block (reduce-scatter, all-gather, gather, scatter): that, or no overlap at all.
Status block_in_place(const char* coll, const char* whole, size_t whole_bytes, const char* block_buf,
                      size_t block_bytes, int block, const std::string& overlap_message) {
  if (block_buf == whole + static_cast<size_t>(block) * block_bytes) return Status::Ok();
  if (overlaps(whole, whole_bytes, block_buf, block_bytes)) return invalid(coll, "%s", overlap_message);
  return Status::Ok();
}

// count * multiplier * element size without overflow.
bool total_bytes(size_t count, size_t multiplier, size_t element, size_t* out) {
  if (multiplier != 0 && count > SIZE_MAX / multiplier) return false;
  size_t elements = count * multiplier;
  if (element != 0 && elements > SIZE_MAX / element) return false;
  *out = elements * element;
  return true;
}

Status check_datatype(const char* who, int32_t datatype) {
  if (datatype_valid(datatype)) return Status::Ok();
  return invalid(who, "%s", string_printf("unknown datatype %d (valid: 0..%d, see collx_datatype_t)",
                                          static_cast<int>(datatype), COLLX_NUM_DATATYPES - 1));
}

}  // namespace

Status Communicator::check_choice(const char* who, collx_coll_t coll, int32_t datatype, int32_t forced) const {
  if (static_cast<int>(coll) < 0 || static_cast<int>(coll) >= COLLX_NUM_COLLS) {
    return invalid(who, "%s", string_printf("unknown collective %d (valid: 0..%d, see collx_coll_t)",
                                            static_cast<int>(coll), COLLX_NUM_COLLS - 1));
  }
  if (coll != COLLX_COLL_BARRIER) COLLX_RETURN_IF_ERROR(check_datatype(who, datatype));
  return check_forced(who, coll, forced);
}

Status Communicator::check_forced(const char* who, collx_coll_t coll, int32_t forced) const {
  if (forced == COLLX_ALGO_AUTO) return Status::Ok();
  // The raw value is looked up, never cast to the enum first: it may be out of its range.
  if (algo::find_implementation(forced, coll) == nullptr) return invalid(who, "%s", not_implemented(forced, coll));
  const algo::AlgorithmInfo* info = algo::algorithm_info(forced);
  if ((info->needs & algo::kNeedsSharedBoards) && (!transport_ || transport_->shared_boards() == nullptr)) {
    return invalid(who, "%s", string_printf("algorithm '%s' needs the shm transport (every rank on one host); this "
                                            "communicator uses %s", info->name, transport_name()));
  }
  return Status::Ok();
}

Status Communicator::validate(const CollCall& c) const {
  const char* name = coll_name(c.coll);
  const bool has_data = c.coll != COLLX_COLL_BARRIER;
  const bool reduces = coll_reduces(c.coll);
  if (has_data) COLLX_RETURN_IF_ERROR(check_datatype(name, c.datatype));
  if (reduces && !op_valid(c.op)) {
    return invalid(name, "%s", string_printf("unknown reduction op %d (valid: 0..%d, see collx_op_t)",
                                             static_cast<int>(c.op), COLLX_NUM_OPS - 1));
  }
  COLLX_RETURN_IF_ERROR(check_forced(name, c.coll, c.algorithm));
  COLLX_RETURN_IF_ERROR(device_check(c));  // the memory-kind rule (comm_device.cc)
  if (coll_has_root(c.coll) && (c.root < 0 || c.root >= size_)) {
    return invalid(name, "%s", string_printf("root %d is out of range for a communicator of %d ranks", c.root, size_));
  }
  if (coll_is_v(c.coll)) return validate_v(c);
  if (c.coll == COLLX_COLL_SEND || c.coll == COLLX_COLL_RECV) {
    if (c.peer < 0 || c.peer >= size_) {
      return invalid(name, "%s", string_printf("peer %d is out of range for a communicator of %d ranks", c.peer, size_));
    }
    if (c.peer == rank_) {
      return invalid(name, "%s", string_printf("peer %d is this rank; send to yourself with a local copy", c.peer));
    }
    if (c.tag < 0) return invalid(name, "%s", string_printf("tag %d is negative", c.tag));
  }
  if (!has_data) return Status::Ok();

  const size_t element = datatype_size(c.datatype);
  const size_t n = static_cast<size_t>(size_);
  size_t send_bytes = 0, recv_bytes = 0;
  size_t send_mult = 1, recv_mult = 1;
  switch (c.coll) {
    case COLLX_COLL_REDUCE_SCATTER: send_mult = n; break;
    case COLLX_COLL_ALLGATHER: recv_mult = n; break;
    case COLLX_COLL_GATHER: recv_mult = n; break;   // the root's recvbuf
    case COLLX_COLL_SCATTER: send_mult = n; break;  // the root's sendbuf
    case COLLX_COLL_ALLTOALL: send_mult = recv_mult = n; break;
    default: break;
  }
  if (!total_bytes(c.count, send_mult, element, &send_bytes) ||
      !total_bytes(c.count, recv_mult, element, &recv_bytes)) {
    return invalid(name, "%s", string_printf("count %zu x %zu ranks x %zu-byte elements overflows size_t",
                                             c.count, n, element));
  }
  if (send_bytes > (1ull << 40) || recv_bytes > (1ull << 40)) {
    return invalid(name, "%s", string_printf("count %zu asks for more than 1 TiB per buffer", c.count));
  }

  // Which buffers this rank reads and writes.
  const bool is_root = c.root == rank_;
  bool reads_send = true, writes_recv = true;
  if (c.coll == COLLX_COLL_BROADCAST || c.coll == COLLX_COLL_SCATTER) reads_send = is_root;
  if (c.coll == COLLX_COLL_REDUCE || c.coll == COLLX_COLL_GATHER) writes_recv = is_root;
  if (c.coll == COLLX_COLL_SEND) writes_recv = false;
  if (c.coll == COLLX_COLL_RECV) reads_send = false;
  if (c.count > 0 && reads_send && c.sendbuf == nullptr) {
    return invalid(name, "%s", string_printf("sendbuf is NULL but count is %zu", c.count));
  }
  if (c.count > 0 && writes_recv && c.recvbuf == nullptr) {
    return invalid(name, "%s", string_printf("recvbuf is NULL but count is %zu", c.count));
  }
  if (!reads_send || !writes_recv || c.count == 0) return Status::Ok();

  // In-place layouts (NCCL's rules); any other overlap is an error.
  const auto* send = static_cast<const char*>(c.sendbuf);
  const auto* recv = static_cast<const char*>(c.recvbuf);
  switch (c.coll) {
    case COLLX_COLL_ALLREDUCE:
    case COLLX_COLL_BROADCAST:
    case COLLX_COLL_REDUCE:
      if (send == recv) return Status::Ok();
      break;
    case COLLX_COLL_REDUCE_SCATTER:
      return block_in_place(name, send, send_bytes, recv, recv_bytes, rank_,
                            string_printf("recvbuf overlaps sendbuf; in place needs recvbuf == sendbuf + "
                                          "rank * recvcount elements (rank %d)", rank_));
    case COLLX_COLL_ALLGATHER:
      return block_in_place(name, recv, recv_bytes, send, send_bytes, rank_,
                            string_printf("sendbuf overlaps recvbuf; in place needs sendbuf == recvbuf + "
                                          "rank * sendcount elements (rank %d)", rank_));
    case COLLX_COLL_GATHER:  // only the root gets here
      return block_in_place(name, recv, recv_bytes, send, send_bytes, rank_,
                            string_printf("sendbuf overlaps recvbuf on the root; in place needs sendbuf == "
                                          "recvbuf + root * count elements (root %d)", rank_));
    case COLLX_COLL_SCATTER:  // only the root gets here
      return block_in_place(name, send, send_bytes, recv, recv_bytes, rank_,
                            string_printf("recvbuf overlaps sendbuf on the root; in place needs recvbuf == "
                                          "sendbuf + root * count elements (root %d)", rank_));
    default:
      break;
  }
  if (overlaps(send, send_bytes, recv, recv_bytes)) {
    return invalid(name, "%s", std::string(c.coll == COLLX_COLL_ALLTOALL
                                               ? "sendbuf and recvbuf overlap; alltoall has no in-place form"
                                               : "sendbuf and recvbuf overlap without being equal (in place "
                                                 "needs sendbuf == recvbuf)"));
  }
  return Status::Ok();
}

}  // namespace collx
