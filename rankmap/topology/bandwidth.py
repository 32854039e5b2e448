"""Link bandwidths of a machine: the rates and latencies users write, and
the bandwidth of every link where the machine description gives none.

A tree link joins a node to its parent and carries, in each direction, the
bytes that leave (up) or enter (down) the node's subtree; ``TreeNode.uplink``
is its bandwidth in bytes per second where the description says it (a
cluster file's ``network ... bandwidths 50mbit``: the links of the nodes
into their switch).  Links without one get a bandwidth in inverse
proportion to the distance of the level they lead into (a byte that costs
100 between nodes crosses a link 100 times slower than one that costs 1
inside a node), scaled to the given bandwidths (the smallest bandwidth x
distance of them), or, when none is given, one byte per unit of time per
unit of distance: times are then relative (``unit`` is empty).  A level of
distance 0 (slots sharing a PE) and the root cost no time.

Inside a node whose inside is a link matrix (GPU links) the links are those
of the tree approximating it (``Topology.tree_only``).  On a mesh or torus
every link has the same bandwidth (one unit).
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass

import numpy as np

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9,
               "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9}


def _quantity(text: str, units: dict, what: str, example: str) -> float:
    """A number and one of ``units`` (``"200mbit"``) times that unit's scale."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]+)\s*", str(text))
    if not m or m.group(2).lower() not in units:
        raise ValueError(f"{what} {text!r}: expected a number and a unit ({', '.join(units)}), e.g. {example}")
    return float(m.group(1)) * units[m.group(2).lower()]


def _levels(text: str, parse) -> list:
    """``"a:b"`` (or ``"a,b"``) -> one parsed value per level, innermost first."""
    return [parse(x) for x in str(text).replace(",", ":").split(":")]


def parse_rate(text: str) -> int:
    """``"200mbit"`` -> 200_000_000 bits per second (tc's units; ``mbps`` = megabytes/s)."""
    bits = _quantity(text, _RATE_UNITS, "bandwidth", "200mbit")
    if bits < 8000:
        raise ValueError(f"bandwidth {text!r}: at least 8kbit")
    return int(bits)


def parse_bandwidths(text: str) -> list[float]:
    """``"50mbit:10gbit"`` -> bytes per second of each level, innermost first."""
    return _levels(text, lambda x: parse_rate(x) / 8)


_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def parse_latency(text: str) -> float:
    """``"1.5us"`` -> 1.5e-6 seconds (units ns, us, ms, s)."""
    seconds = _quantity(text, _TIME_UNITS, "latency", "1.5us")
    if not seconds < 1.0:
        raise ValueError(f"latency {text!r}: under a second, e.g. 1.5us")
    return seconds


def parse_latencies(text: str) -> list[float]:
    """``"1.2us:1.5us"`` -> seconds of each level, innermost first."""
    return _levels(text, parse_latency)


def format_latency(seconds: float) -> str:
    """1.5e-6 -> ``"1.5us"`` (what ``parse_latency`` reads back)."""
    for unit, scale in (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3)):
        if seconds < 1000 * scale:
            return f"{seconds / scale:.4g}{unit}"
    return f"{seconds:.4g}s"


@dataclass(frozen=True)
class LinkBandwidths:
    """Seconds per byte of every directed link (``inverse``, numbered as
    ``cost.all_link_loads``: 0 where a link costs no time) and the unit of
    the times they give ("s", or "" for relative times)."""

    inverse: np.ndarray
    unit: str

    def times(self, loads) -> np.ndarray:
        return np.asarray(loads, dtype=np.float64) * self.inverse


_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a tree's model, made once (2 s at 2^24 PEs)


def link_bandwidths(topology) -> LinkBandwidths:
    """The bandwidth model of ``topology`` (module docstring)."""
    from .tree import Topology

    if not isinstance(topology, Topology):  # a mesh or torus: uniform links
        size = topology.link_loads(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)).size
        return LinkBandwidths(np.ones(size), "")
    model = _MODELS.get(topology)
    if model is None or model[0] is not topology.node_uplink:  # the given bandwidths replaced: made anew
        model = _MODELS[topology] = (topology.node_uplink, _tree_bandwidths(topology))
    return model[1]


def _tree_bandwidths(topology) -> LinkBandwidths:
    parent, n = topology.parent, topology.n_nodes
    both = np.empty(2 * n)  # the up links, then the down links: the same inverse
    level = both[:n]  # each node's parent's distance (the root, node 0 in preorder, has no link above it)
    level[0] = 0.0
    np.take(topology.node_distance, parent[1:], out=level[1:])
    given = topology.node_uplink
    known = np.isfinite(given) & (parent >= 0)
    absolute = bool(known.any())  # some bandwidth given: times in seconds
    if absolute:
        anchors = known & (level > 0)
        scale = float(np.min(given[anchors] * level[anchors])) if anchors.any() else 1.0
        with np.errstate(divide="ignore"):
            level[:] = np.where(known, 1.0 / np.where(known, given, 1.0), np.where(level > 0, level / scale, 0.0))
        level[0] = 0.0
    # else relative times: each link's inverse its level's distance (distances are >= 0)
    both[n:] = level
    return LinkBandwidths(both, "s" if absolute else "")
