"""The backfill state file (missing, unreadable, of another version, or under a path that cannot be
a folder: each a ConfigError that says what to do) and the slice arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.runtime.backfill.state import STATE_VERSION, load_state, save_state, state_path


def test_round_trip_and_missing(tmp_path: Path) -> None:
    path = state_path(tmp_path, "g/1 x")
    assert path.name == "g_1_x.json"
    assert load_state(path) is None
    save_state(path, {"version": STATE_VERSION, "topic": "t"})
    assert load_state(path) == {"version": STATE_VERSION, "topic": "t"}


def test_bad_files_say_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"is unreadable .*delete it or pass --restart"):
        load_state(path)
    path.write_text('{"version": 999}')
    with pytest.raises(ConfigError, match="unknown version"):
        load_state(path)
    a_file = tmp_path / "f"
    a_file.write_text("")
    with pytest.raises(ConfigError, match=r"a part of its path is a file.*choose another --state-dir"):
        load_state(a_file / "sub" / "s.json")


def test_reversed_offsets_are_refused() -> None:
    from pipeline.runtime.backfill.slice import SliceArgs

    with pytest.raises(ConfigError, match="partition 1: 50 > 10"):
        SliceArgs("t", from_offsets={0: 0, 1: 50}, to_offsets={0: 5, 1: 10})
    SliceArgs("t", from_offsets={0: 5}, to_offsets={0: 5, 1: 3})  # empty, or another partition: fine
