"""A row scored by another model than the shipped one says so: the report's bottom line, the manifest, the terminal.

The probe edited the shipped cross-encoder judgment file in ``data/reference/judgments/``: the subset run refused it
(a warning), trained the smaller CI-budget cross-encoder instead, and its ``ce`` row changed (MRR 0.229 against
0.401) while neither the report nor the manifest said another model scored it. Now the manifest's
``model:<ranker>`` names the model, its key and where it came from, and why the shipped judgments were refused;
the report's bottom line and the terminal say it (docs/protocol.md#shipped-reference).

The run here is the CI subset's on an empty cache with the shipped judgments edited (a copy: the checkout's files are
never touched); the CI-budget training is replaced by a word-overlap scorer that stands in for the model it would
train (minutes of CPU), so everything else is the suite's own: the refusal, the budget decision, the judging, the
row, the record and the published files.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import fake_project as fake
import harness.models
import rankers.scorers.ce_training
import rankers.shipped
from harness.run import evaluate, publish
from rankers.scorers.base import ScoreBatch
from rankers.shipped import SHIPPED_DIR, ShippedWarning


class StandIn:
    """What the CI-budget training would return, scoring by word overlap instead of a fine-tuned model."""

    model_key = "stand-in-for-the-ci-budget-cross-encoder"

    def score(self, inputs):
        scores = [len(set(re.findall(r"\w+", q.lower())) & set(re.findall(r"\w+", p.lower()))) / 10.0
                  for q, p in inputs]
        return ScoreBatch(np.array(scores, dtype=float), [None] * len(scores))


@pytest.fixture
def edited_judgments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped judgments, copied and one score edited (their seal left as shipped), read in place of the
    checkout's; returns the edited table."""
    copy = tmp_path / "reference"
    shutil.copytree(SHIPPED_DIR / "judgments", copy / "judgments")
    [table] = (copy / "judgments").glob("*.parquet")
    frame = pd.read_parquet(table)
    frame.loc[0, "score"] += 1.0
    frame.to_parquet(table, index=False)
    real = rankers.shipped.judgments_path
    for module in (rankers.shipped, harness.models):  # where the run and its record look for them
        monkeypatch.setattr(module, "judgments_path", lambda identity, shipped_dir=copy: real(identity, copy))
    return table


def test_a_row_another_model_scored_names_it_and_why_the_shipped_one_was_not_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edited_judgments: Path) -> None:
    budgets = []

    def train(*args, budget=None, **kwargs):
        budgets.append(budget)
        return SimpleNamespace(name="stand-in", path=tmp_path / "stand-in", scorer=lambda **options: StandIn())

    monkeypatch.setattr(rankers.scorers.ce_training, "train_cross_encoder", train)
    with pytest.warns(ShippedWarning, match="judgments table"):
        record = evaluate("embedded", splits=["test"], subset_pairs=24, rankers=["ce"], cache_dir=tmp_path / "cache",
                          results_dir=tmp_path / "results")
    assert budgets == ["ci"] and record.failures.empty, record.failures
    scored = record.splits["test"].entries["model:ce"]["ce"]
    assert scored["model"] == "the cross-encoder fine-tuned on the dataset's Train pools, ci budget"
    assert scored["model_key"] == StandIn.model_key and "fine-tuned by this suite" in scored["source"]
    assert str(edited_judgments) in scored["refused"] and "judgments table" in scored["refused"]

    publish(record, tmp_path / "results")
    folder = tmp_path / "results" / "partial" / "test"  # a run of one ranker is partial
    assert json.loads((folder / "manifest.json").read_text())["model:ce"]["ce"] == scored
    report = (folder / "report.md").read_text()
    bottom = report.split("## Bottom line", 1)[1].split("\n## ", 1)[0]
    assert "**Another model scored this row**: `ce` was scored by the cross-encoder fine" in bottom
    assert f"`{StandIn.model_key}`" in bottom and "which were refused" in bottom


def test_the_terminal_names_the_model_that_scored_a_row_in_a_refused_shipped_ones_place(tmp_path: Path) -> None:
    """The report plugin's summary, on the small project whose manifest carries what the run above records."""
    folder, results = fake.write(tmp_path / "project"), tmp_path / "results"
    done = fake.run(folder, results, FAKE_STRICT="3", FAKE_SCORED_BY="1")
    assert done.returncode == 0, done.stdout[-3000:]
    [heading] = [i for i, line in enumerate(done.stdout.splitlines()) if "ANOTHER MODEL SCORED THESE ROWS" in line]
    lines = done.stdout.splitlines()[heading + 1:heading + 3]
    assert all("ce was scored by the cross-encoder fine-tuned on the dataset's Train pools, ci budget (model key "
               "ce-ci-key;" in line and "which were refused: shipped judgments table" in line for line in lines), lines
    assert [line.split("]")[0] for line in lines] == ["[confirmation", "[test"]
    assert "Another model scored this row" in (results / "test" / "report.md").read_text()
