"""Build the interposition library for the MPI a compiled program uses.

The library must be compiled with that MPI's own header (handles, constants
and status layouts differ between MPIs), so it ships as C source and is
built on first use with the MPI's compiler wrapper, ``mpicc``, found

1. in ``RANKMAP_MPICC`` (then only there), else
2. in the ``bin`` beside the MPI library the program links (``ldd``), next
   to ``mpiexec``, next to this Python (the ``mpich`` wheel puts its
   ``mpicc`` in the virtual environment), and on ``PATH``;

a program linked with MPICH's standard ABI (``libmpi_abi``) uses
``mpicc_abi``.  A candidate is taken when the library it builds resolves
the same MPI library as the program.  Builds are cached per user
(``$XDG_CACHE_HOME/rankmap/pmpi`` or ``~/.cache/rankmap/pmpi``) under a key
of the sources, the compiler wrapper and the MPI library (path, size,
modification time), so the ranks of a job compile once (a file lock makes
the others wait) and a new MPI or a new rankmap builds anew.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import calls

SOURCE_DIR = Path(__file__).resolve().parent
SOURCES = ("rankmap_pmpi.c", "rankmap_pmpi.h", "calls.py")
LIBRARY = "librankmap_pmpi.so"
#: the MPI C libraries (not their Fortran or C++ companions) in ``ldd`` output
_MPI_LIBRARY = re.compile(r"^\s*(lib(?:mpi|mpich|mpi_abi|mpi_ibm|mpi_mt|mpi_dbg)\.so[.\d]*)\s+=>\s+(\S+)", re.M)


class BuildError(RuntimeError):
    """The library cannot be built for this program (one line: why, and what to do)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rankmap" / "pmpi"


def linked_mpi(program: Path) -> Path | None:
    """The MPI C library ``program`` loads (resolved), or None (a script, no
    ``ldd``, no MPI among its libraries).  Raises ``BuildError`` for an
    executable linked statically: it cannot be interposed."""
    try:
        with open(program, "rb") as fh:
            elf = fh.read(4) == b"\x7fELF"
    except OSError as exc:
        raise BuildError(f"rankmap.profile: cannot read {program}: {exc.strerror}") from None
    if not elf or shutil.which("ldd") is None:
        return None
    proc = subprocess.run(["ldd", str(program)], capture_output=True, text=True, timeout=60)
    if "not a dynamic executable" in proc.stdout + proc.stderr:
        raise BuildError(f"rankmap.profile: {program} is linked statically: recording needs a "
                         f"dynamically linked program (the default of mpicc; Cray: -dynamic)")
    found = _MPI_LIBRARY.search(proc.stdout)
    return Path(found.group(2)).resolve() if found and found.group(2) != "not" else None


def candidates(mpi_library: Path | None) -> list[Path]:
    """MPI C compiler wrappers to try, best first (see the module docstring)."""
    explicit = os.environ.get("RANKMAP_MPICC")
    if explicit:
        found = shutil.which(explicit)
        return [Path(found)] if found else []
    name = "mpicc_abi" if mpi_library is not None and "mpi_abi" in mpi_library.name else "mpicc"
    dirs = []
    if mpi_library is not None:
        dirs.append(mpi_library.parent.parent / "bin")
    mpiexec = shutil.which("mpiexec")
    if mpiexec:
        dirs.append(Path(mpiexec).parent)
    dirs.append(Path(sys.executable).parent)
    dirs += [Path(d) for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    out, seen = [], set()
    for d in dirs:
        exe = d / name
        if exe.is_file() and os.access(exe, os.X_OK):
            real = exe.resolve()
            if real not in seen:
                seen.add(real)
                out.append(exe)
    return out


def _identity(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"


def cache_key(mpicc: Path, mpi_library: Path | None) -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        h.update((SOURCE_DIR / name).read_bytes())
    h.update(_identity(mpicc).encode())
    h.update((_identity(mpi_library) if mpi_library is not None else "-").encode())
    return h.hexdigest()[:24]


def _run(cmd: list[str], log: Path, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
    return proc


def build(mpicc: Path, entry: Path) -> Path:
    """Compile the library with ``mpicc`` into the cache entry ``entry``
    (its generated wrappers and build log stay there); returns the library."""
    entry.mkdir(parents=True, exist_ok=True)
    log = entry / "build.log"
    header = _run([str(mpicc), "-E", "-x", "c", "-"], log, input="#include <mpi.h>\n")
    declared = calls.declared_names(header.stdout)
    if header.returncode != 0 or "PMPI_Send" not in declared:
        raise BuildError(f"rankmap.profile: {mpicc} cannot read its mpi.h (see {log})")
    (entry / "calls.c").write_text(calls.generate(declared))
    tmp = entry / f".{LIBRARY}.{os.getpid()}"
    fortran = ["-DRM_FORTRAN"] if calls.fortran_handles(declared) else []
    proc = _run([str(mpicc), "-shared", "-fPIC", "-O2", *fortran, f"-I{SOURCE_DIR}", "-o", str(tmp),
                 str(SOURCE_DIR / "rankmap_pmpi.c"), str(entry / "calls.c"), "-ldl", "-lpthread"], log)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:200])
        raise BuildError(f"rankmap.profile: {mpicc} failed to build the recording library: {first} "
                         f"(full log: {log})")
    os.replace(tmp, entry / LIBRARY)
    return entry / LIBRARY


def resolved_mpi(library: Path) -> Path | None:
    """The MPI library a built library resolves (what ``ldd`` says)."""
    if shutil.which("ldd") is None:
        return None
    out = subprocess.run(["ldd", str(library)], capture_output=True, text=True, timeout=60).stdout
    found = _MPI_LIBRARY.search(out)
    return Path(found.group(2)).resolve() if found and found.group(2) != "not" else None


def cached_build(mpicc: Path, mpi_library: Path | None) -> tuple[Path, Path | None]:
    """(library, the MPI library it resolves), built once per cache key:
    concurrent ranks wait on a lock while one of them compiles."""
    root = cache_root()
    entry = root / cache_key(mpicc, mpi_library)
    done = entry / "built.json"
    if not done.exists():
        root.mkdir(parents=True, exist_ok=True)
        with open(root / f"{entry.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                library = build(mpicc, entry)
                mpi = resolved_mpi(library)
                tmp = done.with_suffix(f".{os.getpid()}")
                tmp.write_text(json.dumps({"mpicc": str(mpicc), "mpi_library": str(mpi) if mpi else None}))
                os.replace(tmp, done)
    info = json.loads(done.read_text())
    return entry / LIBRARY, Path(info["mpi_library"]) if info["mpi_library"] else None


def library_for(program: Path) -> Path:
    """The interposition library for ``program``'s MPI (built if needed).
    Raises ``BuildError`` with one line saying why not."""
    mpi_library = linked_mpi(program)
    found = candidates(mpi_library)
    if not found:
        where = os.environ.get("RANKMAP_MPICC") or "next to mpiexec, next to this Python, on PATH"
        raise BuildError(f"rankmap.profile: no MPI C compiler wrapper (mpicc) found ({where}): "
                         f"install the MPI's development files (e.g. libopenmpi-dev), "
                         f"`pip install mpich`, or set RANKMAP_MPICC")
    for mpicc in found:
        library, resolves = cached_build(mpicc, mpi_library)
        if mpi_library is None or resolves is None or resolves == mpi_library:
            return library
    tried = ", ".join(map(str, found))
    raise BuildError(f"rankmap.profile: {program} uses {mpi_library}, but no compiler wrapper found "
                     f"builds against it (tried {tried}): set RANKMAP_MPICC to that MPI's mpicc")
