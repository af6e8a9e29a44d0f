"""A declared sequential sample end to end on the CI subset: it stops early on a large effect, spends its budget
on none (docs/statistics.md#sequential-samples).

A temporary profile extends the embedded one with two sequential samples of the Test and confirmation splits'
directions, each judged two source groups per look by fast Python scorers whose effect is known
(``tests.support.sequential_scorers``): on ``clear`` a scorer that knows every answer against one that mixes
every answer up (every designated pair differs, the same way); on ``noise`` two salted coins (no effect). The
run publishes ``cost.csv`` rows with the looks' spending and ``sequential.csv`` rows with each claim's
anytime-valid p-values and confidence sequence; a second run reads every judgment from the cache and stops at
the same look.
"""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from fixtures.settings import PROJECT_ROOT
from reports.render import md_escape
from tests.harness.test_end_to_end import SPLITS, run_specs

# fusion's own row too: Figure 1 needs a ranker with full-pool ranks beside the designated-pair ones; the manifest
# spec names the population artifact the explorer page is built from. The CI subset with --grader-sample 0: a
# sequential sample's own budget bounds it (--grader-sample 4 would cap it to one group).
SELECT = ("--grader-sample", "0",
          "-k", "sequential or knows or mixes_up or coin or (table2_row and fusion and not fusion_) or run_manifest")
NOISE_JUDGMENTS = 40

PROFILE = f"""
[profile]
name = "e2e-sequential"
extends = "embedded"
pythonpath = ["{PROJECT_ROOT}"]

[samples.clear]
sequential = true
batch = 2
budget = {{ max_directions = 200, judgments = 400 }}
description = "a large effect: decided before the budget"

[samples.noise]
sequential = true
batch = 2
budget = {{ max_directions = 200, judgments = {NOISE_JUDGMENTS} }}
description = "no effect: the budget is spent"

[rankers.mixes_up]
kind = "python"
factory = "tests.support.sequential_scorers:mixes_up"
population = "clear"
mode = "designated"
compare_to = "mixes_up"
order = 80

[rankers.knows]
like = "mixes_up"
factory = "tests.support.sequential_scorers:knows"
compare_to = "mixes_up"
order = 81

[rankers.coin_b]
kind = "python"
factory = "tests.support.sequential_scorers:coin"
options = {{ salt = "b" }}
population = "noise"
mode = "designated"
compare_to = "coin_b"
order = 82

[rankers.coin_a]
like = "coin_b"
options = {{ salt = "a" }}
compare_to = "coin_b"
order = 83
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("e2e-sequential")
    profile = root / "sequential.toml"
    profile.write_text(PROFILE, encoding="utf-8")
    first = run_specs(profile, root / "first", *SELECT)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-4000:]
    second = run_specs(profile, root / "second", *SELECT)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-4000:]
    return {"first": root / "first" / "partial", "second": root / "second" / "partial", "stdout": first.stdout}


def _cost(folder, split: str) -> pd.DataFrame:
    return pd.read_csv(folder / split / "cost.csv").set_index("stage")


@pytest.mark.parametrize("split", SPLITS)
def test_a_large_effect_stops_before_the_budget_and_no_effect_spends_it(runs, split: str) -> None:
    cost = _cost(runs["first"], split)
    clear, noise = cost.loc["clear_sequential"], cost.loc["noise_sequential"]
    assert clear["stop"] == "decided", clear["stop_reason"]
    assert clear["judgments"] < 400 and clear["directions"] < clear["full_directions"]
    assert 0 < clear["share_judgments"] < 1 and clear["looks"] >= 1
    # Two distinct scorers judge both designated passages of every direction: 4 judgments a direction.
    assert clear["judgments"] == 4 * clear["directions"]
    assert noise["stop"] == "budget" and "judgments" in noise["stop_reason"], noise["stop_reason"]
    assert noise["judgments"] <= NOISE_JUDGMENTS < noise["judgments"] + 4 * noise["directions"]
    claims = pd.read_csv(runs["first"] / split / "claims.csv").set_index("claim")
    assert claims.loc["h2_knows_strict_gt_mixes_up", "status"] == "holds"
    assert "sequential sample clear" in claims.loc["h2_knows_strict_gt_mixes_up", "measured"]
    assert claims.loc["h2_coin_a_strict_gt_coin_b", "status"] == "inconclusive"
    seq = pd.read_csv(runs["first"] / split / "sequential.csv").set_index("claim")
    row = seq.loc["h2_knows_strict_gt_mixes_up"]
    assert row["p_greater"] <= 0.025 and 0 < row["cs_lo"] <= 100 <= row["cs_hi"] + 1e-9
    assert row["decided_after_groups"] == row["groups"]
    # The verdict's interval at the stop is the confidence sequence (valid there); the bootstrap one sits beside it.
    shown = claims.loc["h2_knows_strict_gt_mixes_up"]
    assert (shown["lo"], shown["hi"]) == pytest.approx((row["cs_lo"], row["cs_hi"]))
    assert "confidence sequence, valid at this data-dependent stop" in shown["measured"]
    t2 = pd.read_csv(runs["first"] / split / "table2.csv").set_index("ranker")
    assert t2.loc["knows", "n"] == clear["directions"] and t2.loc["coin_a", "n"] == noise["directions"]
    assert md_escape("clear_sequential") in (runs["first"] / split / "report.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("split", SPLITS)
def test_the_verdicts_the_terminal_and_the_explorer_say_where_a_sequential_claim_stopped(runs, split: str) -> None:
    clear = _cost(runs["first"], split).loc["clear_sequential"]
    k, g, d, j = (int(clear[c]) for c in ("looks", "groups", "directions", "judgments"))
    row = pd.read_csv(runs["first"] / split / "sequential.csv").set_index("claim").loc["h2_knows_strict_gt_mixes_up"]
    assert (row["look"], row["stop_groups"], row["stop_directions"], row["stop_judgments"], row["stop_reason"]) == \
        (k, g, d, j, clear["stop_reason"])
    assert row["decided_look"] == k  # the sample stops at the look that decides its one claim
    stopped = (f"sequential sample clear stopped at look {k}: {g} groups, {d} directions, {j} judgments "
               f"({clear['stop_reason']}); decided at look {k} ({g} groups, {d} directions, {j} judgments)")
    verdicts = (runs["first"] / split / "report.md").read_text(encoding="utf-8").split("## Each verdict")[1]
    sentence = next(line for line in verdicts.splitlines() if "`knows`" in line and "`mixes" in line)
    assert sentence.startswith("- **holds**") and sentence.endswith(f" The {md_escape(stopped)}.")
    assert f"[{split}] h2_knows_strict_gt_mixes_up (holds): {stopped}" in runs["stdout"]
    page = (runs["first"] / split / "explore.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    point = data["sequential"]["h2_knows_strict_gt_mixes_up"]
    assert point | {"sample": "clear", "look": k, "groups": g, "directions": d, "judgments": j, "decided_look": k} == point


@pytest.mark.parametrize("split", SPLITS)
def test_a_rerun_reads_the_cache_and_stops_at_the_same_look(runs, split: str) -> None:
    first, second = _cost(runs["first"], split), _cost(runs["second"], split)
    for stage in ("clear_sequential", "noise_sequential"):
        for column in ("groups", "directions", "judgments", "stop"):
            assert first.loc[stage, column] == second.loc[stage, column], (stage, column)
