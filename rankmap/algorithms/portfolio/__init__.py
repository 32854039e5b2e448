"""Portfolios: ``auto`` runs several constructions and refinements within a budget and keeps
the best (one-to-one and many-to-one)."""
