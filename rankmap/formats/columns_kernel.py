"""Plain integer text scanned in one compiled pass (numba).

``columns.scan_numbers`` finds the numbers of a block with a dozen numpy
passes over its bytes and parses them with ``numpy.fromstring``: about
75 MB/s on one core, 7.5 s for the 560 MB METIS file of a 2^24-task
stencil.  Text of digits and separators alone (every METIS file without
comments, edge lists of integers) is read here in a single pass instead;
anything else (another character, a carriage return, a number past int64)
is declined and the numpy path reads the block, so that path alone decides
what the text means.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.jit import njit

INT64_MAX = np.iinfo(np.int64).max


@njit(cache=True, nogil=True)
def scan_digits(data, is_sep, values, counts):
    """The numbers of ``data`` (bytes: digits and ``is_sep`` separators)
    into ``values`` and how many start on each line into ``counts`` (a last
    line without its newline counted too); returns (numbers, lines), or
    (-1, -1) where the block holds anything else: a byte that is neither,
    a carriage return (its line rules are the numpy path's), a number of
    int64's largest or past it."""
    n_values, n_lines, here = 0, 0, 0
    inside, value = False, 0
    for i in range(data.size):
        c = data[i]
        if c >= 48 and c <= 57:
            digit = c - 48
            if value > (INT64_MAX - 1 - digit) // 10:  # int64's largest too: numpy reads past it as that
                return -1, -1
            value = value * 10 + digit
            if not inside:
                inside = True
                here += 1
            continue
        if c == 13 or not is_sep[c]:
            return -1, -1
        if inside:
            values[n_values] = value
            n_values += 1
            inside, value = False, 0
        if c == 10:
            counts[n_lines] = here
            n_lines += 1
            here = 0
    if inside:
        values[n_values] = value
        n_values += 1
    if data.size and data[data.size - 1] != 10:
        counts[n_lines] = here
        n_lines += 1
    return n_values, n_lines
