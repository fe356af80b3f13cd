"""Zero-copy host buffers (collx_mem_alloc): memory the other ranks on this host read in place."""
import ctypes
import weakref

from ._comm import _check
from ._lib import lib


def mem_alloc(nbytes):
    """A writable, zero-filled memoryview (format 'B') of `nbytes` bytes from collx_mem_alloc.

    Pass it (or a cast of it, e.g. ``mem_alloc(4 * n).cast('f')``, or
    ``numpy.frombuffer(view, dtype=numpy.float32)``) to the collectives: on one host, peers
    read its data straight from this memory. It is freed with collx_mem_free when the last
    object referring to it (views, casts, numpy arrays) is gone, never earlier, so no view can
    outlive it. Raises InvalidArgument for nbytes < 1 and NoMemory when it cannot be had.
    """
    nbytes = int(nbytes)
    ptr = ctypes.c_void_p()
    _check(lib.collx_mem_alloc(nbytes if nbytes > 0 else 0, ctypes.byref(ptr)), None, "mem_alloc")
    array = (ctypes.c_char * nbytes).from_address(ptr.value)
    # Views keep `array` alive; its collection frees the memory.
    weakref.finalize(array, lib.collx_mem_free, ptr.value)
    return memoryview(array).cast("B")
