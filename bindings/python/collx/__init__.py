"""collx: Python bindings (pure ctypes) for the collx collective-communication library.

The shared library is found through $COLLX_LIBRARY (a path), else the system search
(ctypes.util.find_library('collx'), libcollx.so.0, libcollx.so). Its ABI major version must
be SUPPORTED_MAJOR, or importing collx raises ImportError.

    import collx
    with collx.Communicator.from_env() as comm:
        grads = array.array('f', [1.0, 2.0, 3.0])
        comm.allreduce(grads, op='avg')          # in place
"""
from ._lib import SUPPORTED_MAJOR, library_path, library_version
from ._lib import cstr as _cstr, lib as _clib
from ._types import (Aborted, Algorithm, Coll, CollxError, CollxSystemError, Datatype,
                     InternalError, InvalidArgument, InvalidUsage, MemKind, Mismatch, NoMemory,
                     Op, ProtocolError, RemoteError, SPLIT_NOCOLOR, Status, Timeout, Transport,
                     Unsupported)
from ._buffer import as_buffer, datatype_size, parse_datatype
from ._comm import Communicator, Request, parse_algorithm, parse_op
from ._group import group
from ._memory import mem_alloc

__version__ = "0.1.0"

__all__ = [
    "Aborted", "Algorithm", "Coll", "CollxError", "CollxSystemError", "Communicator",
    "Datatype", "group", "InternalError", "InvalidArgument", "InvalidUsage", "MemKind", "Mismatch",
    "NoMemory", "Op", "ProtocolError", "RemoteError", "Request", "SPLIT_NOCOLOR", "Status",
    "SUPPORTED_MAJOR", "Timeout", "Transport", "Unsupported", "as_buffer", "datatype_size",
    "library_path", "library_version", "mem_alloc", "parse_algorithm", "parse_datatype", "parse_op",
    "status_name", "status_string", "version",
]


def version():
    """Version string of the loaded libcollx ("0.1.0")."""
    return _cstr(_clib.collx_get_version_string())


def status_name(status):
    return _cstr(_clib.collx_status_name(int(status)))


def status_string(status):
    return _cstr(_clib.collx_status_string(int(status)))
