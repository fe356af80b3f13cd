"""Loading libcollx.so and declaring the C ABI with ctypes.

Every function used by the binding gets explicit argtypes and restype here (ctypes'
defaults would truncate pointers and size_t). The two ABI structs are built field by
field in the header's order; the library fills them through collx_config_init /
collx_opts_init, so no default value is repeated in Python.
"""
import ctypes
import ctypes.util
import os

#: The ABI major version this binding speaks (collx.h: same major = same ABI).
SUPPORTED_MAJOR = 0

c_status = ctypes.c_int  # collx_status_t is a C enum: int-sized
c_comm = ctypes.c_void_p  # collx_comm_t (opaque pointer)
c_request = ctypes.c_void_p  # collx_request_t
c_store = ctypes.c_void_p  # collx_store_t
c_enum = ctypes.c_int  # datatype/op/coll/algorithm parameters are C enums


class CollxConfig(ctypes.Structure):
    """collx_config_t, field by field as in collx.h (fields are only ever appended)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("rank", ctypes.c_int32),
        ("world_size", ctypes.c_int32),
        ("store_addr", ctypes.c_char_p),
        ("store", c_store),
        ("timeout_ms", ctypes.c_int64),
        ("transports", ctypes.c_uint32),
        ("device", ctypes.c_int32),
        ("name", ctypes.c_char_p),
    ]


class CollxOpts(ctypes.Structure):
    """collx_opts_t, field by field as in collx.h."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("algorithm", ctypes.c_int32),
        ("mem_kind", ctypes.c_int32),
        ("timeout_ms", ctypes.c_int64),
        ("premul_scalar", ctypes.c_double),
        ("stream", ctypes.c_void_p),
    ]


P = ctypes.POINTER
_vp = ctypes.c_void_p
_sz = ctypes.c_size_t
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_opts = P(CollxOpts)
_szp = P(ctypes.c_size_t)

# name: (restype, [argtypes])
_PROTOTYPES = {
    "collx_get_version": (c_status, [P(ctypes.c_int), P(ctypes.c_int), P(ctypes.c_int)]),
    "collx_get_version_string": (ctypes.c_char_p, []),
    "collx_status_name": (ctypes.c_char_p, [c_status]),
    "collx_mem_alloc": (c_status, [_sz, P(_vp)]),
    "collx_mem_free": (c_status, [_vp]),
    "collx_status_string": (ctypes.c_char_p, [c_status]),
    "collx_last_error": (ctypes.c_char_p, [c_comm]),
    "collx_datatype_name": (ctypes.c_char_p, [c_enum]),
    "collx_op_name": (ctypes.c_char_p, [c_enum]),
    "collx_coll_name": (ctypes.c_char_p, [c_enum]),
    "collx_algorithm_name": (ctypes.c_char_p, [c_enum]),
    "collx_datatype_size": (_sz, [c_enum]),
    "collx_datatype_from_name": (c_status, [ctypes.c_char_p, P(c_enum)]),
    "collx_op_from_name": (c_status, [ctypes.c_char_p, P(c_enum)]),
    "collx_algorithm_from_name": (c_status, [ctypes.c_char_p, P(c_enum)]),
    "collx_config_init": (c_status, [P(CollxConfig), _sz]),
    "collx_opts_init": (c_status, [_opts, _sz]),
    "collx_comm_create": (c_status, [P(CollxConfig), P(c_comm)]),
    "collx_comm_create_from_env": (c_status, [P(CollxConfig), P(c_comm)]),
    "collx_comm_split": (c_status, [c_comm, _i32, _i32, P(c_comm)]),
    "collx_comm_dup": (c_status, [c_comm, P(c_comm)]),
    "collx_comm_destroy": (c_status, [c_comm]),
    "collx_comm_abort": (c_status, [c_comm]),
    "collx_comm_rank": (c_status, [c_comm, P(_i32)]),
    "collx_comm_size": (c_status, [c_comm, P(_i32)]),
    "collx_comm_local_rank": (c_status, [c_comm, P(_i32)]),
    "collx_comm_local_size": (c_status, [c_comm, P(_i32)]),
    "collx_comm_get_async_error": (c_status, [c_comm, P(c_status)]),
    "collx_select_algorithm": (c_status, [c_comm, c_enum, _sz, c_enum, _opts, P(c_enum)]),
    "collx_allreduce": (c_status, [_vp, _vp, _sz, c_enum, c_enum, c_comm, _opts]),
    "collx_reduce_scatter": (c_status, [_vp, _vp, _sz, c_enum, c_enum, c_comm, _opts]),
    "collx_allgather": (c_status, [_vp, _vp, _sz, c_enum, c_comm, _opts]),
    "collx_broadcast": (c_status, [_vp, _vp, _sz, c_enum, _i32, c_comm, _opts]),
    "collx_gather": (c_status, [_vp, _vp, _sz, c_enum, _i32, c_comm, _opts]),
    "collx_scatter": (c_status, [_vp, _vp, _sz, c_enum, _i32, c_comm, _opts]),
    "collx_reduce": (c_status, [_vp, _vp, _sz, c_enum, c_enum, _i32, c_comm, _opts]),
    "collx_alltoall": (c_status, [_vp, _vp, _sz, c_enum, c_comm, _opts]),
    "collx_barrier": (c_status, [c_comm, _opts]),
    "collx_send": (c_status, [_vp, _sz, c_enum, _i32, _i32, c_comm, _opts]),
    "collx_recv": (c_status, [_vp, _sz, c_enum, _i32, _i32, c_comm, _opts]),
    "collx_iallreduce": (c_status, [_vp, _vp, _sz, c_enum, c_enum, c_comm, _opts, P(c_request)]),
    "collx_ireduce_scatter": (c_status, [_vp, _vp, _sz, c_enum, c_enum, c_comm, _opts, P(c_request)]),
    "collx_iallgather": (c_status, [_vp, _vp, _sz, c_enum, c_comm, _opts, P(c_request)]),
    "collx_ibroadcast": (c_status, [_vp, _vp, _sz, c_enum, _i32, c_comm, _opts, P(c_request)]),
    "collx_igather": (c_status, [_vp, _vp, _sz, c_enum, _i32, c_comm, _opts, P(c_request)]),
    "collx_iscatter": (c_status, [_vp, _vp, _sz, c_enum, _i32, c_comm, _opts, P(c_request)]),
    "collx_ireduce": (c_status, [_vp, _vp, _sz, c_enum, c_enum, _i32, c_comm, _opts, P(c_request)]),
    "collx_ialltoall": (c_status, [_vp, _vp, _sz, c_enum, c_comm, _opts, P(c_request)]),
    "collx_ibarrier": (c_status, [c_comm, _opts, P(c_request)]),
    "collx_isend": (c_status, [_vp, _sz, c_enum, _i32, _i32, c_comm, _opts, P(c_request)]),
    "collx_irecv": (c_status, [_vp, _sz, c_enum, _i32, _i32, c_comm, _opts, P(c_request)]),
    "collx_allgatherv": (c_status, [_vp, _sz, _vp, _szp, _szp, c_enum, c_comm, _opts]),
    "collx_alltoallv": (c_status, [_vp, _szp, _szp, _vp, _szp, _szp, c_enum, c_comm, _opts]),
    "collx_reduce_scatterv": (c_status, [_vp, _vp, _szp, c_enum, c_enum, c_comm, _opts]),
    "collx_gatherv": (c_status, [_vp, _sz, _vp, _szp, _szp, c_enum, _i32, c_comm, _opts]),
    "collx_scatterv": (c_status, [_vp, _szp, _szp, _vp, _sz, c_enum, _i32, c_comm, _opts]),
    "collx_iallgatherv": (c_status, [_vp, _sz, _vp, _szp, _szp, c_enum, c_comm, _opts,
                                     P(c_request)]),
    "collx_ialltoallv": (c_status, [_vp, _szp, _szp, _vp, _szp, _szp, c_enum, c_comm, _opts,
                                    P(c_request)]),
    "collx_ireduce_scatterv": (c_status, [_vp, _vp, _szp, c_enum, c_enum, c_comm, _opts,
                                          P(c_request)]),
    "collx_igatherv": (c_status, [_vp, _sz, _vp, _szp, _szp, c_enum, _i32, c_comm, _opts,
                                  P(c_request)]),
    "collx_iscatterv": (c_status, [_vp, _szp, _szp, _vp, _sz, c_enum, _i32, c_comm, _opts,
                                   P(c_request)]),
    "collx_group_start": (c_status, []),
    "collx_group_end": (c_status, []),
    "collx_test": (c_status, [c_request, P(ctypes.c_int)]),
    "collx_wait": (c_status, [c_request, _i64]),
    "collx_request_free": (c_status, [c_request]),
}


def _candidates():
    env = os.environ.get("COLLX_LIBRARY")
    if env:
        # An explicit path is authoritative: do not silently fall back to another copy.
        return [env], True
    names = []
    found = ctypes.util.find_library("collx")
    if found:
        names.append(found)
    names += ["libcollx.so.%d" % SUPPORTED_MAJOR, "libcollx.so"]
    return names, False


def _load():
    names, explicit = _candidates()
    errors = []
    lib = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as exc:
            errors.append("%s: %s" % (name, exc))
    if lib is None:
        where = ("COLLX_LIBRARY=%s" % names[0]) if explicit else ", ".join(names)
        raise ImportError(
            "collx: cannot load libcollx (tried %s). Set COLLX_LIBRARY to the path of "
            "libcollx.so, or put its folder on LD_LIBRARY_PATH. Errors: %s"
            % (where, "; ".join(errors)))
    missing = []
    for fname, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, fname)
        except AttributeError:
            missing.append(fname)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if "collx_get_version" in missing:
        raise ImportError("collx: %s is not libcollx (no collx_get_version)" % lib._name)
    major, minor, patch = ctypes.c_int(-1), ctypes.c_int(-1), ctypes.c_int(-1)
    lib.collx_get_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    if major.value != SUPPORTED_MAJOR:
        raise ImportError(
            "collx: %s has ABI version %d.%d.%d but this binding supports major version %d "
            "only; install a matching libcollx or binding"
            % (lib._name, major.value, minor.value, patch.value, SUPPORTED_MAJOR))
    if missing:
        raise ImportError("collx: %s (version %d.%d.%d) lacks %s"
                          % (lib._name, major.value, minor.value, patch.value, ", ".join(missing)))
    return lib, (major.value, minor.value, patch.value)


lib, library_version = _load()
library_path = lib._name


def cstr(ptr):
    """Decode a const char* returned by the library (None -> '')."""
    return ptr.decode("utf-8", "replace") if ptr else ""


def new_config():
    """A collx_config_t filled by collx_config_init (every field 'unset')."""
    cfg = CollxConfig()
    rc = lib.collx_config_init(ctypes.byref(cfg), ctypes.sizeof(cfg))
    if rc != 0:
        raise RuntimeError("collx_config_init failed: " + cstr(lib.collx_last_error(None)))
    return cfg


def new_opts():
    """A collx_opts_t filled by collx_opts_init (library defaults)."""
    opts = CollxOpts()
    rc = lib.collx_opts_init(ctypes.byref(opts), ctypes.sizeof(opts))
    if rc != 0:
        raise RuntimeError("collx_opts_init failed: " + cstr(lib.collx_last_error(None)))
    return opts
