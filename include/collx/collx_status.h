/* collx status codes.
 *
 * One list, COLLX_STATUS_MAP, generates the enum below and, inside the library,
 * collx_status_name() and collx_status_string(), so names and messages cannot drift
 * from the codes. 0 is success, positive values are states, negative values errors.
 *
 * Categories (as NCCL's, made explicit):
 *   COLLX_ERR_INVALID_ARG   the call had no effect; the communicator stays usable.
 *   every other error       fatal for the communicator: later calls on it return the
 *                           same status; destroy it (or abort it) and create a new one.
 */
#ifndef COLLX_STATUS_H_
#define COLLX_STATUS_H_

/* X(NAME, VALUE, MESSAGE) */
#define COLLX_STATUS_MAP(X)                                                              \
  X(OK, 0, "success")                                                                    \
  X(IN_PROGRESS, 1, "operation still in progress")                                       \
  X(ERR_INVALID_ARG, -1, "invalid argument; the call had no effect")                     \
  X(ERR_INVALID_USAGE, -2, "invalid usage: a call made in the wrong state or order")     \
  X(ERR_SYSTEM, -3, "a system call failed")                                              \
  X(ERR_INTERNAL, -4, "internal error in collx (please report it)")                      \
  X(ERR_REMOTE, -5, "a remote rank failed, aborted or disconnected")                     \
  X(ERR_TIMEOUT, -6, "the operation did not finish before its deadline")                 \
  X(ERR_MISMATCH, -7, "ranks called different collectives, counts, types, ops or roots") \
  X(ERR_ABORTED, -8, "the communicator was aborted")                                     \
  X(ERR_NO_MEMORY, -9, "out of memory")                                                  \
  X(ERR_UNSUPPORTED, -10, "not supported by this build, transport or buffer kind")       \
  X(ERR_PROTOCOL, -11, "malformed or unauthenticated data received from the network")    \
  X(ERR_CUDA, -12, "a CUDA call failed")                                                 \
  X(ERR_NCCL, -13, "an NCCL call failed")

typedef enum collx_status {
#define COLLX_STATUS_ENUM_ENTRY_(name, value, message) COLLX_##name = value,
  COLLX_STATUS_MAP(COLLX_STATUS_ENUM_ENTRY_)
#undef COLLX_STATUS_ENUM_ENTRY_
  COLLX_STATUS_LAST_ = -14 /* one below the lowest code; not a status */
} collx_status_t;

#endif /* COLLX_STATUS_H_ */
