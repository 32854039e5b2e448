"""Method options a caller passes by name (``--option KEY=VALUE``,
``reorder_comm(options=...)``), checked before any method runs.

Methods swallow keywords they do not use (``**_``), so a misspelt key would
otherwise be ignored silently.  A key must be a parameter of some registered
method or one ``map_tasks`` itself takes; values must be finite, and counts
(``workers``, ``threads``, ...) whole numbers >= 1.
"""

from __future__ import annotations

import inspect
import math

#: keys ``map_tasks`` and the search budget take besides the methods' own
#: (``coarse_max``, ``coarse_time_limit``: reorder_comm's distributed multilevel path)
GENERAL = ("refine", "refine_depth", "time_limit", "work_limit", "coarse_max", "coarse_time_limit")
#: options that count something: whole numbers >= 1
COUNTS = ("workers", "threads", "tries", "rounds", "replicas", "max_tasks", "cycles", "coarse_max", "levels",
          "max_pairs")
#: budgets: finite and > 0
BUDGETS = ("time_limit", "work_limit", "coarse_time_limit")


def option_names() -> set[str]:
    """Every option key some registered method (or ``map_tasks``) takes."""
    from . import METHODS

    names = set(GENERAL)
    for spec in METHODS.values():
        for p in inspect.signature(spec.fn).parameters.values():
            if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD:
                names.add(p.name)
    return names - {"graph", "topology", "seed", "eps", "deadline"}  # deadline: map_tasks makes it


def check_options(options: dict) -> dict:
    """``options`` unchanged when every key is known and every value sane;
    else ``ValueError`` naming the key."""
    # the general keys (a budget: what reorder_comm's callers pass) are known
    # without loading every method: that costs each rank scipy's, KaHIP's
    # and Mt-KaHyPar's imports (CPU and tens of MB)
    known = set(GENERAL) if set(options) <= set(GENERAL) else option_names()
    for key, value in options.items():
        if key not in known:
            raise ValueError(f"unknown option {key!r} (options: {', '.join(sorted(known))})")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"option {key}={value!r}: not a finite number")
        if key in COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"option {key}={value!r}: expected a whole number >= 1")
        if key in BUDGETS and value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise ValueError(f"option {key}={value!r}: expected a number of seconds > 0")
    return options
