"""Two checkouts of different commits share one cache (its folder is per user, not per checkout): a file one of
them wrote must never be published by the other as its own, even when the data it renders are the same."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rankers.base import single_score_ranking
from rankers.trec import read_run
from reports import outputs


def test_a_run_written_by_another_version_of_the_writer_is_not_reused(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The same ranking, written by this writer and by another (its code digest and its bytes differ, as a TREC
    writer that prints score keys instead of rank scores does): each version finds its own file. Before, the name
    was the ranking's digest alone, and a checkout read the other's file: an MRR that disagreed with its row."""
    pool = pd.DataFrame({"qid": ["q1"] * 3 + ["q2"] * 3, "pid": ["a", "b", "c"] * 2})
    ranking = single_score_ranking(pool, np.array([0.9, 0.5, 0.5, 0.3, 0.2, 0.1]), "fusion")
    ours = outputs.stash_run(tmp_path, ranking)
    expected = ours.read_bytes()

    def other_writer(r, path: Path, tag: str) -> Path:
        path.write_text("".join(f"{q} Q0 {p} {k} 1.0 {tag}\n" for q, p, k in r.frame[["qid", "pid", "rank"]]
                                .itertuples(index=False)), encoding="utf-8")
        return path

    monkeypatch.setattr(outputs, "write_run", other_writer)
    monkeypatch.setattr(outputs, "code_digest", lambda *modules: "another-commit-of-the-writer")
    theirs = outputs.stash_run(tmp_path, ranking)
    assert theirs != ours and set(read_run(theirs)["score"]) == {1.0}
    monkeypatch.undo()
    assert outputs.stash_run(tmp_path, ranking) == ours and ours.read_bytes() == expected
