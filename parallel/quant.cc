// Quantized all-gather (ZeRO++ qwZ) and reduce-scatter (ZeRO++ qgZ) over the public
// collectives: quantize into messages (quant_message.h), move the bytes as COLLX_UINT8,
// check every received header, dequantize.
#include <cstring>
#include <string>
#include <vector>

#include "parallel/free_calls.h"
#include "parallel/quant_message.h"

namespace collx {
namespace parallel {
namespace {

using quant::Format;

// The format of a config (NULL = defaults), or a failure naming what is wrong.
collx_status_t read_config(const collx_quant_config_t* c, const char* fn, Format* f, int64_t* timeout_ms) {
  collx_quant_config_t d;
  collx_quant_config_init(&d, sizeof d);
  if (!c) c = &d;
  if (c->size < sizeof(collx_quant_config_t))
    return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": config->size is " + std::to_string(c->size) +
                                                " (call collx_quant_config_init with sizeof(collx_quant_config_t))");
  f->bits = c->bits;
  f->block = c->block_elems;
  std::string why = quant::format_problem(*f);
  if (c->timeout_ms < -1) why = "timeout_ms is " + std::to_string(c->timeout_ms) + "; use -1 or a value >= 0";
  if (!why.empty()) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": config: " + why);
  if (timeout_ms) *timeout_ms = c->timeout_ms;
  return COLLX_OK;
}

collx_status_t check_datatype(collx_datatype_t dt, const char* fn) {
  const std::string why = quant::datatype_problem(dt);
  return why.empty() ? COLLX_OK : free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": " + why);
}

bool overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const char* pa = static_cast<const char*>(a);
  const char* pb = static_cast<const char*>(b);
  return a_bytes && b_bytes && pa < pb + b_bytes && pb < pa + a_bytes;
}

// What the collectives share: the checked shape of the call.
struct Call {
  const char* fn;
  Format format;
  collx_opts_t opts;
  size_t size = 1;
  size_t rank = 0;
  size_t msg = 0;  // bytes of one message
};

collx_status_t prepare(const char* fn, collx_comm_t comm, collx_datatype_t dt, size_t count,
                       const collx_quant_config_t* config, Call* call) {
  call->fn = fn;
  if (!comm) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": comm is NULL");
  int64_t timeout_ms = -1;
  collx_status_t st = read_config(config, fn, &call->format, &timeout_ms);
  if (st == COLLX_OK) st = check_datatype(dt, fn);
  if (st != COLLX_OK) return st;
  int32_t size = 0, rank = 0;
  st = collx_comm_size(comm, &size);
  if (st == COLLX_OK) st = collx_comm_rank(comm, &rank);
  if (st != COLLX_OK) return comm_fail(comm, st, fn);
  call->size = static_cast<size_t>(size);
  call->rank = static_cast<size_t>(rank);
  collx_opts_init(&call->opts, sizeof call->opts);
  call->opts.timeout_ms = timeout_ms;
  call->msg = quant::message_bytes(count, call->format);
  return COLLX_OK;
}

// Every received message must describe count elements in this rank's format.
collx_status_t check_messages(const Call& c, const std::vector<uint8_t>& bytes, size_t count) {
  for (size_t r = 0; r < c.size; ++r) {
    const std::string why = quant::header_problem(bytes.data() + r * c.msg, count, c.format);
    if (!why.empty())
      return free_fail(COLLX_ERR_MISMATCH, std::string(c.fn) + ": the message from rank " + std::to_string(r) +
                                               " does not match: " + why);
  }
  return COLLX_OK;
}

collx_status_t allgather(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t dt,
                         const collx_quant_config_t* config, collx_comm_t comm) {
  Call c;
  collx_status_t st = prepare("collx_quant_allgather", comm, dt, count, config, &c);
  if (st != COLLX_OK) return st;
  const size_t es = collx_datatype_size(dt), bytes = count * es;
  if (bytes && (!sendbuf || !recvbuf))
    return free_fail(COLLX_ERR_INVALID_ARG, "collx_quant_allgather: sendbuf or recvbuf is NULL");
  const bool in_place = bytes && sendbuf == static_cast<const char*>(recvbuf) + c.rank * bytes;
  if (!in_place && overlap(sendbuf, bytes, recvbuf, bytes * c.size))
    return free_fail(COLLX_ERR_INVALID_ARG, "collx_quant_allgather: sendbuf overlaps recvbuf but is not recvbuf + "
                                            "rank * sendcount (the in-place form)");
  std::vector<uint8_t> wire(c.msg * c.size);
  uint8_t* own = wire.data() + c.rank * c.msg;
  quant::encode(sendbuf, count, dt, c.format, own);
  st = collx_allgather(own, wire.data(), c.msg, COLLX_UINT8, comm, &c.opts);
  if (st != COLLX_OK) return comm_fail(comm, st, c.fn);
  if ((st = check_messages(c, wire, count)) != COLLX_OK) return st;
  for (size_t r = 0; r < c.size; ++r)
    quant::decode(wire.data() + r * c.msg, count, dt, c.format, static_cast<char*>(recvbuf) + r * bytes);
  return COLLX_OK;
}

// acc += the own chunk, unquantized.
void add_own(const void* chunk, size_t count, collx_datatype_t dt, float* acc) {
  if (dt == COLLX_FLOAT32) {
    const float* x = static_cast<const float*>(chunk);
    for (size_t i = 0; i < count; ++i) acc[i] += x[i];
    return;
  }
  std::vector<float> wide(count);
  quant::widen(chunk, dt, count, wide.data());
  for (size_t i = 0; i < count; ++i) acc[i] += wide[i];
}

collx_status_t reduce_scatter(const void* sendbuf, void* recvbuf, size_t count, collx_datatype_t dt, collx_op_t op,
                              const collx_quant_config_t* config, collx_comm_t comm) {
  Call c;
  collx_status_t st = prepare("collx_quant_reduce_scatter", comm, dt, count, config, &c);
  if (st != COLLX_OK) return st;
  if (op != COLLX_SUM && op != COLLX_AVG)
    return free_fail(COLLX_ERR_INVALID_ARG, std::string("collx_quant_reduce_scatter: op ") + collx_op_name(op) +
                                                " is not supported; use COLLX_SUM or COLLX_AVG");
  const size_t es = collx_datatype_size(dt), bytes = count * es;
  if (bytes && (!sendbuf || !recvbuf))
    return free_fail(COLLX_ERR_INVALID_ARG, "collx_quant_reduce_scatter: sendbuf or recvbuf is NULL");
  const bool in_place = bytes && recvbuf == static_cast<const char*>(sendbuf) + c.rank * bytes;
  if (!in_place && overlap(sendbuf, bytes * c.size, recvbuf, bytes))
    return free_fail(COLLX_ERR_INVALID_ARG, "collx_quant_reduce_scatter: recvbuf overlaps sendbuf but is not sendbuf "
                                            "+ rank * recvcount (the in-place form)");
  std::vector<uint8_t> out(c.msg * c.size), in(c.msg * c.size);
  for (size_t r = 0; r < c.size; ++r) {
    uint8_t* msg = out.data() + r * c.msg;
    // The own chunk is added unquantized: its message only carries the header.
    if (r == c.rank) quant::encode_header(count, c.format, msg);
    else quant::encode(static_cast<const char*>(sendbuf) + r * bytes, count, dt, c.format, msg);
  }
  st = collx_alltoall(out.data(), in.data(), c.msg, COLLX_UINT8, comm, &c.opts);
  if (st != COLLX_OK) return comm_fail(comm, st, c.fn);
  if ((st = check_messages(c, in, count)) != COLLX_OK) return st;
  std::vector<float> acc(count, 0.0f);
  for (size_t r = 0; r < c.size; ++r) {
    if (r == c.rank) add_own(static_cast<const char*>(sendbuf) + r * bytes, count, dt, acc.data());
    else quant::decode_add(in.data() + r * c.msg, count, c.format, acc.data());
  }
  if (op == COLLX_AVG) {
    const float n = static_cast<float>(c.size);
    for (float& v : acc) v /= n;
  }
  if (bytes) quant::narrow(acc.data(), count, dt, recvbuf);
  return COLLX_OK;
}

collx_status_t check_local(const char* fn, const collx_quant_config_t* config, collx_datatype_t dt, size_t count,
                           const void* elems, const void* packed, Format* f);

collx_status_t pack(const void* in, size_t count, collx_datatype_t dt, const collx_quant_config_t* config,
                    void* packed) {
  Format f;
  const collx_status_t st = check_local("collx_quant_pack", config, dt, count, in, packed, &f);
  if (st == COLLX_OK) quant::encode(in, count, dt, f, static_cast<uint8_t*>(packed));
  return st;
}

collx_status_t unpack(const void* packed, size_t count, collx_datatype_t dt, const collx_quant_config_t* config,
                      void* out) {
  Format f;
  collx_status_t st = check_local("collx_quant_unpack", config, dt, count, out, packed, &f);
  const uint8_t* msg = static_cast<const uint8_t*>(packed);
  const std::string why = st == COLLX_OK ? quant::header_problem(msg, count, f) : "";
  if (!why.empty()) st = free_fail(COLLX_ERR_INVALID_ARG, "collx_quant_unpack: packed: " + why);
  if (st == COLLX_OK) quant::decode(msg, count, dt, f, out);
  return st;
}

// What pack and unpack check: config, datatype, buffers present and apart. `elems` is the
// element buffer (count elements of dt), `packed` the message.
collx_status_t check_local(const char* fn, const collx_quant_config_t* config, collx_datatype_t dt, size_t count,
                           const void* elems, const void* packed, Format* f) {
  collx_status_t st = read_config(config, fn, f, nullptr);
  if (st == COLLX_OK) st = check_datatype(dt, fn);
  if (st != COLLX_OK) return st;
  if (!packed || (count && !elems))
    return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": the element buffer or the packed buffer is NULL");
  const bool apart = !overlap(elems, count * collx_datatype_size(dt), packed, quant::message_bytes(count, *f));
  return apart ? COLLX_OK : free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": the element and packed buffers overlap");
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_quant_config_init(collx_quant_config_t* config, size_t size) {
  if (!config || size < sizeof(collx_quant_config_t))
    return free_fail(COLLX_ERR_INVALID_ARG, "collx_quant_config_init: config is NULL or size is smaller than "
                                            "sizeof(collx_quant_config_t)");
  std::memset(config, 0, sizeof *config);
  config->size = size;
  config->bits = 8;
  config->block_elems = 256;
  config->timeout_ms = -1;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_quant_packed_bytes(size_t count, const collx_quant_config_t* config, size_t* bytes) {
  Format f;
  collx_status_t st = read_config(config, "collx_quant_packed_bytes", &f, nullptr);
  if (st != COLLX_OK) return st;
  if (!bytes) return free_fail(COLLX_ERR_INVALID_ARG, "collx_quant_packed_bytes: bytes is NULL");
  *bytes = quant::message_bytes(count, f);
  return COLLX_OK;
}

COLLX_API collx_status_t collx_quant_pack(const void* in, size_t count, collx_datatype_t datatype,
                                          const collx_quant_config_t* config, void* packed) {
  return free_call("collx_quant_pack", [&] { return pack(in, count, datatype, config, packed); });
}

COLLX_API collx_status_t collx_quant_unpack(const void* packed, size_t count, collx_datatype_t datatype,
                                            const collx_quant_config_t* config, void* out) {
  return free_call("collx_quant_unpack", [&] { return unpack(packed, count, datatype, config, out); });
}

COLLX_API collx_status_t collx_quant_allgather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                               collx_datatype_t datatype, collx_comm_t comm,
                                               const collx_quant_config_t* config) {
  return free_call("collx_quant_allgather",
                   [&] { return allgather(sendbuf, recvbuf, sendcount, datatype, config, comm); });
}

COLLX_API collx_status_t collx_quant_reduce_scatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                                    collx_datatype_t datatype, collx_op_t op, collx_comm_t comm,
                                                    const collx_quant_config_t* config) {
  return free_call("collx_quant_reduce_scatter",
                   [&] { return reduce_scatter(sendbuf, recvbuf, recvcount, datatype, op, config, comm); });
}

}  // extern "C"
