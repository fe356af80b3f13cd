"""Rooted data movement on Communicator: gather, scatter, gatherv, scatterv (+ i forms).

The root's side (recv of gather, send of scatter, counts and displacements of the v forms)
is used on the root only; other ranks may pass None for it."""
from ._buffer import alloc_like, as_buffer
from ._counts import bad, layout
from ._lib import lib


class RootedMixin(object):
    """Mixed into Communicator; uses its _h/_run/_opts/_root/_same_type/_need helpers."""

    def _blocks(self, name, buf, what):
        n = self.size
        if buf.count % n:
            raise bad("%s: %s holds %d elements, not a multiple of the %d ranks"
                      % (name, what, buf.count, n))
        return buf.count // n

    def _recv_into(self, name, recv, like, count, datatype):
        """recv (allocated like `like` when None) checked to hold count elements."""
        if recv is None:
            recv = alloc_like(like, count)
        r = as_buffer(recv, datatype, writable=True, what="recv buffer")
        self._same_type(name, like, r, "send buffer", "recv buffer")
        self._need(name, r, count, "recv buffer")
        return r

    def _inplace_recv(self, name, recv, datatype, span):
        """The recv buffer of an in-place call (send None), checked to hold span elements."""
        if recv is None:
            raise bad("%s: send and recv cannot both be None" % name)
        r = as_buffer(recv, datatype, writable=True, what="recv buffer")
        self._need(name, r, span, "recv buffer")
        return r

    def _gather_ends(self, name, send, recv, lay, me, datatype):
        """(src, recv Buffer, keep) of gatherv/allgatherv on a rank that receives (lay: the
        recvcounts Layout): send None is in place (recv at displs[me] is the input), else
        send must hold recvcounts[me] elements; recv is allocated like send when None."""
        if send is None:
            r = self._inplace_recv(name, recv, datatype, lay.span)
            return r.element_address(lay.displs[me]), r, (r.keep,)
        if recv is send:
            raise bad("%s: recv cannot be send; pass send=None for in place" % name)
        s = as_buffer(send, datatype, what="send buffer")
        if s.count != lay.counts[me]:
            raise bad("%s: send buffer holds %d elements but recvcounts[%d] is %d"
                      % (name, s.count, me, lay.counts[me]))
        r = self._recv_into(name, recv, s, lay.span, datatype)
        return s.address, r, (s.keep, r.keep)

    def _scatter_ends(self, name, send, recv, root, datatype, own_block):
        """(src, dst, count, datatype, result, keep) of scatter/scatterv on this rank.
        own_block(s) -> (offset, count) of the root's block in its send buffer s."""
        if self.rank != root:
            if recv is None:
                raise bad("%s: rank %d is not the root (%d) and needs its recv buffer (its "
                          "length is the count)" % (name, self.rank, root))
            r = as_buffer(recv, datatype, writable=True, what="recv buffer")
            return None, r.address, r.count, r.datatype, r.obj, (r.keep,)
        s = as_buffer(send, datatype, writable=(recv is send), what="send buffer")
        off, c = own_block(s)
        if recv is send:  # in place: the root's block stays where it is
            return s.address, s.element_address(off), c, s.datatype, s.obj, (s.keep,)
        r = self._recv_into(name, recv, s, c, datatype)
        return s.address, r.address, c, s.datatype, r.obj, (s.keep, r.keep)

    # -- gather / scatter --------------------------------------------------------------
    def _gather(self, send, recv, root, datatype, algorithm, timeout_ms, nb):
        name, n, root = "gather", self.size, self._root(root)
        at_root = self.rank == root
        if send is None:  # in place: block `root` of the root's recv is its input
            if not at_root or recv is None:
                raise bad("gather: send None (in place) needs the root's recv buffer; rank %d "
                          "is %s" % (self.rank, "the root" if at_root else "not the root"))
            r = as_buffer(recv, datatype, writable=True, what="recv buffer")
            c = self._blocks(name, r, "recv buffer")
            src, dt, keep = r.element_address(root * c), r.datatype, (r.keep,)
        else:
            if recv is send:
                raise bad("gather: recv cannot be send; pass send=None for in place")
            s = as_buffer(send, datatype, what="send buffer")
            c, src, dt = s.count, s.address, s.datatype
            r = self._recv_into(name, recv, s, c * n, datatype) if at_root else None
            keep = (s.keep, r.keep if r else None)
        opts = self._opts(algorithm, timeout_ms)
        return self._run(name, lib.collx_igather if nb else lib.collx_gather,
                         [src, r.address if r else None, c, int(dt), root], opts, keep,
                         r.obj if r else None, nb)

    def gather(self, send, recv=None, root=0, datatype=None, algorithm=None, timeout_ms=None):
        """The root's recv (size * len(send); allocated like send when None) gets every
        rank's send as block `rank`. Returns recv on the root, None elsewhere (recv is not
        used there). send None on the root: in place, block `root` of recv is its input."""
        return self._gather(send, recv, root, datatype, algorithm, timeout_ms, False)

    def igather(self, send, recv=None, root=0, datatype=None, algorithm=None, timeout_ms=None):
        return self._gather(send, recv, root, datatype, algorithm, timeout_ms, True)

    def _scatter(self, send, recv, root, datatype, algorithm, timeout_ms, nb):
        name, root = "scatter", self._root(root)

        def own_block(s):
            c = self._blocks(name, s, "send buffer")
            return root * c, c
        src, dst, c, dt, result, keep = self._scatter_ends(name, send, recv, root, datatype,
                                                           own_block)
        opts = self._opts(algorithm, timeout_ms)
        return self._run(name, lib.collx_iscatter if nb else lib.collx_scatter,
                         [src, dst, c, int(dt), root], opts, keep, result, nb)

    def scatter(self, send, recv=None, root=0, datatype=None, algorithm=None, timeout_ms=None):
        """Block r of the root's send (size * n elements) goes to rank r's recv (n elements).
        Root: recv allocated like send when None; recv is send -> in place (its block stays).
        Other ranks: send is not used (may be None), recv is required and its length is n.
        Returns the buffer holding this rank's block."""
        return self._scatter(send, recv, root, datatype, algorithm, timeout_ms, False)

    def iscatter(self, send, recv=None, root=0, datatype=None, algorithm=None, timeout_ms=None):
        return self._scatter(send, recv, root, datatype, algorithm, timeout_ms, True)

    # -- gatherv / scatterv ------------------------------------------------------------
    def _gatherv(self, send, recvcounts, recv, displs, root, datatype, algorithm, timeout_ms,
                 nb):
        name, root = "gatherv", self._root(root)
        lay = r = None
        if self.rank == root:
            lay = layout(name, recvcounts, displs, self.size, "recvcounts", "displs")
            src, r, keep = self._gather_ends(name, send, recv, lay, root, datatype)
            sc, dt = lay.counts[root], r.datatype
        else:
            if send is None:
                raise bad("gatherv: send None (in place) is for the root only; rank %d is not "
                          "the root (%d)" % (self.rank, root))
            s = as_buffer(send, datatype, what="send buffer")
            src, sc, dt, keep = s.address, s.count, s.datatype, (s.keep,)
        opts = self._opts(algorithm, timeout_ms)
        return self._run(name, lib.collx_igatherv if nb else lib.collx_gatherv,
                         [src, sc, r.address if r else None, lay.counts_c if lay else None,
                          lay.displs_c if lay else None, int(dt), root], opts,
                         (keep, lay.keep() if lay else None), r.obj if r else None, nb)

    def gatherv(self, send, recvcounts=None, recv=None, displs=None, root=0, datatype=None,
                algorithm=None, timeout_ms=None):
        """Rank r's send (recvcounts[r] elements) lands in the root's recv at displs[r]
        (None: packed in rank order). recvcounts, recv and displs are used on the root only;
        recv is allocated like send when None. Returns recv on the root, None elsewhere.
        send None on the root: in place, recv at displs[root] is its input."""
        return self._gatherv(send, recvcounts, recv, displs, root, datatype, algorithm,
                             timeout_ms, False)

    def igatherv(self, send, recvcounts=None, recv=None, displs=None, root=0, datatype=None,
                 algorithm=None, timeout_ms=None):
        return self._gatherv(send, recvcounts, recv, displs, root, datatype, algorithm,
                             timeout_ms, True)

    def _scatterv(self, send, sendcounts, recv, displs, root, datatype, algorithm, timeout_ms,
                  nb):
        name, root = "scatterv", self._root(root)
        lay = None
        if self.rank == root:
            lay = layout(name, sendcounts, displs, self.size, "sendcounts", "displs")

        def own_block(s):
            self._need(name, s, lay.span, "send buffer")
            return lay.displs[root], lay.counts[root]
        src, dst, rc, dt, result, keep = self._scatter_ends(name, send, recv, root, datatype,
                                                            own_block)
        opts = self._opts(algorithm, timeout_ms)
        return self._run(name, lib.collx_iscatterv if nb else lib.collx_scatterv,
                         [src, lay.counts_c if lay else None, lay.displs_c if lay else None,
                          dst, rc, int(dt), root], opts, (keep, lay.keep() if lay else None),
                         result, nb)

    def scatterv(self, send, sendcounts=None, recv=None, displs=None, root=0, datatype=None,
                 algorithm=None, timeout_ms=None):
        """sendcounts[r] elements at displs[r] (None: packed in rank order) of the root's send
        go to rank r's recv. Root: recv allocated like send when None; recv is send -> in
        place. Other ranks: send, sendcounts and displs are not used; recv is required and
        its length must equal the root's sendcounts[rank]. Returns this rank's block."""
        return self._scatterv(send, sendcounts, recv, displs, root, datatype, algorithm,
                              timeout_ms, False)

    def iscatterv(self, send, sendcounts=None, recv=None, displs=None, root=0, datatype=None,
                  algorithm=None, timeout_ms=None):
        return self._scatterv(send, sendcounts, recv, displs, root, datatype, algorithm,
                              timeout_ms, True)
