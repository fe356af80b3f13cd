"""Turning Python buffers into (address, element count, datatype) for the C calls.

Accepted: numpy arrays, array.array, ctypes arrays, bytes/bytearray/memoryview and any
other object with the buffer protocol. The datatype is inferred from the buffer's format
(int8 uint8 int32 uint32 int64 uint64 float16 float32 float64); untyped bytes and 16-bit
integers (bfloat16 travels in uint16 arrays) need an explicit datatype=. Buffers must be
C-contiguous and in native byte order; buffers written by collx must be writable.
"""
import array
import ctypes
import sys

from ._lib import lib, cstr
from ._types import Datatype, InvalidArgument, Status

_SIGNED = {1: Datatype.INT8, 4: Datatype.INT32, 8: Datatype.INT64}
_UNSIGNED = {1: Datatype.UINT8, 4: Datatype.UINT32, 8: Datatype.UINT64}
_FLOAT = {"e": Datatype.FLOAT16, "f": Datatype.FLOAT32, "d": Datatype.FLOAT64}
_RAW = ("B", "b", "c")  # untyped bytes: reinterpretable with an explicit datatype=
_FOREIGN_ORDER = ">!" if sys.byteorder == "little" else "<"


def _bad(message):
    return InvalidArgument(Status.ERR_INVALID_ARG, message)


def datatype_size(dt):
    return int(lib.collx_datatype_size(int(dt)))


def datatype_name(dt):
    return cstr(lib.collx_datatype_name(int(dt)))


def parse_datatype(value):
    """Datatype, int, C name ('bfloat16', 'bf16', 'float', ...) or numpy dtype -> Datatype."""
    if value is None:
        return None
    if isinstance(value, Datatype):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return Datatype(value)
        except ValueError:
            raise _bad("datatype %d is out of range [0, %d)" % (value, len(Datatype)))
    name = getattr(value, "name", None) if not isinstance(value, str) else value
    if not isinstance(name, str):
        name = str(value)
    out = ctypes.c_int(-1)
    if lib.collx_datatype_from_name(name.encode(), ctypes.byref(out)) != 0:
        raise _bad("unknown datatype %r; expected one of %s"
                   % (value, ", ".join(d.name.lower() for d in Datatype)))
    return Datatype(out.value)


def _format_datatype(fmt, itemsize):
    order = fmt[0] if fmt and fmt[0] in "@=<>!" else ""
    code = fmt[len(order):]
    if order and order in _FOREIGN_ORDER and itemsize > 1:
        return None, "byte order %r is not native" % order
    if code in _FLOAT and {"e": 2, "f": 4, "d": 8}[code] == itemsize:
        return _FLOAT[code], None
    if code in ("b", "h", "i", "l", "q", "n"):
        return _SIGNED.get(itemsize), None
    if code in ("B", "H", "I", "L", "Q", "N"):
        return _UNSIGNED.get(itemsize), None
    if code == "c":
        return Datatype.UINT8, None
    return None, None


class Buffer(object):
    """A borrowed view of a Python buffer: .address (int or None), .count (elements),
    .datatype, .nbytes, and .keep (objects that must stay alive while C uses it)."""

    __slots__ = ("obj", "address", "count", "datatype", "nbytes", "itemsize", "writable", "keep")

    def element_address(self, index):
        if self.address is None:
            return None
        return self.address + index * datatype_size(self.datatype)


def as_buffer(obj, datatype=None, writable=False, what="buffer"):
    """Describe `obj` as a collx buffer. Raises InvalidArgument (a ValueError) when it
    cannot be used: not a buffer, not contiguous, read-only but written, datatype unknown
    or inconsistent with the buffer's item size."""
    explicit = parse_datatype(datatype)
    try:
        mv = memoryview(obj)
    except TypeError:
        raise _bad("%s must support the buffer protocol (numpy array, array.array, bytearray, "
                   "memoryview or ctypes array), got %s" % (what, type(obj).__name__))
    if not mv.c_contiguous:
        raise _bad("%s must be C-contiguous" % what)
    if writable and mv.readonly:
        raise _bad("%s is read-only but collx writes into it" % what)
    inferred, why = _format_datatype(mv.format, mv.itemsize)
    if why:
        raise _bad("%s: %s" % (what, why))
    if explicit is not None:
        dt = explicit
        dsize = datatype_size(dt)
        if mv.format.lstrip("@=<>!") not in _RAW and mv.itemsize != dsize:
            raise _bad("%s has items of %d bytes (format %r) but datatype %s has %d-byte "
                       "elements" % (what, mv.itemsize, mv.format, datatype_name(dt), dsize))
    else:
        if inferred is None:
            raise _bad("%s has format %r (%d-byte items) with no collx datatype; pass "
                       "datatype= explicitly (e.g. datatype='bfloat16' for a uint16 array, "
                       "datatype='float32' for raw bytes)" % (what, mv.format, mv.itemsize))
        dt = inferred
        dsize = datatype_size(dt)
    if mv.nbytes % dsize:
        raise _bad("%s holds %d bytes, not a whole number of %s elements (%d bytes each)"
                   % (what, mv.nbytes, datatype_name(dt), dsize))
    b = Buffer()
    b.obj = obj
    b.datatype = dt
    b.nbytes = mv.nbytes
    b.itemsize = dsize
    b.count = mv.nbytes // dsize
    b.writable = not mv.readonly
    if mv.nbytes == 0:
        b.address, b.keep = None, (obj,)
    elif mv.readonly:
        # ctypes cannot take the address of a read-only buffer: collx only reads it, so a
        # private copy serves (kept alive with the call / request).
        copy = (ctypes.c_char * mv.nbytes).from_buffer_copy(mv)
        b.address, b.keep = ctypes.addressof(copy), (obj, copy)
    else:
        raw = (ctypes.c_char * mv.nbytes).from_buffer(mv)
        b.address, b.keep = ctypes.addressof(raw), (obj, raw)
    return b


def _ctypes_scalar(t):
    while issubclass(t, ctypes.Array):
        t = t._type_
    return t


def alloc_like(template, count):
    """A new zeroed buffer of `count` elements of the same kind as template.obj: numpy
    array, array.array or ctypes array of the same element type; else a bytearray."""
    obj = template.obj
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        return np.zeros(count, dtype=obj.dtype)
    if isinstance(obj, array.array) and obj.itemsize == template.itemsize:
        return array.array(obj.typecode, bytes(count * obj.itemsize))
    if isinstance(obj, ctypes.Array):
        scalar = _ctypes_scalar(type(obj))
        if ctypes.sizeof(scalar) == template.itemsize:
            return (scalar * count)()
    return bytearray(count * template.itemsize)
