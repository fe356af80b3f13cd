// The Transport methods every engine overrides, declared once: tcp, shm and ucx implement the
// same interface with the same signatures, and a change to transport.h then touches one list.
// name(), rank() and size() stay in each engine (they are one-line inline definitions).
#pragma once

#include "transports/transport.h"

// Inside a class deriving from transport::Transport, in its public section.
#define COLLX_TRANSPORT_ENGINE_OVERRIDES                                                                   \
  Status post_send(::collx::transport::Request* req, int peer, uint64_t tag, const void* buf, size_t bytes, \
                   const ::collx::transport::OpDesc& desc) override;                                       \
  Status post_recv(::collx::transport::Request* req, int peer, uint64_t tag, void* buf, size_t bytes,       \
                   const ::collx::transport::OpDesc& desc) override;                                       \
  Status wait_all(::collx::transport::Request* const* reqs, size_t count, Deadline deadline) override;     \
  void cancel(::collx::transport::Request* const* reqs, size_t count) override;                            \
  void set_active_op(const ::collx::transport::OpDesc* desc) override;                                     \
  void poison(const Status& status, bool notify_peers) override;                                           \
  Status health() const override;                                                                          \
  void abort() override;                                                                                   \
  void close(Deadline deadline) override
