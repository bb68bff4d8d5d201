"""The docs' speed table is the benchmarks' recorded output, not hand-copied numbers."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def speed_table():
    spec = importlib.util.spec_from_file_location("speed_table", ROOT / "benchmarks/speed_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_table_is_up_to_date():
    module = speed_table()
    assert module.OUT.read_text() == module.render(), "re-run benchmarks/speed_table.py"


def test_every_recorded_row_says_when_where_and_against_what():
    rows = [
        r for p in (ROOT / "benchmarks/results").glob("*.json") for r in json.loads(p.read_text())
    ]
    assert rows
    for r in rows:
        assert {"case", "ours", "reference", "ratio", "date", "commit", "machine", "load"} <= set(r)
        assert "extrapolat" not in r["ratio"], r  # whole runs only
