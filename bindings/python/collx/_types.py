"""Enums mirroring collx.h / collx_status.h, and the exception hierarchy."""
import enum


class Status(enum.IntEnum):
    OK = 0
    IN_PROGRESS = 1
    ERR_INVALID_ARG = -1
    ERR_INVALID_USAGE = -2
    ERR_SYSTEM = -3
    ERR_INTERNAL = -4
    ERR_REMOTE = -5
    ERR_TIMEOUT = -6
    ERR_MISMATCH = -7
    ERR_ABORTED = -8
    ERR_NO_MEMORY = -9
    ERR_UNSUPPORTED = -10
    ERR_PROTOCOL = -11
    ERR_CUDA = -12
    ERR_NCCL = -13


class Datatype(enum.IntEnum):
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    BFLOAT16 = 7
    FLOAT32 = 8
    FLOAT64 = 9


class Op(enum.IntEnum):
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4
    PREMUL_SUM = 5


class Coll(enum.IntEnum):
    ALLREDUCE = 0
    REDUCE_SCATTER = 1
    ALLGATHER = 2
    BROADCAST = 3
    REDUCE = 4
    ALLTOALL = 5
    BARRIER = 6
    SEND = 7
    RECV = 8
    GATHER = 9
    SCATTER = 10
    ALLGATHERV = 11
    ALLTOALLV = 12
    REDUCE_SCATTERV = 13
    GATHERV = 14
    SCATTERV = 15


class Algorithm(enum.IntEnum):
    AUTO = 0
    RING = 1
    RECURSIVE_DOUBLING = 2
    BINOMIAL = 3
    PAIRWISE = 4
    DISSEMINATION = 5
    DIRECT = 6
    RABENSEIFNER = 7
    DOUBLE_TREE = 8
    SHARED_MEMORY = 9
    HIERARCHICAL = 10


class MemKind(enum.IntEnum):
    AUTO = 0
    HOST = 1
    CUDA = 2


class Transport(enum.IntFlag):
    TCP = 0x1
    SHM = 0x2
    UCX = 0x4
    NCCL = 0x8


SPLIT_NOCOLOR = -1


class CollxError(Exception):
    """A collx call failed. .status is the collx_status_t (int), .name its
    collx_status_name ("COLLX_ERR_TIMEOUT"), .message collx_last_error's text."""

    def __init__(self, status, message, name=None):
        self.status = int(status)
        self.name = name or ("COLLX_" + Status(status).name if status in Status._value2member_map_
                             else "COLLX_UNKNOWN_STATUS")
        self.message = message or ""
        text = self.message
        if not text.startswith(self.name):
            text = "%s: %s" % (self.name, text) if text else self.name
        super().__init__(text)


class InvalidArgument(CollxError, ValueError):
    """COLLX_ERR_INVALID_ARG: the call had no effect; the communicator stays usable.
    Also a ValueError, and raised by the binding itself for arguments it rejects
    before calling C."""


class InvalidUsage(CollxError):
    """COLLX_ERR_INVALID_USAGE."""


class CollxSystemError(CollxError):
    """COLLX_ERR_SYSTEM."""


class InternalError(CollxError):
    """COLLX_ERR_INTERNAL."""


class RemoteError(CollxError):
    """COLLX_ERR_REMOTE: a peer failed, aborted or disconnected."""


class Timeout(CollxError, TimeoutError):
    """COLLX_ERR_TIMEOUT (also a builtin TimeoutError)."""


class Mismatch(CollxError):
    """COLLX_ERR_MISMATCH: ranks called different collectives/counts/types/ops/roots."""


class Aborted(CollxError):
    """COLLX_ERR_ABORTED."""


class NoMemory(CollxError, MemoryError):
    """COLLX_ERR_NO_MEMORY."""


class Unsupported(CollxError):
    """COLLX_ERR_UNSUPPORTED."""


class ProtocolError(CollxError):
    """COLLX_ERR_PROTOCOL."""


_ERROR_CLASSES = {
    Status.ERR_INVALID_ARG: InvalidArgument,
    Status.ERR_INVALID_USAGE: InvalidUsage,
    Status.ERR_SYSTEM: CollxSystemError,
    Status.ERR_INTERNAL: InternalError,
    Status.ERR_REMOTE: RemoteError,
    Status.ERR_TIMEOUT: Timeout,
    Status.ERR_MISMATCH: Mismatch,
    Status.ERR_ABORTED: Aborted,
    Status.ERR_NO_MEMORY: NoMemory,
    Status.ERR_UNSUPPORTED: Unsupported,
    Status.ERR_PROTOCOL: ProtocolError,
}


def error_class(status):
    return _ERROR_CLASSES.get(status, CollxError)
