"""Mapping methods behind one interface: ``map_tasks(graph, topology, method=...)``.

A method is a function ``fn(graph, topology, *, seed, eps, **options)`` that
returns ``pe_of_task``; ``register`` adds it under a name.  ``map_tasks``
times it, validates the result and wraps it in a ``Mapping``, so every method
is checked the same way.  Algorithms never import MPI.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:  # annotations only: importing one module here must not load scipy
    from ..graph import CommGraph
from ..mapping import Mapping, validate_mapping
from ..topology import Topology


@dataclass
class MethodSpec:
    name: str
    fn: Callable
    description: str
    machines: tuple = ("tree",)  # "tree" (Topology) and/or "mesh" (MeshTopology)


class _Registry(dict):
    """The methods by name.  Every module of this package registers its
    methods on import; the registry imports them all on its first lookup, not
    when the package is imported, so a process that needs one module (an MPI
    rank of the distributed refinement imports ``distributed.swap_rounds``) does not load
    numba, KaHIP and Mt-KaHyPar (~55 MB and ~0.4 s per process)."""

    def _all(self):
        _import_methods()
        return self

    def __contains__(self, name):
        return dict.__contains__(self._all(), name)

    def __getitem__(self, name):
        return dict.__getitem__(self._all(), name)

    def __iter__(self):
        return dict.__iter__(self._all())

    def __len__(self):
        return dict.__len__(self._all())

    def get(self, name, default=None):
        return dict.get(self._all(), name, default)

    def keys(self):
        return dict.keys(self._all())

    def values(self):
        return dict.values(self._all())

    def items(self):
        return dict.items(self._all())


METHODS: dict[str, MethodSpec] = _Registry()


def register(name: str, description: str, machines: tuple = ("tree",)):
    """Decorator: make ``fn`` available as ``map_tasks(..., method=name)``;
    ``machines`` says which topology kinds it maps onto."""

    def deco(fn):
        if dict.__contains__(METHODS, name):  # a plain look: no import while importing
            raise ValueError(f"mapping method {name!r} registered twice")
        METHODS[name] = MethodSpec(name, fn, description, tuple(machines))
        return fn

    return deco


def method_names(topology=None) -> list[str]:
    """All method names, or those that map onto ``topology``'s kind."""
    if topology is None:
        return sorted(METHODS)
    kind = "tree" if isinstance(topology, Topology) else "mesh"
    return sorted(n for n, spec in METHODS.items() if kind in spec.machines)


def map_tasks(graph: CommGraph, topology: Topology, method: str = "auto", seed: int = 0,
              eps: float | None = None, **options) -> Mapping:
    """Map the tasks of ``graph`` onto the PEs of ``topology``.

    One-to-one when ``graph.n <= topology.n_pes`` and ``eps`` is None;
    otherwise many-to-one with PE loads within (1 + eps) of balance.
    Option ``refine=True`` (``refine_depth=d``) passes the method's result
    through swap refinement (``refine.swap_refine``), ``refine="moves"``
    through move refinement (``move_refine.move_refine``, tree topologies)."""
    if method not in METHODS:
        raise ValueError(f"unknown mapping method {method!r}; choose from {', '.join(method_names())}")
    if graph.n > topology.n_pes and eps is None:
        from ..mapping import DEFAULT_EPS

        eps = DEFAULT_EPS
    kind = "tree" if isinstance(topology, Topology) else "mesh"
    if kind not in METHODS[method].machines:
        raise ValueError(f"method {method!r} does not map onto a {kind} topology; "
                         f"choose from {', '.join(method_names(topology))}")
    refine = options.pop("refine", False)
    refine_depth = options.pop("refine_depth", None)
    start = time.perf_counter()
    pe = METHODS[method].fn(graph, topology, seed=seed, eps=eps, **options)
    if isinstance(refine, str) and refine.strip().lower() == "moves":  # many-to-one: single-task moves
        from .refine.moves import move_refine

        pe = move_refine(graph, topology, pe, seed=seed, eps=eps, time_limit=options.get("time_limit"))
    elif refine:  # any method's result may go through swap refinement
        from .refine.swaps import refine_option, swap_refine_option_depth, swap_refine

        if refine_option(refine):
            pe = swap_refine(graph, topology, pe, seed=seed, eps=eps,
                             depth=swap_refine_option_depth(refine_depth),
                             time_limit=options.get("time_limit"))
    elapsed = time.perf_counter() - start
    pe = np.asarray(pe, dtype=np.int64)
    validate_mapping(pe, graph, topology, eps=eps)
    return Mapping(pe, method=method, seed=seed, time_s=elapsed)


_imported = False


def _import_methods() -> None:
    """Import every module of this package and its family subpackages once
    (each registers its methods)."""
    global _imported
    if _imported:
        return
    _imported = True
    import importlib
    import pkgutil

    try:
        for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
            importlib.import_module(info.name)
    except BaseException:
        _imported = False  # the next lookup raises the same error, never a partial registry
        raise
