"""Recording compiled MPI programs (C, C++, Fortran) through PMPI interposition.

``python -m rankmap.profile ./app`` runs ``run.main`` on every rank: the
library is built for the program's MPI (``build``) from the C source here
and the wrappers ``calls`` generates, preloaded into the program, and its
counter snapshots (``counts``) become the same part files and trace as an
mpi4py program's.
"""
