"""Bytes a message really carries, read from an mpi4py buffer specification.

mpi4py accepts a buffer alone (``arr``), or a list/tuple spec:
``[buf, datatype]``, ``[buf, count, datatype]``, ``[buf, (count, displ),
datatype]``, ``[buf, count, displ, datatype]``, with the datatype an
``MPI.Datatype`` or a typecode string (or left out: then it comes from the
buffer's format).  The bytes carried are ``count x datatype size``: for a
derived datatype with holes that is its size, not its extent; when the count
is left out, mpi4py derives it as ``buffer bytes // extent``, and so do we.
Vector specs (the ``v``/``w`` collectives) give one count per peer.

The plain-buffer path is the hot one (numpy array, bytes): it costs one type
check and one attribute read.
"""

from __future__ import annotations

from mpi4py import MPI
import numpy as np

_NDARRAY = np.ndarray
_DATATYPE = MPI.Datatype
_TYPEDICT = MPI._typedict  # typecode -> predefined Datatype, as mpi4py resolves strings
_IN_PLACE = MPI.IN_PLACE
_BOTTOM = MPI.BOTTOM


def raw_nbytes(obj) -> int:
    """Bytes of a buffer-like object (0 for None, IN_PLACE, BOTTOM)."""
    if obj is None or obj is _IN_PLACE or obj is _BOTTOM:
        return 0
    t = type(obj)
    if t is _NDARRAY:
        return obj.nbytes
    if t is bytes or t is bytearray:
        return len(obj)
    n = getattr(obj, "nbytes", None)  # memoryview, MPI.buffer, cupy, ...
    if isinstance(n, int):
        return n
    return memoryview(obj).nbytes


def _itemsize(obj) -> int:
    if type(obj) is _NDARRAY:
        return obj.itemsize
    size = getattr(obj, "itemsize", None)
    if isinstance(size, int):
        return size
    return memoryview(obj).itemsize if obj is not None else 1


def _datatype(spec):
    """An MPI.Datatype from a Datatype or a typecode string; None otherwise."""
    if isinstance(spec, _DATATYPE):
        return spec
    if isinstance(spec, str):
        dt = _TYPEDICT.get(spec)
        if dt is None:
            raise ValueError(f"unknown MPI typecode {spec!r}")
        return dt
    return None


def _count_bytes(data, count, datatype) -> int:
    """Bytes of ``count`` items (count None: as many as fit in ``data``)."""
    if datatype is None:
        item = _itemsize(data)
        return raw_nbytes(data) if count is None else int(count) * item
    if count is None:
        extent = datatype.Get_extent()[1]
        count = raw_nbytes(data) // extent if extent else 0
    return int(count) * datatype.Get_size()


def buffer_bytes(spec) -> int:
    """Bytes sent from one buffer spec (point-to-point or a uniform collective)."""
    t = type(spec)
    if t is _NDARRAY:
        return spec.nbytes
    if t is list or t is tuple:
        return _spec_bytes(spec)
    return raw_nbytes(spec)


def _spec_bytes(spec) -> int:
    n = len(spec)
    if n == 0:
        return 0
    data = spec[0]
    if n == 1:
        return raw_nbytes(data)
    datatype = _datatype(spec[-1])
    if n == 2:
        if datatype is not None:
            return _count_bytes(data, None, datatype)
        return _count_bytes(data, _first(spec[1]), None)
    if n == 3:
        count = spec[1]
        if type(count) is int and datatype is not None:  # [buf, count, type]: the usual form
            return count * datatype.Get_size()
        return _count_bytes(data, _first(count), datatype)
    if n == 4:
        return _count_bytes(data, spec[1], datatype)
    raise ValueError(f"cannot read an MPI buffer spec with {n} entries")


def _first(count):
    """``count`` or the count of a ``(count, displ)`` pair."""
    if isinstance(count, (tuple, list)):
        return count[0]
    return count


def vector_bytes(spec, size: int) -> list[int]:
    """Bytes for each of ``size`` peers from a ``v`` or ``w`` spec.

    Forms: ``[buf, counts, displs, type]``, ``[buf, (counts, displs), type]``,
    ``[buf, counts, type]``, ``[buf, (counts, displs), [types]]`` (w), or a
    plain buffer split evenly as mpi4py does.
    """
    if type(spec) is not list and type(spec) is not tuple:
        each = raw_nbytes(spec) // size if size else 0
        return [each] * size
    data = spec[0]
    last = spec[-1]
    if len(spec) == 4:
        counts = spec[1]
    elif len(spec) == 3:
        counts = spec[1]
        if isinstance(counts, tuple) and len(counts) == 2 and not isinstance(counts[0], int):
            counts = counts[0]
    elif len(spec) == 2:
        return vector_bytes(data, size) if _datatype(last) is None else \
            [_count_bytes(data, None, _datatype(last)) // size] * size
    else:
        raise ValueError(f"cannot read an MPI vector buffer spec with {len(spec)} entries")
    if counts is None:
        return vector_bytes([data, last], size)
    counts = [int(c) for c in counts]
    if isinstance(last, (list, tuple)):  # w: one datatype per peer
        return [c * _datatype(dt).Get_size() for c, dt in zip(counts, last)]
    datatype = _datatype(last)
    item = datatype.Get_size() if datatype is not None else _itemsize(data)
    return [c * item for c in counts]
