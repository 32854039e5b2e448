"""Distributed refinement: the swap rounds the MPI ranks run on their own rows (no MPI here;
the ranks' exchange lives in ``rankmap.reorder``)."""
