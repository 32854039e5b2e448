# Binary min-heaps of (key, value) pairs in two flat arrays, ties to the
# smaller value: the replay's links, the growing's frontier, the chain
# repair's and the pair FM's searches.  Inline, so each module that cimports
# them compiles its own copy; the caller keeps the size and makes room.

from libc.stdint cimport int64_t, uint64_t

ctypedef fused heap_value:
    int64_t
    uint64_t


cdef inline bint before(double key_a, heap_value val_a, double key_b, heap_value val_b) noexcept nogil:
    """The heap's order: the smaller key, ties to the smaller value."""
    return key_a < key_b or (key_a == key_b and val_a < val_b)


cdef inline Py_ssize_t push(double* keys, heap_value* vals, Py_ssize_t size, double key,
                            heap_value val) noexcept nogil:
    """(key, val) added to the heap ``keys[:size]``/``vals[:size]``; returns the new size."""
    cdef Py_ssize_t i = size, up
    while i > 0:
        up = (i - 1) >> 1
        if not before(key, val, keys[up], vals[up]):
            break
        keys[i] = keys[up]
        vals[i] = vals[up]
        i = up
    keys[i] = key
    vals[i] = val
    return size + 1


cdef inline Py_ssize_t pop(double* keys, heap_value* vals, Py_ssize_t size, double* key,
                           heap_value* val) noexcept nogil:
    """The smallest (key, val) of the heap of ``size`` entries taken out into
    ``key``/``val``; returns the new size."""
    cdef Py_ssize_t i = 0, c
    cdef double last_key
    cdef heap_value last_val
    key[0] = keys[0]
    val[0] = vals[0]
    size -= 1
    last_key = keys[size]
    last_val = vals[size]
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and before(keys[c + 1], vals[c + 1], keys[c], vals[c]):
            c += 1
        if not before(keys[c], vals[c], last_key, last_val):
            break
        keys[i] = keys[c]
        vals[i] = vals[c]
        i = c
    keys[i] = last_key
    vals[i] = last_val
    return size
