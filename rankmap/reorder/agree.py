"""Collective safety: every rank takes the same branch.

A step runs its local work on every rank, then the ranks agree on the verdict
with one allreduce before anyone goes on.  If it failed anywhere, every rank
raises ``ReorderFailed`` carrying the message of the lowest failing rank, so
all ranks fall back the same way and print the same warning.  Steps must do
only local work (or collectives that already agree on failure, like the swap
rounds): a rank that raised before a collective the others entered would
leave them waiting.
"""

from __future__ import annotations

from mpi4py import MPI


class ReorderFailed(RuntimeError):
    """Raised on every rank, with the same message, when any rank failed."""


class RankmapWarning(UserWarning):
    """reorder_comm kept the original order (the message says why)."""


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def agree_on_failure(comm, error: str | None) -> None:
    """Collective: raise ``ReorderFailed`` on every rank when ``error`` is set
    on any rank (the lowest failing rank's message)."""
    size = comm.Get_size()
    first = comm.allreduce(comm.Get_rank() if error is not None else size, op=MPI.MIN)
    if first < size:
        raise ReorderFailed(comm.bcast(error, root=first))


def step(comm, what: str, fn, *args, **kwargs):
    """Run ``fn`` on every rank; agree whether it worked everywhere."""
    result, error = None, None
    try:
        result = fn(*args, **kwargs)
    except ReorderFailed as exc:
        error = str(exc)
    except Exception as exc:  # noqa: BLE001 - any failure must reach every rank
        error = f"{what} failed on rank {comm.Get_rank()}: {describe(exc)}"
    agree_on_failure(comm, error)
    return result


def root_step(comm, what: str, fn, *args, root: int = 0, **kwargs):
    """Run ``fn`` on ``root`` only; every rank learns whether it worked.
    Returns its result on ``root``, None elsewhere."""
    result, error = None, None
    if comm.Get_rank() == root:
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            error = f"{what} failed on rank {root}: {describe(exc)}"
    error = comm.bcast(error, root=root)
    if error is not None:
        raise ReorderFailed(error)
    return result


def same_everywhere(comm, what: str, value: float) -> None:
    """Collective: fail on every rank unless ``value`` is equal on all ranks."""
    lo = comm.allreduce(value, op=MPI.MIN)
    hi = comm.allreduce(value, op=MPI.MAX)
    if lo != hi:
        raise ReorderFailed(f"{what} differs between ranks ({lo!r} .. {hi!r}): pass the same "
                            "value on every rank")


def agreed_arguments(comm, check, *args):
    """Collective: ``check(*args)`` on every rank (it raises on a bad
    argument, else returns the checked values).  A bad argument on any rank
    raises ``ValueError`` on every rank with the lowest such rank's message,
    so a caller's mistake is an error everywhere, never a rank left waiting."""
    result, error = None, None
    try:
        result = check(*args)
    except Exception as exc:  # noqa: BLE001 - any failure must reach every rank
        error = f"{exc} (on rank {comm.Get_rank()})"
    try:
        agree_on_failure(comm, error)
    except ReorderFailed as exc:
        raise ValueError(str(exc)) from None
    return result
