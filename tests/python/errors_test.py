#!/usr/bin/env python3
"""python_errors_test: bad arguments raise clear exceptions from the Python binding, and
the communicator stays usable after an InvalidArgument. Also checks the ctypes struct
layout against what collx_config_init / collx_opts_init write, and the loader's errors."""
import array
import ctypes
import os
import socket
import subprocess
import sys
import time

import collx
from collx import _lib

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: %s" % what, flush=True)


def raises(exc_type, fn, *contains):
    """Run fn; return the exception if it is exc_type and its text has every `contains`."""
    try:
        fn()
    except exc_type as e:
        text = str(e)
        for c in contains:
            check(c in text, "%s message %r lacks %r" % (exc_type.__name__, text, c))
        print("ok: %s: %s" % (type(e).__name__, text), flush=True)
        return e
    except Exception as e:  # the wrong kind
        check(False, "expected %s, got %s: %s" % (exc_type.__name__, type(e).__name__, e))
        return None
    check(False, "expected %s, nothing raised (%s)" % (exc_type.__name__, contains))
    return None


def test_layout():
    cfg = _lib.new_config()
    check(cfg.size == ctypes.sizeof(_lib.CollxConfig), "config.size %d" % cfg.size)
    check(cfg.version >> 16 == collx.library_version[0]
          and (cfg.version >> 8) & 0xff == collx.library_version[1],
          "config.version 0x%x vs library %s" % (cfg.version, collx.library_version))
    for field in ("rank", "world_size", "timeout_ms", "device"):
        check(getattr(cfg, field) == -1, "config.%s default %r, want -1" % (field, getattr(cfg, field)))
    check(cfg.store_addr is None and not cfg.store and cfg.name is None and cfg.transports == 0,
          "config pointers/transports not unset")
    opts = _lib.new_opts()
    check(opts.size == ctypes.sizeof(_lib.CollxOpts), "opts.size %d" % opts.size)
    check(opts.algorithm == 0 and opts.mem_kind == 0, "opts algorithm/mem_kind not auto")
    check(opts.timeout_ms == -1, "opts.timeout_ms %d, want -1" % opts.timeout_ms)
    check(opts.premul_scalar == 1.0, "opts.premul_scalar %r, want 1.0" % opts.premul_scalar)
    check(not opts.stream, "opts.stream not NULL")
    # The enums agree with the library's own names.
    for dt in collx.Datatype:
        name = _lib.cstr(_lib.lib.collx_datatype_name(int(dt)))
        check(collx.parse_datatype(name) == dt, "datatype %s <-> %s" % (dt.name, name))
    for op in collx.Op:
        check(collx.parse_op(_lib.cstr(_lib.lib.collx_op_name(int(op)))) == op, "op %s" % op.name)
    # Algorithm names come from the library's registry (algorithms/registry.cc).
    for algo in collx.Algorithm:
        name = _lib.cstr(_lib.lib.collx_algorithm_name(int(algo)))
        check(name == algo.name.lower() and collx.parse_algorithm(name) == algo,
              "algorithm %s <-> %s" % (algo.name, name))
    check(len(collx.Algorithm) == collx.Algorithm.HIERARCHICAL + 1
          and _lib.cstr(_lib.lib.collx_algorithm_name(len(collx.Algorithm))) == "unknown",
          "collx.Algorithm lacks an algorithm of the library")
    for st in collx.Status:
        check(collx.status_name(st) == "COLLX_" + st.name, "status %s -> %s"
              % (st.name, collx.status_name(st)))


def test_single_rank():
    comm = collx.Communicator(0, 1, None)
    check(comm.rank == 0 and comm.size == 1, "world of 1: rank %d size %d" % (comm.rank, comm.size))

    # recv buffer too small: raised before C is called, naming the sizes.
    e = raises(ValueError, lambda: comm.allreduce(array.array("f", [1, 2, 3, 4]),
                                                  array.array("f", [0, 0, 0])),
               "holds 3", "4 elements", "16 bytes")
    check(isinstance(e, collx.InvalidArgument) and e.status == collx.Status.ERR_INVALID_ARG,
          "too-small recv is not InvalidArgument(-1): %r" % e)
    raises(collx.InvalidArgument, lambda: comm.allreduce(array.array("f", [1]), bytes(4),
                                                         datatype="float32"), "read-only")
    raises(collx.InvalidArgument, lambda: comm.allreduce(array.array("f", [1]),
                                                         array.array("i", [0])), "float32", "int32")
    raises(collx.InvalidArgument, lambda: comm.allgather(array.array("q", [1, 2]),
                                                         array.array("q", [0])), "holds 1", "2 elements")
    raises(collx.InvalidArgument, lambda: comm.allreduce(array.array("f", [1]), op="bogus"),
           "bogus", "sum")
    raises(collx.InvalidArgument, lambda: comm.allreduce(array.array("f", [1]), op=42), "42")
    raises(collx.InvalidArgument, lambda: comm.allreduce(array.array("f", [1]), algorithm="nope"),
           "nope")
    raises(collx.InvalidArgument, lambda: comm.allreduce(array.array("h", [1])), "datatype=")
    raises(collx.InvalidArgument, lambda: comm.allreduce(bytearray(6), datatype="float32"),
           "6 bytes")
    raises(collx.InvalidArgument, lambda: comm.allreduce(array.array("f", [1]), datatype="f128"),
           "f128")
    raises(collx.InvalidArgument, lambda: comm.allreduce(memoryview(array.array("f", [1, 2, 3, 4]))[::2]),
           "contiguous")
    raises(collx.InvalidArgument, lambda: comm.allreduce(12345), "buffer protocol")
    raises(collx.InvalidArgument, lambda: collx.mem_alloc(0), "collx_mem_alloc", "bytes is 0")
    zc = collx.mem_alloc(12).cast("f")
    check(list(zc) == [0.0, 0.0, 0.0], "mem_alloc memory is not zero-filled: %r" % list(zc))
    zc[1] = 2.5
    check(comm.allreduce(zc) is zc and list(zc) == [0.0, 2.5, 0.0], "allreduce on mem_alloc memory")

    # An InvalidArgument from the C library itself (root out of range), with
    # collx_last_error(comm)'s message; the communicator stays usable afterwards.
    e = raises(collx.InvalidArgument, lambda: comm.broadcast(array.array("i", [1]), root=3),
               "COLLX_ERR_INVALID_ARG", "root")
    check(e is not None and e.name == "COLLX_ERR_INVALID_ARG", "name of C-side error: %r" % e)
    raises(collx.InvalidArgument, lambda: comm.allreduce(array.array("f", [1]), algorithm="binomial"),
           "binomial")
    buf = array.array("f", [1.5, -2.0])
    comm.allreduce(buf, op="sum")
    check(list(buf) == [1.5, -2.0], "allreduce after InvalidArgument: %r" % buf)
    check(comm.async_error() == collx.Status.OK, "communicator poisoned after InvalidArgument")

    # bfloat16 through a uint16 array with an explicit datatype (1.0 = 0x3f80).
    bf = array.array("H", [0x3F80, 0xC000])
    comm.allreduce(bf, datatype="bfloat16")
    check(list(bf) == [0x3F80, 0xC000], "bfloat16 allreduce %r" % bf)
    # ctypes arrays and nonblocking requests.
    ca = (ctypes.c_double * 3)(1.0, 2.0, 3.0)
    req = comm.iallreduce(ca, (ctypes.c_double * 3)())
    check(req.wait(5000) and list(req.result) == [1.0, 2.0, 3.0], "iallreduce ctypes")
    req.free()
    raises(collx.InvalidUsage, req.wait, "freed")

    comm.destroy()
    raises(collx.InvalidUsage, lambda: comm.allreduce(array.array("f", [1])), "destroyed")
    comm.destroy()  # idempotent


def test_create_errors():
    e = raises(collx.InvalidArgument, lambda: collx.Communicator(5, 2, "127.0.0.1:1"), "rank 5")
    check(e is not None and e.status == -1 and e.name == "COLLX_ERR_INVALID_ARG",
          "rank 5 error fields: " + repr(e and (e.status, e.name)))
    raises(collx.InvalidArgument, lambda: collx.Communicator(0, 0, None), "world_size")

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = "127.0.0.1:%d" % port
    t0 = time.monotonic()
    e = raises(collx.Timeout, lambda: collx.Communicator(1, 2, addr, timeout_ms=300), addr)
    took = time.monotonic() - t0
    check(isinstance(e, collx.CollxError) and isinstance(e, TimeoutError)
          and e.status == collx.Status.ERR_TIMEOUT, "unreachable store error: %r" % e)
    check(took < 10, "unreachable store took %.1f s with timeout_ms=300" % took)


def test_loader():
    here = os.path.dirname(collx.__path__[0])
    env = dict(os.environ, COLLX_LIBRARY="/nonexistent/libcollx.so", PYTHONPATH=here)
    r = subprocess.run([sys.executable, "-c", "import collx"], env=env, capture_output=True,
                       text=True, timeout=60)
    check(r.returncode != 0 and "ImportError" in r.stderr and "COLLX_LIBRARY" in r.stderr,
          "bad COLLX_LIBRARY: rc %d, %s" % (r.returncode, r.stderr[-300:]))
    # A library whose major version differs is refused.
    saved = _lib.SUPPORTED_MAJOR
    try:
        _lib.SUPPORTED_MAJOR = saved + 1
        raises(ImportError, _lib._load, "supports major version %d" % (saved + 1))
    finally:
        _lib.SUPPORTED_MAJOR = saved


def main():
    print("library: %s (%s)" % (collx.library_path, collx.version()), flush=True)
    for t in (test_layout, test_single_rank, test_create_errors, test_loader):
        try:
            t()
        except Exception as e:  # an unexpected exception is a failure too
            import traceback
            traceback.print_exc()
            FAILURES.append("%s raised %s: %s" % (t.__name__, type(e).__name__, e))
    if FAILURES:
        print("%d failure(s):\n  %s" % (len(FAILURES), "\n  ".join(FAILURES)), flush=True)
        return 1
    print("all passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
