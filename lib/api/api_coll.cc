// Collective and point-to-point entry points, blocking and nonblocking, and requests.
#include "lib/api/group_state.h"  // grouped calls
#include "lib/api/handles.h"

using namespace collx;

namespace {

// Blocking: validate handles and options, then run.
collx_status_t run_blocking(collx_comm_t comm, const collx_opts_t* opts, CollCall call) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    COLLX_RETURN_IF_ERROR(api::read_opts(opts, &call));
    if (api::group_open()) return api::group_record(comm, call, nullptr);  // grouped calls
    if (call.coll == COLLX_COLL_SEND || call.coll == COLLX_COLL_RECV) return comm->impl->send_recv(call);
    return comm->impl->run(call);
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
      COLLX_RETURN_IF_ERROR(comm->impl->submit(call, &impl));
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

// All-gatherv: the arrays are copied here, while the caller's pointers are known valid.
// `datatype` is the caller's raw value (validate() rejects one outside collx_datatype_t).
Status make_v_call(collx_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                   const size_t* displs, int32_t datatype, CollCall* call) {
  if (!comm || !comm->impl) return api::null_handle("comm");
  if (!recvcounts) return make_status(COLLX_ERR_INVALID_ARG, "allgatherv: recvcounts is NULL (it needs one entry per rank)");
  const size_t n = static_cast<size_t>(comm->impl->size());
  *call = make_call(COLLX_COLL_ALLGATHERV, sendbuf, recvbuf, sendcount, COLLX_UINT8, COLLX_SUM, 0);
  call->datatype = datatype;
  call->counts.assign(recvcounts, recvcounts + n);
  call->displs.resize(n);
  size_t packed = 0;  // overflow is validate_v's to report
  for (size_t r = 0; r < n; ++r) {
    call->displs[r] = displs ? displs[r] : packed;
    packed += recvcounts[r];
  }
  return Status::Ok();
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
