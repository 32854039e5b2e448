# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Plain integer text scanned in one compiled pass.

``columns.scan_numbers`` finds the numbers of a block with a dozen numpy
passes over its bytes and parses them with ``numpy.fromstring``.  Text of
digits and separators alone (every METIS file without comments, edge lists
of integers) is read here in a single pass instead; anything else (another
character, a carriage return, a number past int64) is declined and the
numpy path reads the block, so that path alone decides what the text
means.  Releases the GIL: large files are scanned a block per core.
"""

from libc.stdint cimport int64_t, uint8_t
from libcpp cimport bool as cbool

cdef int64_t INT64_MAX = 9223372036854775807


def scan_digits(const uint8_t[::1] data, const cbool[::1] is_sep, int64_t[::1] values, int64_t[::1] counts):
    """The numbers of ``data`` (bytes: digits and ``is_sep`` separators)
    into ``values`` and how many start on each line into ``counts`` (a last
    line without its newline counted too); returns (numbers, lines), or
    (-1, -1) where the block holds anything else: a byte that is neither,
    a carriage return (its line rules are the numpy path's), a number of
    int64's largest or past it."""
    cdef int64_t n_values = 0, n_lines = 0, here = 0, value = 0, digit
    cdef Py_ssize_t i, size = data.shape[0]
    cdef bint inside = False, declined = False
    cdef uint8_t c
    with nogil:
        for i in range(size):
            c = data[i]
            if c >= 48 and c <= 57:
                digit = c - 48
                if value > (INT64_MAX - 1 - digit) // 10:  # int64's largest too: numpy reads past it as that
                    declined = True
                    break
                value = value * 10 + digit
                if not inside:
                    inside = True
                    here += 1
                continue
            if c == 13 or not is_sep[c]:
                declined = True
                break
            if inside:
                values[n_values] = value
                n_values += 1
                inside, value = False, 0
            if c == 10:
                counts[n_lines] = here
                n_lines += 1
                here = 0
        if not declined:
            if inside:
                values[n_values] = value
                n_values += 1
            if size and data[size - 1] != 10:
                counts[n_lines] = here
                n_lines += 1
    if declined:
        return -1, -1
    return n_values, n_lines
