"""Run history and comparisons: changed / unchanged / undetermined, paired on the same directions."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reports.record import SplitRecord
from reports.changes import decide_change, paired_change, tolerance_change
from reports.history import (ENTRY, FIELDS, HISTORY, HistoryError, reviewed_run, run_id,
                             saved_runs, saved_split)
from reports.table_registry import COMPARISON_COLUMNS
from reports.run_comparison import compare_with, comparison_table
from tests.reports.saved_runs import MANIFEST, save, split_record

N = 400


def table(strict: int, mrr: float) -> pd.DataFrame:
    return pd.DataFrame([{"ranker": "fusion", "n": N, "strict": strict, "strict_pct": 100 * strict / N, "mrr": mrr,
                          "paired_pct": 10.0, "ties": 0, "fallback": 0}])


def directions(strict: np.ndarray, rank_pos: np.ndarray) -> pd.DataFrame:
    """A directions.csv with one ranker: N directions in N/4 groups of four."""
    return pd.DataFrame({"qid": [f"q{i}" for i in range(N)], "group": [f"g{i // 4}" for i in range(N)],
                         "fusion__strict": strict.astype(bool), "fusion__rank_pos": rank_pos,
                         "fusion__rank_neg": rank_pos + 1, "fusion__tie": False, "fusion__fallback": False})


@pytest.fixture
def base() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return directions(rng.random(N) < 0.5, rng.integers(1, 20, N))


def outcomes(frame: pd.DataFrame) -> pd.DataFrame:
    """The ranker's per-direction outcomes (qid and its fields) from a directions frame."""
    return frame[["qid", *(f"fusion__{f}" for f in FIELDS)]].rename(columns=lambda c: c.removeprefix("fusion__"))


def test_identical_runs_are_unchanged_and_a_systematic_shift_is_changed(base) -> None:
    labels = base["group"].to_numpy()
    same = paired_change("strict_pct", outcomes(base), outcomes(base), labels, margin=1.0)
    assert (same.decision, same.delta, same.p_changed) == ("unchanged", 0.0, 1.0) and same.p_unchanged < 0.05
    # 40 failures of "then" turned into successes, one per group for 40 groups: +10 points, p tiny.
    better = base.copy()
    fixed = np.flatnonzero(~base["fusion__strict"].to_numpy())[:40]
    better.loc[fixed, "fusion__strict"] = True
    moved = paired_change("strict", outcomes(better), outcomes(base), labels, margin=1.0)
    assert moved.decision == "changed" and moved.delta == pytest.approx(40.0)  # a count column counts directions
    # Fewer than 40 groups differ (some hold two of the 40), so the bound-aware test decides too: p ≈ 0.01.
    assert moved.now - moved.then == 40 and moved.lo <= 40 <= moved.hi and moved.p_changed < 0.02
    pct = paired_change("strict_pct", outcomes(better), outcomes(base), labels, margin=1.0)
    assert pct.delta == pytest.approx(10.0) and pct.p_changed == moved.p_changed
    assert "changed: then" in moved.message() and "paired p" in moved.message()
    assert (moved.differing_groups, moved.discordant) == (20, 40)
    assert "20 groups and 40 directions differ" in moved.message()


def test_ndcg_at_10_is_compared_direction_by_direction_in_ndcg_units(base) -> None:
    """nDCG@10 (docs/protocol.md#ndcg-at-10): every preferred passage moved from its rank to rank 1 gains
    1 - 1/log2(1 + r) (0 where it was already first; 1 from outside the top 10)."""
    labels = base["group"].to_numpy()
    first = base.assign(fusion__rank_pos=1, fusion__rank_neg=2)
    rank = base["fusion__rank_pos"].to_numpy(dtype=float)
    gain = np.mean(1 - np.where(rank <= 10, 1 / np.log2(1 + rank), 0.0))
    moved = paired_change("ndcg_at_10", outcomes(first), outcomes(base), labels, margin=0.01)
    assert (moved.now, moved.decision, moved.basis) == (1.0, "changed", "paired")
    assert moved.delta == pytest.approx(gain, rel=1e-12) and moved.then == pytest.approx(1 - gain, rel=1e-12)


def test_a_small_balanced_change_is_undetermined_without_a_wide_enough_margin(base) -> None:
    labels = base["group"].to_numpy()
    swapped = base.copy()
    win = np.flatnonzero(~base["fusion__strict"].to_numpy())[:3]
    lose = np.flatnonzero(base["fusion__strict"].to_numpy())[:3]
    swapped.loc[win, "fusion__strict"] = True
    swapped.loc[lose, "fusion__strict"] = False
    tight = paired_change("strict_pct", outcomes(swapped), outcomes(base), labels, margin=0.1)
    wide = paired_change("strict_pct", outcomes(swapped), outcomes(base), labels, margin=5.0)
    none = paired_change("strict_pct", outcomes(swapped), outcomes(base), labels, margin=None)
    # ±0.1 point on 400 directions with 6 changes: below what the sample can certify, said in the row.
    assert (tight.decision, wide.decision, none.decision) == ("margin unreachable", "unchanged", "undetermined")
    assert tight.certifiable > 0.1 and "the smallest margin this sample can certify" in tight.message()
    assert math.isnan(wide.certifiable)  # the TOST certified the declared margin: nothing more to compute
    assert "no margin declared" in none.message()


def grader_pin_rerun(changes: int) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """A grader-sized sample (150 directions in 38 whole groups) and a rerun with ``changes`` outcomes flipped
    both ways (Δ about 0), as a pinned grader's rerun on another machine gives."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"qid": [f"q{i}" for i in range(150)], "group": [f"g{min(i // 4, 37)}" for i in range(150)],
                          "fusion__strict": rng.random(150) < 0.5, "fusion__rank_pos": 1, "fusion__rank_neg": 2,
                          "fusion__tie": False, "fusion__fallback": False})
    rerun = frame.copy()
    wins, losses = np.flatnonzero(~frame["fusion__strict"]), np.flatnonzero(frame["fusion__strict"])
    flipped = [*rng.choice(wins, changes // 2, replace=False),
               *rng.choice(losses, changes - changes // 2, replace=False)]
    rerun.loc[flipped, "fusion__strict"] ^= True  # as many gains as losses: Δ = 0 for an even count
    return outcomes(rerun), outcomes(frame), frame["group"].to_numpy()


def test_a_pin_on_a_150_direction_sample_reports_its_certifiable_margin() -> None:
    """±1 point cannot be certified on 150 directions: the pin says so, with the margin it could certify,
    instead of "undetermined" on every rerun that is not identical."""
    now, then, groups = grader_pin_rerun(4)
    verdict = paired_change("strict_pct", now, then, groups, margin=1.0)
    assert verdict.decision == "margin unreachable" and verdict.p_changed > 0.05
    assert verdict.certifiable > 1.0 and f"certify: ±{verdict.certifiable:.3g}" in verdict.message()
    assert (verdict.n, verdict.differing_groups) == (150, len(set(groups[now["strict"] != then["strict"]])))
    # A margin at least as wide as the certifiable one is left to the tests: never "unreachable".
    wide = paired_change("strict_pct", now, then, groups, margin=verdict.certifiable * 1.05)
    assert wide.decision in ("unchanged", "undetermined")
    # Even identical outcomes cannot certify ±1 point with 38 groups (whose sum a rare whole-group change could
    # move): the design's floor is the certifiable margin then.
    same = paired_change("strict_pct", then, then, groups, margin=1.0)
    assert same.decision == "margin unreachable" and 1.0 < same.certifiable <= verdict.certifiable
    # A rerun whose observed change exceeds the margin is never passed silently: undetermined (a warning) at least.
    moved = then.copy()
    moved.loc[np.flatnonzero(then["strict"])[:2], "strict"] = False  # Δ = −1.33 points
    assert paired_change("strict_pct", moved, then, groups, margin=1.0).decision == "undetermined"


def test_decision_words_and_the_tolerance_rule() -> None:
    assert [decide_change(0.01, 0.2, p_beyond=0.01), decide_change(0.01, 0.01, p_beyond=0.9),
            decide_change(0.2, 0.01, p_beyond=0.9), decide_change(0.01, 0.2, p_beyond=0.9),
            decide_change(0.2, 0.2, reachable=False, p_beyond=0.9), decide_change(0.01, 1.0)] == [
        "changed", "changed within margin", "unchanged", "undetermined", "margin unreachable", "changed"]
    assert tolerance_change(1387, 1387, 0).decision == "unchanged"
    assert tolerance_change(1390, 1387, 3).decision == "unchanged"
    assert tolerance_change(1391, 1387, 3).decision == "changed"
    assert tolerance_change(float("nan"), 1387, 3).decision == "changed"
    assert "tolerance ±3" in tolerance_change(1391, 1387, 3).message()


def record(folder: Path, strict: int, frame: pd.DataFrame, pool: str = "abc", **entries) -> SplitRecord:
    return split_record(folder, "test", table(strict, 0.5), frame,
                        {**MANIFEST, "pool": {"parquet_sha256": pool}, **entries})


def test_compare_to_is_paired_on_the_same_pool_and_unpaired_otherwise(tmp_path: Path, base) -> None:
    results = tmp_path / "results"
    strict = int(base["fusion__strict"].sum())
    ident = "20261201T000000Z-abc-embedded-full"
    saved = save(results, ident, {"test": record(tmp_path / "a", strict, base)})
    assert saved.healed is None and (saved.path / "test" / "outcomes.parquet").is_file()
    assert saved_runs(results) == [ident]
    here = record(tmp_path / "b", strict, base)
    rows = compare_with(results, ident, here)
    assert list(rows.columns) == list(COMPARISON_COLUMNS)
    rows = rows.set_index("measure")
    assert rows.at["strict_pct", "decision"] == "unchanged" and rows.at["strict_pct", "basis"] == "paired"
    assert rows.at["mrr", "decision"] == "undetermined"  # identical, but no MRR margin declared
    assert rows.at["n", "decision"] == "unchanged" and rows.at["n", "basis"] == "no per-direction test for this measure"
    assert rows.at["strict_pct", "paper"] == pytest.approx(52.30)  # the published value rides along on Test
    # Another results folder: its split's manifest names the run its history keeps.
    save(tmp_path / "elsewhere", "20261202T000000Z-x", {"test": record(tmp_path / "c", strict, base, pool="other")})
    rows = compare_with(results, str(tmp_path / "elsewhere"), here).set_index("measure")
    assert rows.at["strict_pct", "basis"] == "unpaired" and rows.at["strict_pct", "decision"] == "unchanged"
    with pytest.raises(HistoryError, match="'no-such-run' is neither a saved run id"):
        compare_with(results, "no-such-run", here)
    with pytest.raises(HistoryError, match=f"saved run {ident} holds no split 'confirmation'"):
        saved_split(results, ident, "confirmation")


def test_a_saved_run_edited_after_it_was_saved_is_refused_naming_the_file(tmp_path: Path, base) -> None:
    """The probe: editing ``.history/<id>/test/table2.csv`` (fusion MRR 0.5878 -> 0.9999) and comparing with the run
    exited 0. Every file of a saved split is checked against ``entry.json`` before use; the typed record is read,
    never the CSV."""
    results = tmp_path / "results"
    strict = int(base["fusion__strict"].sum())
    ident = "20261201T000000Z-abc-embedded-full"
    save(results, ident, {"test": record(tmp_path / "a", strict, base)})
    here = record(tmp_path / "b", strict, base)
    pins = {("fusion", "strict"): strict}
    assert reviewed_run(results, "embedded", "full", "test", "abc", pins).run_id == ident
    for name in ("table2.csv", "table2.parquet", "outcomes.parquet", "manifest.json"):
        path = results / HISTORY / ident / "test" / name
        kept = path.read_bytes()
        path.write_bytes(kept.replace(b"0.5", b"0.9") if b"0.5" in kept else kept + b" ")
        with pytest.raises(HistoryError, match=f"{path} was changed after the run saved it"):
            comparison_table(results, ident, here)
        with pytest.raises(HistoryError, match=f"{path} was changed"):
            reviewed_run(results, "embedded", "full", "test", "abc", pins)
        path.unlink()
        with pytest.raises(HistoryError, match=f"{path} is missing"):
            saved_split(results, ident, "test")
        path.write_bytes(kept)
    assert comparison_table(results, ident, here)["decision"].notna().all()


def test_the_reviewed_run_is_the_newest_saved_run_reproducing_the_pins(tmp_path: Path, base) -> None:
    results = tmp_path / "results"
    strict = int(base["fusion__strict"].sum())
    for ident, value in (("20261101T000000Z-a", strict), ("20261102T000000Z-b", strict + 1),
                         ("20261103T000000Z-c", strict)):
        save(results, ident, {"test": record(tmp_path / ident, value, base)})
    found = reviewed_run(results, "embedded", "full", "test", "abc", {("fusion", "strict"): strict})
    assert found.folder == results / ".history" / "20261103T000000Z-c" / "test"
    assert found.outcomes("fusion")["strict"].sum() == strict and found.outcomes("other") is None
    # A pin is decided on the saved outcomes as read (nullable dtypes), paired with this run's (docs/statistics.md#pins)
    same = paired_change("strict_pct", outcomes(base), found.outcomes("fusion"), base["group"].to_numpy(), margin=1.0)
    assert (same.decision, same.basis, same.n) == ("unchanged", "paired", N)
    assert reviewed_run(results, "embedded", "full", "test", "other-pool", {("fusion", "strict"): strict}) is None
    assert reviewed_run(results, "embedded", "full", "test", "abc", {("fusion", "strict"): strict + 5}) is None
    assert reviewed_run(tmp_path / "none", "embedded", "full", "test", "abc", {}) is None


def test_an_incomplete_run_is_never_listed_nor_used_and_the_next_save_keeps_it(tmp_path: Path, base) -> None:
    """A run folder without ``entry.json`` that the ledger does not list (kept before the history kept typed records,
    or another tool's folder) is not a saved run: ``--compare-to`` names it as incomplete, and the next save keeps
    it, since the suite did not write it, and names it once (docs/outputs.md#whose-folder)."""
    results = tmp_path / "results"
    strict = int(base["fusion__strict"].sum())
    cut = results / HISTORY / "20261101T000000Z-cut" / "test"
    cut.mkdir(parents=True)
    table(strict, 0.5).to_csv(cut / "table2.csv", index=False)
    assert saved_runs(results) == []
    with pytest.raises(HistoryError, match="saved run 20261101T000000Z-cut is incomplete"):
        saved_split(results, "20261101T000000Z-cut", "test")
    saved = save(results, "20261102T000000Z-next", {"test": record(tmp_path / "a", strict, base)})
    assert saved.healed is None and saved.kept == [f"{HISTORY}/20261101T000000Z-cut/"]
    assert sorted(p.name for p in (results / HISTORY).iterdir()) == ["20261101T000000Z-cut", "20261102T000000Z-next"]
    assert (saved.path / ENTRY).is_file() and saved_runs(results) == ["20261102T000000Z-next"]
    again = save(results, "20261103T000000Z-again", {"test": record(tmp_path / "b", strict, base)})
    assert again.kept == [] and (cut / "table2.csv").is_file()  # named once, kept still


def test_run_id_names_commit_profile_and_scope() -> None:
    entries = {"code_commit": "abcdef123456", "profile": {"name": "embedded"}, "scope": "full"}
    ident = run_id([SplitRecord("test", {}, entries)])
    assert "abcdef12-embedded-full" in ident
    partial = run_id([SplitRecord("test", {}, {"scope": "full"})], partial=True)
    assert "-profile-full-partial-" in partial


def test_a_partial_run_is_never_a_pins_reviewed_run_but_is_compared_with(tmp_path: Path, base) -> None:
    results = tmp_path / "results"
    strict = int(base["fusion__strict"].sum())
    save(results, "20261101T000000Z-complete", {"test": record(tmp_path / "a", strict, base)})
    save(results, "20261102T000000Z-partial", {"test": record(tmp_path / "b", strict, base,
                                                               partial=["1 test(s) deselected"])})
    found = reviewed_run(results, "embedded", "full", "test", "abc", {("fusion", "strict"): strict})
    assert found.run_id == "20261101T000000Z-complete"
    now = pd.concat([table(strict, 0.5), table(strict, 0.5).assign(ranker="mine")], ignore_index=True)
    mine = base.assign(**{f"mine__{f}": base[f"fusion__{f}"] for f in FIELDS})
    here = split_record(tmp_path / "c", "test", now, mine, {})
    rows = comparison_table(results, "20261102T000000Z-partial", here)
    assert set(rows["saved_partial"]) == {"1 test(s) deselected"}
    assert rows.drop_duplicates("ranker").set_index("ranker")["side"].to_dict() == {"fusion": "both",
                                                                                     "mine": "this run only"}
    complete = comparison_table(results, "20261101T000000Z-complete", here)
    assert set(complete["saved_partial"]) == {""}
