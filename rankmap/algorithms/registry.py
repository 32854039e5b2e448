"""The table of mapping methods: ``register`` adds a method under a name,
``METHODS`` finds it, importing only the module that defines it.

The table sits below every method module (each registers itself on import)
and below ``map_tasks`` (which looks methods up), so neither imports the
other through the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..topology import Topology


@dataclass
class MethodSpec:
    name: str
    fn: Callable
    description: str
    machines: tuple = ("tree",)  # "tree" (Topology) and/or "mesh" (MeshTopology)


class _Registry(dict):
    """The methods by name.  Every module of ``rankmap.algorithms`` registers
    its methods on import.  Looking up a built-in method imports only the
    module that registers it (``_MODULE_OF``), so ``rankmap map --method identity``
    loads neither the search kernels nor KaHIP nor Mt-KaHyPar, and an MPI rank of the
    distributed refinement only ``distributed.swap_rounds``; listing the
    methods (iteration) or a name outside the table imports them all."""

    def _all(self):
        _import_methods()
        return self

    def _with(self, name):
        if not dict.__contains__(self, name):
            module = _MODULE_OF.get(name) if isinstance(name, str) else None
            if module is None:
                _import_methods()
            else:
                import importlib

                importlib.import_module(f"{__package__}.{module}")
        return self

    def __contains__(self, name):
        return dict.__contains__(self._with(name), name)

    def __getitem__(self, name):
        return dict.__getitem__(self._with(name), name)

    def __iter__(self):
        return dict.__iter__(self._all())

    def __len__(self):
        return dict.__len__(self._all())

    def get(self, name, default=None):
        return dict.get(self._with(name), name, default)

    def keys(self):
        return dict.keys(self._all())

    def values(self):
        return dict.values(self._all())

    def items(self):
        return dict.items(self._all())


#: the module (in this package) that registers each built-in method
_MODULE_OF = {
    **dict.fromkeys(("identity", "random", "greedy", "greedy_allc"), "construct.baselines"),
    **dict.fromkeys(("packed", "round_robin"), "construct.placements"),
    **dict.fromkeys(("mpipp1", "mpipp5"), "construct.mpipp"),
    "treematch": "construct.treematch", "multisection": "construct.multisection",
    "multilevel": "construct.multilevel", "grow": "construct.tree_growing",
    "auto": "portfolio.one_to_one", "swap": "refine.swaps", "bottleneck": "refine.bottleneck",
    **dict.fromkeys(("bft", "mht", "affn", "coce", "coce_mht", "pairs", "mesh_auto"), "mesh.heuristics"),
    "mesh_bisect": "mesh.bisect", "curve": "mesh.curve",
}


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


def is_method(name) -> bool:
    """Whether ``name`` names a mapping method, importing nothing: each rank
    of ``reorder_comm`` checks its argument, one rank maps."""
    return isinstance(name, str) and (name in _MODULE_OF or dict.__contains__(METHODS, name))


def method_names(topology=None) -> list[str]:
    """All method names, or those that map onto ``topology``'s kind."""
    if topology is None:
        return sorted(METHODS)
    kind = "tree" if isinstance(topology, Topology) else "mesh"
    return sorted(n for n, spec in METHODS.items() if kind in spec.machines)


_imported = False


def _import_methods() -> None:
    """Import every module of ``rankmap.algorithms`` and its family
    subpackages once (each registers its methods)."""
    global _imported
    if _imported:
        return
    _imported = True
    import importlib
    import pkgutil

    try:
        for info in pkgutil.walk_packages([str(Path(__file__).parent)], prefix=f"{__package__}."):
            importlib.import_module(info.name)
    except BaseException:
        _imported = False  # the next lookup raises the same error, never a partial registry
        raise
