"""Async HBase access over the Thrift gateways (happybase for Thrift1, thriftpy2 for Thrift2)."""

from .client import Cells, HBaseClient, RegionInfo, Row
from .errors import map_exceptions, translate
from .scanrows import Cell, CellRow

__all__ = ["Cell", "CellRow", "Cells", "HBaseClient", "RegionInfo", "Row", "map_exceptions", "translate"]
