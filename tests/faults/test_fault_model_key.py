"""A scorer's own model_key keys its scores on every run.

Failure: a ``python`` factory whose scorer's ``model_key`` names the weights file it reads; after the weights and the
``model_key`` both changed, a warm run scored nothing and republished the old row: the key was remembered against
the factory's code and options and never asked of the scorer again. Now the factory is called on every run and its
scorer's key is part of the scorer's identity (docs/kinds.md#what-keys-its-scores).
"""
from __future__ import annotations

from pathlib import Path

from harness.run import evaluate

FACTORY = '''
from pathlib import Path


class Weighted:
    """Word overlap times the weight its weights file holds; the file's first word is its version."""

    def __init__(self, weights):
        version, weight = Path(weights).read_text().split()
        self.model_key = f"weighted-overlap-{version}"
        self.weight = float(weight)

    def score(self, inputs):
        return [self.weight * (1 + len(set(q.lower().split()) & set(p.lower().split()))) for q, p in inputs]


def make(weights):
    return Weighted(weights)
'''


def test_a_changed_model_key_rescores_although_the_factory_and_its_options_did_not_change(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "weighted_overlap_fault.py").write_text(FACTORY)
    weights = tmp_path / "weights.txt"
    profile = tmp_path / "weighted.toml"
    profile.write_text(f'[profile]\nname = "weighted"\nextends = "embedded"\npythonpath = ["code"]\n'
                       f'[rankers.weighted]\nkind = "python"\nfactory = "weighted_overlap_fault:make"\n'
                       f'options = {{ weights = "{weights}" }}\n')

    def row(version: str, weight: str) -> dict[str, float]:
        weights.write_text(f"{version} {weight}\n")
        record = evaluate(profile, splits=["test"], subset_pairs=24, grader_sample=4, rankers=["weighted"])
        t2 = record.table2.set_index("ranker")
        return {m: float(t2.loc["weighted", m]) for m in ("strict_pct", "mrr")}

    first = row("v1", "1.0")
    assert row("v1", "1.0") == first  # warm and unchanged: the same row
    reversed_ = row("v2", "-1.0")  # new weights, new key: scored again, not the v1 row
    assert reversed_ != first, "the warm run republished the old model's row under a changed model_key"
    assert row("v1", "1.0") == first  # and back: the v1 scores are still the v1 row
