"""Listwise and pairwise rankers declared in a profile, end to end on the CI subset, on a real model.

A temporary profile extends the embedded one and declares, on a seeded sample of the Test split's directions,
a listwise ranker (RankGPT-style sliding sub-windows over the fusion top 3, with an order check), the very
same declaration pointed at an OpenAI-compatible llama.cpp server on 127.0.0.1 (only ``backend``, ``url``
and ``model`` change), and pairwise rankers (all pairs, PRP-sliding and designated mode), all on the
embedded SmolLM2-135M GGUF (a protocol model: its rankings are not meant to be good). The specs then
publish their Table II rows, H2 claims, cost rows and repair / order-check counts; a second run reads every
judgment from the caches and publishes the same tables.
"""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from tests.harness.test_end_to_end import run_specs

NAMES = ("listwise_smol", "listwise_smol_server", "pairwise_smol", "pairwise_smol_sliding", "pairwise_smol_pairs")
SELECT = "judged_fusion or " + " or ".join(NAMES)

PROFILE = """
[profile]
name = "e2e-judges"
extends = "embedded"

[samples.judged]
directions = 4
description = "seeded whole pairs for the LLM judges"

[gates]
# SmolLM2-135M is a protocol model: an unusable reply is a counted fallback (order_bias.csv), not a gate failure.
fallback_pct_max = 100.0

[rankers.judged_fusion]
kind = "fusion"
population = "judged"
compare_to = "judged_fusion"
order = 70

[rankers.listwise_smol]
kind = "llm_listwise"
backend = "llamacpp"
model = "builtin:smollm2-135m-instruct"
population = "judged"
compare_to = "judged_fusion"
thinking = false
window = 3
sub_window = 2
step = 1
order_check = 1
passage_tokens = 64
order = 71

[rankers.listwise_smol_server]
like = "listwise_smol"
backend = "openai"
url = "{url}"
model = "smollm2"
order = 72

[rankers.pairwise_smol]
kind = "llm_pairwise"
backend = "llamacpp"
model = "builtin:smollm2-135m-instruct"
population = "judged"
compare_to = "judged_fusion"
thinking = false
window = 3
passage_tokens = 64
order = 73

[rankers.pairwise_smol_sliding]
like = "pairwise_smol"
algorithm = "sliding"
passes = 2
order = 74

[rankers.pairwise_smol_pairs]
like = "pairwise_smol"
mode = "designated"
order = 75
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from fixtures.gguf import smollm2_gguf
    from tests.support.llama_server import LlamaServer, ServerUnavailable, check_server_available

    try:
        model = smollm2_gguf()
        check_server_available()
    except (FileNotFoundError, ServerUnavailable) as exc:
        pytest.skip(str(exc))
    root = tmp_path_factory.mktemp("e2e-judges")
    server = LlamaServer(model.path, model="smollm2", n_ctx=2048, n_threads=2)
    server.start()
    try:
        profile = root / "judges.toml"
        profile.write_text(PROFILE.format(url=server.base_url), encoding="utf-8")
        args = ("-k", SELECT, "--splits", "test")
        cold = run_specs(profile, root / "cold", *args)
        warm = run_specs(profile, root / "warm", *args)
    finally:
        server.stop()
        server.log_path.unlink(missing_ok=True)
    return {"cold": cold, "warm": warm, "root": root}


def _published(runs, run: str):
    """Where a run was published: a selection (-k, -m) goes under <results>/partial."""
    return runs["root"] / run / "partial" / "test"


def _table(runs, name: str, run: str = "cold") -> pd.DataFrame:
    return pd.read_csv(_published(runs, run) / f"{name}.csv")


@pytest.mark.llm
def test_both_kinds_get_table_ii_rows_and_h2_claims(runs) -> None:
    assert runs["cold"].returncode == 0, runs["cold"].stdout[-4000:] + runs["cold"].stderr[-2000:]
    t2 = _table(runs, "table2").set_index("ranker")
    fusion_n = int(t2.loc["judged_fusion", "n"])
    assert fusion_n == 4
    for name in NAMES:
        assert t2.loc[name, "n"] == fusion_n and 0 <= t2.loc[name, "strict"] + t2.loc[name, "ties"] <= fusion_n
    assert math.isnan(t2.loc["pairwise_smol_pairs", "mrr"]) and not math.isnan(t2.loc["listwise_smol", "mrr"])
    claims = set(_table(runs, "claims")["claim"])
    for name in NAMES:
        assert f"h2_{name}_strict_gt_judged_fusion" in claims
    assert "h2_listwise_smol_mrr_gt_judged_fusion" in claims and "h2_pairwise_smol_pairs_mrr_gt_judged_fusion" \
        not in claims


@pytest.mark.llm
def test_cost_rows_count_model_judgments_tokens_and_time_per_window(runs) -> None:
    cost = _table(runs, "cost").set_index("stage")
    for name, stages in (("listwise_smol", ("window", "pair_only")), ("listwise_smol_server", ("window", "pair_only")),
                         ("pairwise_smol", ("window", "pair_only")), ("pairwise_smol_pairs", ("pair_only",))):
        for stage in stages:
            row = cost.loc[f"{name}_{stage}"]
            assert row["requests"] > 0 and row["judgments"] >= row["requests"], (name, stage)
            assert row["input_tokens"] > 0 and row["wall_s"] > 0 and row["windows"] == 4, (name, stage)
            assert row["wall_s_per_window"] == pytest.approx(row["wall_s"] / row["windows"])
    # All pairs of a 3-passage window in both orders: 6 judgments per window.
    assert cost.loc["pairwise_smol_window", "judgments"] == 4 * 6
    # Designated mode: the two orders of the designated pair, 2 judgments per direction (shared with L1's).
    assert cost.loc["pairwise_smol_pairs_pair_only", "judgments"] == 4 * 2
    # Sub-windows [1, 3) and [0, 2) of a 3-passage window: 2 judgments per window and per reversed window (1 of
    # them), fewer where a window stopped at an unusable reply (it falls back at once).
    windows = _table(runs, "order_bias").set_index(["ranker", "scope"]).loc[("listwise_smol", "window")]
    assert 5 <= cost.loc["listwise_smol_window", "judgments"] <= 4 * 2 + 1 * 2
    assert cost.loc["listwise_smol_window", "fallback_windows"] == windows["fallback_windows"]


@pytest.mark.llm
def test_repairs_order_sensitivity_and_inconsistent_pairs_are_published(runs) -> None:
    bias = _table(runs, "order_bias").set_index(["ranker", "scope"])
    for name in ("listwise_smol", "listwise_smol_server"):
        row = bias.loc[(name, "window")]
        assert row["windows"] == 4 and 0 <= row["fallback_windows"] <= 4
        for repair in ("duplicates", "out_of_range", "missing"):
            assert 0 <= row[f"windows_with_{repair}"] <= 4
        assert row["order_checked"] <= 1 and row["order_changed"] <= row["order_checked_with_pair"]
    for name in ("pairwise_smol", "pairwise_smol_sliding", "pairwise_smol_pairs"):
        row = bias.loc[(name, "pair_only")]
        assert row["pairs"] == 4 and 0 <= row["inconsistent_pairs"] <= 4  # one designated pair per direction
        assert row["inconsistent_pct"] == pytest.approx(100 * row["inconsistent_pairs"] / 4)
    assert bias.loc[("pairwise_smol", "window"), "pairs"] == 4 * 3  # all pairs of 3 passages
    # The designated ranker reads the very comparisons the window ranker's pair scope made (one judge key).
    assert bias.loc[("pairwise_smol_pairs", "pair_only"), "inconsistent_pairs"] == \
        bias.loc[("pairwise_smol", "pair_only"), "inconsistent_pairs"]
    manifest = json.loads((_published(runs, "cold") / "manifest.json").read_text())
    text = json.dumps(manifest)
    assert "order_bias:listwise_smol:window" in text and "order_bias:pairwise_smol_pairs:pair_only" in text


@pytest.mark.llm
def test_a_warm_rerun_judges_only_what_was_unusable_and_publishes_the_same_rows(runs) -> None:
    assert runs["warm"].returncode == 0, runs["warm"].stdout[-4000:]
    stages = json.loads((_published(runs, "warm") / "manifest.json").read_text())["stages_wall_clock"]
    judged = {k: (v["scored_now"], v["retried"]) for k, v in stages.items() if "scored_now" in v}
    assert judged and all(now == retried for now, retried in judged.values()), judged  # only unusable ones again
    # The in-process judgments are reproducible bit for bit, retried or not; a server's are its own business.
    cold, warm = (_table(runs, "table2", r).set_index("ranker") for r in ("cold", "warm"))
    local = [n for n in NAMES if n != "listwise_smol_server"]
    pd.testing.assert_frame_equal(cold.loc[local], warm.loc[local])
