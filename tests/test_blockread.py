"""The bounded path's block reader (engine/data/blockread.py): with blocks of a few bytes, so that every
cut falls somewhere awkward, it gives exactly Polars' whole-file frame and schema; and the source and
split stages on the bounded path read CSV files through it, never Polars' mapping reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from claimcheck.engine.data import blockread
from claimcheck.engine.data import rows as data
from claimcheck.engine.data.blockread import BlockFolder, merge_dtype, record_end


def _whole(paths: list[Path]) -> pl.DataFrame:
    return data.scan_files(paths).collect()


def _blockwise(paths: list[Path], block_bytes: int) -> pl.DataFrame:
    with BlockFolder(block_bytes=block_bytes) as blocks:
        return data.scan_files(paths, blocks=blocks).collect()


def _same(paths: list[Path], sizes: tuple[int, ...] = (1, 7, 64, 1 << 20)) -> pl.DataFrame:
    whole = _whole(paths)
    for size in sizes:
        got = _blockwise(paths, size)
        assert got.schema == whole.schema, size
        assert_frame_equal(got, whole, check_exact=True)
    return whole


def _write(tmp_path: Path, name: str, body: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(body)
    return path


QUOTED = (
    b'id,text,n\n1,"a line\nand another, with ""quotes""",3\n2,"""",4\n3,plain,5\n'
    b'4,"ends in a newline\n",6\n5,"""start""\n""end""",7\n'
)


def test_record_boundaries_follow_quote_parity() -> None:
    body = b'a,b\n1,"x\ny"\n2,z\n'
    assert record_end(body) == len(body)
    assert record_end(body[:9]) == 4  # the newline inside the quotes is no boundary
    assert record_end(b"no newline") == 0
    assert record_end(b'a\n"open\n') == 2


def test_quoted_fields_with_newlines_and_quotes_across_cuts(tmp_path: Path) -> None:
    frame = _same([_write(tmp_path, "q.csv", QUOTED)])
    assert frame.height == 5
    assert frame["text"][0] == 'a line\nand another, with "quotes"'


def test_a_column_turning_from_ints_to_floats_to_text_in_late_blocks(tmp_path: Path) -> None:
    lines = [f"{i},{i},{i}" for i in range(300)]
    lines += [f"{i},{i}.5,{i}" for i in range(300, 400)] + ["400,7,seven", "401,,true"]
    path = _write(tmp_path, "late.csv", ("k,f,s\n" + "\n".join(lines) + "\n").encode())
    frame = _same([path], sizes=(5, 100, 1000, 1 << 20))
    assert frame.schema["f"] == pl.Float64 and frame.schema["s"] == pl.String
    assert frame["s"][0] == "0" and frame["f"][0] == 0.0


def test_columns_all_null_in_a_block_and_empty_strings_against_missing(tmp_path: Path) -> None:
    lines = [f"{i},,x" for i in range(200)] + [f"{i},{i}," for i in range(200, 300)]
    lines += ['300,,""', '301,1.5," "', "302,,"]
    path = _write(tmp_path, "gaps.csv", ("k,v,t\n" + "\n".join(lines) + "\n").encode())
    frame = _same([path], sizes=(3, 200, 1 << 20))
    assert frame.schema["v"] == pl.Float64
    assert frame["t"][300] == "" and frame["t"][302] is None
    bool_late = _write(
        tmp_path, "b.csv", ("k,v\n" + "\n".join(f"{i}," for i in range(50)) + "\n50,true\n").encode()
    )
    assert _same([bool_late]).schema["v"] == pl.Boolean
    never = _write(tmp_path, "n.csv", b"k,v\n1,\n2,\n")
    assert _same([never]).schema["v"] == pl.String


def test_crlf_bom_ragged_lines_and_invalid_utf8(tmp_path: Path) -> None:
    body = b'\xef\xbb\xbfid,name,score\r\n1,ann,2\r\n2,b\xffob,3,extra\r\n3\r\n4,"x\r\ny",5.5\r\n\r\n5,eve,6'
    frame = _same([_write(tmp_path, "crlf.csv", body)])
    assert frame.columns[:4] == [data.ROW_ID, data.SOURCE_LINE, "id", "name"]
    assert frame["name"][1] == "b\ufffdob"
    assert frame["score"][2] is None


def test_tsv_and_several_files(tmp_path: Path) -> None:
    tsv = _write(tmp_path, "a.tsv", b'k\tv\tw\n1\t"a\tb"\t2\n2\tc\t3.5\n')
    csv = _write(tmp_path, "b.csv", b'k,v,extra\n3,d,x\n4,"e\nf",y\n')
    frame = _same([tsv, csv])
    assert frame[data.SOURCE_LINE].to_list() == [1, 2, 1, 2]
    assert frame[data.SOURCE_FILE].to_list() == ["a.tsv", "a.tsv", "b.csv", "b.csv"]


def test_a_header_only_file_and_a_file_without_a_final_newline(tmp_path: Path) -> None:
    _same([_write(tmp_path, "h.csv", b"a,b,c\n")])
    _same([_write(tmp_path, "h2.csv", b"a,b,c")])
    _same([_write(tmp_path, "x.csv", b"a,b\n1,2\n3,4")])


def test_random_files_give_the_whole_file_frame(tmp_path: Path) -> None:
    """Many random files of quoted text, numbers and gaps, cut at random block sizes."""
    rng = np.random.default_rng(5)
    pieces = ["1", "2.5", "x", "", '"a,b"', '"q""uote"', '"multi\nline"', "true", "-3", "NaN", '""']
    for trial in range(20):
        rows = rng.integers(1, 60)
        body = "a,b,c\n" + "".join(
            ",".join(rng.choice(pieces, 3).tolist()) + ("\r\n" if trial % 3 == 0 else "\n")
            for _ in range(rows)
        )
        path = _write(tmp_path, f"r{trial}.csv", body.encode())
        _same([path], sizes=(int(rng.integers(1, 40)), int(rng.integers(40, 400))))


def test_merge_rule_is_polars_whole_file_inference() -> None:
    """merge_dtype over the blocks' types equals Polars' inference over the blocks' values together."""
    values = ["1", "1.5", "true", "x", "NaN", '"1"', "-1", "", "1e400", '""', "False"]
    rng = np.random.default_rng(11)

    def infer(vals: list[str]) -> pl.DataType:
        body = ("a\n" + "\n".join(vals) + "\n").encode()
        return pl.read_csv(body, infer_schema_length=None).schema["a"]

    for _ in range(300):
        blocks = [rng.choice(values, rng.integers(1, 4)).tolist() for _ in range(rng.integers(1, 4))]
        valued = [
            b
            for b in blocks
            if pl.read_csv(("a\n" + "\n".join(b) + "\n").encode())["a"].null_count() < len(b)
        ]
        merged = merge_dtype([infer(b) for b in valued])
        assert merged == infer([v for b in blocks for v in b]), blocks


def test_an_integer_past_int64_falls_back_to_the_whole_file_schema(tmp_path: Path) -> None:
    body = "k,v\n" + "".join(f"{i},{i}\n" for i in range(40)) + "40,1.5\n41,99999999999999999999\n"
    path = _write(tmp_path, "big.csv", body.encode())
    assert merge_dtype([pl.Float64(), pl.Int128()]) is None
    assert _same([path], sizes=(8, 1 << 20)).schema["v"] == pl.String


def _same_or_same_error(paths: list[Path], sizes: tuple[int, ...]) -> None:
    """The block read gives the whole-file frame, or the error Polars' reader gives on the file."""
    try:
        whole = _whole(paths)
    except pl.exceptions.PolarsError as exc:
        for size in sizes:
            with pytest.raises(type(exc)) as got:
                _blockwise(paths, size)
            assert str(got.value) == str(exc)
        return
    for size in sizes:
        assert_frame_equal(_blockwise(paths, size), whole, check_exact=True)


def test_a_file_polars_cannot_read_fails_as_polars_reader_fails(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.csv", b"k\n1\n999999999999999999999999999999999999999999\n")
    with pytest.raises(pl.exceptions.ComputeError):
        _whole([path])
    _same_or_same_error([path], (4, 1 << 20))


def test_stray_quotes_outside_quoted_fields(tmp_path: Path) -> None:
    """A quote inside an unquoted field: Polars reads some such files and refuses others; the block
    read gives the same frame or the same error."""
    rng = np.random.default_rng(5)
    pieces = ["1", "x", '"a,b"', 'st"ray', '"multi\nline"']
    for trial in range(40):
        rows = rng.integers(1, 12)
        body = "a,b,c\n" + "".join(",".join(rng.choice(pieces, 3).tolist()) + "\n" for _ in range(rows))
        _same_or_same_error([_write(tmp_path, f"s{trial}.csv", body.encode())], (3, 50))


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_the_bounded_stages_read_in_blocks_to_the_in_memory_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """On the bounded path the source and split stages read a CSV / JSONL file in blocks and record
    what the in-memory path records; Polars' mapping reader is not called on that path."""
    from tests.test_audit_memory import TINY, _assert_same, _planted, _stages

    monkeypatch.setattr(blockread, "BLOCK_BYTES", 4096)
    planted = _planted(6000)  # past TINY / PARSE_FACTOR: the bounded path
    planted.write_csv(tmp_path / "d.csv") if kind == "csv" else planted.write_ndjson(tmp_path / "d.jsonl")
    src = {
        "files": [f"d.{kind}"],
        "label_column": "label",
        "label_mapping": {"x": "x", "y": "y", "z": "z"},
        "input_columns": ["body", "kind"],
        "text_columns": ["body"],
        "entity_columns": ["cust"],
        "time_column": "when",
        "as_of": "2026-01-01",
        "near_dup_threshold": 0.7,
        "shingle_size": 2,
    }
    spl = {"strategy": "random", "rationale": "bounded read", "grouping": "entities"}
    big, small = _assert_same(tmp_path, src, spl)
    assert big[0].check("source.near_duplicates").measured["pairs"] > 0

    def refuse(source: object, *args: object, **kwargs: object) -> pl.LazyFrame:
        if not isinstance(source, bytes):  # a block's bytes are parsed; a file is never mapped
            raise AssertionError(f"pl.{reader} called on a file on the bounded path: {source}")
        return real(source, *args, **kwargs)

    reader = "scan_csv" if kind == "csv" else "scan_ndjson"
    real = getattr(pl, reader)
    monkeypatch.setattr(pl, reader, refuse)
    again = _stages(tmp_path, "no-map", src, spl, TINY)
    assert again[0].check("source.schema").measured == small[0].check("source.schema").measured


def _jsonl(tmp_path: Path, name: str, lines: list[str]) -> Path:
    return _write(tmp_path, name, ("\n".join(lines) + "\n").encode())


def test_jsonl_with_nested_values_and_one_schema_in_every_block(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": i, "text": f'line {i} "quoted" \\n', "msgs": [{"role": "user", "content": "a\nb"}]})
        for i in range(60)
    ]
    frame = _same([_jsonl(tmp_path, "chat.jsonl", lines)], sizes=(1, 300, 1 << 20))
    assert frame.schema["msgs"] == pl.List(pl.Struct({"role": pl.String, "content": pl.String}))


def test_jsonl_with_a_late_new_key_and_a_late_type_change(tmp_path: Path) -> None:
    lines = [json.dumps({"id": i, "v": i}) for i in range(50)]
    lines += [json.dumps({"id": 50, "v": 1.5, "late": "x"}), "", json.dumps({"v": "text", "id": 51})]
    frame = _same([_jsonl(tmp_path, "late.jsonl", lines)], sizes=(1, 64, 1 << 20))
    assert frame.schema["v"] == pl.String and "late" in frame.columns


def test_jsonl_with_a_key_null_throughout_a_block_merges_without_polars_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [json.dumps({"id": i, "opt": None, "tags": None}) for i in range(40)]
    lines += [json.dumps({"id": i, "opt": i / 2, "tags": ["a", "b"]}) for i in range(40, 50)]
    path = _jsonl(tmp_path, "opt.jsonl", lines)
    whole = _whole([path])
    real = pl.scan_ndjson

    def bytes_only(source: object, *args: object, **kwargs: object) -> pl.LazyFrame:
        assert isinstance(source, bytes), "the blocks merge: Polars' whole-file reader is not needed"
        return real(source, *args, **kwargs)

    monkeypatch.setattr(pl, "scan_ndjson", bytes_only)
    for size in (1, 100, 1 << 20):
        assert_frame_equal(_blockwise([path], size), whole, check_exact=True)
    assert whole.schema["opt"] == pl.Float64 and whole.schema["tags"] == pl.List(pl.String)


def test_jsonl_and_csv_files_together(tmp_path: Path) -> None:
    a = _jsonl(tmp_path, "a.jsonl", [json.dumps({"k": i, "t": None if i % 3 else "x"}) for i in range(20)])
    b = _write(tmp_path, "b.csv", b"k,t\n1,y\n2,\n")
    _same([a, b], sizes=(16, 1 << 20))


def test_spill_read_back_keeps_row_order_and_nulls(tmp_path: Path) -> None:
    """The spill's frame, read a column at a time, is the file with stand-ins (several row groups)."""
    from claimcheck.engine.audit import textstore

    rng = np.random.default_rng(1)
    n = 50_000
    body = [None if rng.random() < 0.1 else "x" * int(rng.integers(1, 50)) for _ in range(n)]
    frame = pl.DataFrame({data.ROW_ID: np.arange(n), "body": body, "k": rng.integers(0, 5, n)})
    frame.write_parquet(tmp_path / "s.parquet", row_group_size=textstore.ROW_GROUP)
    got = textstore.read_back(pl.scan_parquet(tmp_path / "s.parquet"), ["body"])
    assert_frame_equal(got, frame.with_columns(textstore.stand_in("body")))
    assert got.n_chunks("all") == [1, 1, 1]


def test_blocks_in_flight_finish_out_of_order_and_keep_file_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocks are parsed and written on several threads: a block that finishes before an earlier
    one still takes its place, and the schemas merge as in one pass (ints, then floats, then text in a
    late block; a column null throughout the early blocks)."""
    import threading
    import time

    lines = [f"{i},{i},," for i in range(400)] + [f"{i},{i}.5,x,{i}" for i in range(400, 500)]
    lines += ["500,7,seven,1", "501,,true,"]
    path = _write(tmp_path, "order.csv", ("k,f,s,late\n" + "\n".join(lines) + "\n").encode())
    parse = blockread._Format.parse
    first = threading.Event()

    def slow_first(self: blockread._Format, data: bytes, schema: pl.Schema | None) -> pl.DataFrame:
        if schema is None and data.startswith(b"k,f,s,late\n0,"):  # the first block waits for another
            first.wait(timeout=5)
            time.sleep(0.05)
        else:
            first.set()
        return parse(self, data, schema)

    monkeypatch.setattr(blockread._Format, "parse", slow_first)
    monkeypatch.setattr(blockread, "BLOCKS_IN_FLIGHT", 4)
    monkeypatch.setattr("claimcheck.engine.threads.usable_cores", lambda: 4)
    frame = _same([path], sizes=(9, 300, 4000))
    assert first.is_set()
    assert frame["k"].to_list() == list(range(502))
    assert frame.schema["f"] == pl.Float64 and frame.schema["s"] == pl.String
    assert frame.schema["late"] == pl.Int64 and frame["late"][0] is None


@pytest.mark.parametrize("bad", ["jsonl", "nul"])
def test_the_record_scan_beside_the_bounded_read_refuses_first(tmp_path: Path, bad: str) -> None:
    """On the bounded path the record scan (malformed JSONL lines, NUL bytes) runs on a thread beside
    the block read; its refusal, naming the line, is the one raised, as on the in-memory path, not the
    reader's complaint about the same line."""
    from claimcheck.engine.pipeline.context import StageContext, StageInputError
    from claimcheck.engine.stages.source import run as source
    from tests.test_audit_memory import HUGE, TINY

    pad = "word " * 40
    if bad == "jsonl":
        lines = [json.dumps({"id": i, "text": f"{pad}{i}", "label": "ab"[i % 2]}) for i in range(6000)]
        lines[4321] = "{oops"
        name, expect = "d.jsonl", "line 4322"
        _jsonl(tmp_path, name, lines)
    else:
        lines = ["id,text,label", *(f"{i},{pad}{i},{'ab'[i % 2]}" for i in range(6000))]
        lines[4321] = lines[4321].replace("word", "wo\0rd", 1)
        name, expect = "d.csv", "line 4322"
        _write(tmp_path, name, ("\n".join(lines) + "\n").encode())
    said = []
    for budget in (HUGE, TINY):
        ctx = StageContext(session_dir=tmp_path / f"s-{budget}", workspace=tmp_path)
        inputs = source.Inputs(
            files=[name],
            label_column="label",
            input_columns=["text"],
            text_columns=["text"],
            memory_budget=budget,
        )
        with pytest.raises(StageInputError, match=expect) as err:
            source.run(inputs, {}, ctx)
        assert err.value.__suppress_context__ or err.value.__context__ is None
        said.append(str(err.value))
    assert said[0] == said[1]


def test_a_cancelled_bounded_read_stops_the_record_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled (or stopped by anything but a refusal), the bounded read stops the record scan beside
    it within a few lines instead of waiting for it to reach the end of the file."""
    import threading

    from claimcheck.engine.audit import profile
    from claimcheck.engine.pipeline.context import Cancelled, StageContext
    from claimcheck.engine.stages.source import run as source
    from tests.test_audit_memory import TINY

    lines = ["id,text,label", *(f"{i},some words {i},{'ab'[i % 2]}" for i in range(400_000))]
    _write(tmp_path, "d.csv", ("\n".join(lines) + "\n").encode())
    monkeypatch.setattr(profile, "STOP_EVERY", 50)
    scanned: list[dict] = []
    real_scan = profile.malformed_records

    started = threading.Event()

    def spied(*args: object) -> dict:
        started.set()
        # The scan goes on once the read has set its stop (or after 30 s, when it never does): on an
        # idle box a thread woken by `started` may get the interpreter only after a short file's scan.
        stop = args[2]
        assert isinstance(stop, threading.Event)
        stop.wait(timeout=30)
        scanned.append(real_scan(*args))  # type: ignore[arg-type]
        return scanned[-1]

    def cancelled(*args: object) -> None:
        started.wait(timeout=10)
        raise Cancelled("source cancelled")

    monkeypatch.setattr(profile, "malformed_records", spied)
    monkeypatch.setattr(source, "_loaded", cancelled)
    ctx = StageContext(session_dir=tmp_path / "s", workspace=tmp_path)
    inputs = source.Inputs(files=["d.csv"], label_column="label", input_columns=["text"], memory_budget=TINY)
    with pytest.raises(Cancelled):
        source.run(inputs, {}, ctx)
    assert scanned and scanned[0]["records"] < 400_000
    full = real_scan(tmp_path / "d.csv", "d.csv")
    assert full["records"] == 400_000 and full["malformed"] == 0
