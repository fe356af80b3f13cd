// Collective and point-to-point entry points, blocking and nonblocking, and requests.
#include <utility>

#include "lib/api/group_state.h"  // grouped calls
#include "lib/api/handles.h"
#include "lib/core/names.h"

using namespace collx;

namespace {

// Blocking: validate handles and options, then run.
collx_status_t run_blocking(collx_comm_t comm, const collx_opts_t* opts, CollCall call) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    COLLX_RETURN_IF_ERROR(api::read_opts(opts, &call));
    if (api::group_open()) return api::group_record(comm, call, nullptr);  // grouped calls
    if (call.coll == COLLX_COLL_SEND || call.coll == COLLX_COLL_RECV) return comm->impl->send_recv(call);
    return comm->impl->run(std::move(call));
  });
}

collx_status_t run_nonblocking(collx_comm_t comm, const collx_opts_t* opts, CollCall call,
                               collx_request_t* request) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    if (!request) return api::null_handle("request (output)");
    *request = nullptr;
    COLLX_RETURN_IF_ERROR(api::read_opts(opts, &call));
    if (api::group_open()) return api::group_record(comm, call, request);  // grouped calls
    std::shared_ptr<RequestImpl> impl;
    if (call.coll == COLLX_COLL_SEND || call.coll == COLLX_COLL_RECV) {
      COLLX_RETURN_IF_ERROR(comm->impl->post_p2p(call, &impl));
    } else {
      COLLX_RETURN_IF_ERROR(comm->impl->submit(std::move(call), &impl));
    }
    *request = new collx_request_s{std::move(impl)};
    return Status::Ok();
  });
}

CollCall make_call(collx_coll_t coll, const void* sendbuf, void* recvbuf, size_t count,
                   collx_datatype_t datatype, collx_op_t op, int root) {
  CollCall call;
  call.coll = coll;
  call.sendbuf = sendbuf;
  call.recvbuf = recvbuf;
  call.count = count;
  call.datatype = static_cast<int32_t>(datatype);
  call.op = static_cast<int32_t>(op);
  call.root = root;
  return call;
}

CollCall make_p2p(collx_coll_t coll, const void* sendbuf, void* recvbuf, size_t count,
                  collx_datatype_t datatype, int peer, int tag) {
  CollCall call = make_call(coll, sendbuf, recvbuf, count, datatype, COLLX_SUM, 0);
  call.peer = peer;
  call.tag = tag;
  return call;
}

// One per-rank array pair of a v-collective, copied (displs packed in rank order when NULL;
// overflow is validate_v's to report). `counts` must not be NULL.
Status copy_layout(collx_comm_t comm, const char* coll, const char* counts_name, const size_t* counts,
                   const size_t* displs, std::vector<size_t>* out_counts, std::vector<size_t>* out_displs) {
  if (!counts) {
    return make_status(COLLX_ERR_INVALID_ARG, "%s: %s is NULL (it needs one entry per rank)", coll, counts_name);
  }
  const size_t n = static_cast<size_t>(comm->impl->size());
  out_counts->assign(counts, counts + n);
  out_displs->resize(n);
  size_t packed = 0;
  for (size_t r = 0; r < n; ++r) {
    (*out_displs)[r] = displs ? displs[r] : packed;
    packed += counts[r];
  }
  return Status::Ok();
}

// All-gatherv: the arrays are copied here, while the caller's pointers are known valid.
// `datatype` is the caller's raw value (validate() rejects one outside collx_datatype_t).
Status make_v_call(collx_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                   const size_t* displs, int32_t datatype, CollCall* call) {
  if (!comm || !comm->impl) return api::null_handle("comm");
  *call = make_call(COLLX_COLL_ALLGATHERV, sendbuf, recvbuf, sendcount, COLLX_UINT8, COLLX_SUM, 0);
  call->datatype = datatype;
  return copy_layout(comm, "allgatherv", "recvcounts", recvcounts, displs, &call->counts, &call->displs);
}

// --- v-collectives: all-to-allv, reduce-scatterv, gatherv, scatterv (docs/collectives-v.md) ---

// Builds a v-call (its arrays copied by `layout`) and runs it, blocking or not. `datatype`
// and `op` are read once as integers by the caller: they may be out of range.
template <class Layout>
collx_status_t run_v(collx_comm_t comm, const collx_opts_t* opts, collx_request_t* request, bool nonblocking,
                     CollCall call, Layout layout) {
  collx_status_t rc = api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    return layout(comm->impl->rank(), &call);
  });
  if (rc != COLLX_OK) return rc;
  return nonblocking ? run_nonblocking(comm, opts, std::move(call), request) : run_blocking(comm, opts, std::move(call));
}

CollCall v_call(collx_coll_t coll, const void* sendbuf, void* recvbuf, size_t count, int32_t datatype, int32_t op,
                int root) {
  CollCall call = make_call(coll, sendbuf, recvbuf, count, COLLX_UINT8, COLLX_SUM, root);
  call.datatype = datatype;
  call.op = op;
  return call;
}

collx_status_t alltoallv(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls, void* recvbuf,
                         const size_t* recvcounts, const size_t* rdispls, int32_t datatype, collx_comm_t comm,
                         const collx_opts_t* opts, collx_request_t* request, bool nonblocking) {
  return run_v(comm, opts, request, nonblocking, v_call(COLLX_COLL_ALLTOALLV, sendbuf, recvbuf, 0, datatype, 0, 0),
               [&](int, CollCall* call) -> Status {
                 COLLX_RETURN_IF_ERROR(copy_layout(comm, "alltoallv", "sendcounts", sendcounts, sdispls,
                                                   &call->send_counts, &call->send_displs));
                 return copy_layout(comm, "alltoallv", "recvcounts", recvcounts, rdispls, &call->counts,
                                    &call->displs);
               });
}

collx_status_t reduce_scatterv(const void* sendbuf, void* recvbuf, const size_t* recvcounts, int32_t datatype,
                               int32_t op, collx_comm_t comm, const collx_opts_t* opts, collx_request_t* request,
                               bool nonblocking) {
  return run_v(comm, opts, request, nonblocking,
               v_call(COLLX_COLL_REDUCE_SCATTERV, sendbuf, recvbuf, 0, datatype, op, 0),
               [&](int rank, CollCall* call) -> Status {
                 // sendbuf is packed in rank order; count: this rank's block.
                 COLLX_RETURN_IF_ERROR(copy_layout(comm, "reduce_scatterv", "recvcounts", recvcounts, nullptr,
                                                   &call->counts, &call->displs));
                 call->count = call->counts[static_cast<size_t>(rank)];
                 return Status::Ok();
               });
}

// Gatherv and scatterv: the root's arrays (`counts`, `displs`) are read on the root only.
collx_status_t rooted_v(collx_coll_t coll, const void* sendbuf, void* recvbuf, size_t count, const size_t* counts,
                        const size_t* displs, int32_t datatype, int32_t root, collx_comm_t comm,
                        const collx_opts_t* opts, collx_request_t* request, bool nonblocking) {
  const bool gathers = coll == COLLX_COLL_GATHERV;
  return run_v(comm, opts, request, nonblocking, v_call(coll, sendbuf, recvbuf, count, datatype, 0, root),
               [&](int rank, CollCall* call) -> Status {
                 if (rank != root) return Status::Ok();
                 return copy_layout(comm, coll_name(coll), gathers ? "recvcounts" : "sendcounts", counts, displs,
                                    &call->counts, &call->displs);
               });
}

}  // namespace

extern "C" {

collx_status_t collx_allreduce(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                               collx_op_t op, collx_comm_t comm, const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_call(COLLX_COLL_ALLREDUCE, sendbuf, recvbuf, count, datatype, op, 0));
}
collx_status_t collx_reduce_scatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                    collx_datatype_t datatype, collx_op_t op, collx_comm_t comm,
                                    const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_call(COLLX_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, datatype, op, 0));
}
collx_status_t collx_allgather(const void* sendbuf, void* recvbuf, size_t sendcount, collx_datatype_t datatype,
                               collx_comm_t comm, const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_call(COLLX_COLL_ALLGATHER, sendbuf, recvbuf, sendcount, datatype, COLLX_SUM, 0));
}
collx_status_t collx_broadcast(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                               int32_t root, collx_comm_t comm, const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_call(COLLX_COLL_BROADCAST, sendbuf, recvbuf, count, datatype, COLLX_SUM, root));
}
collx_status_t collx_reduce(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                            collx_op_t op, int32_t root, collx_comm_t comm, const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_call(COLLX_COLL_REDUCE, sendbuf, recvbuf, count, datatype, op, root));
}
collx_status_t collx_alltoall(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                              collx_comm_t comm, const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_call(COLLX_COLL_ALLTOALL, sendbuf, recvbuf, count, datatype, COLLX_SUM, 0));
}
collx_status_t collx_gather(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                            int32_t root, collx_comm_t comm, const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_call(COLLX_COLL_GATHER, sendbuf, recvbuf, count, datatype, COLLX_SUM, root));
}
collx_status_t collx_scatter(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                             int32_t root, collx_comm_t comm, const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_call(COLLX_COLL_SCATTER, sendbuf, recvbuf, count, datatype, COLLX_SUM, root));
}
collx_status_t collx_allgatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                                const size_t* displs, collx_datatype_t datatype, collx_comm_t comm,
                                const collx_opts_t* opts) {
  CollCall call;
  const int32_t raw_datatype = datatype;  // read once as an integer: it may be out of range
  collx_status_t rc = api::guarded(comm, [&] {
    return make_v_call(comm, sendbuf, sendcount, recvbuf, recvcounts, displs, raw_datatype, &call);
  });
  return rc != COLLX_OK ? rc : run_blocking(comm, opts, std::move(call));
}
collx_status_t collx_barrier(collx_comm_t comm, const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_call(COLLX_COLL_BARRIER, nullptr, nullptr, 0, COLLX_UINT8, COLLX_SUM, 0));
}
collx_status_t collx_send(const void* buf, size_t count, collx_datatype_t datatype, int32_t peer, int32_t tag,
                          collx_comm_t comm, const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_p2p(COLLX_COLL_SEND, buf, nullptr, count, datatype, peer, tag));
}
collx_status_t collx_recv(void* buf, size_t count, collx_datatype_t datatype, int32_t peer, int32_t tag,
                          collx_comm_t comm, const collx_opts_t* opts) {
  return run_blocking(comm, opts, make_p2p(COLLX_COLL_RECV, nullptr, buf, count, datatype, peer, tag));
}

collx_status_t collx_iallreduce(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                                collx_op_t op, collx_comm_t comm, const collx_opts_t* opts,
                                collx_request_t* request) {
  return run_nonblocking(comm, opts, make_call(COLLX_COLL_ALLREDUCE, sendbuf, recvbuf, count, datatype, op, 0), request);
}
collx_status_t collx_ireduce_scatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                     collx_datatype_t datatype, collx_op_t op, collx_comm_t comm,
                                     const collx_opts_t* opts, collx_request_t* request) {
  return run_nonblocking(comm, opts,
                         make_call(COLLX_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, datatype, op, 0), request);
}
collx_status_t collx_iallgather(const void* sendbuf, void* recvbuf, size_t sendcount, collx_datatype_t datatype,
                                collx_comm_t comm, const collx_opts_t* opts, collx_request_t* request) {
  return run_nonblocking(comm, opts,
                         make_call(COLLX_COLL_ALLGATHER, sendbuf, recvbuf, sendcount, datatype, COLLX_SUM, 0), request);
}
collx_status_t collx_ibroadcast(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                                int32_t root, collx_comm_t comm, const collx_opts_t* opts,
                                collx_request_t* request) {
  return run_nonblocking(comm, opts,
                         make_call(COLLX_COLL_BROADCAST, sendbuf, recvbuf, count, datatype, COLLX_SUM, root), request);
}
collx_status_t collx_ireduce(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                             collx_op_t op, int32_t root, collx_comm_t comm, const collx_opts_t* opts,
                             collx_request_t* request) {
  return run_nonblocking(comm, opts, make_call(COLLX_COLL_REDUCE, sendbuf, recvbuf, count, datatype, op, root), request);
}
collx_status_t collx_ialltoall(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                               collx_comm_t comm, const collx_opts_t* opts, collx_request_t* request) {
  return run_nonblocking(comm, opts,
                         make_call(COLLX_COLL_ALLTOALL, sendbuf, recvbuf, count, datatype, COLLX_SUM, 0), request);
}
collx_status_t collx_igather(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                             int32_t root, collx_comm_t comm, const collx_opts_t* opts, collx_request_t* request) {
  return run_nonblocking(comm, opts,
                         make_call(COLLX_COLL_GATHER, sendbuf, recvbuf, count, datatype, COLLX_SUM, root), request);
}
collx_status_t collx_iscatter(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t datatype,
                              int32_t root, collx_comm_t comm, const collx_opts_t* opts, collx_request_t* request) {
  return run_nonblocking(comm, opts,
                         make_call(COLLX_COLL_SCATTER, sendbuf, recvbuf, count, datatype, COLLX_SUM, root), request);
}
collx_status_t collx_iallgatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                                 const size_t* displs, collx_datatype_t datatype, collx_comm_t comm,
                                 const collx_opts_t* opts, collx_request_t* request) {
  CollCall call;
  const int32_t raw_datatype = datatype;  // read once as an integer: it may be out of range
  collx_status_t rc = api::guarded(comm, [&] {
    return make_v_call(comm, sendbuf, sendcount, recvbuf, recvcounts, displs, raw_datatype, &call);
  });
  return rc != COLLX_OK ? rc : run_nonblocking(comm, opts, std::move(call), request);
}
// --- v-collectives: all-to-allv, reduce-scatterv, gatherv, scatterv ---
// The enums are read once as integers: a C caller may pass any value.
collx_status_t collx_alltoallv(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls, void* recvbuf,
                               const size_t* recvcounts, const size_t* rdispls, collx_datatype_t datatype,
                               collx_comm_t comm, const collx_opts_t* opts) {
  const int32_t dt = datatype;
  return alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dt, comm, opts, nullptr, false);
}
collx_status_t collx_ialltoallv(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls, void* recvbuf,
                                const size_t* recvcounts, const size_t* rdispls, collx_datatype_t datatype,
                                collx_comm_t comm, const collx_opts_t* opts, collx_request_t* request) {
  const int32_t dt = datatype;
  return alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dt, comm, opts, request, true);
}
collx_status_t collx_reduce_scatterv(const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                                     collx_datatype_t datatype, collx_op_t op, collx_comm_t comm,
                                     const collx_opts_t* opts) {
  const int32_t dt = datatype, raw_op = op;
  return reduce_scatterv(sendbuf, recvbuf, recvcounts, dt, raw_op, comm, opts, nullptr, false);
}
collx_status_t collx_ireduce_scatterv(const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                                      collx_datatype_t datatype, collx_op_t op, collx_comm_t comm,
                                      const collx_opts_t* opts, collx_request_t* request) {
  const int32_t dt = datatype, raw_op = op;
  return reduce_scatterv(sendbuf, recvbuf, recvcounts, dt, raw_op, comm, opts, request, true);
}
collx_status_t collx_gatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                             const size_t* displs, collx_datatype_t datatype, int32_t root, collx_comm_t comm,
                             const collx_opts_t* opts) {
  const int32_t dt = datatype;
  return rooted_v(COLLX_COLL_GATHERV, sendbuf, recvbuf, sendcount, recvcounts, displs, dt, root, comm, opts,
                  nullptr, false);
}
collx_status_t collx_igatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                              const size_t* displs, collx_datatype_t datatype, int32_t root, collx_comm_t comm,
                              const collx_opts_t* opts, collx_request_t* request) {
  const int32_t dt = datatype;
  return rooted_v(COLLX_COLL_GATHERV, sendbuf, recvbuf, sendcount, recvcounts, displs, dt, root, comm, opts,
                  request, true);
}
collx_status_t collx_scatterv(const void* sendbuf, const size_t* sendcounts, const size_t* displs, void* recvbuf,
                              size_t recvcount, collx_datatype_t datatype, int32_t root, collx_comm_t comm,
                              const collx_opts_t* opts) {
  const int32_t dt = datatype;
  return rooted_v(COLLX_COLL_SCATTERV, sendbuf, recvbuf, recvcount, sendcounts, displs, dt, root, comm, opts,
                  nullptr, false);
}
collx_status_t collx_iscatterv(const void* sendbuf, const size_t* sendcounts, const size_t* displs, void* recvbuf,
                               size_t recvcount, collx_datatype_t datatype, int32_t root, collx_comm_t comm,
                               const collx_opts_t* opts, collx_request_t* request) {
  const int32_t dt = datatype;
  return rooted_v(COLLX_COLL_SCATTERV, sendbuf, recvbuf, recvcount, sendcounts, displs, dt, root, comm, opts,
                  request, true);
}
collx_status_t collx_ibarrier(collx_comm_t comm, const collx_opts_t* opts, collx_request_t* request) {
  return run_nonblocking(comm, opts, make_call(COLLX_COLL_BARRIER, nullptr, nullptr, 0, COLLX_UINT8, COLLX_SUM, 0),
                         request);
}
collx_status_t collx_isend(const void* buf, size_t count, collx_datatype_t datatype, int32_t peer, int32_t tag,
                           collx_comm_t comm, const collx_opts_t* opts, collx_request_t* request) {
  return run_nonblocking(comm, opts, make_p2p(COLLX_COLL_SEND, buf, nullptr, count, datatype, peer, tag), request);
}
collx_status_t collx_irecv(void* buf, size_t count, collx_datatype_t datatype, int32_t peer, int32_t tag,
                           collx_comm_t comm, const collx_opts_t* opts, collx_request_t* request) {
  return run_nonblocking(comm, opts, make_p2p(COLLX_COLL_RECV, nullptr, buf, count, datatype, peer, tag), request);
}

collx_status_t collx_test(collx_request_t request, int* done) {
  if (!request || !request->impl) {
    api::set_thread_error(api::null_handle("request"));
    return COLLX_ERR_INVALID_ARG;
  }
  collx_comm_s view{request->impl->comm()};
  collx_status_t rc = api::guarded(&view, [&]() -> Status {
    if (!done) return api::null_handle("done");
    Status status;
    *done = request->impl->test(&status) ? 1 : 0;
    return *done ? status : Status::Ok();
  });
  return rc;
}

collx_status_t collx_wait(collx_request_t request, int64_t timeout_ms) {
  if (!request || !request->impl) {
    api::set_thread_error(api::null_handle("request"));
    return COLLX_ERR_INVALID_ARG;
  }
  collx_comm_s view{request->impl->comm()};
  return api::guarded(&view, [&]() -> Status {
    if (api::group_holds(request->impl.get())) {  // grouped calls
      return Status(COLLX_ERR_INVALID_USAGE, "collx_wait on a request recorded in this thread's open group: it runs "
                                             "only at collx_group_end, so this wait could never end");
    }
    return request->impl->wait(Deadline::after_ms(timeout_ms));
  });
}

collx_status_t collx_request_free(collx_request_t request) {
  if (!request) return COLLX_OK;
  if (request->impl) {
    Status status;
    // A point-to-point request still in flight must outlive the handle: the transport
    // writes into (or reads from) its buffers until it completes.
    std::shared_ptr<Communicator> comm = request->impl->comm();
    if (comm && !request->impl->test(&status)) comm->detach(request->impl);
  }
  delete request;
  return COLLX_OK;
}

}  // extern "C"
