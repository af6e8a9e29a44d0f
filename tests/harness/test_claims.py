"""Claims as pytest outcomes: families fixed by the shipped profiles, whole families decided once, verdicts asserted."""
from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import harness.checks as checks
import harness.claims as claims
from harness.claims import ClaimBook, check_claim_names, definitions
from harness.profile import load_profile
from reports.claim_measures import ClaimTest
from reports.hypotheses import decide_family
from tests.support.checks import check_claim, check_pin


def test_the_embedded_profile_declares_four_families() -> None:
    families: dict[str, int] = {}
    for d in definitions(load_profile("embedded")).values():
        families[d.family] = families.get(d.family, 0) + 1
    # H2: ce (strict, MRR) and the three designated-pair grader rankers (strict); H3: the two argmax-grade pair
    # rankers. The window grader rankers are declared but not enabled (their CPU sample decides nothing).
    assert families == {"H1": 4, "H2": 5, "H3": 2, "H3x": 1}


def test_a_user_ranker_gets_its_own_family_and_leaves_the_study_s_families_alone(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                    '[rankers.my_ce]\nlike = "ce"\norder = 45\n'
                    '[rankers.ce]\nbatch_size = 16\n'  # a built-in ranker changed, not added: stays in H2
                    '[claims.my_ce_beats_e0]\nranker = "my_ce"\nversus = "e0"\nmeasure = "mrr"\nfamily = "H1"\n',
                    encoding="utf-8")
    mine = definitions(load_profile(str(path)))
    base = definitions(load_profile("embedded"))
    assert {n: d.family for n, d in mine.items() if n in base} == {n: d.family for n, d in base.items()}
    assert mine["h2_my_ce_strict_gt_fusion"].family == mine["h2_my_ce_mrr_gt_fusion"].family == "H2:my_ce"
    assert mine["my_ce_beats_e0"].family == "H1:my_ce"  # a user's claim never joins the study's H1


class FakeEvaluation:
    def __init__(self) -> None:
        self.profile = load_profile("embedded")
        self.settings = SimpleNamespace(seed=13)
        self._shared: dict = {}
        self.measured: list[str] = []
        self.memo = SimpleNamespace(get=lambda label, parts, compute, keep=None: compute())  # nothing kept

    def shared(self, key, build):
        return self._shared.setdefault(key, build())


def test_a_family_is_decided_once_with_its_unmeasured_members_counted(monkeypatch) -> None:
    ev = FakeEvaluation()

    def fake_measure(ev_, split, d, single_seed=False):
        ev.measured.append(d.name)
        return ClaimTest(d, 2.0, 1.0, 3.0, 0.5, 0.004, 0.999, 300, 60, "pts")

    monkeypatch.setattr(claims, "measure", fake_measure)
    monkeypatch.setattr(claims, "_groups", lambda ev_, split, name, qids=None: np.array([f"g{i}" for i in range(60)]))
    selected = frozenset({("test", "h1_e0_strict_gt_fusion"), ("test", "h1_bg8_mrr_gt_e0")})
    book = ClaimBook(ev, selected)
    first = book.result("test", "h1_e0_strict_gt_fusion")
    assert book.result("test", "h1_bg8_mrr_gt_e0").family_hypotheses == first.family_hypotheses == 8
    assert sorted(ev.measured) == ["h1_bg8_mrr_gt_e0", "h1_e0_strict_gt_fusion"]  # once, and only the selected
    # Two measured at p 0.004 among 8 hypotheses: 0.004 × 8 = 0.032, then × 7 = 0.028 -> 0.032 both: holds.
    assert first.status == "holds" and first.p_adjusted == pytest.approx(0.032)
    assert decide_family([fake_measure(ev, "test", book.definitions["h1_e0_strict_gt_fusion"])])[0].p_adjusted == \
        pytest.approx(0.008)  # alone it would be 0.004 × 2: the declared family is larger
    with pytest.raises(KeyError, match="no claim named"):
        book.result("test", "h9_nothing")


class Report:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, table: str, split: str, row: dict, order=None) -> None:
        self.rows.append(row)


def result(p_claimed: float, p_other: float, name: str = "h1_e0_strict_gt_fusion"):
    d = definitions(load_profile("embedded"))[name]
    return decide_family([ClaimTest(d, -4.6, -6.4, -2.9, 0.9, p_claimed, p_other, 2735, 699, "pts")])[0]


def test_check_claim_asserts_only_reviewed_decisive_expectations() -> None:
    profile = load_profile("embedded")
    report = Report()
    with pytest.raises(pytest.xfail.Exception, match="fails, as recorded"):  # reviewed as fails on Test
        check_claim(profile, report, "test", result(1.0, 0.0001), subset=False)
    with pytest.raises(pytest.fail.Exception, match="now HOLDS"):
        check_claim(profile, report, "test", result(0.0001, 1.0), subset=False)
    with pytest.warns(checks.InconclusiveClaim, match="reviewed as 'fails' but is now inconclusive"):
        check_claim(profile, report, "test", result(0.5, 0.5), subset=False)
    check_claim(profile, report, "confirmation", result(0.0001, 1.0), subset=False)  # no expectation: reported
    row = report.rows[-1]
    assert (row["status"], row["expected"], row["ranker"], row["versus"], row["measure"]) == (
        "holds", "", "e0", "fusion", "strict")
    assert row["p_adjusted"] <= 0.05 and math.isnan(row["lo"]) is False and len(report.rows) == 4


def test_a_claim_whose_ranker_breaks_fails_alone(monkeypatch) -> None:
    ev = FakeEvaluation()

    def fake_measure(ev_, split, d, single_seed=False):
        if d.ranker == "bg8":
            raise RuntimeError("bg8 cannot be trained")
        return ClaimTest(d, 2.0, 1.0, 3.0, 0.5, 0.001, 0.999, 300, 60, "pts")

    monkeypatch.setattr(claims, "measure", fake_measure)
    book = ClaimBook(ev, None)
    with pytest.raises(RuntimeError, match="bg8 cannot be trained"):
        book.result("test", "h1_bg8_mrr_gt_e0")
    held = book.result("test", "h1_e0_strict_gt_fusion")  # decided, with the two broken claims counted untested
    assert held.status == "holds" and held.family_hypotheses == 8


def test_a_pin_fails_only_on_a_change_beyond_its_margin(monkeypatch, recwarn) -> None:
    """changed fails; changed within margin and margin unreachable pass without a warning; undetermined warns."""
    from harness.profile_records import Pin
    from reports.changes import ChangeVerdict

    rows: list[dict] = []
    report = SimpleNamespace(add=lambda table, split, row: rows.append(row))
    ev = SimpleNamespace(profile=load_profile("embedded"))
    pin = Pin("subset", "test", "grader", "strict_pct", 50.0, 0.0, ev.profile.path.resolve())
    for decision in ("changed within margin", "margin unreachable", "unchanged"):
        verdict = ChangeVerdict(decision, "paired", 50.5, 50.0, 0.5, n=150, certifiable=18.5, differing_groups=3,
                                discordant=4)
        monkeypatch.setattr(checks, "pin_verdict", lambda ev, pin, v=verdict: v)
        check_pin(ev, report, pin)
    assert not [w for w in recwarn if issubclass(w.category, checks.UndeterminedPin)]
    assert [r["status"] for r in rows] == ["changed within margin", "margin unreachable", "unchanged"]
    assert rows[1]["differing_groups"] == 3 and "certify: ±18.5" in rows[1]["measured"]
    monkeypatch.setattr(checks, "pin_verdict", lambda ev, pin: ChangeVerdict("undetermined", "paired", 51, 50, 1))
    with pytest.warns(checks.UndeterminedPin):
        check_pin(ev, report, pin)
    monkeypatch.setattr(checks, "pin_verdict", lambda ev, pin: ChangeVerdict("changed", "paired", 60, 50, 10))
    with pytest.raises(pytest.fail.Exception, match="pinned grader.strict_pct changed.*specs/profiles/embedded.toml"):
        check_pin(ev, report, pin)


def test_a_claim_s_test_is_memoized_under_the_contents_of_its_inputs(tmp_path: Path) -> None:
    """A warm run reads a claim's interval and p-values instead of resampling them; any change to what the test
    reads (a value, a column's name) is a new key."""
    import dataclasses
    import functools

    import pandas as pd

    from fixtures.populations import annotate_population
    from harness.memo import Memo
    from reports.claim_families import ClaimDefinition

    n = 8
    d = pd.DataFrame({"qid": [f"P{i}_q1" for i in range(n)], "pair_id": [f"P{i}" for i in range(n)], "split": "test",
                      "preferred_pid": "a", "counterpart_pid": "b", "group": [f"g{i // 2}" for i in range(n)],
                      "conflict": False})
    directions = annotate_population(d, pd.DataFrame({"qid": np.repeat(d["qid"], 2), "pid": np.tile(["a", "b"], n)}))

    def outcomes(strict: list[int]) -> pd.DataFrame:
        ranks = pd.array([pd.NA] * n, dtype="Int64")
        return pd.DataFrame({"qid": d["qid"], "rank_pos": ranks, "rank_neg": ranks,
                             "strict": np.asarray(strict, dtype=bool), "tie": False, "fallback": False})

    calls = []

    @functools.wraps(claims.measure_comparison)
    def counted(*args, **kwargs):
        calls.append(1)
        return claims.measure_comparison(*args, **kwargs)

    ev = SimpleNamespace(memo=Memo(tmp_path))
    claim = ClaimDefinition("c", "H1", "comparison", "a", "b", "strict", ">")
    a, b = outcomes([1, 1, 1, 1, 1, 1, 0, 1]), outcomes([0, 0, 1, 0, 0, 1, 0, 0])
    first = claims._tested(ev, claim, counted, a, b, directions, 0, "")
    again = claims._tested(ev, claim, counted, a.copy(), b.copy(), directions.copy(), 0, "")
    assert calls == [1] and again == first and first.n == n  # read back: the same test, not resampled
    flipped = a.copy()
    flipped.loc[0, "strict"] = False
    assert claims._tested(ev, claim, counted, flipped, b, directions, 0, "").effect != first.effect
    claims._tested(ev, claim, counted, a.astype({"tie": int}), b, directions, 0, "")
    claims._tested(ev, claim, counted, a, b, directions, 1, "")
    claims._tested(ev, dataclasses.replace(claim, side="<"), counted, a, b, directions, 0, "")
    assert len(calls) == 5  # another value, another dtype, another seed, another claim: each a new key


def test_a_full_pool_ranker_a_user_declares_gets_h2_claims_and_can_be_gated(tmp_path: Path) -> None:
    """An outside system's run (or a factory ranking the pool) is claimed against its baseline like a window ranker,
    in a family of its own, so CI can gate it on "beats fusion"; the shipped full-pool rankers keep their H1."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "test.trec").write_text("1000-2_q1 Q0 p 1 1.0 s\n", encoding="utf-8")
    path = tmp_path / "mine.toml"
    path.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                    '[rankers.theirs]\nkind = "trec_run"\npath = "runs/{split}.trec"\n'
                    '[rankers.mine]\nkind = "python"\nfactory = "m:make"\nwindow = false\ncompare_to = "e0"\n'
                    '[claims.h2_theirs_strict_gt_fusion]\nsubset_expect = "holds"\n', encoding="utf-8")
    profile = load_profile(str(path))
    check_claim_names(profile)  # its expectation names a claim the specs measure
    mine, base = definitions(profile), definitions(load_profile("embedded"))
    assert {n: d.family for n, d in mine.items() if n in base} == {n: d.family for n, d in base.items()}
    added = {n: (d.ranker, d.versus, d.measure, d.family) for n, d in mine.items() if n not in base}
    assert added == {"h2_theirs_strict_gt_fusion": ("theirs", "fusion", "strict", "H2:theirs"),
                     "h2_theirs_mrr_gt_fusion": ("theirs", "fusion", "mrr", "H2:theirs"),
                     "h2_mine_strict_gt_e0": ("mine", "e0", "strict", "H2:mine"),
                     "h2_mine_mrr_gt_e0": ("mine", "e0", "mrr", "H2:mine")}

    class Report:
        def add(self, table: str, split: str, row: dict, order=None) -> None:
            self.row = row

    undecided = decide_family([ClaimTest(mine["h2_theirs_strict_gt_fusion"], 0.4, -1.0, 1.8, 0.7, 0.5, 0.5, 48, 24,
                                         "pts")])[0]
    with pytest.raises(pytest.fail.Exception, match=rf"h2_theirs_strict_gt_fusion was reviewed as 'holds' but is now "
                                                    rf"inconclusive.*--gate-expectations.*review {path}"):
        check_claim(profile, Report(), "test", undecided, subset=True, gate=True)


def test_a_claims_mde_is_simulated_once_and_read_from_the_memo_after(tmp_path: Path, monkeypatch) -> None:
    """The decision test's power simulation is most of a warm run's claim time: memoized under the claim's design
    and the level, a second session reads it, and another design simulates again."""
    from harness.memo import KEY_ENV, Memo
    from reports.power import PowerDesign

    monkeypatch.setenv(KEY_ENV, str(tmp_path / "config" / "memo.key"))
    calls: list[float] = []
    real = claims.power_numbers
    monkeypatch.setattr(claims, "power_numbers", lambda t, level, power: (calls.append(level), real(t, level, power))[1])
    d = next(iter(definitions(load_profile("embedded")).values()))
    design = PowerDesign(sizes=(2,) * 30, magnitudes=tuple(float(i % 3) for i in range(30)), scale=100.0)
    t = ClaimTest(d, 2.0, 1.0, 3.0, 0.5, 0.004, 0.999, 60, 30, "pts", design=design)

    def session():  # a fresh Memo over the same folder: another run of the same cache
        return claims.memo_numbers(SimpleNamespace(memo=Memo(tmp_path / "cache" / "memo")))

    first = session()(t, 0.0125, 0.8)
    assert session()(t, 0.0125, 0.8) == first and len(calls) == 1 and math.isfinite(first[0])
    other = ClaimTest(d, 2.0, 1.0, 3.0, 0.5, 0.004, 0.999, 60, 30, "pts",
                      design=PowerDesign(sizes=(2,) * 30, magnitudes=(1.0,) * 30, scale=100.0))
    session()(other, 0.0125, 0.8)
    assert len(calls) == 2  # another design, another key
