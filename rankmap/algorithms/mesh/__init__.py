"""Mesh and torus machines: Bhatele-Kale heuristics, recursive bisection, space-filling curves
and the compiled hop-count kernels they share."""
