"""Parse every hwloc XML of real machines and print PEs, levels and parse
time per file, then files parsed, failures and the slowest parse.

    python benchmarks/topology_parse.py [DIR ...] [--archives] [--quiet]

DIR defaults to the nearest shared/data/topologies above this script.
--archives also extracts the .txz cluster archives found there (hwloc netloc
test data: per-node XMLs and topology diffs) into a temporary directory and
parses their content.
"""

from __future__ import annotations

import argparse
import os
import re
import tarfile
import tempfile
import time
from pathlib import Path

from rankmap.topology.hwloc import read_hwloc_xml

def default_dir() -> Path:
    """The nearest ``shared/data/topologies`` above this script."""
    for parent in Path(__file__).resolve().parents:
        cand = parent / "shared" / "data" / "topologies"
        if cand.is_dir():
            return cand
    raise SystemExit("shared/data/topologies not found; give the directory as an argument")


def xml_version(path: Path) -> str:
    head = path.read_bytes()[:400].decode("utf-8", "replace")
    if "<topologydiff" in head:
        return "diff"
    m = re.search(r'<topology version="([0-9.]+)"', head)
    return f"v{m.group(1)}" if m else "v1"


def levels(t) -> str:
    parts = []
    for kind, ar in zip(t.level_kinds(), t.level_arities()):
        parts.append(f"{kind}:{'/'.join(map(str, ar))}")
    return " ".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="*", type=Path)
    ap.add_argument("--archives", action="store_true", help="also parse the content of .txz archives")
    ap.add_argument("--quiet", action="store_true", help="only the summary")
    args = ap.parse_args()
    dirs = args.dirs or [default_dir()]
    files = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in dirs:
            files += sorted(p for p in d.rglob("*") if p.name.endswith((".xml", ".xml.output")))
            if args.archives:
                for arc in sorted(d.rglob("*.txz")):
                    dest = Path(tmp) / arc.stem
                    with tarfile.open(arc) as tar:
                        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".xml")
                                   and "/hwloc/" in m.name]
                        tar.extractall(dest, members=members, filter="data")
                    files += sorted(dest.rglob("*.xml"))
        rows, failures, by_version = [], [], {}
        for f in files:
            ver = xml_version(f)
            t0 = time.perf_counter()
            try:
                t = read_hwloc_xml(f)
            except Exception as exc:  # report, keep going
                failures.append((f, f"{type(exc).__name__}: {exc}"))
                continue
            dt = time.perf_counter() - t0
            by_version[ver] = by_version.get(ver, 0) + 1
            rows.append((dt, f, ver, t))
        if not args.quiet:
            print(f"{'file':58} {'fmt':5} {'PEs':>5} {'ms':>7}  levels (kind:arity from the root)")
            for dt, f, ver, t in rows:
                name = str(f).split("topologies/")[-1].split(tmp)[-1].lstrip("/")
                print(f"{name[-58:]:58} {ver:5} {t.n_pes:5d} {dt * 1e3:7.1f}  {levels(t)}")
        print()
        print(f"files parsed: {len(rows)} of {len(files)}  ({', '.join(f'{k}: {v}' for k, v in sorted(by_version.items()))})")
        print(f"failures: {len(failures)}")
        for f, msg in failures:
            print(f"  {f}: {msg}")
        if rows:
            dt, f, _, t = max(rows, key=lambda r: r[0])
            total = sum(r[0] for r in rows)
            print(f"slowest parse: {dt * 1e3:.1f} ms ({f.name}, {t.n_pes} PEs); total {total:.2f} s, "
                  f"mean {total / len(rows) * 1e3:.1f} ms")
        print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    return 1 if failures or not rows else 0


if __name__ == "__main__":
    raise SystemExit(main())
