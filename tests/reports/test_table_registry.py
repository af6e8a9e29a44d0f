"""One registry for every published table (``reports.table_registry.TABLES``, docs/protocol.md#outputs): each table's
columns and intervals are declared there once, every frame is laid out in them, the rows every producer computes name
only them, and no module under ``reports/`` keeps a column list of a published table of its own."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from fixtures.populations import annotate_population
from fixtures.settings import PROJECT_ROOT
from reports import render, report_md
from reports.comparisons import pairwise_table
from reports.measures import CHANGE_COLUMNS, NEVIR_PAIRED, TABLE2, TABLE2_ROW_COLUMNS, TABLE3_COLUMNS
from reports.order_bias import REPAIRS
from reports.populations import table1_row
from reports.record_builder import RecordBuilder
from reports.table_registry import TABLES, Table
from reports.tie_branch import expected_grade_rows, tie_branch_table
from tests.reports.test_populations import toy_directions, toy_pool

PUBLISHED = ("table1", "table2", "seeds", "perturbation", "table3", "nevir_paired", "tie_branch", "pairwise", "cost",
             "unavailable", "order_bias", "endpoints", "claims", "sequential", "coverage", "comparison")
#: The functions computing rows of a table, by file: the string keys of their dict literals, ``update`` keywords
#: and item assignments are the columns they fill.
PRODUCERS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "table1": (("reports/populations.py", ("table1_row",)), ("harness/parts.py", ("table1",))),
    "seeds": (("harness/parts.py", ("seed_spread",)),),
    "perturbation": (("harness/parts.py", ("_perturbation_row",)),),
    "tie_branch": (("reports/tie_branch.py", ("tie_branch_table", "expected_grade_rows")),),
    "cost": (("reports/cost.py", ("stage_cost", "judgment_cost", "ranking_cost", "replay_rows")),
             ("harness/sequential.py", ("cost_row",))),
    "unavailable": (("harness/window_parts.py", ("unavailable",)),),
    "order_bias": (("reports/order_bias.py", ("order_bias_row",)),),
    "endpoints": (("harness/window_parts.py", ("endpoints",)), ("rankers/scorers/results.py", ("endpoint_summary",))),
    "claims": (("reports/hypotheses.py", ("row",)),
               ("harness/checks.py", ("single_seed_row", "declaration", "claim_check", "gate_checks", "pin_check"))),
    "sequential": (("harness/sequential.py", ("claim_rows", "_stop_columns")),),
    "coverage": (("harness/parts.py", ("table2_row",)), ("rankers/kinds/trec_run.py", ("rank",)),
                 ("rankers/trec_run.py", ("totals", "direction_coverage"))),
}
#: Columns a producer fills under a computed name, which the key scan cannot read.
COMPUTED = {"order_bias": {f"windows_with_{name}" for name in REPAIRS},
            "cost": {f"share_{k}" for k in ("groups", "directions", "judgments")}}
#: Keys a producer above writes that are no column of its table: a usage record ``judgment_cost`` reads, and
#: ``table2_row``'s manifest entries, memo key and cost row.
NOT_COLUMNS = {"cost": {"latency_s"},
               "coverage": {"code", "coverage", "of_eligible", "qrels", "requested", "run", "seed", "stage"}}
#: Column lists under ``reports/`` outside the registry, each of something that is not a published table's columns.
NOT_TABLES = {
    ("reports/tables.py", "DIRECTION_BASE_COLUMNS"): "directions.csv, a contract file built from the population",
    ("reports/tables.py", "JUDGMENTS_CSV_COLUMNS"): "judgments.csv, a contract file built from the judgments",
    ("reports/outcomes.py", "OUTCOME_COLUMNS"): "a ranker's per-direction outcome frame, an input of every table",
    ("reports/history.py", "STORED_OUTCOME_COLUMNS"): "outcomes.parquet in the history, never published",
    ("reports/run_record.py", "FAILURE_COLUMNS"): "RunRecord.failures, a frame the specs read",
    ("reports/run_record.py", "CHECK_COLUMNS"): "RunRecord.checks, a frame the specs read",
    ("reports/report_md.py", "COMPARISON_BRIEF_COLUMNS"): "what report.md shows of comparison.csv (checked below)",
    ("reports/bottom_line.py", "VERDICT_COLUMNS"): "report.md's verdict table, headings of rendered claims.csv cells",
    ("reports/measures.py", "TABLE2_COLUMNS"): "Table II's contract, derived from its measure records",
    ("reports/measures.py", "TABLE3_COLUMNS"): "Table III's columns, derived from its measure records",
    ("reports/measures.py", "NEVIR_PAIRED_COLUMNS"): "nevir_paired's columns, derived from its measure records",
}


def test_every_published_table_is_one_record() -> None:
    assert tuple(TABLES) == PUBLISHED
    assert all(isinstance(t, Table) and t.stem == stem for stem, t in TABLES.items())
    for t in TABLES.values():
        assert len(set(t.columns)) == len(t.columns), t.stem
        assert set(t.keys) <= set(t.columns), t.stem
        for interval in t.intervals:
            assert {interval.lo, interval.hi} <= set(t.columns), (t.stem, interval)


def test_measure_tables_take_columns_and_intervals_from_their_measure_records() -> None:
    table2 = TABLES["table2"]
    assert table2.columns == (*TABLE2_ROW_COLUMNS, *CHANGE_COLUMNS, "label", "compare_to", "seeds")
    assert {(i.name, i.lo, i.hi) for i in table2.intervals} == {(m.name, *m.bounds) for m in TABLE2 if m.bounds}
    assert {"strict_pct", "mrr", "delta_pts", "paired_pct"} <= {i.name for i in table2.intervals}
    assert TABLES["table3"].columns == TABLE3_COLUMNS
    assert [(i.lo, i.hi) for i in TABLES["nevir_paired"].intervals] == [m.bounds for m in NEVIR_PAIRED if m.bounds]


def test_the_record_builder_lays_every_table_out_in_its_columns() -> None:
    """Rows computed in any order, each holding part of the columns, give the table's columns in its order; a column
    it does not declare follows them."""
    rec = RecordBuilder()
    for stem, t in TABLES.items():
        late = {c: 1 for c in reversed(t.columns)}
        early = {**{k: 0 for k in t.keys}, "undeclared": 0, **{c: 0 for c in t.columns[len(t.columns) // 2:]}}
        rec.add(stem, "test", early, order=1)
        rec.add(stem, "test", late, order=2)
    for stem, frame in rec.tables()["test"].items():
        assert list(frame.columns) == [*TABLES[stem].columns, "undeclared"], stem


def test_frames_computed_in_reports_have_the_registry_columns() -> None:
    rec = RecordBuilder()
    rec.add("table1", "test", {"population": "test",
                               **table1_row(annotate_population(toy_directions(), toy_pool()), "test")})
    per = pd.DataFrame({"branch": ["equal_score", "different_score"], "strict": [True, False],
                        "s_pos": [4.0, 3.0], "s_neg": [4.0, 1.0]})
    counts = {"split": 1, "split_right": 1, "fusion_right_on_split": 0, "still_tied": 0,
              "fusion_right_on_still_tied": 0}
    for row in [*tie_branch_table(per, "g", 4.0), *expected_grade_rows(counts, "g", 2, 1)]:
        rec.add("tie_branch", "test", row)
    tables = rec.tables()["test"]
    for stem in ("table1", "tie_branch"):
        assert tuple(tables[stem].columns) == TABLES[stem].columns, stem

    directions = pd.DataFrame({"qid": [f"q{i}" for i in range(8)], "pair_id": [f"p{i // 2}" for i in range(8)],
                               "group": [f"g{i // 4}" for i in range(8)], "eligible": True, "complete": True})
    outcomes = {name: pd.DataFrame({"qid": directions["qid"], "strict": strict, "tie": False, "fallback": False,
                                    "rank_pos": np.arange(1.0, 9.0), "rank_neg": np.arange(2.0, 10.0)})
                for name, strict in (("a", [True] * 6 + [False] * 2), ("b", [True, False] * 4))}
    pairwise = pairwise_table(outcomes, directions, n_resamples=50, n_permutations=50)
    assert (*pairwise.columns, "population") == TABLES["pairwise"].columns  # the part adds the population


def _keys(function: ast.AST) -> set[str]:
    """The column names a row-building function writes: dict-literal keys, ``update`` keywords, item assignments."""
    found: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Dict):
            found |= {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
            found |= {k.arg for k in node.keywords if k.arg}
        elif isinstance(node, ast.Assign):
            found |= {t.slice.value for t in node.targets if isinstance(t, ast.Subscript)
                      and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str)}
    return found


def test_every_producer_fills_exactly_its_tables_columns() -> None:
    """Between them, the functions that compute a table's rows fill every column the registry declares and no
    other: a column added, renamed or dropped in one place alone fails here."""
    for stem, producers in PRODUCERS.items():
        filled: set[str] = set()
        for path, names in producers:
            tree = ast.parse((PROJECT_ROOT / path).read_text(encoding="utf-8"))
            functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            assert set(names) <= set(functions), (path, sorted(set(names) - set(functions)))
            for name in names:
                filled |= _keys(functions[name])
        filled = (filled | COMPUTED.get(stem, set())) - NOT_COLUMNS.get(stem, set())
        assert filled == set(TABLES[stem].columns), (stem, sorted(filled - set(TABLES[stem].columns)),
                                                     sorted(set(TABLES[stem].columns) - filled))


def _column_lists(path: Path) -> dict[str, ast.expr]:
    """Module-level ``*_COLUMNS`` assignments of ``path`` whose value spells out column names (a string literal)."""
    out = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        for target in targets:
            if isinstance(target, ast.Name) and target.id.endswith("_COLUMNS") and node.value is not None \
                    and isinstance(node.value, (ast.Tuple, ast.List)) \
                    and any(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts):
                out[target.id] = node.value
    return out


def test_no_module_under_reports_lists_a_published_tables_columns_of_its_own() -> None:
    found = {(str(p.relative_to(PROJECT_ROOT)), name) for p in sorted((PROJECT_ROOT / "reports").glob("*.py"))
             if p.name != "table_registry.py" for name in _column_lists(p)}
    assert found == set(NOT_TABLES), sorted(found ^ set(NOT_TABLES))


def test_no_column_list_name_means_two_things() -> None:
    """A ``*_COLUMNS`` name is defined in one module of the project's packages (importing it elsewhere is fine)."""
    where: dict[str, list[str]] = defaultdict(list)
    for package in ("fixtures", "rankers", "reports", "harness"):
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, ast.AnnAssign) else []
                for t in targets:
                    if isinstance(t, ast.Name) and t.id.endswith("_COLUMNS"):
                        where[t.id].append(str(path.relative_to(PROJECT_ROOT)))
    assert not {name: paths for name, paths in where.items() if len(paths) > 1}


def test_the_columns_outputs_show_are_their_tables() -> None:
    assert set(report_md.COMPARISON_BRIEF_COLUMNS) <= set(TABLES["comparison"].columns)
    assert set(render.BRIEF_COLUMNS["claims"]) - {"decided_in"} <= set(TABLES["claims"].columns)
    assert set(render.BRIEF_COLUMNS["table2"]) <= set(TABLES["table2"].columns)
