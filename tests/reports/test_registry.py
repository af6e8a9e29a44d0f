"""Every output and vocabulary takes its columns from the registry (``reports.measures``: ``TABLE2``, ``TABLE3``,
``NEVIR_PAIRED``; docs/protocol.md#measures): walking the registry gives each one's column list, and a measure added
to the registry appears in every output that shows it with nothing else changed."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from harness import profile_terms, session
from reports import columns, explore_data, figures, history, hypotheses, measures, paper, reference, render
from reports.explore import ASSETS
from reports.explore_data import table2_columns
from reports.measures import (NEVIR_PAIRED, NEVIR_PAIRED_COLUMNS, PAIRED_MEASURES, TABLE2, TABLE2_COLUMNS, TABLE3,
                              TABLE3_COLUMNS, TABLE2_INTERVAL_COLUMNS, TABLE2_ROW_COLUMNS, column, shown_in)
from reports.columns import (OUTPUTS, BaselineMeasure, ChangeMeasure, DirectionMeasure, GivenPairMeasure,
                             IntervalMeasure, PairMeasure, SideColumn, checked)
from reports.pairs import GIVEN_PAIR_TIE_RULES, GivenPairPaired, Rate
from reports.tables import pair_only_outcomes, pair_only_summary, table3


def registry(flag: str) -> tuple[str, ...]:
    return tuple(m.name for m in TABLE2 if getattr(m, flag))


def table2_row(name: str = "r", **values: object) -> dict[str, object]:
    """A Table II row with a distinct value in every column, so a column shown twice or not at all is seen."""
    row: dict[str, object] = {"ranker": name, "compare_to": "base", "label": "the ranker"}
    for i, m in enumerate(TABLE2):
        row[m.name] = 100 + i if m.unit in (columns.COUNT, columns.POPULATION) else 0.5 + i / 1000
    return row | values


def test_table2_csv_is_the_contract_then_the_uncertainty_then_the_change_columns():
    assert TABLE2_COLUMNS == ("ranker", *registry("contract"))
    assert TABLE2_ROW_COLUMNS + session.CHANGE_COLUMNS == ("ranker", *(m.name for m in TABLE2))
    assert session.CHANGE_COLUMNS == tuple(m.name for m in TABLE2 if isinstance(m, ChangeMeasure))
    assert not set(TABLE2_INTERVAL_COLUMNS) & set(registry("contract"))


def test_every_interval_is_two_registry_columns_in_the_measures_unit():
    for m in TABLE2:
        if m.bounds is not None:
            lo, hi = (column(b) for b in m.bounds)
            assert (lo.unit, hi.unit, lo.digits, hi.digits) == (m.unit, m.unit, m.digits, m.digits), m.name
        if isinstance(m, IntervalMeasure):
            assert column(m.of).bounds is not None and m.name in column(m.of).bounds


def test_profile_vocabularies_and_rounding_come_from_the_registry():
    assert profile_terms.PIN_MEASURES == registry("pinnable")
    assert profile_terms.QUALITY_GATES == {f"{c}_min": c for c in registry("floored")}
    assert set(profile_terms.ROUNDING) == {m.name for m in TABLE2 if m.pinnable and m.unit not in ("count", "directions")}
    claimable = set(registry("claimable"))
    assert profile_terms.MEASURES == tuple(m.name for m in PAIRED_MEASURES if claimable & set(m.columns))
    assert {"strict", "mrr", "ndcg_at_10"} <= set(profile_terms.MEASURES)


def test_compared_digits_and_paper_columns_come_from_the_registry():
    assert history.COMPARED == registry("compared")
    assert hypotheses.DIGITS == {m.unit: m.digits for m in PAIRED_MEASURES}
    assert all(m.unit in hypotheses.DIGITS for m in PAIRED_MEASURES)
    assert paper.COLUMNS == ("ranker", *(c for c in TABLE2_COLUMNS[1:] if c in paper.COLUMNS))  # contract order
    # Every direction measure tested direction by direction has exactly one paired measure.
    for m in TABLE2:
        if isinstance(m, DirectionMeasure) and m.paired:
            assert [p.name for p in PAIRED_MEASURES if m.name in p.columns] == [m.name]


def test_the_terminal_brief_is_the_registrys_brief_columns():
    assert render.BRIEF_COLUMNS["table2"] == ["ranker", *(m.name for m in shown_in("brief"))]
    frame = pd.DataFrame([table2_row()])
    header = render.terminal_tables("table2", frame).splitlines()[0].split()
    assert header == render.BRIEF_COLUMNS["table2"]


def _report_headings(frame: pd.DataFrame) -> list[str]:
    return [c.strip() for c in render.table2_markdown(frame, {}).splitlines()[0].strip("|").split("|")]


def _latex_headings(frame: pd.DataFrame) -> list[str]:
    tex = render.table2_latex(frame, "test", "p", "c")
    return tex.split(r"\toprule")[1].split(r"\midrule")[0].strip().removesuffix(r"\\").strip().split(" & ")


def test_report_md_and_latex_show_the_registrys_columns_in_order():
    frame = pd.DataFrame([table2_row()])
    expected = ["ranker", "label"]
    for m in shown_in("report"):
        if isinstance(m, BaselineMeasure) and "Δ vs" not in expected:
            expected.append("Δ vs")
        expected.append(f"{m.label} [95% CI]" if m.bounds and "report" not in m.bare else m.label)
    assert _report_headings(frame) == expected
    latex = ["Ranker"]
    for m in shown_in("latex"):
        if isinstance(m, BaselineMeasure) and "Baseline" not in latex:
            latex.append("Baseline")
        latex.append(m.tex)
    assert _latex_headings(frame) == [*latex, "Label"]
    spec = "".join("l" if h in ("Ranker", "Baseline") else "r" for h in latex) + "p{4cm}"
    assert rf"\begin{{tabular}}{{{spec}}}" in render.table2_latex(frame, "t", "p", "c")


def test_every_shown_value_is_written_with_its_records_digits():
    row = table2_row()
    line = render.table2_markdown(pd.DataFrame([row]), {}).splitlines()[2]
    cells = [c.strip() for c in line.strip("|").split("|")]
    values = [c for c in cells[2:] if c != "base"]
    for m, cell in zip(shown_in("report"), values):
        if m.unit in ("count", "directions"):
            assert cell == f"{int(row[m.name]):,}", m.name
        else:
            assert cell.startswith(f"{row[m.name]:.{m.digits}f}"), m.name
            assert ("[" in cell) == (m.bounds is not None and "report" not in m.bare), m.name


def test_the_explorer_receives_its_columns_and_renders_table2_from_them():
    meta = table2_columns()
    assert [c["name"] for c in meta] == [m.name for m in shown_in("explorer")]
    for c in meta:
        m = column(c["name"])
        assert (c["label"], c["digits"], c["baseline"]) == (m.label, m.digits, isinstance(m, BaselineMeasure))
        assert (c["lo"], c["hi"]) == (m.bounds if m.bounds and "explorer" not in m.bare else (None, None))
    # explore.js lists no Table II measure: the values it writes come by name from the page's metadata. It reads a
    # row's n, strict, corrections and regressions only to link to directions (failures, fixes / breaks).
    script = (ASSETS / "explore.js").read_text(encoding="utf-8")
    read = set(re.findall(r"\br\.([a-z_0-9]+)\b", script)) & {m.name for m in TABLE2}  # r: a Table II row
    assert read <= {"n", "strict", "corrections", "regressions"}, read
    assert "D.table2_columns" in script


def test_a_new_registry_column_reaches_every_output_that_shows_it(monkeypatch):
    """One record, nothing else: the brief's list is fixed at import, the tables and the page follow at once."""
    new = DirectionMeasure("pref_at_5", lambda c: (c["rank_pos"] <= 5).astype(float), "pct", "Pref@5", position=True,
                           unit="%", digits=2, label="Pref@5 %", tex=r"Pref@5 (\%)", contract=True,
                           shown=frozenset(OUTPUTS))
    monkeypatch.setattr(measures, "TABLE2", (*TABLE2, new))
    monkeypatch.setattr(explore_data, "TABLE2", (*TABLE2, new))
    frame = pd.DataFrame([table2_row(pref_at_5=12.345)])
    assert _report_headings(frame)[-1] == "Pref@5 %"
    assert render.table2_markdown(frame, {}).splitlines()[2].strip("|").split("|")[-1].strip() == "12.35"
    assert _latex_headings(frame)[-2] == r"Pref@5 (\%)"
    assert table2_columns()[-1]["name"] == "pref_at_5"


def test_table3_is_table2_measures_on_each_side_under_its_published_names():
    assert TABLE3_COLUMNS == ("scorer", "n", "l1_strict", "l1_strict_pct", "l1_ties", "l1_unavailable", "l2_strict",
                              "l2_strict_pct")  # table3.csv's contract (docs/protocol.md#outputs)
    for c in TABLE3:  # a Table II measure, or the count only pair-only scoring has
        assert c.measure is measures.UNAVAILABLE or c.measure is column(c.measure.name), c.name
    # The pair-only side is computed by the same records: its keys are their names, its rate the count's share of n.
    o = pd.DataFrame({"strict": [True, False, False], "tie": [False, True, False], "unavailable": [False, False, True]})
    row = pair_only_summary(o, "ce")
    assert tuple(row) == ("scorer", *(c.measure.name for c in TABLE3 if c.side != "l2"))
    assert row["strict_pct"] == 100.0 * 1 / 3 and (row["n"], row["strict"], row["ties"], row["unavailable"]) == (
        3, 1, 1, 1)


def test_a_new_table3_column_is_one_record(monkeypatch):
    """A Table II measure added on the window side reaches table3.csv from its Table II row, nothing else changed."""
    monkeypatch.setattr("reports.tables.TABLE3", (*TABLE3, SideColumn(column("ties"), "l2")))
    monkeypatch.setattr("reports.tables.TABLE3_COLUMNS", (*TABLE3_COLUMNS, "l2_ties"))
    l1 = pair_only_summary(pd.DataFrame({"strict": [True], "tie": [False], "unavailable": [False]}), "ce")
    t = table3([l1], [{"ranker": "ce", "n": 1, "strict": 0, "strict_pct": 0.0, "ties": 1}])
    assert t.columns[-1] == "l2_ties" and t["l2_ties"].tolist() == [1] and str(t["l2_ties"].dtype) == "Int64"


def test_nevir_paired_columns_are_records_with_their_intervals():
    assert NEVIR_PAIRED_COLUMNS == ("scorer", "pairs", "paired", "paired_pct", "paired_lo", "paired_hi", "tied_pairs",
                                    "paired_trec_pct", "paired_trec_lo", "paired_trec_hi")  # published names
    by_name = {m.name: m for m in NEVIR_PAIRED}
    rates = [m for m in NEVIR_PAIRED if isinstance(m, GivenPairMeasure) and m.rule is not None]
    assert sorted(m.rule for m in rates) == sorted(GIVEN_PAIR_TIE_RULES)  # one rate per tie rule
    for m in rates:
        lo, hi = (by_name[b] for b in m.bounds)
        assert (lo.of, hi.of, lo.end, hi.end, lo.unit, lo.digits) == (m.name, m.name, "lo", "hi", m.unit, m.digits)
    assert [m.rule for m in reference.RATES] == ["fail", "trec"]  # report.md's two rate columns, in order
    result = GivenPairPaired(pairs=4, paired=1, tied_pairs=2, rates={"fail": Rate(25.0, 0.0, 50.0),
                                                                     "trec": Rate(50.0, 25.0, 75.0)})
    assert measures.nevir_paired_row("ce", result) == {
        "scorer": "ce", "pairs": 4, "paired": 1, "paired_pct": 25.0, "paired_lo": 0.0, "paired_hi": 50.0,
        "tied_pairs": 2, "paired_trec_pct": 50.0, "paired_trec_lo": 25.0, "paired_trec_hi": 75.0}


def test_a_column_list_is_checked_when_it_is_declared():
    rate = GivenPairMeasure("rate", "a rate", rule="fail", interval=("rate_lo", "rate_hi"))
    with pytest.raises(ValueError, match=r"nevir_paired column 'rate': its interval \('rate_lo', 'rate_hi'\) is not"):
        checked("nevir_paired", (rate,))
    with pytest.raises(ValueError, match="names a column twice"):
        checked("nevir_paired", (rate, *columns.interval_ends(rate), rate))
    assert [m.name for m in checked("x", (rate, *columns.interval_ends(rate)))] == ["rate", "rate_lo", "rate_hi"]
    assert [m.name for m in columns.interval_ends(PairMeasure("p", "a pair rate", interval=True))] == ["p_lo", "p_hi"]


def test_figure1_plots_the_registrys_columns_and_their_intervals():
    assert figures.PREFERENCE.name == "strict_pct" and figures.POSITION.name == "mrr"
    frame = pd.DataFrame([table2_row("a"), table2_row("b", n=4)])
    data = figures.figure1_data({"table2": frame})
    assert data.columns.tolist() == ["ranker", "label", "n", "strict_pct", "mrr", "mean_rank_pos", "mean_rank_neg",
                                     "strict_pct_lo", "strict_pct_hi", "mrr_lo", "mrr_hi", "sampled",
                                     "interval_note"]  # figure1.csv as published
    assert data["mrr_lo"].tolist() == frame[column("mrr").bounds[0]].tolist()
    assert data["sampled"].tolist() == [False, True]
    assert np.isnan(figures.figure1_data({"table2": frame.drop(columns=["mrr_lo"])})["mrr_lo"]).all()
