"""Emulated multi-node clusters on one machine (network namespaces joined by
rate-limited links) for real MPI runs across "nodes": see ``cluster``."""

from .cluster import (ClusterError, ClusterSpec, ClusterUnavailable, EmulatedCluster,
                      check_environment, default_mpiexec, list_clusters, load_cluster,
                      parse_rate, teardown)

__all__ = ["ClusterError", "ClusterSpec", "ClusterUnavailable", "EmulatedCluster",
           "check_environment", "default_mpiexec", "list_clusters", "load_cluster",
           "parse_rate", "teardown"]
