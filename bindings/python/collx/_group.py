"""Grouped calls: `with collx.group():` around collx_group_start / collx_group_end.

Calls made inside the block on this thread (any communicator, blocking or i-forms) are
recorded by collx and run together when the outermost block exits. Their buffers must stay
alive until then: the binding keeps them here (per thread) instead of per call."""
import contextlib
import threading

from ._lib import lib
from ._types import Status

_state = threading.local()


def depth():
    """How many `with collx.group()` blocks are open on this thread (0: none)."""
    return getattr(_state, "depth", 0)


def hold(keep):
    """Keep `keep` alive until the outermost open group on this thread ends."""
    _state.keep.append(keep)


@contextlib.contextmanager
def group():
    """Record the calls in the block and run them as one batch when it exits (nests: only
    the outermost block runs them). Inside, a blocking call returns at once and its result
    buffer is filled only when the block exits; Request.wait() on a call recorded in the open
    group raises InvalidUsage. Sends and receives may be issued in any order (deadlock-free);
    small all-reduces are fused. On exit the first failing call raises the binding's
    exception with collx's message ("call i of n in the group ..."). If the block itself
    raises, the group is still closed (collx runs what was recorded) and the block's
    exception propagates."""
    from ._comm import _raise  # _comm imports this module
    rc = lib.collx_group_start()
    if rc != Status.OK:
        _raise(rc, None, "group start")
    if depth() == 0:
        _state.keep = []
    _state.depth = depth() + 1
    failed = True
    try:
        yield
        failed = False
    finally:
        _state.depth -= 1
        try:
            rc = lib.collx_group_end()
        finally:
            if _state.depth == 0:
                _state.keep = []
        if rc != Status.OK and not failed:
            _raise(rc, None, "group end")
