"""A co-user of a shared cache cannot change this user's verdicts: every store a run reads back is sealed with the
user's key (``fixtures.userkey``), and an entry written without it is refused and recomputed.

The probe planted values in the explorer's cached data (``figures/explore-*.json``: the page said "holds" while
``claims.csv`` said inconclusive), forged a history entry's ``table2.parquet`` with a recomputed ``entry.json``
digest (``--compare-to`` showed "then" = 0.9999), and replaced cached artifacts together with a recomputed plain
sha256 seal. Each case is rebuilt here, deterministically (docs/reproducibility.md#sharing-a-cache).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from fixtures import models
from fixtures.artifacts import ArtifactCorrupt, check_seal, seal_path, write_sealed
from fixtures.gguf import join_parts
from fixtures.identity import json_digest, sha256_file
from fixtures.userkey import KEY_ENV, seal_tag
from rankers.scorers.cache import CachedScore, ScoreCache, ScoreCacheWarning
from reports import explore
from reports.explore import write_explore
from reports.history import ENTRY, HISTORY, HistoryError, compare_problem, saved_split
from reports.outputs import stash_frame
from tests.reports.saved_runs import save, small_run
from tests.reports.test_explore import artifacts  # noqa: F401 - the explorer's record, a fixture

PLANTED = "PLANTED-holds-99.9"


def _plain_seal(path: Path) -> None:
    """What a writer without the key can do: recompute the file's sha256 into its seal."""
    seal_path(path).write_text(hashlib.sha256(path.read_bytes()).hexdigest() + "\n")


@pytest.fixture
def other_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Switch to another user's key (a co-user of the same cache) and back."""
    mine = Path(__import__("os").environ[KEY_ENV])

    def switch(to_other: bool) -> None:
        if to_other:
            other = tmp_path / "other-user" / "memo.key"
            other.parent.mkdir(exist_ok=True)
            if not other.exists():
                other.write_bytes(b"k" * 32)
                other.chmod(0o600)
            monkeypatch.setenv(KEY_ENV, str(other))
        else:
            monkeypatch.setenv(KEY_ENV, str(mine))
    return switch


@pytest.mark.parametrize("how", ["plain-seal", "other-users-key"])
def test_planted_explorer_data_in_the_cache_is_recomputed(artifacts, tmp_path: Path, how: str, other_user,  # noqa: F811
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache, first, second = tmp_path / "cache", tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    monkeypatch.setenv("NEVIR_CHROMIUM", str(cache / "no-such-browser"))
    write_explore(first, artifacts["record"], run_id="run-1", cache_dir=cache)
    [kept] = cache.glob("explore-test-*.json")
    data = json.loads(kept.read_text(encoding="utf-8"))
    data["claims"] = [{"claim": "h2_grader_strict_gt_fusion", "status": "holds", "effect": 99.9, "note": PLANTED}]
    text = json.dumps(data)
    if how == "plain-seal":
        kept.write_text(text, encoding="utf-8")
        _plain_seal(kept)
    else:  # a co-user with the suite and a key of their own
        other_user(True)
        write_sealed(kept, lambda p: p.write_text(text, encoding="utf-8"))
        other_user(False)
    recomputed = []
    real = explore.page_data
    monkeypatch.setattr(explore, "page_data", lambda inputs: recomputed.append(1) or real(inputs))
    with pytest.warns(UserWarning, match=f"explorer data {kept}: not sealed with this user's key"):
        write_explore(second, artifacts["record"], run_id="run-1", cache_dir=cache)
    page = (second / "explore.html").read_text(encoding="utf-8")
    assert recomputed and PLANTED not in page and '"status":"inconclusive"' in page
    assert page == (first / "explore.html").read_text(encoding="utf-8")
    check_seal(kept)  # rewritten under this user's key


def _forge(results: Path, ident: str, recompute_hmac_free: bool) -> Path:
    """Edit the saved Table II (fusion's MRR to 0.9999) and recompute its sha256 into ``entry.json``."""
    target = results / HISTORY / ident / "test" / "table2.parquet"
    frame = pd.read_parquet(target).assign(mrr=0.9999)
    frame.to_parquet(target, index=False)
    index_path = results / HISTORY / ident / ENTRY
    index = json.loads(index_path.read_text(encoding="utf-8"))
    index["splits"]["test"]["table2.parquet"] = sha256_file(target)
    if recompute_hmac_free:
        index.pop("hmac")
    index_path.write_text(json.dumps(index, indent=1, sort_keys=True), encoding="utf-8")
    return index_path


@pytest.mark.parametrize("hmac_kept", [True, False], ids=["old-hmac-kept", "hmac-removed"])
def test_a_forged_history_digest_is_refused_by_compare_to_in_one_message(tmp_path: Path, hmac_kept: bool) -> None:
    results = tmp_path / "results"
    save(results, "20261101T000000.1Z-saved", small_run(tmp_path / "run"))
    index_path = _forge(results, "20261101T000000.1Z-saved", recompute_hmac_free=not hmac_kept)
    with pytest.raises(HistoryError, match="not sealed with this user.s key"):
        saved_split(results, "20261101T000000.1Z-saved", "test")
    problem = compare_problem(results, "20261101T000000.1Z-saved", ["test", "confirmation"])
    assert problem is not None and problem.count("not sealed with this user's key") == 1, problem
    assert str(index_path) in problem and "0.9999" not in problem


def test_a_history_entry_of_another_users_key_is_refused(tmp_path: Path, other_user) -> None:
    results = tmp_path / "results"
    other_user(True)
    save(results, "20261101T000000.1Z-theirs", small_run(tmp_path / "run"))
    other_user(False)
    with pytest.raises(HistoryError, match="not sealed with this user.s key"):
        saved_split(results, "20261101T000000.1Z-theirs", "test")
    save(results, "20261102T000000.1Z-mine", small_run(tmp_path / "run2"))
    assert saved_split(results, "20261102T000000.1Z-mine", "test").table2()["mrr"].tolist() == [0.5]


def test_a_cached_artifact_replaced_with_a_recomputed_plain_seal_is_refused_and_rewritten(tmp_path: Path) -> None:
    frame = pd.DataFrame({"qid": ["q1", "q2"], "strict": [True, False]})
    path = stash_frame(tmp_path, "outcomes-fusion", frame)
    check_seal(path)
    frame.assign(strict=True).to_parquet(path, index=False)  # planted values under the same name
    _plain_seal(path)
    with pytest.raises(ArtifactCorrupt, match="seal was not written with this user's key"):
        check_seal(path)
    assert stash_frame(tmp_path, "outcomes-fusion", frame) == path  # rewritten, not used
    assert pd.read_parquet(path)["strict"].tolist() == [True, False] and check_seal(path)


def test_a_shipped_file_keeps_its_plain_seal(tmp_path: Path) -> None:
    """The frozen pools in the checkout are git's, not a user's: written and read with a plain seal."""
    path = tmp_path / "shipped.json"
    digest = write_sealed(path, lambda p: p.write_text("{}"), keyed=False)
    assert seal_path(path).read_text() == digest + "\n" and check_seal(path, keyed=False) == digest
    with pytest.raises(ArtifactCorrupt):
        check_seal(path)  # never trusted as a cache entry


@pytest.mark.parametrize("forger", ["no-key", "other-users-key"])
def test_a_forged_model_stamp_never_vouches_for_an_altered_gguf(tmp_path: Path, other_user, forger: str) -> None:
    """The probe: a grader GGUF altered in place, its ``.digests.json`` stamp rewritten to vouch for the new bytes
    under the pinned sha256, was used without a warning. The stamp is sealed with the user's key now: a forged one
    is not trusted, the file is hashed in full, and joined again from its parts."""
    parts, digest = [], hashlib.sha256()
    for i in range(2):
        data = bytes([i + 1]) * (1 << 20)
        parts.append(tmp_path / f"part{i}.bin")
        parts[-1].write_bytes(data)
        digest.update(data)
    pinned, target = digest.hexdigest(), tmp_path / "cache" / "gguf" / "model.gguf"
    join_parts(parts, target, 2 << 20, pinned)
    join_parts(parts, target, 2 << 20, pinned)  # used once more: stamped as verified
    stamp = target.with_name(target.name + ".digests.json")
    assert json.loads(stamp.read_text())["hmac"]
    target.write_bytes(b"\xff" * (2 << 20))  # altered in place, same size
    entry = models._hash_file(target)
    stat = models._stat(target)
    record = {"files": [{"path": str(target), "stat": stat, **entry, "sha256": pinned}],
              "stamped_ns": stat[2] + models.RACY_NS + 1, "next": 0}
    if forger == "other-users-key":
        other_user(True)
        record["hmac"] = seal_tag(models.STAMP_PURPOSE, models._stamp_bytes(record))
        other_user(False)
    stamp.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="does not hold the pinned bytes"):
        join_parts(parts, target, 2 << 20, pinned)
    assert sha256_file(target) == pinned


def test_a_stored_judgment_rewritten_with_a_recomputed_plain_digest_is_refused_and_rescored(tmp_path: Path) -> None:
    """A co-user who can write the score store changes a judgment and recomputes its row digest the way the
    store used to (a plain sha256 over the row): the row does not verify under this user's key."""
    key = ("judge-v1", "qsha", "p1", "psha")
    with ScoreCache(tmp_path / "scores.sqlite") as store:
        store.put_many([(key, CachedScore(1.0, None, {}, "1"))])
        assert store.lookup([key])[0][key].score == 1.0
    with sqlite3.connect(tmp_path / "scores.sqlite") as conn:
        mk, qs, pid, ps, _, error, usage, raw, created = conn.execute(
            "SELECT model_key, query_sha, pid, passage_sha, score, error, usage, raw, created FROM scores").fetchone()
        forged = json_digest([mk, qs, pid, ps, 4.0, error, usage, raw, created])
        conn.execute("UPDATE scores SET score=4.0, digest=?", (forged,))
    with ScoreCache(tmp_path / "scores.sqlite") as store:
        with pytest.warns(ScoreCacheWarning, match="1 stored score.* fail their digest check"):
            found, bad = store.lookup([key])
        assert found == {} and bad == [key]
