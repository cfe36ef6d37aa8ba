"""Checks that were wrong on real data: time cuts inside one timestamp, numeric time columns, rows with
any null, independent rows as a recorded decision, duplicate-family grouping, class order at the source
stage, and the default text template."""

from __future__ import annotations

from pathlib import Path

import pytest

from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.stages.source import run as source
from claimcheck.engine.stages.split import run as split


def _source(tmp_path: Path, text: str, upstream: dict | None = None, **kw):
    (tmp_path / "d.csv").write_text(text)
    base = {
        "files": ["d.csv"],
        "label_column": "lab",
        "input_columns": ["txt", "num"],
        "text_columns": ["txt"],
        "availability": {"txt": "yes", "num": "yes"},
        "entity_columns": ["cust"],
        "as_of": "2030-01-01",
    }
    base.update(kw)
    ctx = StageContext(session_dir=tmp_path / "s", workspace=tmp_path)
    return source.run(source.Inputs(**base), upstream or {}, ctx), ctx


def test_missingness_counts_rows_with_any_null(tmp_path: Path) -> None:
    rows = "txt,num,cust,lab\na,1,c1,x\n,2,c2,y\nb,,c3,x\n,,c4,y\nc,5,c5,x\n"
    rec, _ = _source(tmp_path, rows)
    m = rec.check("source.missingness")
    # rows 2, 3 and 4 each have a null: 3 rows, not 2 + 2 = 4 null cells
    assert m.measured["rows_with_any_null"] == 3
    assert m.measured["rows_with_any_null_share"] == 0.6
    assert "3 row(s) (60.0%)" in m.summary


def _panel(n_years: int = 20, per_year: int = 11) -> str:
    """A yearly panel written as floats (1935.0), `per_year` rows a year, one entity per row."""
    lines = ["txt,num,cust,year,lab"]
    for y in range(n_years):
        for k in range(per_year):
            lines.append(f"row {y} {k} words here,{k},c{y}_{k},{1935 + y}.0,{'ab'[(y + k) % 2]}")
    return "\n".join(lines) + "\n"


def _split(rec, ctx, **kw):
    inp = {"strategy": "time", "fractions": {"train": 0.68, "test": 0.32}, "rationale": "the next years"}
    inp.update(kw)
    return split.run(split.Inputs(**inp), {"source": rec}, ctx)


def test_a_numeric_time_column_needs_a_unit(tmp_path: Path) -> None:
    from claimcheck.engine.pipeline.context import StageInputError

    with pytest.raises(StageInputError, match="'time_unit' is empty.*'year'.*year, unix_seconds, ordinal"):
        _source(tmp_path, _panel(), time_column="year")
    assert not (tmp_path / "s").exists()  # nothing written
    with pytest.raises(StageInputError, match="'time_unit' = 'date' needs a date"):
        _source(tmp_path, _panel(), time_column="year", time_unit="date")
    with pytest.raises(ValueError, match="time_unit"):
        source.Inputs(files=["d.csv"], label_column="lab", time_column="year", time_unit="decade")


def test_years_are_shown_as_years(tmp_path: Path) -> None:
    rec, ctx = _source(tmp_path, _panel(), time_column="year", time_unit="year")
    t = rec.check("source.time_range")
    assert (t.measured["min"], t.measured["max"], t.measured["unit"]) == ("1935", "1954", "year")
    assert t.measured["rows_per_year"]["1948"] == 11 and t.measured["empty_years"] == []
    assert "1970" not in t.summary and "1935 .. 1954" in t.summary
    chron = _split(rec, ctx).check("split.chronology")
    assert "1970" not in chron.summary and chron.measured["unit"] == "year"


def test_a_time_split_never_cuts_inside_one_timestamp(tmp_path: Path) -> None:
    import polars as pl

    rec, ctx = _source(tmp_path, _panel(), time_column="year", time_unit="year")
    out = _split(rec, ctx)
    mem = pl.read_parquet(ctx.session_dir / out.check("split.membership").measured["path"])
    years = (
        pl.read_csv(tmp_path / "d.csv")
        .with_row_index("row_id")
        .select(pl.col("row_id").cast(pl.Int64), pl.col("year"))
    )
    per_year = mem.join(years, on="row_id").group_by("year").agg(pl.col("split").n_unique().alias("k"))
    assert per_year.get_column("k").max() == 1  # 220 rows × 0.68 = 149.6 would cut 1948 at 7 / 4
    m = out.check("split.membership").measured
    assert m["sizes"]["train"] % 11 == 0 and m["sizes"]["train"] == 154
    assert m["realised_fractions"]["train"] == 0.7 and m["largest_fraction_shift"] == 0.02
    chron = out.check("split.chronology")
    assert chron.status == "pass" and chron.measured["test_rows_at_max_train"] == 0
    assert (chron.measured["max_train_time"], chron.measured["min_test_time"]) == ("1948", "1949")


def test_chronology_counts_a_shared_timestamp_as_overlap(tmp_path: Path) -> None:
    import polars as pl

    from claimcheck.engine.stages.split.checks import chronology

    joined = pl.DataFrame(
        {"split": ["train", "train", "test", "test"], "year": [1947.0, 1948.0, 1948.0, 1949.0]}
    )
    c = chronology(joined, ("year", "year"), split.Inputs(strategy="time", rationale="r"))
    assert c.status == "fail" and c.measured["test_rows_at_max_train"] == 1
    assert c.measured["test_share_before_max_train"] == 0.0 and "1948" in c.summary


def _claim(order: list[str]):
    from claimcheck.engine.evidence import StageRecord

    return {"claim": StageRecord(stage="claim", inputs={"class_order": order}, checks=[])}


def test_class_order_is_checked_at_the_source_stage(tmp_path: Path) -> None:
    rows = "txt,num,cust,lab\n" + "".join(f"t {i},{i},c{i},{['sports', 'news'][i % 2]}\n" for i in range(8))
    rec, _ = _source(tmp_path, rows, _claim(["sport", "news", "weather"]))
    c = rec.check("source.class_order")
    assert c.status == "fail" and c.measured["not_in_class_order"] == ["sports"]
    assert "'sports'" in c.summary and "label_mapping" in c.summary
    rec, _ = _source(tmp_path, rows, _claim(["sports", "news", "weather"]))
    c = rec.check("source.class_order")
    assert c.status == "warn" and c.measured["classes_without_rows"] == ["weather"]
    rec, _ = _source(tmp_path, rows, _claim(["news", "sports"]))
    assert rec.check("source.class_order").status == "pass"
    rec, _ = _source(tmp_path, rows)
    assert rec.check("source.class_order").status == "not_run"


def test_float_labels_against_integer_class_order_are_named(tmp_path: Path) -> None:
    rows = "txt,num,cust,lab\n" + "".join(f"t {i},{i},c{i},{i % 2}.0\n" for i in range(8))
    rec, _ = _source(tmp_path, rows, _claim(["0", "1"]))
    c = rec.check("source.class_order")
    assert c.status == "fail" and c.measured["whole_number_floats"] == {"0.0": "0", "1.0": "1"}
    assert "whole numbers written as floats" in c.summary and "'1.0' = '1'" in c.summary


def test_independent_rows_are_a_recorded_decision(tmp_path: Path) -> None:
    from pydantic import ValidationError

    rows = "txt,num,lab\n" + "".join(f"t {i},{i},{'xy'[i % 2]}\n" for i in range(8))
    rec, _ = _source(tmp_path, rows, entity_columns=[])
    fam = rec.check("source.entity_families")
    assert fam.status == "warn" and fam.basis == "measured" and "unseen-entity" in fam.summary
    assert any("no entity id" in n.text for n in rec.notes)
    why = "one reading per independent lab sample; no patient ids exist"
    rec, _ = _source(tmp_path, rows, entity_columns=[], independent_rows={"declared": True, "rationale": why})
    fam = rec.check("source.entity_families")
    assert (fam.status, fam.basis) == ("pass", "decided") and why in fam.summary
    assert fam.measured["independent_rows_declared"] is True and fam.measured["families"] == 8
    assert not rec.notes
    assert rec.inputs["independent_rows"] == {"declared": True, "rationale": why}
    with pytest.raises(ValidationError, match="needs a rationale"):
        source.Inputs(independent_rows={"declared": True, "rationale": "  "})
    with pytest.raises(ValidationError, match="entity_columns"):
        source.Inputs(entity_columns=["cust"], independent_rows={"declared": True, "rationale": why})


def _dup_data() -> str:
    """Rows in families of exact copies (case and spacing differ) and near copies (one word changed)."""
    lines = ["txt,num,cust,lab"]
    for i in range(60):
        base = f"ticket {i} the printer on floor {i % 7} jams every morning after the update"
        lines.append(f"{base},{i},c{i},{'xy'[i % 2]}")
        if i % 3 == 0:
            lines.append(f"  {base.upper()} ,{i},d{i},{'xy'[i % 2]}")  # exact after lower_strip_ws
        if i % 4 == 0:
            lines.append(f"{base} today,{i},e{i},{'xy'[i % 2]}")  # a near copy
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("grouping", ["entities", "duplicates", "duplicates_and_near"])
def test_a_split_can_group_by_duplicate_families(tmp_path: Path, grouping: str) -> None:
    import polars as pl

    from claimcheck.engine.audit.neardup import read_pairs
    from claimcheck.engine.audit.texts import norm_text_expr

    rec, ctx = _source(tmp_path, _dup_data(), input_columns=["txt"], availability={"txt": "yes"})
    near = rec.check("source.near_duplicates").measured
    assert near["pairs"] > 0
    out = split.run(
        split.Inputs(strategy="group", grouping=grouping, rationale="new tickets", seed=3),
        {"source": rec},
        ctx,
    )
    m = out.check("split.membership").measured
    assert m["grouping"] == grouping
    mem = pl.read_parquet(ctx.session_dir / m["path"])
    text = (
        pl.read_csv(tmp_path / "d.csv")
        .with_row_index("row_id")
        .select(pl.col("row_id").cast(pl.Int64), norm_text_expr("txt").alias("key"))
    )
    exact_straddle = mem.join(text, on="row_id").group_by("key").agg(pl.col("split").n_unique().alias("k"))
    pairs = read_pairs(ctx.session_dir / near["pairs_path"], near["pairs_sha256"])
    lab = mem.select("row_id", "split")
    crossing = (
        pairs.join(lab.rename({"row_id": "row_a", "split": "sa"}), on="row_a")
        .join(lab.rename({"row_id": "row_b", "split": "sb"}), on="row_b")
        .filter(pl.col("sa") != pl.col("sb"))
        .height
    )
    if grouping == "entities":  # one customer per row: copies land on both sides
        assert exact_straddle.get_column("k").max() > 1 and crossing > 0
        assert m["families"] == mem.height
    else:
        assert exact_straddle.get_column("k").max() == 1  # no exact family straddles splits
        assert out.check("split.exact_overlap").measured["rows"].get("test", 0) == 0
        assert (crossing == 0) == (grouping == "duplicates_and_near")
        assert out.check("split.family_intersection").status == "pass"
        assert m["families"] < mem.height


def test_duplicate_grouping_is_refused_where_it_cannot_apply(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from claimcheck.engine.pipeline.context import StageInputError

    with pytest.raises(ValidationError, match="does not split by groups"):
        split.Inputs(strategy="random", grouping="duplicates")
    rec, ctx = _source(tmp_path, _dup_data(), input_columns=["txt", "num"], text_columns=[])
    with pytest.raises(StageInputError, match="near-duplicate pairs"):
        split.run(split.Inputs(grouping="duplicates_and_near", rationale="r"), {"source": rec}, ctx)


def _template(contract_inputs: dict, source_inputs: dict):
    from claimcheck.engine.training.hardware import probe
    from claimcheck.engine.training.resolve import Resolution, _Resolving, _template
    from claimcheck.engine.training.schema import Inputs

    s = _Resolving(Inputs(**contract_inputs), Resolution(), {}, {}, Path("."), {}, source_inputs, probe())
    _template(s)
    return s.eff.get("text_template"), s.R


def test_the_default_text_template_comes_from_the_text_columns() -> None:
    from claimcheck.engine.pipeline.recipes import DEFAULT_RECIPE, load_recipe

    news = {"input_columns": ["headline", "article", "wordcount"], "text_columns": ["headline", "article"]}
    eff, r = _template({}, news)
    assert eff == "{headline}\n{article}" and not r.refused
    row = next(x for x in r.rows if x["setting"] == "text_template")
    assert row["outcome"] == "resolved: derived from the source's text columns" and row["requested"] == '""'
    # The sample recipe keeps its result: '{subject}\n{body}', now derived instead of written in.
    recipe = load_recipe(DEFAULT_RECIPE)
    assert "text_template" not in recipe["contract"]
    contract = {k: v for k, v in recipe["contract"].items() if k in ("task_kind",)}
    assert _template(contract, recipe["source"])[0] == "{subject}\n{body}"
    # No text columns to derive from: refused with the reason, not a ticket-specific guess.
    _, r = _template({}, {"input_columns": ["wordcount"], "text_columns": []})
    assert r.refused and "no text model input" in r.refused[0]["reason"]
    # An explicit template is kept as requested.
    eff, r = _template({"text_template": "{article}"}, news)
    assert eff == "{article}" and r.rows[-1]["outcome"] == "as requested"


def test_ordinal_and_fractional_times(tmp_path: Path) -> None:
    rows = "txt,num,cust,step,lab\n" + "".join(f"t {i},{i},c{i},{i // 3},{'xy'[i % 2]}\n" for i in range(30))
    rec, ctx = _source(tmp_path, rows, time_column="step", time_unit="ordinal")
    t = rec.check("source.time_range")
    assert (t.measured["min"], t.measured["max"], t.measured["distinct_values"]) == ("0", "9", 10)
    assert rec.check("source.future_timestamps") is None  # an order, not a date
    chron = _split(rec, ctx, fractions={"train": 0.7, "test": 0.3}).check("split.chronology")
    assert (chron.measured["max_train_time"], chron.measured["min_test_time"]) == ("6", "7")
    rows = "txt,num,cust,yr,lab\nt a,1,c1,1935.0,x\nt b,2,c2,1935.5,y\nt c,3,c3,1937.0,x\n"
    t = _source(tmp_path, rows, time_column="yr", time_unit="year")[0].check("source.time_range")
    assert t.measured["unparseable"] == 1 and t.measured["empty_years"] == ["1936"] and t.status == "warn"


def test_the_report_shows_independent_rows_as_a_decision_and_class_order_from_the_frozen_claim(
    tmp_path: Path,
) -> None:
    from claimcheck.engine.ledger.session import Session
    from claimcheck.engine.report.build import render

    rows = "txt,num,lab\n" + "".join(f"t {i},{i},{['1.0', '0.0'][i % 2]}\n" for i in range(12))
    (tmp_path / "d.csv").write_text(rows)
    s = Session.create(tmp_path / "sess", workspace=tmp_path)
    s.run_stage("claim", {"class_order": ["0", "1"], "prediction_unit": "one sample"})
    s.freeze("claim")
    why = "one reading per lab sample | no subject ids exist"
    src = {
        "files": ["d.csv"],
        "label_column": "lab",
        "input_columns": ["txt", "num"],
        "text_columns": ["txt"],
        "availability": {"txt": "yes", "num": "yes"},
        "independent_rows": {"declared": True, "rationale": why},
    }
    rec = s.run_stage("source", src)
    assert rec.check("source.class_order").status == "fail"  # found at the source stage, from the real claim
    s.freeze("source")
    md, _ = render(s.path)
    row = next(line for line in md.splitlines() if "source.entity_families" in line and "|" in line)
    assert "| PASS | source.entity_families | decided |" in row
    assert "one reading per lab sample \\| no subject ids exist" in row  # escaped, not a new cell
    assert "independent_rows" in md  # among the stage's recorded decisions
    cls_row = next(line for line in md.splitlines() if "| source.class_order |" in line)
    assert cls_row.startswith("| FAIL") and "whole numbers written as floats" in cls_row
