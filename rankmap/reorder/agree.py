"""Collective safety: every rank takes the same branch.

A step runs its local work on every rank, then the ranks agree on the verdict
with one allreduce before anyone goes on.  If it failed anywhere, every rank
raises ``ReorderFailed`` carrying the message of the lowest failing rank, so
all ranks fall back the same way.  Steps must do only local work (or
collectives that already agree on failure, like the swap rounds): a rank that
raised before a collective the others entered would leave them waiting.

An interruption (``SystemExit``, ``KeyboardInterrupt``: anything that is not
an ``Exception``) is agreed the same way and then raised on every rank: the
rank where it happened re-raises its own, the others raise ``SystemExit`` with
the same exit status (a string status becomes 1) or ``KeyboardInterrupt``.  A
program that asked to stop on one rank stops on all of them instead of
leaving the others in the next collective.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from . import idle


class ReorderFailed(RuntimeError):
    """Raised on every rank, with the same message, when any rank failed."""


class RankmapWarning(UserWarning):
    """reorder_comm kept the original order (the message says why)."""


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _stop_signal(exc: BaseException):
    """What the other ranks raise for ``exc``: ("exit", status) or ("interrupt", None)."""
    if isinstance(exc, SystemExit):
        code = exc.code
        return "exit", code if code is None or isinstance(code, int) else 1
    return "interrupt", None


def agree_on_failure(comm, error: str | None, interrupt: BaseException | None = None) -> None:
    """Collective: raise ``interrupt`` (see the module docstring) on every
    rank when any rank has one, else ``ReorderFailed`` on every rank when
    ``error`` is set on any rank (the lowest failing rank's message)."""
    size, rank = comm.Get_size(), comm.Get_rank()
    mine = np.array([rank if interrupt is not None else size, rank if error is not None else size],
                    dtype=np.int64)
    first = np.empty_like(mine)
    comm.Allreduce(mine, first, op=MPI.MIN)
    if first[0] < size:
        kind, code = comm.bcast(_stop_signal(interrupt) if rank == first[0] else None,
                                root=int(first[0]))
        if interrupt is not None:
            raise interrupt
        raise SystemExit(code) if kind == "exit" else KeyboardInterrupt()
    if first[1] < size:
        raise ReorderFailed(comm.bcast(error, root=int(first[1])))


def step(comm, what: str, fn, *args, **kwargs):
    """Run ``fn`` on every rank; agree whether it worked everywhere."""
    result, error, interrupt = None, None, None
    try:
        result = fn(*args, **kwargs)
    except ReorderFailed as exc:
        error = str(exc)
    except Exception as exc:  # noqa: BLE001 - any failure must reach every rank
        error = f"{what} failed on rank {comm.Get_rank()}: {describe(exc)}"
    except BaseException as exc:  # noqa: BLE001 - agreed, then raised on every rank
        interrupt = exc
    agree_on_failure(comm, error, interrupt)
    return result


def root_step(comm, what: str, fn, *args, root: int = 0, **kwargs):
    """Run ``fn`` on ``root`` only; every rank learns whether it worked
    (the others wait without spinning: ``idle``).  Returns its result on
    ``root``, None elsewhere."""
    result, error, interrupt = None, None, None
    if comm.Get_rank() == root:
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            error = f"{what} failed on rank {root}: {describe(exc)}"
        except BaseException as exc:  # noqa: BLE001 - agreed, then raised on every rank
            interrupt = exc
    idle.barrier(comm)
    verdict = comm.bcast((error, None if interrupt is None else _stop_signal(interrupt)), root=root)
    if verdict[1] is not None:
        if interrupt is not None:
            raise interrupt
        kind, code = verdict[1]
        raise SystemExit(code) if kind == "exit" else KeyboardInterrupt()
    if verdict[0] is not None:
        raise ReorderFailed(verdict[0])
    return result


def same_everywhere(comm, what: str, value: float) -> None:
    """Collective: fail on every rank unless ``value`` is equal on all ranks."""
    lo = comm.allreduce(value, op=MPI.MIN)
    hi = comm.allreduce(value, op=MPI.MAX)
    if lo != hi:
        raise ReorderFailed(f"{what} differs between ranks ({lo!r} .. {hi!r}): pass the same "
                            "value on every rank")


def agreed_arguments(comm, check, *args, same: str | None = None):
    """Collective: ``check(*args)`` on every rank (it raises on a bad
    argument, else returns the checked values as plain Python data).  With
    ``same`` (what the values are, for the message) the checked values must
    also equal rank 0's.  A bad argument on any rank raises ``ValueError`` on
    every rank with the lowest such rank's message, so a caller's mistake is
    an error everywhere, never a rank left waiting."""
    rank = comm.Get_rank()
    result, error = None, None
    try:
        result = check(*args)
    except Exception as exc:  # noqa: BLE001 - any failure must reach every rank
        error = f"{exc} (on rank {rank})"
    if same is not None:
        reference = comm.bcast(result if error is None else None, root=0)
        if error is None and reference is not None and result != reference:
            mine, theirs = _difference(result, reference)
            error = (f"{same} differ between ranks: {mine} on rank {rank}, {theirs} on rank 0; "
                     "pass the same on every rank")
    try:
        agree_on_failure(comm, error)
    except ReorderFailed as exc:
        raise ValueError(str(exc)) from None
    return result


def _difference(mine, reference) -> tuple[str, str]:
    """The values that differ, as text: only the differing keys of two dicts."""
    if isinstance(mine, dict) and isinstance(reference, dict):
        keys = [k for k in dict.fromkeys([*mine, *reference]) if mine.get(k) != reference.get(k)]
        return (", ".join(f"{k}={mine.get(k)!r}" for k in keys),
                ", ".join(f"{k}={reference.get(k)!r}" for k in keys))
    return repr(mine), repr(reference)


def warn_once(comm, message: str | None, category=RankmapWarning, stacklevel: int = 3) -> None:
    """Collective: one warning per job instead of one per rank.  Rank 0
    warns with the message of the lowest rank that has one and the number of
    ranks concerned."""
    import warnings

    count = comm.allreduce(int(message is not None), op=MPI.SUM)
    if not count:
        return
    size = comm.Get_size()
    first = comm.allreduce(comm.Get_rank() if message is not None else size, op=MPI.MIN)
    text = comm.bcast(message, root=first) if first != 0 else message
    if comm.Get_rank() == 0:
        concerned = f"all {size} ranks" if count == size else f"{count} of {size} ranks"
        warnings.warn(f"{text} ({concerned})", category, stacklevel=stacklevel)
