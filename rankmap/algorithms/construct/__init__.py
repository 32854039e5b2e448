"""Constructions: methods that build a mapping from scratch (TreeMatch, multisection and its
partitioners, greedy and MPIPP baselines, placements given by the user)."""
