"""File formats: communication graphs in (one module per format, one entry
in ``registry``), launch files out (``launch``)."""

from .common import FormatError
from .launch import (LAUNCH_FILE_NAMES, LAUNCH_FORMATS, read_perm, write_all_launch_files,
                     write_launch_file, write_launch_files)
from .registry import GRAPH_FORMATS, WRITE_FORMATS, detect_format, read_graph, write_graph

__all__ = ["read_graph", "write_graph", "detect_format", "FormatError", "GRAPH_FORMATS",
           "WRITE_FORMATS", "LAUNCH_FORMATS", "LAUNCH_FILE_NAMES", "write_launch_file",
           "write_all_launch_files", "write_launch_files", "read_perm"]
