"""Communicator and Request."""
import ctypes
import threading

from . import _group
from ._buffer import Buffer, alloc_like, as_buffer, datatype_name, parse_datatype
from ._lib import cstr, lib, new_config, new_opts
from ._rooted import RootedMixin
from ._vector import VectorMixin
from ._types import (Algorithm, CollxError, InvalidArgument, InvalidUsage, Op, SPLIT_NOCOLOR,
                     Status, error_class)


def _raise(rc, comm_handle=None, context=None):
    """Raise the exception for status rc with collx_last_error's message."""
    msg = cstr(lib.collx_last_error(comm_handle))
    if not msg and comm_handle is not None:
        msg = cstr(lib.collx_last_error(None))
    if not msg:
        msg = cstr(lib.collx_status_string(rc))
    if context:
        msg = "%s (in %s)" % (msg, context)
    raise error_class(rc)(rc, msg, cstr(lib.collx_status_name(rc)))


def _check(rc, comm_handle=None, context=None):
    if rc != Status.OK:
        _raise(rc, comm_handle, context)


def _bad(message):
    return InvalidArgument(Status.ERR_INVALID_ARG, message)


def parse_op(op):
    if isinstance(op, Op):
        return op
    if isinstance(op, int) and not isinstance(op, bool):
        try:
            return Op(op)
        except ValueError:
            raise _bad("op %d is out of range [0, %d)" % (op, len(Op)))
    if isinstance(op, str):
        out = ctypes.c_int(-1)
        if lib.collx_op_from_name(op.encode(), ctypes.byref(out)) != 0:
            raise _bad("unknown reduction op %r; expected one of %s"
                       % (op, ", ".join(o.name.lower() for o in Op)))
        return Op(out.value)
    raise _bad("op must be an Op, int or name, got %s" % type(op).__name__)


def parse_algorithm(algorithm):
    if algorithm is None:
        return None
    if isinstance(algorithm, Algorithm):
        return algorithm
    if isinstance(algorithm, int) and not isinstance(algorithm, bool):
        try:
            return Algorithm(algorithm)
        except ValueError:
            raise _bad("algorithm %d is out of range [0, %d)" % (algorithm, len(Algorithm)))
    if isinstance(algorithm, str):
        out = ctypes.c_int(-1)
        if lib.collx_algorithm_from_name(algorithm.encode(), ctypes.byref(out)) != 0:
            raise _bad("unknown algorithm %r; expected one of %s"
                       % (algorithm, ", ".join(a.name.lower() for a in Algorithm)))
        return Algorithm(out.value)
    raise _bad("algorithm must be an Algorithm, int or name, got %s" % type(algorithm).__name__)


def _int_or_none(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad("%s must be an int, got %r" % (name, value))
    return value


class Request(object):
    """A nonblocking operation. test() -> bool, wait(timeout_ms=None) -> bool, free().
    Holds the buffers (and the communicator) alive until it is freed; .result is the
    receive buffer the operation fills."""

    def __init__(self, comm, handle, keep, result, what):
        self._comm = comm
        self._handle = handle
        self._keep = keep
        self.result = result
        self._what = what
        self._done = False

    @property
    def done(self):
        return self._done

    def _finish(self, rc):
        self._done = True
        if rc != Status.OK:
            _raise(rc, self._comm._handle_or_none(), self._what)

    def test(self):
        """True once the operation finished (raises if it failed); never blocks."""
        self._need_handle()
        if self._done:
            return True
        done = ctypes.c_int(0)
        rc = lib.collx_test(self._handle, ctypes.byref(done))
        if not done.value:
            _check(rc, self._comm._handle_or_none(), self._what)
            return False
        self._finish(rc)
        return True

    def wait(self, timeout_ms=None):
        """Wait up to timeout_ms (None: until the operation ends, within its own deadline).
        True when finished (raises if it failed), False when still running."""
        self._need_handle()
        if self._done:
            return True
        t = -1 if timeout_ms is None else int(timeout_ms)
        rc = lib.collx_wait(self._handle, t)
        if rc == Status.IN_PROGRESS:
            return False
        self._finish(rc)
        return True

    def _need_handle(self):
        if self._handle is None:
            raise InvalidUsage(Status.ERR_INVALID_USAGE, "%s: request was freed" % self._what)

    def free(self):
        """Release the handle. If the operation still runs, its buffers stay referenced by
        the communicator until its next blocking call or destroy (as collx.h requires)."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        lib.collx_request_free(handle)
        if not self._done:
            self._comm._orphans.append(self._keep)
        self._keep = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


class Communicator(RootedMixin, VectorMixin):
    """A collx communicator.

    Communicator(rank, size, store_addr, timeout_ms=None, name=None, transports=None)
    creates this rank's member (rank 0 hosts the TCP store at store_addr unless one already
    listens; store_addr may be None for a single-rank world). Communicator.from_env() takes
    rank, size and store from COLLX_RANK / COLLX_WORLD_SIZE / COLLX_STORE_ADDR or torchrun's
    variables. Use as a context manager, or call destroy()/close().
    """

    def __init__(self, rank, size, store_addr=None, timeout_ms=None, name=None, transports=None,
                 _handle=None):
        self._orphans = []
        self._lock = threading.Lock()
        if _handle is not None:
            self._handle = _handle
            return
        self._handle = None
        cfg = new_config()
        cfg.rank = _int_or_none("rank", rank)
        cfg.world_size = _int_or_none("size", size)
        keep = []
        if store_addr is not None:
            addr = store_addr.encode() if isinstance(store_addr, str) else bytes(store_addr)
            keep.append(addr)
            cfg.store_addr = addr
        self._apply_config(cfg, timeout_ms, name, transports, keep)
        handle = ctypes.c_void_p()
        rc = lib.collx_comm_create(ctypes.byref(cfg), ctypes.byref(handle))
        _check(rc, None, "Communicator(rank=%r, size=%r, store_addr=%r)" % (rank, size, store_addr))
        self._handle = handle.value

    @staticmethod
    def _apply_config(cfg, timeout_ms, name, transports, keep):
        if timeout_ms is not None:
            cfg.timeout_ms = _int_or_none("timeout_ms", timeout_ms)
        if name is not None:
            b = name.encode()
            keep.append(b)
            cfg.name = b
        if transports is not None:
            cfg.transports = int(transports)

    @classmethod
    def from_env(cls, timeout_ms=None, name=None, transports=None):
        cfg = new_config()
        keep = []
        cls._apply_config(cfg, timeout_ms, name, transports, keep)
        handle = ctypes.c_void_p()
        rc = lib.collx_comm_create_from_env(ctypes.byref(cfg), ctypes.byref(handle))
        _check(rc, None, "Communicator.from_env()")
        return cls(None, None, _handle=handle.value)

    # -- lifetime ---------------------------------------------------------------------
    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidUsage(Status.ERR_INVALID_USAGE, "the communicator was destroyed")
        return h

    def _handle_or_none(self):
        return self._handle

    def destroy(self):
        """Release the communicator (waits for pending nonblocking operations). Idempotent."""
        with self._lock:
            h, self._handle = self._handle, None
        if h is not None:
            rc = lib.collx_comm_destroy(h)
            self._orphans = []
            _check(rc, None, "destroy")

    close = destroy

    def abort(self):
        """Stop everything on the communicator now (any thread); destroy() still needed."""
        h = self._handle
        if h is not None:
            lib.collx_comm_abort(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        try:
            self.destroy()
        except Exception:
            pass

    @property
    def closed(self):
        return self._handle is None

    # -- queries ----------------------------------------------------------------------
    def _query(self, fn):
        out = ctypes.c_int32(-1)
        h = self._h()
        _check(fn(h, ctypes.byref(out)), h)
        return out.value

    @property
    def rank(self):
        return self._query(lib.collx_comm_rank)

    @property
    def size(self):
        return self._query(lib.collx_comm_size)

    @property
    def local_rank(self):
        return self._query(lib.collx_comm_local_rank)

    @property
    def local_size(self):
        return self._query(lib.collx_comm_local_size)

    def async_error(self):
        """Status.OK while healthy, else the fatal status that poisoned the communicator."""
        out = ctypes.c_int(0)
        h = self._h()
        _check(lib.collx_comm_get_async_error(h, ctypes.byref(out)), h)
        return Status(out.value) if out.value in Status._value2member_map_ else out.value

    def __repr__(self):
        if self._handle is None:
            return "<collx.Communicator destroyed>"
        return "<collx.Communicator rank %d of %d>" % (self.rank, self.size)

    # -- communicator construction ----------------------------------------------------
    def split(self, color, key=None):
        """MPI_Comm_split. color None or SPLIT_NOCOLOR -> returns None on this rank."""
        h = self._h()
        color = SPLIT_NOCOLOR if color is None else _int_or_none("color", color)
        key = self.rank if key is None else _int_or_none("key", key)
        out = ctypes.c_void_p()
        _check(lib.collx_comm_split(h, color, key, ctypes.byref(out)), h, "split")
        return Communicator(None, None, _handle=out.value) if out.value else None

    def dup(self):
        h = self._h()
        out = ctypes.c_void_p()
        _check(lib.collx_comm_dup(h, ctypes.byref(out)), h, "dup")
        return Communicator(None, None, _handle=out.value)

    # -- helpers ----------------------------------------------------------------------
    def _opts(self, algorithm=None, timeout_ms=None, scalar=None):
        if algorithm is None and timeout_ms is None and scalar is None:
            return None
        opts = new_opts()
        alg = parse_algorithm(algorithm)
        if alg is not None:
            opts.algorithm = int(alg)
        if timeout_ms is not None:
            opts.timeout_ms = _int_or_none("timeout_ms", timeout_ms)
        if scalar is not None:
            opts.premul_scalar = float(scalar)
        return opts

    def select_algorithm(self, coll, count, datatype, algorithm=None):
        """The algorithm collx would run for (coll, count, datatype); local."""
        from ._types import Coll
        h = self._h()
        opts = self._opts(algorithm)
        out = ctypes.c_int(0)
        _check(lib.collx_select_algorithm(h, int(Coll(coll)), int(count),
                                          int(parse_datatype(datatype)),
                                          ctypes.byref(opts) if opts is not None else None,
                                          ctypes.byref(out)), h)
        return Algorithm(out.value)

    def _run(self, name, fn, args, opts, keep, result, nonblocking):
        h = self._h()
        popts = ctypes.byref(opts) if opts is not None else None
        grouped = _group.depth() > 0
        if grouped:  # recorded, not run: the buffers must live until the group ends
            _group.hold((keep, opts, result))
        if not nonblocking:
            rc = fn(*(args + [h, popts]))
            if not grouped:
                self._orphans = []  # a blocking call orders after every earlier operation
            _check(rc, h, name)
            return result
        req = ctypes.c_void_p()
        rc = fn(*(args + [h, popts, ctypes.byref(req)]))
        _check(rc, h, name)
        return Request(self, req.value, (keep, opts), result, name)

    @staticmethod
    def _same_type(name, a, b, what_a, what_b):
        if a.datatype != b.datatype:
            raise _bad("%s: %s is %s but %s is %s" % (name, what_a, datatype_name(a.datatype),
                                                     what_b, datatype_name(b.datatype)))

    @staticmethod
    def _need(name, buf, count, what):
        if buf.count < count:
            raise _bad("%s: %s holds %d %s elements (%d bytes) but %d elements (%d bytes) are "
                       "needed" % (name, what, buf.count, datatype_name(buf.datatype), buf.nbytes,
                                   count, count * buf.itemsize))

    def _pair(self, name, send, recv, datatype, recv_count_of):
        """Buffers for send -> recv. recv None/same object -> in place (returns recv=None)."""
        s = as_buffer(send, datatype, writable=(recv is None or recv is send), what="send buffer")
        if recv is None or recv is send:
            return s, None
        r = as_buffer(recv, datatype if datatype is not None else None, writable=True,
                      what="recv buffer")
        self._same_type(name, s, r, "send buffer", "recv buffer")
        self._need(name, r, recv_count_of(s), "recv buffer")
        return s, r

    # -- collectives ------------------------------------------------------------------
    def _allreduce(self, send, recv, op, datatype, algorithm, timeout_ms, scalar, nb):
        name = "allreduce"
        o = parse_op(op)
        s, r = self._pair(name, send, recv, datatype, lambda s: s.count)
        dst = r if r is not None else s
        opts = self._opts(algorithm, timeout_ms, scalar)
        return self._run(name, lib.collx_iallreduce if nb else lib.collx_allreduce,
                         [s.address, dst.address, s.count, int(s.datatype), int(o)],
                         opts, (s.keep, dst.keep), dst.obj, nb)

    def allreduce(self, send, recv=None, op="sum", datatype=None, algorithm=None,
                  timeout_ms=None, scalar=None):
        """recv[i] = op over ranks of send[i]; in place when recv is None or send.
        Returns the buffer holding the result. scalar: premul_sum's factor."""
        return self._allreduce(send, recv, op, datatype, algorithm, timeout_ms, scalar, False)

    def iallreduce(self, send, recv=None, op="sum", datatype=None, algorithm=None,
                   timeout_ms=None, scalar=None):
        return self._allreduce(send, recv, op, datatype, algorithm, timeout_ms, scalar, True)

    def _reduce_scatter(self, send, recv, op, datatype, algorithm, timeout_ms, scalar, nb):
        name = "reduce_scatter"
        o = parse_op(op)
        n = self.size
        s = as_buffer(send, datatype, writable=(recv is send), what="send buffer")
        if s.count % n:
            raise _bad("%s: send buffer holds %d elements, not a multiple of the %d ranks"
                       % (name, s.count, n))
        rc = s.count // n
        if recv is send:  # in place: the result lands in block `rank` of send
            dst_addr, dst_keep, result = s.element_address(self.rank * rc), s.keep, s.obj
        else:
            if recv is None:
                recv = alloc_like(s, rc)
            r = as_buffer(recv, datatype, writable=True, what="recv buffer")
            self._same_type(name, s, r, "send buffer", "recv buffer")
            self._need(name, r, rc, "recv buffer")
            dst_addr, dst_keep, result = r.address, r.keep, r.obj
        opts = self._opts(algorithm, timeout_ms, scalar)
        return self._run(name, lib.collx_ireduce_scatter if nb else lib.collx_reduce_scatter,
                         [s.address, dst_addr, rc, int(s.datatype), int(o)],
                         opts, (s.keep, dst_keep), result, nb)

    def reduce_scatter(self, send, recv=None, op="sum", datatype=None, algorithm=None,
                       timeout_ms=None, scalar=None):
        """send holds size * n elements; recv (n elements; allocated like send when None)
        gets block `rank` of the reduction. recv is send: in place, into block `rank`."""
        return self._reduce_scatter(send, recv, op, datatype, algorithm, timeout_ms, scalar, False)

    def ireduce_scatter(self, send, recv=None, op="sum", datatype=None, algorithm=None,
                        timeout_ms=None, scalar=None):
        return self._reduce_scatter(send, recv, op, datatype, algorithm, timeout_ms, scalar, True)

    def _allgather(self, send, recv, datatype, algorithm, timeout_ms, nb):
        name = "allgather"
        n = self.size
        if send is None:  # in place: recv's block `rank` is this rank's input
            if recv is None:
                raise _bad("allgather: send and recv cannot both be None")
            r = as_buffer(recv, datatype, writable=True, what="recv buffer")
            if r.count % n:
                raise _bad("%s: recv buffer holds %d elements, not a multiple of the %d ranks"
                           % (name, r.count, n))
            c = r.count // n
            src_addr, keep = r.element_address(self.rank * c), (r.keep,)
        else:
            s = as_buffer(send, datatype, what="send buffer")
            c = s.count
            if recv is None:
                recv = alloc_like(s, c * n)
            elif recv is send:
                raise _bad("allgather: recv cannot be send; pass send=None for in place")
            r = as_buffer(recv, datatype, writable=True, what="recv buffer")
            self._same_type(name, s, r, "send buffer", "recv buffer")
            self._need(name, r, c * n, "recv buffer")
            src_addr, keep = s.address, (s.keep, r.keep)
        opts = self._opts(algorithm, timeout_ms)
        return self._run(name, lib.collx_iallgather if nb else lib.collx_allgather,
                         [src_addr, r.address, c, int(r.datatype)], opts, keep, r.obj, nb)

    def allgather(self, send, recv=None, datatype=None, algorithm=None, timeout_ms=None):
        """recv (size * len(send); allocated like send when None) gets every rank's send in
        rank order. send None: in place, block `rank` of recv is the input."""
        return self._allgather(send, recv, datatype, algorithm, timeout_ms, False)

    def iallgather(self, send, recv=None, datatype=None, algorithm=None, timeout_ms=None):
        return self._allgather(send, recv, datatype, algorithm, timeout_ms, True)

    def _root(self, root):
        root = _int_or_none("root", root)
        return root

    def _broadcast(self, buf, root, datatype, algorithm, timeout_ms, nb):
        b = as_buffer(buf, datatype, writable=True, what="buffer")
        opts = self._opts(algorithm, timeout_ms)
        return self._run("broadcast", lib.collx_ibroadcast if nb else lib.collx_broadcast,
                         [b.address, b.address, b.count, int(b.datatype), self._root(root)],
                         opts, (b.keep,), b.obj, nb)

    def broadcast(self, buf, root=0, datatype=None, algorithm=None, timeout_ms=None):
        """In place: every rank's buf gets root's buf."""
        return self._broadcast(buf, root, datatype, algorithm, timeout_ms, False)

    def ibroadcast(self, buf, root=0, datatype=None, algorithm=None, timeout_ms=None):
        return self._broadcast(buf, root, datatype, algorithm, timeout_ms, True)

    def _reduce(self, send, recv, op, root, datatype, algorithm, timeout_ms, scalar, nb):
        name = "reduce"
        o = parse_op(op)
        s, r = self._pair(name, send, recv, datatype, lambda s: s.count)
        dst = r if r is not None else s
        opts = self._opts(algorithm, timeout_ms, scalar)
        return self._run(name, lib.collx_ireduce if nb else lib.collx_reduce,
                         [s.address, dst.address, s.count, int(s.datatype), int(o),
                          self._root(root)], opts, (s.keep, dst.keep), dst.obj, nb)

    def reduce(self, send, recv=None, op="sum", root=0, datatype=None, algorithm=None,
               timeout_ms=None, scalar=None):
        """root's recv (send itself when None) gets the reduction; others' are not written."""
        return self._reduce(send, recv, op, root, datatype, algorithm, timeout_ms, scalar, False)

    def ireduce(self, send, recv=None, op="sum", root=0, datatype=None, algorithm=None,
                timeout_ms=None, scalar=None):
        return self._reduce(send, recv, op, root, datatype, algorithm, timeout_ms, scalar, True)

    def _alltoall(self, send, recv, datatype, algorithm, timeout_ms, nb):
        name = "alltoall"
        n = self.size
        s = as_buffer(send, datatype, what="send buffer")
        if s.count % n:
            raise _bad("%s: send buffer holds %d elements, not a multiple of the %d ranks"
                       % (name, s.count, n))
        if recv is send:
            raise _bad("alltoall is not in place: pass a separate recv buffer (or None)")
        if recv is None:
            recv = alloc_like(s, s.count)
        r = as_buffer(recv, datatype, writable=True, what="recv buffer")
        self._same_type(name, s, r, "send buffer", "recv buffer")
        self._need(name, r, s.count, "recv buffer")
        opts = self._opts(algorithm, timeout_ms)
        return self._run(name, lib.collx_ialltoall if nb else lib.collx_alltoall,
                         [s.address, r.address, s.count // n, int(s.datatype)], opts,
                         (s.keep, r.keep), r.obj, nb)

    def alltoall(self, send, recv=None, datatype=None, algorithm=None, timeout_ms=None):
        """Block j of send goes to rank j, stored as block `rank` of its recv."""
        return self._alltoall(send, recv, datatype, algorithm, timeout_ms, False)

    def ialltoall(self, send, recv=None, datatype=None, algorithm=None, timeout_ms=None):
        return self._alltoall(send, recv, datatype, algorithm, timeout_ms, True)

    def barrier(self, algorithm=None, timeout_ms=None):
        self._run("barrier", lib.collx_barrier, [], self._opts(algorithm, timeout_ms), (), None,
                  False)

    def ibarrier(self, algorithm=None, timeout_ms=None):
        return self._run("barrier", lib.collx_ibarrier, [], self._opts(algorithm, timeout_ms),
                         (), None, True)

    def _p2p(self, name, fn, buf, peer, tag, datatype, timeout_ms, write, nb):
        b = as_buffer(buf, datatype, writable=write, what="buffer")
        peer = _int_or_none("peer", peer)
        tag = _int_or_none("tag", tag)
        return self._run(name, fn, [b.address, b.count, int(b.datatype), peer, tag],
                         self._opts(None, timeout_ms), (b.keep,), b.obj, nb)

    def send(self, buf, peer, tag=0, datatype=None, timeout_ms=None):
        self._p2p("send", lib.collx_send, buf, peer, tag, datatype, timeout_ms, False, False)

    def recv(self, buf, peer, tag=0, datatype=None, timeout_ms=None):
        """Receive into buf (its element count and datatype must equal the sender's)."""
        return self._p2p("recv", lib.collx_recv, buf, peer, tag, datatype, timeout_ms, True, False)

    def isend(self, buf, peer, tag=0, datatype=None, timeout_ms=None):
        return self._p2p("send", lib.collx_isend, buf, peer, tag, datatype, timeout_ms, False, True)

    def irecv(self, buf, peer, tag=0, datatype=None, timeout_ms=None):
        return self._p2p("recv", lib.collx_irecv, buf, peer, tag, datatype, timeout_ms, True, True)
