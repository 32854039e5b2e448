"""Checks of what a caller passed to ``reorder_comm``, ``reorder_cart`` and
``reorder_dist_graph``, done locally on each rank and agreed by the caller
(``agree.agreed_arguments``) before any collective: a bad neighbour list, an
unknown method or settings that differ between ranks are then a
``ValueError`` on every rank, never a rank raising alone while the others
wait in the next collective, nor one rank's value silently used for all.
The checked values are plain Python data, so they can be compared across
ranks and given to MPI as they are.
"""

from __future__ import annotations

import math

import numpy as np
from mpi4py import MPI

from ..algorithms import objective_of
from ..algorithms.registry import is_method
from ..algorithms.distributed.swap_rounds import rounds_options
from ..algorithms.options import check_options
from ..limits import MAX_SEED

#: MPI weights and dimensions are C ints
C_INT_MAX = 2**31 - 1


def _integers(name: str, values, *, low: int, high: int) -> list[int]:
    try:
        arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of integers, not {type(values).__name__}") from None
    if arr.ndim != 1 and arr.size:
        raise ValueError(f"{name} must be a flat sequence of integers (got shape {arr.shape})")
    arr = arr.ravel()
    if arr.size and arr.dtype.kind not in "iu":
        integral = arr.dtype.kind == "f" and bool(np.all(np.isfinite(arr))) and bool(
            np.all(arr == np.round(arr)))
        if not integral:
            items = values.ravel().tolist() if isinstance(values, np.ndarray) else list(values)
            bad = [v for v in items if isinstance(v, (bool, np.bool_)) or not (
                isinstance(v, (int, np.integer)) or (isinstance(v, float) and v.is_integer()))]
            raise ValueError(f"{name}: {(bad or arr.tolist())[0]!r} is not an integer")
    out = [int(v) for v in arr.tolist()]
    wrong = [v for v in out if not low <= v <= high]
    if wrong:
        raise ValueError(f"{name}: {wrong[0]} is outside {low}..{high}")
    return out


def _weights(name: str, weights, count: int) -> list[int] | None:
    if weights is None or weights is MPI.UNWEIGHTED:
        return None
    out = _integers(name, weights, low=0, high=C_INT_MAX)
    if len(out) != count:
        raise ValueError(f"{name} has {len(out)} entries for {count} neighbours")
    return out


def cart_arguments(size: int, dims, periods, weights):
    """``(dims, periods, weights)`` of ``reorder_cart`` checked against
    ``size`` ranks; zeros in ``dims`` filled by ``MPI.Compute_dims``."""
    dims = _integers("dims", dims, low=0, high=C_INT_MAX)
    if not dims:
        raise ValueError("dims must name at least one dimension")
    fixed = int(np.prod([d for d in dims if d], dtype=object))
    if size % fixed or (fixed != size and 0 not in dims):
        raise ValueError(f"dims {dims} do not fit {size} ranks")
    dims = [int(d) for d in MPI.Compute_dims(size, dims)]
    if periods is None:
        periods = [False] * len(dims)
    periods = [bool(p) for p in periods]
    if len(periods) != len(dims):
        raise ValueError(f"periods has {len(periods)} entries for {len(dims)} dims")
    if weights is not None:
        try:
            w = np.asarray(weights, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            w = np.array([np.nan])
        if w.size != len(dims) or not np.all(np.isfinite(w)) or (w < 0).any():
            raise ValueError(f"weights must be {len(dims)} finite non-negative numbers, one per "
                             f"dimension (got {np.ravel(weights).tolist()!r})")
        weights = w.tolist()
    return dims, periods, weights


def dist_graph_arguments(size: int, sources, destinations, sourceweights, destweights):
    """The adjacency of one rank for ``reorder_dist_graph``: ranks of the
    communicator, one non-negative integer weight per neighbour (or None)."""
    src = _integers("sources", sources, low=0, high=size - 1)
    dst = _integers("destinations", destinations, low=0, high=size - 1)
    return (src, dst, _weights("sourceweights", sourceweights, len(src)),
            _weights("destweights", destweights, len(dst)))


REFINEMENTS = ("auto", "swap", "rounds", "none")


def reorder_settings(method, refine, distributed, seed, max_rounds, min_improvement, replicas,
                     kicks, multilevel, options, objective=None) -> dict:
    """The settings of ``reorder_comm``, checked: a known method and
    objective, a known refinement, a seed numpy takes, counts >= their
    least, a finite ``min_improvement`` >= 0, flags that are booleans,
    ``options`` of some method (``algorithms.options``)."""
    if not is_method(method):
        raise ValueError(f"method {method!r} is not a mapping method (rankmap.algorithms.method_names())")
    objective_of(method, objective)
    if refine in (None, False):
        refine = "none"
    if refine not in REFINEMENTS:
        raise ValueError(f"refine must be one of {', '.join(map(repr, REFINEMENTS))}, not {refine!r}")

    def flag(name, value, none_ok=False):
        if not (isinstance(value, (bool, np.bool_)) or (none_ok and value is None)):
            raise ValueError(f"{name} must be True or False{' or None' if none_ok else ''}, "
                             f"not {value!r}")
        return None if value is None else bool(value)

    def count(name, value, least, most):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or not least <= value <= most:
            raise ValueError(f"{name} must be an integer in {least}..{most}, not {value!r}")
        return int(value)

    if isinstance(min_improvement, (bool, np.bool_)) or not isinstance(
            min_improvement, (int, float, np.integer, np.floating)) or not (
            math.isfinite(min_improvement) and min_improvement >= 0):
        raise ValueError(f"min_improvement must be a finite number >= 0, not {min_improvement!r}")
    if options is not None and not isinstance(options, dict):
        raise ValueError(f"options must be a dict, not {type(options).__name__}")
    replicas, kicks = rounds_options(replicas, kicks)
    return dict(method=method, objective=objective, refine=refine,
                distributed=flag("distributed", distributed, True),
                seed=count("seed", seed, 0, MAX_SEED),
                max_rounds=count("max_rounds", max_rounds, 1, C_INT_MAX),
                min_improvement=float(min_improvement), replicas=replicas, kicks=kicks,
                multilevel=flag("multilevel", multilevel), options=dict(check_options(options or {})))
