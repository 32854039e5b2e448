"""Worker processes for independent sub-problems (multisection's subtrees,
the distributed path's sets), the same result for any number of workers.

The processes come from a fork server (forking the caller could copy
Mt-KaHyPar's thread pool in a locked state) that has the caller's module
loaded already.  Submit under ``without_main()``: like spawn, the fork
server re-runs the main module in every child (a script without an ``if
__name__ == "__main__":`` guard would map again, or start processes while
bootstrapping); the workers need only this package.
"""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager


def fork_server_pool(workers: int, preload: str, initializer=None, initargs=()):
    """A ``ProcessPoolExecutor`` of ``workers`` processes started by a fork
    server that imported module ``preload``."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([preload])
    return ProcessPoolExecutor(max_workers=int(workers), mp_context=context, initializer=initializer,
                               initargs=initargs)


@contextmanager
def without_main():
    """Hide the caller's ``__main__`` while worker processes start."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main
