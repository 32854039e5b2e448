"""Which MPI launches a run on an emulated cluster: MPICH's hydra
(``mpiexec``) or Open MPI's ``mpirun``, each reaching the nodes its own way
(``EmulatedCluster.mpiexec``, ``EmulatedCluster.mpirun``).

A program runs under the launcher of the MPI it was built with; the choice
comes from the user (``--mpi``), else from a launch line's options (the
lines ``rankmap map`` prints), else from the MPI library the program loads,
else hydra.  The launcher itself is found by asking each candidate what it
is: ``mpirun`` is hydra in the ``mpich`` wheel's directory and Open MPI's
in Debian's ``/usr/bin``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

MPIS = ("mpich", "openmpi")
#: the names launchers go by (a launch line starts with one of them, or a path to one)
LAUNCHER_NAMES = ("mpiexec", "mpirun", "mpiexec.hydra", "mpiexec.mpich", "mpirun.mpich",
                  "mpiexec.openmpi", "mpirun.openmpi", "orterun", "prterun")
#: options only one MPI's launcher takes: a launch line that uses one says whose it is
_HYDRA_ONLY = ("-f", "-rankmap", "-hosts", "-ppn", "-genv", "-genvall", "-launcher", "-iface")
_OPENMPI_ONLY = ("--rankfile", "--map-by", "--bind-to", "--host", "--hostfile", "--oversubscribe",
                 "-np", "--mca", "-x")


def is_launcher(word: str) -> bool:
    """Whether a command's first word names an MPI launcher."""
    return os.path.basename(word) in LAUNCHER_NAMES


def launcher_mpi(exe: str) -> str | None:
    """``"mpich"`` (hydra), ``"openmpi"``, or None for a launcher that is
    neither or does not answer ``--version``."""
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    text = proc.stdout + proc.stderr
    if "HYDRA" in text:
        return "mpich"
    if "Open MPI" in text or "OpenRTE" in text or "prterun" in text.lower():
        return "openmpi"
    return None


def line_mpi(argv) -> str | None:
    """The MPI whose launcher a launch line's options belong to, or None
    when they say nothing (``mpiexec -n 4 prog``)."""
    options = set()
    for word in argv[1:]:
        if word == "--":
            break
        options.add(word.split("=", 1)[0])
    if options & set(_OPENMPI_ONLY):
        return "openmpi"
    if options & set(_HYDRA_ONLY):
        return "mpich"
    return None


def program_mpi(program: str) -> str | None:
    """The MPI an executable ``program`` loads (``ldd``), or None (a
    script, a static or unknown one)."""
    from ..profile.native.build import BuildError, linked_mpi

    path = shutil.which(program) or program
    try:
        library = linked_mpi(Path(path))
    except BuildError:
        return None
    if library is None:
        return None
    text = str(library).lower()
    if "openmpi" in text or "libmpi.so.40" in text:
        return "openmpi"
    if "mpich" in text or "libmpi.so.12" in text or "mpi_abi" in text:
        return "mpich"
    return None


def find_launcher(mpi: str, name: str | None = None) -> str | None:
    """The launcher of ``mpi``: ``name`` (a launch line's first word, as
    the shell would find it) where it is that MPI's, else the first
    ``mpiexec``/``mpirun`` beside this Python or on PATH that is."""
    names = ([name] if name else []) + ["mpiexec", "mpirun", f"mpiexec.{mpi}", f"mpirun.{mpi}"]
    seen = set()
    for exe in _found(names):
        real = os.path.realpath(exe)
        if real not in seen:
            seen.add(real)
            if launcher_mpi(exe) == mpi:
                return exe
    return None


def _found(names):
    """Executables of ``names`` (a path as it is), beside this Python first, then on PATH."""
    dirs = [str(Path(sys.executable).parent)] + os.environ.get("PATH", "").split(os.pathsep)
    for name in names:
        if os.path.dirname(name):
            if os.access(name, os.X_OK):
                yield name
            continue
        for d in dirs:
            exe = shutil.which(name, path=d)
            if exe is not None:
                yield exe
