"""A co-user of a shared cache can neither read this user's key through it nor change a result with it: every store
a run reads back is verified with the user's key and read without following a link
(docs/reproducibility.md#what-each-store-holds).

The probe: a cached figure PNG that was a symbolic link to the user's ``memo.key`` made that user's ``figure1.png``
the 32-byte key and ``explore.html`` carry it in base64; a planted PNG (a regular file) was published as the user's
figure with no warning; route-result rows rewritten in a shared cache with their plain digest recomputed built
another user's own-data pool (fusion MRR 0.013 instead of 0.785, no warning). Each case is rebuilt here,
deterministically, on the function that read the store.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import secrets
import shutil
import sqlite3
from pathlib import Path

import pytest
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from fixtures.artifacts import ArtifactCorrupt, NotRegularFile, check_seal, seal_path, write_sealed
from fixtures.routes import CorruptCacheWarning, Hit
from fixtures.routes.bm25 import BM25Route
from fixtures.routes.store import route_results
from fixtures.settings import PROJECT_ROOT
from rankers.scorers import ce_fit
from rankers.scorers.ce_store import MANIFEST, is_trained, load_sealed, model_digests
from reports.explore import write_explore
from reports.figures import FigureCacheWarning, write_figures
from tests.faults.test_fault_sealed_stores import other_user  # noqa: F401 - a co-user's key, a fixture
from tests.rankers.scorers.test_ce_training import RECIPE, backbone, fake_pool  # noqa: F401 - a tiny backbone, a fixture
from tests.rankers.scorers.test_ce_training import study as ce_study  # noqa: F401 - a fixture
from tests.reports.test_explore import artifacts  # noqa: F401 - the explorer's record, a fixture
from tests.reports.test_figures import table2


@pytest.fixture
def users_key(tmp_path: Path) -> tuple[Path, bytes]:
    """A file holding a key as ``fixtures.userkey`` makes one (32 random bytes, mode 0600)."""
    path = tmp_path / "config" / "memo.key"
    path.parent.mkdir()
    path.write_bytes(secrets.token_bytes(32))
    path.chmod(0o600)
    return path, path.read_bytes()


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A figure cache holding Figure 1 as a run kept it, and the PNG it published."""
    root = tmp_path_factory.mktemp("drawn")
    write_figures(root, {"table2": table2()}, root / "figures")
    return root / "figures", (root / "figure1.png").read_bytes()


@pytest.fixture
def publish_figures(drawn, artifacts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: F811
    """A copy of the drawn cache, and what the writer does for a split's figures (``reports.writer``): the PNGs,
    then the explorer page that carries them, kept in ``<cache>/figures``; publishing returns its folder."""
    monkeypatch.setenv("NEVIR_CHROMIUM", str(tmp_path / "no-such-browser"))
    cache = shutil.copytree(drawn[0], tmp_path / "cache" / "figures")

    def publish() -> Path:
        out = tmp_path / "published"
        out.mkdir()
        figures = write_figures(out, {"table2": table2()}, cache)
        write_explore(out, artifacts["record"], run_id="run-2", figures=figures, cache_dir=cache)
        return out
    [kept] = cache.glob("figure1-*.png")
    return kept, publish


def test_a_kept_figure_linked_to_the_users_key_is_refused_by_name_and_the_key_never_published(
        drawn, publish_figures, users_key) -> None:
    kept, publish = publish_figures
    key_file, key = users_key
    kept.unlink()
    kept.symlink_to(key_file)  # planted by a co-user who can write the cache
    with pytest.warns(FigureCacheWarning, match=rf"kept figure {re.escape(str(kept))}: is a symbolic link, not a "
                                                r"regular file: refused, never read through"):
        out = publish()
    png = (out / "figure1.png").read_bytes()
    assert key not in png and png == drawn[1]  # drawn again
    assert base64.b64encode(key).decode("ascii")[:40] not in (out / "explore.html").read_text(encoding="utf-8")
    assert not kept.is_symlink() and check_seal(kept) and key_file.read_bytes() == key  # the link went, not the key


@pytest.mark.parametrize("seal", ["no seal", "plain seal", "other user's key"])
def test_a_planted_figure_is_named_drawn_again_and_not_published(drawn, publish_figures, other_user,  # noqa: F811
                                                                 seal: str) -> None:
    kept, publish = publish_figures
    planted = (PROJECT_ROOT / "docs" / "explore.png").read_bytes()  # a real PNG, of something else
    if seal == "other user's key":
        other_user(True)
        write_sealed(kept, lambda p: p.write_bytes(planted))
        other_user(False)
    else:
        kept.write_bytes(planted)
        seal_path(kept).unlink(missing_ok=True)
        if seal == "plain seal":  # what a writer without the key can do
            seal_path(kept).write_text(hashlib.sha256(planted).hexdigest() + "\n")
    with pytest.warns(FigureCacheWarning, match=rf"kept figure {re.escape(str(kept))}: .*; drawn again"):
        out = publish()
    assert (out / "figure1.png").read_bytes() == drawn[1] != planted
    assert check_seal(kept)


CORPUS = {"d1": "the river bank floods in spring", "d2": "a bank lends money at interest",
          "d3": "spring water from the hills", "d4": "interest rates rise when money is scarce"}
QUERIES = ["where does a bank lend money", "spring floods on the river"]


def _forge(store: Path, query_sha: bytes, how: str, other_user) -> None:  # noqa: F811
    """Rewrite one query's row to rank its worst hit first, with a digest the co-user can make."""
    with sqlite3.connect(store) as db:
        db.text_factory = bytes
        blob = db.execute("SELECT hits FROM hits WHERE query_sha = ?", (query_sha.decode(),)).fetchone()[0]
        hits = json.loads(blob)
        forged = json.dumps([[hits[-1][0], 99.0, 1], *[[h[0], h[1], r + 2] for r, h in enumerate(hits[:-1])]])
        if how == "plain digest":  # the digest a row carried before, which anyone can recompute
            digest = hashlib.sha256(query_sha + b"\n" + forged.encode()).hexdigest()
        else:  # a co-user running the suite under their own key
            from fixtures.routes.store import ResultStore
            other_user(True)
            theirs = ResultStore(store)
            digest = theirs.row_digest(query_sha, forged.encode())
            theirs.close()
            other_user(False)
        db.execute("UPDATE hits SET hits = ?, digest = ? WHERE query_sha = ?", (forged, digest, query_sha.decode()))


@pytest.mark.parametrize("how", ["plain digest", "other user's key", "a link to a copy"])
def test_route_rows_rewritten_by_a_co_user_are_refused_and_retrieved_again(tmp_path: Path, other_user, how) -> None:
    """The route store feeds every pool a run builds (an own-data profile's included): a row rewritten with a digest
    its writer could make never reaches a pool, and a store that is a link is never opened."""
    route, folder = BM25Route(depth=3), tmp_path / "pools" / "routes"
    truth, _ = route_results(route, CORPUS, QUERIES, folder)
    assert truth[QUERIES[0]][0].pid == "d2"
    [store] = folder.glob("bm25-*.sqlite")
    if how == "a link to a copy":
        elsewhere = Path(shutil.copyfile(store, tmp_path / store.name))
        _forge(elsewhere, hashlib.sha256(QUERIES[0].encode()).hexdigest().encode(), "plain digest", other_user)
        store.unlink()
        store.symlink_to(elsewhere)
        named = rf"route result store {re.escape(str(store))}: is a symbolic link, not a regular file"
    else:
        _forge(store, hashlib.sha256(QUERIES[0].encode()).hexdigest().encode(), how, other_user)
        named = rf"route result store {re.escape(str(store))}: 1 row\(s\) fail their digest: row \d+ \(query_sha " \
                r"[0-9a-f]{16}\)"
    with pytest.warns(CorruptCacheWarning, match=named):
        again, _ = route_results(route, CORPUS, QUERIES, folder)
    assert again == truth and again[QUERIES[0]][0] == Hit("d2", truth[QUERIES[0]][0].score, 1)
    assert not store.is_symlink()


def test_a_cross_encoder_folder_holding_a_link_is_refused_by_name(tmp_path: Path, users_key) -> None:
    """Every file is listed with its digest in the sealed manifest; a link to the same bytes is refused anyway."""
    folder = tmp_path / "models" / "cross-encoder" / "splade-tiny-0123"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    text = json.dumps({"files": model_digests(folder)})
    write_sealed(folder / MANIFEST, lambda p: p.write_text(text))
    assert load_sealed(folder)["files"]
    elsewhere = tmp_path / "config.json"
    elsewhere.write_text("{}")
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(elsewhere)
    with pytest.raises(NotRegularFile, match=rf"{re.escape(str(folder / 'config.json'))}: is a symbolic link"):
        load_sealed(folder)
    assert not is_trained(folder)


def test_a_training_folder_replaced_while_the_cross_encoder_trains_is_never_sealed(
        ce_study, backbone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A co-user who can write the cache moves their own folder into the place of the one being saved (during the
    selected checkpoint's development evaluation, a minute on the full recipe): its files are never digested into a
    sealed manifest, and nothing reaches the model's folder."""
    swapped: list[Path] = []

    def swap_while_evaluating(scorer, *args, **kwargs) -> dict[str, float]:
        folder = Path(scorer.model_name)
        if not swapped:
            swapped.append(folder.rename(folder.with_name(folder.name + ".theirs-moved")))
            shutil.copytree(swapped[0], folder)  # the same files, theirs: any weights would do
        return {"window_strict": 0.5}  # what it measures does not matter here
    monkeypatch.setattr(ce_fit, "evaluate_on_development", swap_while_evaluating)
    tokenizer = AutoTokenizer.from_pretrained(backbone)
    model = AutoModelForSequenceClassification.from_pretrained(backbone, num_labels=1)
    run = ce_fit.TrainingRun([], 0, 0, copy.deepcopy(model.state_dict()), 0.0, 0.0)
    out = tmp_path / "models" / "cross-encoder" / "tiny-0123"
    out.parent.mkdir(parents=True)
    with pytest.raises(ArtifactCorrupt, match=r"cross-encoder training folder .*: was replaced while the model was "
                                              r"trained: refused, nothing sealed"):
        ce_fit.save(model, tokenizer, run, 0, ce_study, fake_pool(ce_study, "development", 1), RECIPE, 5, {}, "0123",
                    "tiny", "a tiny encoder", out)
    assert swapped and not out.exists() and not list(tmp_path.rglob(MANIFEST + "*"))
