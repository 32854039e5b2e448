"""The compiled kernels give what the kernels they replaced gave, bit for bit.

Each file of tests/data/kernels holds calls recorded while mapping real
instances (its README says how): the arguments, the arrays the kernel
wrote, the values it returned.  Every call is made again here on copies of
the arguments; floats are compared exactly, since the searches' choices
follow from every rounding (a sum in another order can pick another swap).
"""

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parent / "data" / "kernels"

#: what each kernel may write: the arguments (by position) compared after the call
WRITES = {
    "uniform_pass": (5, 6), "row_costs": (6,), "swap_pass": (3, 10), "mesh_swap_pass": (3, 10),
    "best_swaps_of": (3, 6, 9, 10), "ball_pairs": (5, 7, 8, 9), "exchange_rounds": (4, 5, 6),
    "tree_exchange_rounds": (4, 5, 6), "move_pass": (3, 8, 11, 12, 13), "pair_fm": (4,), "grow": (8,),
    "grow_blocks": (4, 5), "refine_matched": (3,), "move_along_chains": (3,), "scan_digits": (2, 3),
    "improve_split": (4,), "group_loads": (5,), "uniform_tree": (2, 3, 4, 5, 6, 7, 8, 9),
}
#: work space a kernel writes whatever it held (not compared)
SCRATCH = {"refine_matched": (8,)}
MODULES = {"_kernels": "rankmap._kernels", "algorithms.refine": "rankmap.algorithms.refine._kernels",
           "algorithms.construct": "rankmap.algorithms.construct._kernels", "formats": "rankmap.formats._columns"}


def _kernel(path: Path):
    module, name = path.stem.rsplit(".", 1)
    return getattr(importlib.import_module(MODULES[module]), name), name


def _value(data, key: str, kind):
    if isinstance(kind, dict):
        return tuple(np.array(data[f"{key}.{k}"]) for k in range(kind["tuple"]))
    if kind == "none":
        return None
    x = data[key]
    return {"array": lambda: np.array(x), "int": lambda: int(x), "float": lambda: float(x),
            "bool": lambda: bool(x)}[kind]()


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.asarray(a).shape == np.asarray(b).shape and np.array_equal(a, b)
    return a == b and type(a) is type(b) or (isinstance(a, float) and float(a) == float(b))


CASES = [(path, c) for path in sorted(DATA.glob("*.npz"))
         for c in range(len(json.loads(str(np.load(path)["spec"]))))]


@pytest.mark.parametrize("path, call", CASES, ids=[f"{p.stem}-{c}" for p, c in CASES])
def test_a_kernel_gives_the_recorded_result(path, call):
    kernel, name = _kernel(path)
    with np.load(path) as data:
        spec = json.loads(str(data["spec"]))[call]
        args = [_value(data, f"c{call}.a{j}", kind) for j, kind in enumerate(spec["args"])]
        expected = [_value(data, f"c{call}.o{j}", kind) for j, kind in enumerate(spec["out"])]
        after = {j: np.array(data[f"c{call}.r{j}"]) for j in WRITES.get(name, ())}
        untouched = {j: a.copy() for j, a in enumerate(args)
                     if isinstance(a, np.ndarray) and j not in after and j not in SCRATCH.get(name, ())}
    got = kernel(*args)
    got = list(got) if spec["tuple_out"] else [got]
    assert len(got) == len(expected) and all(_same(g, e) for g, e in zip(got, expected)), (got, expected)
    for j, want in after.items():
        assert np.array_equal(args[j], want), f"argument {j} differs"
    for j, before in untouched.items():
        assert np.array_equal(args[j], before), f"argument {j} changed"


def test_every_kernel_has_recorded_calls():
    """A kernel added to a compiled module gets recorded calls too (a class
    is a kernel's state between calls: its calls are recorded through the
    function that makes them in one, e.g. ``grow_blocks``)."""
    covered = {_kernel(path)[1] for path in DATA.glob("*.npz")}
    for module in MODULES.values():
        mod = importlib.import_module(module)
        public = {name for name, obj in vars(mod).items() if callable(obj) and not name.startswith("_")
                  and not isinstance(obj, type) and getattr(obj, "__module__", None) == module}
        assert public <= covered, sorted(public - covered)
