"""Schema and table names with dots, quotes and spaces work through every operation that takes a table name: the
Python API (tuples and DuckDB's quoted spelling ``"we.ird"."t"``), flush, merge, expire and cleanup, and the CLI."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.__main__ import main
from pyspark_ducklake.exceptions import InvalidIdentifierError
from pyspark_ducklake.table.identifiers import format_identifier, parse_identifier

NAMES = [("we.ird", 't."x"'), ("s p'a", "a.b.c"), ("main", "plain"), ('q"', "e n d.")]


@pytest.mark.parametrize(("schema", "table"), NAMES)
def test_format_and_parse_identifier_round_trip(schema: str, table: str) -> None:
    assert parse_identifier(format_identifier(schema, table)) == (schema, table)
    assert parse_identifier((schema, table)) == (schema, table)


def test_parse_identifier_spellings() -> None:
    assert parse_identifier('"we.ird"."t"') == ("we.ird", "t")
    assert parse_identifier('main."a.b"') == ("main", "a.b")
    assert parse_identifier('"a""b"') == ("main", 'a"b')
    assert parse_identifier("s.t") == ("s", "t")
    assert parse_identifier("t") == ("main", "t")
    assert parse_identifier('we\'ird "name"') == ("main", 'we\'ird "name"')  # quotes inside a bare name: as given
    for bad in ('"a.b".c.d', '"unterminated', '"a"x.t', "a.b.c", "", '"".t'):
        with pytest.raises(InvalidIdentifierError, match="quoted spelling"):
            parse_identifier(bad)


def test_dotted_and_quoted_names_through_flush_maintenance_and_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/c.sqlite"
    lake = pdl.connect(url, str(tmp_path / "data"), data_inlining_row_limit=5)
    for schema, table in NAMES:
        if schema != "main":
            lake.create_schema(schema, exist_ok=True)
        lake.create_table((schema, table), pa.schema([("id", pa.int64())]))
        lake.append((schema, table), pa.table({"id": [1, 2]}))  # inlined
    expected = sorted(format_identifier(s, t) for s, t in NAMES)
    assert sorted(lake.tables()) == expected
    for name in lake.tables():  # every listed name is accepted back
        assert lake.scan(name).num_rows == 2
    # flush of every table (it took each "schema.table" string apart at the dots)
    assert lake.flush_inlined_data() is not None
    for schema, table in NAMES:
        lake.append((schema, table), pa.table({"id": list(range(10, 20))}))
    report = lake.merge_adjacent_files()
    assert report.files_processed == 2 * len(NAMES)
    lake.expire_snapshots(older_than=dt.timedelta(0))
    cleaned = lake.cleanup_old_files(cleanup_all=True)
    assert len(cleaned.files) == 2 * len(NAMES)
    for schema, table in NAMES:
        assert sorted(lake.scan((schema, table)).column("id").to_pylist()) == [1, 2, *range(10, 20)]

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--catalog", url, *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = run("tables")
    assert code == 0 and sorted(out.split("\n")[:-1]) == expected
    weird = format_identifier("we.ird", 't."x"')
    assert weird == '"we.ird"."t.""x"""'
    appended = lake.append(("we.ird", 't."x"'), pa.table({"id": [99]}))
    code, out, _ = run("flush", weird)
    assert code == 0 and "flushed in snapshot" in out
    code, out, _ = run("changes", weird, str(appended))
    assert code == 0 and out.count("'insert'") == 1 and "99" in out
    code, out, _ = run("merge", weird, "--dry-run", "--json")
    assert code == 0 and json.loads(out)["dry_run"]
    code, _, err = run("flush", "we.ird.t")
    assert code == 1 and "quoted spelling" in err  # an error of the lake: 1 (2 is a usage error)


@pytest.mark.parametrize("name", ["%(", "%(x)s", "a%%b", ":x", "?"])
def test_columns_named_like_bind_placeholders_read_back(tmp_path: Path, name: str) -> None:
    # SQLAlchemy's qmark rewrite for SQLite read a quoted column "%(" as the start of a placeholder
    lake = pdl.connect(f"sqlite:///{tmp_path / 'l.sqlite'}", data_path=str(tmp_path / "d"))
    lake.create_table("t", pa.schema([("id", pa.int64()), (name, pa.string())]))
    lake.append("t", pa.table({"id": [1, 2], name: ["x", None]}))  # inlined
    lake.delete("t", [("id", "=", 2)])
    assert lake.scan("t").to_pylist() == [{"id": 1, name: "x"}]
    assert lake.flush_inlined_data("t") is not None
    assert lake.scan("t", columns=[name]).to_pylist() == [{name: "x"}]
    lake.close()
