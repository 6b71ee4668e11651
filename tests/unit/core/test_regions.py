from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.ingest.regions import Region, RegionMap, RegionMaps
from pipeline.errors import RegionMapStale


def tiling(splits: list[bytes], table: str = "t", servers: int = 3) -> list[Region]:
    bounds = [b"", *splits, b""]
    return [
        Region(
            table=table,
            start_key=bounds[i],
            end_key=bounds[i + 1],
            server=f"rs{i % servers}:16020",
            name=f"{table},{bounds[i]!r},{i}",
            region_id=i,
        )
        for i in range(len(bounds) - 1)
    ]


def test_locate_start_inclusive_end_exclusive() -> None:
    rmap = RegionMap(tiling([b"b", b"d"]))
    assert rmap.locate(b"").start_key == b""
    assert rmap.locate(b"a\xff\xff").start_key == b""
    assert rmap.locate(b"b").start_key == b"b"
    assert rmap.locate(b"c").start_key == b"b"
    assert rmap.locate(b"d").start_key == b"d"
    assert rmap.locate(b"\xff" * 8).start_key == b"d"


def test_single_region_table() -> None:
    rmap = RegionMap(tiling([]))
    assert len(rmap) == 1
    assert rmap.locate(b"anything").end_key == b""


def test_input_order_does_not_matter_and_accessors() -> None:
    regions = tiling([b"\x01", b"\x02", b"\x03"], servers=2)
    rmap = RegionMap(reversed(regions))
    assert rmap.regions == tuple(regions)
    assert list(rmap) == regions
    assert len(rmap) == 4
    assert rmap.table == "t"
    assert rmap.servers == frozenset({"rs0:16020", "rs1:16020"})
    assert rmap.by_server() == {
        "rs0:16020": (regions[0], regions[2]),
        "rs1:16020": (regions[1], regions[3]),
    }
    assert rmap == RegionMap(regions)
    assert hash(rmap) == hash(RegionMap(regions))
    assert "regions=4" in repr(rmap)


def test_region_contains() -> None:
    r = Region("t", b"b", b"d", "rs:1", "n")
    assert r.contains(b"b")
    assert r.contains(b"c\xff")
    assert not r.contains(b"d")
    assert not r.contains(b"a")
    last = Region("t", b"d", b"", "rs:1", "n")
    assert last.contains(b"\xff\xff")


def _stale(regions: list[Region], match: str) -> None:
    with pytest.raises(RegionMapStale, match=match) as info:
        RegionMap(regions)
    assert info.value.retryable
    assert info.value.table == (regions[0].table if regions else None)


def test_validation_errors() -> None:
    with pytest.raises(RegionMapStale, match="empty"):
        RegionMap([])
    regions = tiling([b"b", b"d"])
    _stale(regions[1:], "first region starts")
    _stale(regions[:-1], "last region ends")
    _stale([regions[0], regions[2]], "hole")
    overlap = Region("t", b"a", b"c", "rs:1", "overlapping")
    _stale([regions[0], overlap, regions[1], regions[2]], "overlap|hole")
    early_end = Region("t", b"b", b"", "rs:1", "early")
    _stale([regions[0], early_end, regions[2]], "not the last")
    inverted = [
        Region("t", b"", b"b", "rs:1", "a"),
        Region("t", b"b", b"b", "rs:1", "empty"),
        Region("t", b"b", b"", "rs:1", "c"),
    ]
    _stale(inverted, "empty or inverted")
    with pytest.raises(ValueError, match="one table"):
        RegionMap([*tiling([b"b"]), Region("other", b"x", b"", "rs:1", "o")])


keys = st.binary(max_size=4)


@given(
    splits=st.lists(st.binary(min_size=1, max_size=4), unique=True, max_size=30),
    rows=st.lists(keys, max_size=50),
)
def test_property_locate_matches_linear_search(splits: list[bytes], rows: list[bytes]) -> None:
    regions = tiling(sorted(splits))
    rmap = RegionMap(regions)
    for row in [*rows, *splits]:
        holders = [r for r in regions if r.contains(row)]
        assert len(holders) == 1
        assert rmap.locate(row) is holders[0]


def test_region_maps_change_only_through_replace() -> None:
    maps = RegionMaps()
    first = RegionMap(tiling([b"m"]))
    assert maps.replace("t", first) and maps["t"] is first
    assert not maps.replace("t", RegionMap(tiling([b"m"])))  # an equal map: the object stays (a layout's identity)
    assert maps["t"] is first
    assert maps.replace("t", RegionMap(tiling([b"g", b"m"]))) and maps["t"] is not first
    assert list(maps) == ["t"] and len(maps) == 1 and len(maps["t"]) == 3 and maps.get("u") is None
    with pytest.raises(TypeError):
        maps["t"] = first  # type: ignore[index]
