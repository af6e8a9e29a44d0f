"""Inputs judged on a cut text are counted where a reader looks: ``cost.csv`` and the end of the run.

The probe fed 100 KB texts: the cuts were counted only inside the score cache (each input's usage),
in no published file, though the README says they are counted. Each cost row now carries
``truncated`` (distinct inputs or judgments whose text was cut to the scorer's budget), and the
terminal summary names every stage that cut any.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

import fake_project as fake
from reports.cost import judgment_cost, stage_cost


def test_cost_rows_count_the_inputs_judged_on_a_cut_text() -> None:
    frame = pd.DataFrame({"qid": ["a", "a", "b", "b"], "pid": ["p1", "p1", "p2", "p3"], "score": 1.0,
                          "usage": [{"truncated": 1.0}, {"truncated": 1.0}, {"truncated": 0.0}, {}]})
    assert stage_cost("window", frame)["truncated"] == 1  # distinct inputs: the repeated one counts once
    calls = pd.DataFrame({"key": ["k1", "k1", "k2"], "latency_s": 1.0, "input_tokens": 5.0, "output_tokens": 1.0,
                          "available": True, "truncated": [1, 1, 1]})
    assert judgment_cost("listwise", frame, calls)["truncated"] == 2


def test_a_run_that_cut_inputs_says_so_in_cost_csv_and_at_its_end(tmp_path: Path) -> None:
    folder, results = fake.write(tmp_path / "project"), tmp_path / "results"
    done = fake.run(folder, results, FAKE_STRICT="3", FAKE_TRUNCATED="3")
    assert done.returncode == 0, done.stdout[-3000:]
    for split in fake.SPLITS:
        cost = pd.read_csv(results / split / "cost.csv")
        assert cost.set_index("stage").at["ce_window", "truncated"] == 3
        assert f"[{split}] ce_window: 3 inputs cut to the scorer's input budget (cost.csv, truncated)" in done.stdout
    clean = fake.run(folder, tmp_path / "clean", FAKE_STRICT="3")
    assert "inputs cut to the scorer's input budget" not in clean.stdout
