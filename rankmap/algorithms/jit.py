"""numba's ``njit`` with an on-disk cache that works on any install.

The compiled kernels use ``cache=True``: the first run on a machine pays
their compilation (seconds), later runs load it (see docs/time-limits.md);
``rankmap compile`` fills the cache for every kernel at install time.
numba keeps that cache next to the sources (``__pycache__``) or, where the
install is read-only, in the user's cache directory; where neither can be
written (a system-wide install and a read-only home, as on some compute
nodes) it would refuse to define the kernels at all.  Then the cache goes to
a per-user directory under the system's temporary directory.  A
``NUMBA_CACHE_DIR`` the user sets always wins.
"""

from __future__ import annotations

import os
import tempfile

import numba
from numba import njit

__all__ = ["njit"]

#: the directories, from this package, whose modules hold cached kernels (the package root: ``cost_kernel``)
_KERNEL_DIRS = ("construct", "refine", "mesh", os.pardir, os.path.join(os.pardir, "formats"))


def _writable(path: str) -> bool:
    """Whether ``path`` can be written, or created under its nearest existing parent."""
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.access(path, os.W_OK)


def _fallback_cache_dir() -> str | None:
    """The directory to cache in when numba has none it can write, else None."""
    if numba.config.CACHE_DIR:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    if all(_writable(os.path.join(here, d, "__pycache__")) for d in _KERNEL_DIRS):
        return None
    from numba.misc.appdirs import AppDirs

    if _writable(AppDirs(appname="numba", appauthor=False).user_cache_dir):
        return None
    return os.path.join(tempfile.gettempdir(), f"rankmap-numba-{os.getuid()}")


_fallback = _fallback_cache_dir()
if _fallback is not None:
    numba.config.CACHE_DIR = _fallback
