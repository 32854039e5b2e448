"""Binary min-heaps of (key, value) pairs in two flat arrays (numba), ties
to the smaller value: the growing's frontier and the replay's links.  Two
flat arrays, not numba's heapq on a list of tuples (12 % slower in the
growing); the caller keeps the size and makes room."""

from __future__ import annotations

from .algorithms.jit import njit


@njit(cache=True, nogil=True)
def before(key_a, val_a, key_b, val_b) -> bool:
    """The heap's order: the smaller key, ties to the smaller value."""
    return key_a < key_b or (key_a == key_b and val_a < val_b)


@njit(cache=True, nogil=True)
def push(keys, vals, size, key, val):
    """(key, val) added to the heap ``keys[:size]``/``vals[:size]`` (room
    checked by the caller); returns the new size."""
    i = size
    while i > 0:
        up = (i - 1) >> 1
        if not before(key, val, keys[up], vals[up]):
            break
        keys[i], vals[i] = keys[up], vals[up]
        i = up
    keys[i], vals[i] = key, val
    return size + 1


@njit(cache=True, nogil=True)
def pop(keys, vals, size):
    """The smallest (key, val) of the heap of ``size`` entries, taken out;
    returns it and the new size."""
    key, val = keys[0], vals[0]
    size -= 1
    last_key, last_val = keys[size], vals[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and before(keys[c + 1], vals[c + 1], keys[c], vals[c]):
            c += 1
        if not before(keys[c], vals[c], last_key, last_val):
            break
        keys[i], vals[i] = keys[c], vals[c]
        i = c
    keys[i], vals[i] = last_key, last_val
    return key, val, size
