"""Count and displacement arrays of the v-collectives: validated Python sequences turned
into the size_t arrays collx reads (one entry per rank, in elements)."""
import ctypes
import operator

from ._types import InvalidArgument, Status


def bad(message):
    return InvalidArgument(Status.ERR_INVALID_ARG, message)


class Layout(object):
    """counts and displs (lists), their C arrays (displs_c None: packed in rank order) and
    span, the elements a buffer must hold to cover every block."""

    __slots__ = ("counts", "displs", "counts_c", "displs_c", "span")

    def keep(self):
        return (self.counts_c, self.displs_c)


def _size_list(name, what, values, n):
    try:
        vals = [operator.index(v) for v in values]
    except TypeError:
        raise bad("%s: %s must be a sequence of ints (one per rank), got %r" % (name, what, values))
    if len(vals) != n:
        raise bad("%s: %s has %d entries but the communicator has %d ranks"
                  % (name, what, len(vals), n))
    for i, v in enumerate(vals):
        if v < 0:
            raise bad("%s: %s[%d] is %d; counts and displacements cannot be negative"
                      % (name, what, i, v))
    return vals


def layout(name, counts, displs, n, what_counts, what_displs):
    """The Layout of counts (required) and displs (None: packed in rank order)."""
    if counts is None:
        raise bad("%s: %s is required" % (name, what_counts))
    out = Layout()
    out.counts = _size_list(name, what_counts, counts, n)
    out.counts_c = (ctypes.c_size_t * n)(*out.counts)
    if displs is None:
        out.displs, at = [], 0
        for c in out.counts:
            out.displs.append(at)
            at += c
        out.displs_c = None
    else:
        out.displs = _size_list(name, what_displs, displs, n)
        out.displs_c = (ctypes.c_size_t * n)(*out.displs)
    out.span = max([d + c for d, c in zip(out.displs, out.counts)] + [0])
    return out
