"""Uneven (v) collectives on Communicator: allgatherv, alltoallv, reduce_scatterv (+ i
forms). Counts and displacements are sequences of ints, one per rank, in elements."""
from ._buffer import as_buffer
from ._counts import bad, layout
from ._lib import lib


class VectorMixin(object):
    """Mixed into Communicator; uses its helpers and RootedMixin's (_gather_ends)."""

    def _allgatherv(self, send, recvcounts, recv, displs, datatype, algorithm, timeout_ms, nb):
        name, rank = "allgatherv", self.rank
        lay = layout(name, recvcounts, displs, self.size, "recvcounts", "displs")
        src, r, keep = self._gather_ends(name, send, recv, lay, rank, datatype)
        opts = self._opts(algorithm, timeout_ms)
        return self._run(name, lib.collx_iallgatherv if nb else lib.collx_allgatherv,
                         [src, lay.counts[rank], r.address, lay.counts_c, lay.displs_c,
                          int(r.datatype)], opts, (keep, lay.keep()), r.obj, nb)

    def allgatherv(self, send, recvcounts, recv=None, displs=None, datatype=None,
                   algorithm=None, timeout_ms=None):
        """Rank r's send (recvcounts[r] elements) lands in every rank's recv at displs[r]
        (None: packed in rank order); recv is allocated like send when None. recvcounts
        must be the same on every rank (else Mismatch). send None: in place, recv at
        displs[rank] is the input. Returns recv."""
        return self._allgatherv(send, recvcounts, recv, displs, datatype, algorithm,
                                timeout_ms, False)

    def iallgatherv(self, send, recvcounts, recv=None, displs=None, datatype=None,
                    algorithm=None, timeout_ms=None):
        return self._allgatherv(send, recvcounts, recv, displs, datatype, algorithm,
                                timeout_ms, True)

    def _alltoallv(self, send, sendcounts, recvcounts, recv, sdispls, rdispls, datatype,
                   algorithm, timeout_ms, nb):
        name, n, rank = "alltoallv", self.size, self.rank
        sl = layout(name, sendcounts, sdispls, n, "sendcounts", "sdispls")
        rl = layout(name, recvcounts, rdispls, n, "recvcounts", "rdispls")
        if sl.counts[rank] != rl.counts[rank]:
            raise bad("alltoallv: sendcounts[%d] is %d but recvcounts[%d] is %d (a rank's block "
                      "to itself must match)" % (rank, sl.counts[rank], rank, rl.counts[rank]))
        if recv is send and send is not None:
            raise bad("alltoallv is not in place: pass a separate recv buffer (or None)")
        s = as_buffer(send, datatype, what="send buffer")
        self._need(name, s, sl.span, "send buffer")
        r = self._recv_into(name, recv, s, rl.span, datatype)
        opts = self._opts(algorithm, timeout_ms)
        return self._run(name, lib.collx_ialltoallv if nb else lib.collx_alltoallv,
                         [s.address, sl.counts_c, sl.displs_c, r.address, rl.counts_c,
                          rl.displs_c, int(s.datatype)], opts,
                         (s.keep, r.keep, sl.keep(), rl.keep()), r.obj, nb)

    def alltoallv(self, send, sendcounts, recvcounts, recv=None, sdispls=None, rdispls=None,
                  datatype=None, algorithm=None, timeout_ms=None):
        """sendcounts[j] elements at sdispls[j] of send go to rank j, which stores them at
        rdispls[rank] of its recv (recvcounts[rank] elements). Displacements None: packed in
        rank order; recv allocated like send when None. Rank r's sendcounts[j] must equal
        rank j's recvcounts[r] (else Mismatch). Not in place. Returns recv."""
        return self._alltoallv(send, sendcounts, recvcounts, recv, sdispls, rdispls, datatype,
                               algorithm, timeout_ms, False)

    def ialltoallv(self, send, sendcounts, recvcounts, recv=None, sdispls=None, rdispls=None,
                   datatype=None, algorithm=None, timeout_ms=None):
        return self._alltoallv(send, sendcounts, recvcounts, recv, sdispls, rdispls, datatype,
                               algorithm, timeout_ms, True)

    def _reduce_scatterv(self, send, recvcounts, recv, op, datatype, algorithm, timeout_ms,
                         scalar, nb):
        from ._comm import parse_op  # _comm imports this module
        name, rank = "reduce_scatterv", self.rank
        o = parse_op(op)
        lay = layout(name, recvcounts, None, self.size, "recvcounts", "displs")
        s = as_buffer(send, datatype, writable=(recv is send), what="send buffer")
        self._need(name, s, lay.span, "send buffer")
        if recv is send:  # in place: the result lands in block `rank` of send
            dst, result, keep = s.element_address(lay.displs[rank]), s.obj, (s.keep,)
        else:
            r = self._recv_into(name, recv, s, lay.counts[rank], datatype)
            dst, result, keep = r.address, r.obj, (s.keep, r.keep)
        opts = self._opts(algorithm, timeout_ms, scalar)
        return self._run(name, lib.collx_ireduce_scatterv if nb else lib.collx_reduce_scatterv,
                         [s.address, dst, lay.counts_c, int(s.datatype), int(o)], opts,
                         (keep, lay.keep()), result, nb)

    def reduce_scatterv(self, send, recvcounts, recv=None, op="sum", datatype=None,
                        algorithm=None, timeout_ms=None, scalar=None):
        """send holds every rank's block packed in rank order (sum(recvcounts) elements);
        recv (recvcounts[rank] elements; allocated like send when None) gets the reduction
        of block `rank`. recv is send: in place, into block `rank` of send. recvcounts must
        be the same on every rank (else Mismatch). Returns the buffer holding the result."""
        return self._reduce_scatterv(send, recvcounts, recv, op, datatype, algorithm,
                                     timeout_ms, scalar, False)

    def ireduce_scatterv(self, send, recvcounts, recv=None, op="sum", datatype=None,
                         algorithm=None, timeout_ms=None, scalar=None):
        return self._reduce_scatterv(send, recvcounts, recv, op, datatype, algorithm,
                                     timeout_ms, scalar, True)
