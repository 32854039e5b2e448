"""The host lists users already have: Slurm hostlist expressions, MPI
hostfiles (MPICH ``host:n``, Open MPI ``host slots=n``, Slurm's one host per
line), and Slurm's job environment.

Sizes are bounded before anything is allocated: a hostlist naming more than
``MAX_HOSTS`` hosts (``n[0-99999999999]``) is one clear error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..limits import MAX_TREE_PES as MAX_SLOTS  # processes a hostfile or Slurm's task counts may name

MAX_HOSTS = 1 << 20  # far above any machine's node count; bounds a typo's memory


# -------------------------------------------------------- hostlist syntax
def expand_nodelist(text: str, limit: int = MAX_HOSTS) -> list[str]:
    """Slurm hostlist -> host names: ``"node[01-03,07],gpu[1-2]-ib,login"``
    -> node01 node02 node03 node07 gpu1-ib gpu2-ib login (zero padding
    kept, several bracket groups multiply out).  More than ``limit`` hosts
    is an error raised before any name is made."""
    items = []
    for item in _split_top_level(text.strip(), text):
        parts = re.split(r"(\[[^\]]*\])", item)
        groups = []
        for part in parts:
            if part.startswith("["):
                groups.append(_parse_ranges(part[1:-1], text))
            elif "[" in part or "]" in part:
                raise ValueError(f"nodelist {text!r}: unbalanced brackets")
            else:
                groups.append(part)
        items.append(groups)
    total = 0
    for groups in items:
        size = 1
        for g in groups:
            if not isinstance(g, str):
                size *= sum(hi - lo + 1 for lo, hi, _ in g)
        total += size
        if total > limit:
            raise ValueError(f"nodelist {text!r} names more than {limit} hosts")
    hosts: list[str] = []
    for groups in items:
        names = [""]
        for g in groups:
            if isinstance(g, str):
                names = [n + g for n in names]
            else:
                choices = [str(v).zfill(width) for lo, hi, width in g for v in range(lo, hi + 1)]
                names = [n + c for n in names for c in choices]
        hosts.extend(names)
    if not hosts:
        raise ValueError(f"nodelist {text!r}: no host")
    for h in dict.fromkeys(hosts):
        check_host_name(h, f"nodelist {text[:60]!r}")
    return hosts


def check_host_name(name: str, where: str) -> str:
    """``name`` if it can be a host name: no white space, no control
    character (a UTF-16 file read as text has NUL bytes between letters)."""
    if not name.isprintable() or any(ch.isspace() for ch in name):
        raise ValueError(f"{where}: host name {name[:40]!r} has a control or space character "
                         "(a hostfile or nodelist is plain text, one name per host)")
    return name


def _split_top_level(text: str, label: str) -> list[str]:
    items, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if depth < 0 or depth > 1:
            raise ValueError(f"nodelist {label!r}: unbalanced brackets")
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise ValueError(f"nodelist {label!r}: unbalanced brackets")
    items.append(cur)
    return [i.strip() for i in items if i.strip()]


def _parse_ranges(spec: str, text: str) -> list[tuple[int, int, int]]:
    """``"01-03,07"`` -> ``[(1, 3, 2), (7, 7, 2)]`` (low, high, zero-padded width)."""
    out = []
    for part in spec.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"nodelist {text!r}: bad range {part.strip()!r} (expected e.g. 01-04)")
        high = int(hi) if sep else int(lo)
        if high < int(lo):
            raise ValueError(f"nodelist {text!r}: range {part.strip()!r} runs backwards")
        out.append((int(lo), high, len(lo)))
    return out


# --------------------------------------------------------------- hostfiles
def parse_hostfile(path) -> list[tuple[str, int | None]]:
    """Read an MPI hostfile; see ``parse_hostfile_text``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read hostfile ({exc})") from None
    return parse_hostfile_text(text, str(path))


def parse_hostfile_text(text: str, label: str = "<hostfile>") -> list[tuple[str, int | None]]:
    """MPI hostfile -> ``[(host, slots), ...]`` in order of first appearance.

    Lines ``host slots=N [max_slots=M ...]`` (Open MPI), ``host:N`` (MPICH
    hydra) and ``host`` (Slurm's ``SLURM_HOSTFILE``, Open MPI); ``#`` starts
    a comment.  Counts of a host listed several times add up; a bare
    ``host`` line counts one slot when its host appears on other lines too
    (one line per task, as Slurm writes them), and a host on a single bare
    line has ``None`` slots (every PE of the host).
    """
    counts: dict[str, int] = {}
    bare: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split()
        host, slots = tokens[0], None
        if ":" in host:
            host, _, count = host.partition(":")
            slots = _positive(count, label, lineno)
        for tok in tokens[1:]:
            key, sep, value = tok.partition("=")
            if key == "slots" and sep:
                slots = _positive(value, label, lineno)
            elif not sep:
                raise ValueError(f"{label}:{lineno}: unexpected {tok!r} (expected 'host slots=N', "
                                 "'host:N' or 'host')")
        if not host:
            raise ValueError(f"{label}:{lineno}: missing host name")
        check_host_name(host, f"{label}:{lineno}")
        counts.setdefault(host, 0)
        if slots is None:
            bare[host] = bare.get(host, 0) + 1
        else:
            counts[host] += slots
        if sum(counts.values()) + sum(bare.values()) > MAX_SLOTS:
            raise ValueError(f"{label}:{lineno}: more than {MAX_SLOTS} slots")
    if not counts:
        raise ValueError(f"{label}: hostfile lists no host")
    out = []
    for host, n in counts.items():
        b = bare.get(host, 0)
        alone = b == 1 and n == 0
        out.append((host, None if alone else n + b))
    return out


def _positive(text: str, label: str, lineno: int) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"{label}:{lineno}: slot count {text!r} is not a positive integer")
    return int(text)


# ------------------------------------------------------------------- Slurm
def parse_tasks_per_node(text: str, n_nodes: int | None = None) -> list[int]:
    """``SLURM_TASKS_PER_NODE`` -> tasks of each node: ``"2(x3),1"`` ->
    ``[2, 2, 2, 1]``.  With ``n_nodes`` the count of entries must match."""
    out: list[int] = []
    for part in text.strip().split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:\(x(\d+)\))?\s*", part)
        if not m or int(m.group(1)) < 1 or (m.group(2) and int(m.group(2)) < 1):
            raise ValueError(f"SLURM_TASKS_PER_NODE {text!r}: bad entry {part!r} "
                             "(expected e.g. 2(x3),1)")
        repeat = int(m.group(2) or 1)
        if len(out) + repeat > MAX_HOSTS:
            raise ValueError(f"SLURM_TASKS_PER_NODE {text!r} names more than {MAX_HOSTS} nodes")
        out.extend([int(m.group(1))] * repeat)
        if int(m.group(1)) * repeat > MAX_SLOTS or sum(out) > MAX_SLOTS:
            raise ValueError(f"SLURM_TASKS_PER_NODE {text!r} names more than {MAX_SLOTS} tasks")
    if n_nodes is not None and len(out) != n_nodes:
        raise ValueError(f"SLURM_TASKS_PER_NODE {text!r} gives {len(out)} nodes, "
                         f"the nodelist {n_nodes}")
    return out


def slurm_job_slots(environ=None) -> list[tuple[str, int | None]] | None:
    """``[(host, tasks), ...]`` of the Slurm allocation this process runs
    in (``SLURM_JOB_NODELIST`` or ``SLURM_NODELIST``, and
    ``SLURM_TASKS_PER_NODE`` when set), or None outside an allocation."""
    env = os.environ if environ is None else environ
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        return None
    try:
        hosts = expand_nodelist(nodelist)
    except ValueError as exc:
        raise ValueError(f"SLURM_JOB_NODELIST: {exc}") from None
    tasks = env.get("SLURM_TASKS_PER_NODE")
    if not tasks:
        return [(h, None) for h in hosts]
    return list(zip(hosts, parse_tasks_per_node(tasks, len(hosts))))
