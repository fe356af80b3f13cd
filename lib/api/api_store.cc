// Store entry points: bootstrap stores an application can create, share and inspect.
#include <cstring>

#include "lib/api/handles.h"
#include "lib/common/settings.h"

using namespace collx;

namespace {

Status check_key(const char* key) {
  if (!key) return api::null_handle("key");
  if (std::strlen(key) == 0 || std::strlen(key) > kStoreMaxKeyBytes) {
    return make_status(COLLX_ERR_INVALID_ARG, "key length %zu is outside 1..%zu", std::strlen(key), kStoreMaxKeyBytes);
  }
  return Status::Ok();
}

// A negative timeout means the default (COLLX_TIMEOUT_MS).
Deadline store_deadline(int64_t timeout_ms) {
  if (timeout_ms < 0) {
    int64_t configured = -1;
    if (!setting_int(SettingId::TIMEOUT_MS, &configured).ok()) configured = 600000;
    return Deadline::after_ms(configured);
  }
  return Deadline::after_ms(timeout_ms);
}

Status check_store(collx_store_t store) {
  if (!store || !store->impl) return api::null_handle("store");
  return Status::Ok();
}

// A hosted server with this process's client of it. The client handed out (aliasing this
// pair) keeps the server running for as long as the handle or any communicator made from
// the store holds it: collx.h promises the server outlives collx_store_destroy.
struct HostedStore {
  std::unique_ptr<TcpStoreServer> server;  // declared first: outlives the client
  std::shared_ptr<Store> client;
};

Status host_tcp_store(const char* addr, Deadline deadline, std::shared_ptr<Store>* out) {
  auto hosted = std::make_shared<HostedStore>();
  COLLX_RETURN_IF_ERROR(start_tcp_store_server(addr, &hosted->server));
  COLLX_RETURN_IF_ERROR(hosted->server->connect(deadline, &hosted->client));
  *out = std::shared_ptr<Store>(hosted, hosted->client.get());
  return Status::Ok();
}

}  // namespace

extern "C" {

collx_status_t collx_store_create_tcp(const char* addr, int is_server, int64_t timeout_ms, collx_store_t* out) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!addr) return api::null_handle("addr");
    if (!out) return api::null_handle("store (output)");
    *out = nullptr;
    auto handle = std::make_unique<collx_store_s>();
    Deadline deadline = store_deadline(timeout_ms);
    if (is_server) {
      COLLX_RETURN_IF_ERROR(host_tcp_store(addr, deadline, &handle->impl));
    } else {
      COLLX_RETURN_IF_ERROR(connect_tcp_store(addr, deadline, &handle->impl));
    }
    *out = handle.release();
    return Status::Ok();
  });
}

collx_status_t collx_store_create_file(const char* directory, collx_store_t* out) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!directory) return api::null_handle("directory");
    if (!out) return api::null_handle("store (output)");
    *out = nullptr;
    auto handle = std::make_unique<collx_store_s>();
    COLLX_RETURN_IF_ERROR(make_file_store(directory, &handle->impl));
    *out = handle.release();
    return Status::Ok();
  });
}

collx_status_t collx_store_create_memory(collx_store_t* out) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!out) return api::null_handle("store (output)");
    *out = new collx_store_s{make_memory_store()};
    return Status::Ok();
  });
}

collx_status_t collx_store_destroy(collx_store_t store) {
  delete store;
  return COLLX_OK;
}

collx_status_t collx_store_set(collx_store_t store, const char* key, const void* value, size_t value_size) {
  return api::guarded(nullptr, [&]() -> Status {
    COLLX_RETURN_IF_ERROR(check_store(store));
    COLLX_RETURN_IF_ERROR(check_key(key));
    if (!value && value_size > 0) return api::null_handle("value");
    const auto* bytes = static_cast<const uint8_t*>(value);
    return store->impl->set(key, Bytes(bytes, bytes + value_size));
  });
}

collx_status_t collx_store_get(collx_store_t store, const char* key, void* value, size_t capacity,
                               size_t* value_size, int64_t timeout_ms) {
  return api::guarded(nullptr, [&]() -> Status {
    COLLX_RETURN_IF_ERROR(check_store(store));
    COLLX_RETURN_IF_ERROR(check_key(key));
    if (!value && capacity > 0) return api::null_handle("value");
    Bytes bytes;
    COLLX_RETURN_IF_ERROR(store->impl->get(key, &bytes, store_deadline(timeout_ms)));
    if (capacity > 0) std::memcpy(value, bytes.data(), bytes.size() < capacity ? bytes.size() : capacity);
    if (value_size) *value_size = bytes.size();
    return Status::Ok();
  });
}

collx_status_t collx_store_add(collx_store_t store, const char* key, int64_t delta, int64_t* new_value) {
  return api::guarded(nullptr, [&]() -> Status {
    COLLX_RETURN_IF_ERROR(check_store(store));
    COLLX_RETURN_IF_ERROR(check_key(key));
    int64_t value = 0;
    COLLX_RETURN_IF_ERROR(store->impl->add(key, delta, &value));
    if (new_value) *new_value = value;
    return Status::Ok();
  });
}

collx_status_t collx_store_wait(collx_store_t store, const char* const* keys, size_t num_keys, int64_t timeout_ms) {
  return api::guarded(nullptr, [&]() -> Status {
    COLLX_RETURN_IF_ERROR(check_store(store));
    if (!keys && num_keys > 0) return api::null_handle("keys");
    std::vector<std::string> list;
    for (size_t i = 0; i < num_keys; ++i) {
      COLLX_RETURN_IF_ERROR(check_key(keys[i]));
      list.emplace_back(keys[i]);
    }
    return store->impl->wait(list, store_deadline(timeout_ms));
  });
}

collx_status_t collx_store_delete(collx_store_t store, const char* key) {
  return api::guarded(nullptr, [&]() -> Status {
    COLLX_RETURN_IF_ERROR(check_store(store));
    COLLX_RETURN_IF_ERROR(check_key(key));
    return store->impl->remove(key);
  });
}

}  // extern "C"
