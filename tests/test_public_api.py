"""The public names: listed once by dir(), each function and class with a
docstring (the API pages of the docs site are generated from them)."""

import inspect

import rankmap
import rankmap.formats
import rankmap.profile
import rankmap.topology
import rankmap.trace


def test_dir_lists_each_public_name_once():
    for name in ("map_tasks", "reorder_comm", "topology_from_strings"):
        getattr(rankmap, name)  # a lazy name, once loaded, is also a global
    names = dir(rankmap)
    assert len(names) == len(set(names))
    assert set(rankmap.__all__) <= set(names)


def test_public_functions_have_docstrings():
    undocumented = []
    for module in (rankmap, rankmap.topology, rankmap.formats, rankmap.profile):
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and not inspect.getdoc(obj):
                undocumented.append(f"{module.__name__}.{name}")
    assert undocumented == []
