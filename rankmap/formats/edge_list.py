"""Edge lists: ``src dst bytes [messages]`` per line, 0-based, CSV or spaces."""

from __future__ import annotations

import re

import numpy as np

from ..graph import CommGraph
from .common import _err, _num


def read_edge_list(path: str) -> CommGraph:
    src, dst, nbytes, msgs = [], [], [], []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            fields = [t for t in re.split(r"[,\s]+", text) if t]
            if not src and not re.fullmatch(r"[-+0-9.eE]+", fields[0]):
                continue  # a header row such as "src,dst,bytes,count"
            if len(fields) not in (3, 4):
                raise _err(path, no, f"expected 'src dst bytes [messages]', got {len(fields)} fields")
            try:
                s, d = int(fields[0]), int(fields[1])
                b = float(fields[2])
                c = float(fields[3]) if len(fields) == 4 else np.nan
            except ValueError:
                raise _err(path, no, f"expected integer ranks and numeric bytes: {text[:60]!r}") from None
            if s < 0 or d < 0:
                raise _err(path, no, "ranks must be >= 0 (edge lists are 0-based)")
            if b < 0:
                raise _err(path, no, "negative byte count")
            src.append(s), dst.append(d), nbytes.append(b), msgs.append(c)
    if not src:
        raise _err(path, 0, "no edges")
    m = np.asarray(msgs)
    messages = None if np.isnan(m).any() else m
    return CommGraph.from_edges(src, dst, nbytes, messages=messages)


def write_edge_list(graph: CommGraph, path: str) -> None:
    src, dst, w = graph.coo()
    msgs = None
    if graph.messages is not None:
        msgs = np.asarray(graph.messages[src, dst]).ravel()
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("# src dst bytes" + (" messages" if msgs is not None else "") + "  (0-based ranks)\n")
        for i in range(w.size):
            tail = f" {_num(msgs[i])}" if msgs is not None else ""
            fh.write(f"{src[i]} {dst[i]} {_num(w[i])}{tail}\n")
