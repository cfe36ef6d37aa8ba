"""A source filter refers only to the source's own columns (issue 28, section 1).

The filter language (engine/data/filters.py) is parsed into a Polars expression; nothing reaches an
SQL engine. Every table function the installed Polars SQL knows, and every subquery, is refused
before any read, through the real CLI and through the source stage itself, and the refusal never
shows a byte of a file outside the declared source — whether that file exists or not.
"""

from __future__ import annotations

import polars as pl
import pytest

from claimcheck.engine.data.filters import FilterError, compile_filter, parse
from claimcheck.tui.cli import main
from tests.test_bad_inputs import BASE, _csv, set_key

SECRET = "TOP_SECRET_API_KEY=abc123"
# Names a table function could have; the installed Polars says which it knows (probed below).
CANDIDATES = [
    f"{verb}_{kind}"
    for verb in ("read", "scan")
    for kind in (
        "csv",
        "parquet",
        "json",
        "ipc",
        "ndjson",
        "avro",
        "delta",
        "excel",
        "database",
        "iceberg",
        "lines",
        "arrow",
        "feather",
        "ipc_stream",
    )
]


def polars_table_functions() -> list[str]:
    """The table functions the installed Polars SQL engine accepts (a missing file is not 'unsupported')."""
    ctx = pl.SQLContext()
    known = []
    for name in CANDIDATES:
        try:
            ctx.execute(f"SELECT * FROM {name}('/no/such/claimcheck/file')", eager=True)
        except Exception as exc:  # noqa: BLE001 - any error but "not supported" means it exists
            if "not a supported table function" in str(exc):
                continue
        known.append(name)
    return known


TABLE_FUNCTIONS = polars_table_functions()


def test_the_probe_finds_the_documented_table_functions() -> None:
    assert {"read_csv", "read_parquet", "read_json", "read_ipc", "read_ndjson"} <= set(TABLE_FUNCTIONS)


def _peeks(path: str) -> list[str]:
    """Every way a filter could read `path`: each table function, called and inside a subquery."""
    out = []
    for fn in TABLE_FUNCTIONS:
        out += [
            f"{fn}('{path}') IS NULL",
            f"id IN (SELECT id FROM {fn}('{path}'))",
            f"EXISTS (SELECT * FROM {fn}('{path}'))",
            f"id = (SELECT max(id) FROM {fn}('{path}'))",
            f"label IN (SELECT * FROM {fn}('{path}') LIMIT 1)",
        ]
    return [*out, "id IN (SELECT id FROM self)", "id > 1 UNION SELECT 1"]


def _write_secret(tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text(f"{SECRET}\n1\n", encoding="utf-8")
    return secret


def _answers(ws, where: str):
    text = set_key(
        BASE.split("[split]")[0], "source", "filters", '[{ reason = \'peek\', where = """' + where + '""" }]'
    )
    path = ws / "answers.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def ws(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.csv").write_text(_csv(), encoding="utf-8")
    return ws


def test_no_filter_reads_another_file_through_the_cli(ws, tmp_path, capsys) -> None:
    """Each table function and subquery, on an existing secret and on a missing path: exit 2, one
    line, no secret, and the same refusal either way (so the refusal says nothing about the path)."""
    secret = _write_secret(tmp_path)
    missing = tmp_path / "no-such-dir" / "missing.csv"
    tried = 0
    for exists, gone in zip(_peeks(str(secret)), _peeks(str(missing)), strict=True):
        said = []
        for where in (exists, gone):
            rc = main(["run", "--answers", str(_answers(ws, where)), str(tmp_path / "s")])
            out, err = capsys.readouterr()
            assert rc == 2, (where, out, err)
            assert SECRET not in out + err and "abc123" not in out + err
            assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
            assert "source.filters[0].where" in err, err
            said.append(err.replace(str(secret), "P").replace(str(missing), "P"))
            assert not (tmp_path / "s").exists()
        assert said[0] == said[1]
        tried += 1
    assert tried >= 5 * len(TABLE_FUNCTIONS)


def test_the_source_stage_refuses_them_itself(ws, tmp_path) -> None:
    """The app's path: inputs built without validation (a draft) still never read the other file."""
    from claimcheck.engine.pipeline.context import StageContext, StageInputError
    from claimcheck.engine.stages.source import run as source
    from claimcheck.engine.stages.source.inputs import Filter

    secret = _write_secret(tmp_path)
    ctx = StageContext(session_dir=tmp_path / "s", workspace=ws)
    for where in _peeks(str(secret)):
        inputs = source.Inputs(files=["data.csv"], label_column="label", input_columns=["text"])
        inputs.filters = [Filter.model_construct(reason="peek", where=where)]
        with pytest.raises(StageInputError) as err:
            source.run(inputs, {}, ctx)
        assert SECRET not in str(err.value) and "\n" not in str(err.value)


def test_a_name_that_is_not_a_column_lists_only_the_source_columns() -> None:
    schema = {"id": pl.Int64, "label": pl.String}
    with pytest.raises(
        FilterError, match=r"'read_csv' is not a column of the source \(its columns: id, label\)"
    ):
        compile_filter("read_csv = 1", schema)


FRAME = pl.DataFrame(
    {
        "id": [1, 2, 3, 4, None],
        "name": ["a", "B", "ca", "d'x", None],
        "day": pl.Series(
            ["2024-01-01", "2024-06-01", "2025-01-01", "2023-01-01", "2024-02-02"]
        ).str.to_date(),
        "x": [1.5, 2.0, -3.0, None, 10.0],
        "unit price ($)": [1, 2, 3, 4, 5],
    }
)


@pytest.mark.parametrize(
    "where,kept",
    [
        ("id % 2 = 0", [2, 4]),
        ("name IN ('a', 'ca')", [1, 3]),
        ("name NOT IN ('a')", [2, 3, 4]),
        ("day < '2024-06-01'", [1, 4, None]),
        ("x BETWEEN -3 AND 2", [1, 2, 3]),
        ("x NOT BETWEEN -3 AND 2", [None]),
        ("name LIKE 'c%'", [3]),
        ("name ILIKE 'b'", [2]),
        ("name NOT LIKE '_'", [3, 4]),
        ("x IS NULL", [4]),
        ("NOT (id > 2) OR x IS NOT NULL", [1, 2, 3, None]),
        ("lower(name) = 'b'", [2]),
        ("CAST(id AS TEXT) = '3'", [3]),
        ('"unit price ($)" >= 3', [3, 4, None]),
        ("abs(x) > 2.5", [3, None]),
        ("round(x, 0) = 2", [1, 2]),
        ("coalesce(x, 0) = 0", [4]),
        ("name = 'd''x'", [4]),
        ("id IN (-1, 1)", [1]),
        ("length(name) = 2", [3]),
        ("(id + 1) * 2 - 1 = 5", [2]),
        ("id <> 1 AND id != 2", [3, 4]),
        ("'2024-06-01' > day", [1, 4, None]),
    ],
)
def test_the_language_keeps_the_rows_sql_would(where: str, kept: list) -> None:
    got = FRAME.filter(compile_filter(where, FRAME.schema).fill_null(False)).get_column("id").to_list()
    assert got == kept


@pytest.mark.parametrize(
    "where,why",
    [
        ("", "empty"),
        ("id = ?", "'?'"),
        ("`id` = 1", "'`'"),
        ("id IN (x)", "literal values only"),
        ("foo(id)", "function 'foo'"),
        ("CAST(id AS blob) = 1", "CAST to 'blob'"),
        ("id =", "expected a value"),
        ("id = 1 id", "unexpected 'id'"),
        ("(" * 60 + "id" + ")" * 60 + " = 1", "nests deeper"),
        ("-" * 60 + "1 = id", "nests deeper"),
        ("x" * 5000, "characters"),
        ("id" + "+id" * 300 + " > 0", "chains more than 200"),
    ],
)
def test_anything_else_is_refused_by_the_parser(where: str, why: str) -> None:
    with pytest.raises(FilterError, match=__import__("re").escape(why)):
        parse(where)
