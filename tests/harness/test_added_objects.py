"""evaluate(add=...) takes rankers as researchers hold them: a sentence_transformers CrossEncoder, a rerankers
Reranker and a plain function, each with its Table II row on the CI subset; a ranker that fails in every part makes
evaluate() raise with its first cause instead of returning a record silently missing its row."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.run import evaluate
from reports.run_record import RankerLost
from tests.support.checkpoints import tiny_checkpoint

SUBSET = {"splits": ["test"], "subset_pairs": 24, "grader_sample": 4}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A cross-encoder folder as a user has one (a seeded tiny BERT classifier on the SPLADE-tiny tokenizer)."""
    return tiny_checkpoint(tmp_path_factory.mktemp("objects") / "tiny-ce", 1, 11)


def overlap(query, passages):
    """The share of the query's words in each passage: a function, as a notebook defines one."""
    words = set(query.lower().split())
    return [len(words & set(p.lower().split())) / max(len(words), 1) for p in passages]


def test_a_cross_encoder_a_reranker_and_a_function_each_get_their_row(folder: Path) -> None:
    import torch
    from rerankers import Reranker
    from sentence_transformers import CrossEncoder

    # Raw logits, as the rerankers library reads them (the default sigmoid, in float32, ties this untrained model's
    # near-equal logits: another ranking, rightly another key)
    add = {"st_ce": CrossEncoder(str(folder), device="cpu", activation_fn=torch.nn.Identity()),
           "rr": Reranker(str(folder), model_type="cross-encoder", verbose=0, device="cpu", dtype="float32"),
           "fn": overlap}
    record = evaluate("embedded", add=add, rankers=["fusion", *add], **SUBSET)
    t2 = record.table2.set_index("ranker")
    assert set(add) <= set(t2.index) and record.failures.empty, record.failures.to_dict("records")
    for name in add:
        assert t2.loc[name, "n"] == t2.loc["fusion", "n"] > 0 and t2.loc[name, "fallback"] == 0
    # the same folder through two libraries: the same scores, so the same row
    assert t2.loc["st_ce", "strict_pct"] == t2.loc["rr", "strict_pct"]
    assert t2.loc["st_ce", "mrr"] == pytest.approx(t2.loc["rr", "mrr"])


def test_a_ranker_that_fails_every_part_makes_evaluate_raise_with_its_first_cause() -> None:
    class Broken:
        model_key = "broken-v1"

        def score(self, inputs):
            raise RuntimeError("CUDA out of memory (a notebook's model on the wrong device)")

    with pytest.raises(RankerLost, match=r"\['broken'\] failed in every part.*CUDA out of memory") as raised:
        evaluate("embedded", add={"broken": Broken()}, rankers=["fusion", "broken"], **SUBSET)
    record = raised.value.record
    assert set(record.failures["ranker"].str.split(",").explode()) >= {"broken"}
    assert "fusion" in set(record.table2["ranker"])  # what the run computed besides is kept
