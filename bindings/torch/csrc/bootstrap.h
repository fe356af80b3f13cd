// How a torch process group's collx communicator finds its peers, with nothing but the c10d
// store torch hands the backend: group rank 0 hosts a collx TCP store on a free port of this
// host and publishes "hostname:port" under kStoreAddressKey of the c10d store (torch prefixes
// the key per group); the other ranks read it and connect. Users set no extra variables.
#pragma once

#include <chrono>
#include <memory>

#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "collx/collx.h"

namespace collx_torch {

constexpr const char* kStoreAddressKey = "collx_torch/store_address";

// This rank's communicator and the collx store it was bootstrapped through. The store handle
// is kept for the communicator's lifetime: on rank 0 it hosts the server, which stops when the
// handle is destroyed, and peers may still be bootstrapping (or shrinking) through it.
class GroupHandles {
 public:
  GroupHandles(collx_store_t store, collx_comm_t comm) : store_(store), comm_(comm) {}
  ~GroupHandles();  // destroys the communicator, then the store
  GroupHandles(const GroupHandles&) = delete;
  GroupHandles& operator=(const GroupHandles&) = delete;

  collx_comm_t comm() const { return comm_; }

 private:
  collx_store_t store_;
  collx_comm_t comm_;
};

// Creates this rank's communicator of `size` ranks; `timeout` becomes its deadline for every
// blocking call (and bounds the bootstrap). Throws CollxError with collx's message on failure.
std::unique_ptr<GroupHandles> create_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 std::chrono::milliseconds timeout);

}  // namespace collx_torch
