"""File formats: communication graphs in (one module per format, one entry
in ``registry``), launch files out (``launch``)."""

from .common import FormatError
from .launch import LAUNCH_FORMATS, read_perm, write_launch_file
from .registry import GRAPH_FORMATS, WRITE_FORMATS, detect_format, read_graph, write_graph

__all__ = ["read_graph", "write_graph", "detect_format", "FormatError", "GRAPH_FORMATS",
           "WRITE_FORMATS", "LAUNCH_FORMATS", "write_launch_file", "read_perm"]
