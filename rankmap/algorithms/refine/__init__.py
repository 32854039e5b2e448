"""Refinement: local search that improves a given mapping (swaps, single-task moves under the
balance limit, the bottleneck objective) and its compiled kernels."""
