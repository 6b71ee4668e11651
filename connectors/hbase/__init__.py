"""Async HBase access over the Thrift gateways (happybase for Thrift1, thriftpy2 for Thrift2)."""

from .client import Cells, HBaseClient, RegionInfo, Row
from .errors import map_exceptions, translate
from .scanprocs import PageTransform
from .scanrows import Cell, CellRow

__all__ = ["Cell", "CellRow", "Cells", "HBaseClient", "PageTransform", "RegionInfo", "Row", "map_exceptions",
           "translate"]
