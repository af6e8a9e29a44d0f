"""Every file a run leaves in its cache belongs to a store of docs/reproducibility.md#what-each-store-holds, is read
back only through that store's check, and that check is keyed: it passes under the user's key and fails under
another's, so no store is sealed with a plain digest a co-user could recompute. A link planted anywhere in the cache
is refused by name: before any work by the run, and by each store's read if it appears later.

The cache is README step 3's on an empty cache (``tests.support.empty_cache_run``, shared with
tests/rankers/test_shipped.py): the embedded study on the CI subset's Test split, published.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import pytest

from fixtures import models
from fixtures.artifacts import SEAL_SUFFIX, NotRegularFile, check_seal, read_regular
from fixtures.gguf import QWEN_CODER_FILE, QWEN_CODER_SHA256
from fixtures.identity import sha256_file
from fixtures.routes.store import ResultStore
from fixtures.userkey import KEY_ENV, tag_verifies
from harness.memo import Memo
from harness.options import OptionError
from harness.run import settings_for
from rankers.scorers.ce_store import load_sealed
from rankers.scorers.store import ScoreCache


def _sealed(cache: Path, path: Path) -> None:
    """An artifact and its ``.sha256`` seal (``fixtures.artifacts``): the seal's HMAC and the file's digest."""
    check_seal(path.with_name(path.name.removesuffix(SEAL_SUFFIX)))


def _memo(cache: Path, path: Path) -> None:
    Memo(cache / "memo")._load(path)  # the HMAC of its name and bytes, before anything is unpickled


def _route_store(cache: Path, path: Path) -> None:
    """Every row, checked by the store's own read (a row that fails is named in a warning and deleted)."""
    store = ResultStore(path.with_name(path.name.removesuffix("-journal")))
    try:
        assert store.db.execute("SELECT count(*) FROM hits").fetchone()[0] > 0, f"route store {path}: no row"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            store.get([])
    finally:
        store.close()
    if caught:
        raise AssertionError(f"route store {path}: {'; '.join(str(w.message) for w in caught)}")


def _score_store(cache: Path, path: Path) -> None:
    main = path.with_name(path.name.split(".sqlite")[0] + ".sqlite")
    with sqlite3.connect(main) as db:
        keys = db.execute("SELECT model_key, query_sha, pid, passage_sha FROM scores").fetchall()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ScoreCache(main) as store:
            found, bad = store.lookup(keys)
    if caught or bad or len(found) != len(keys) or not keys:
        raise AssertionError(f"score store {main}: {len(bad)} of {len(keys)} rows refused; "
                             f"{'; '.join(str(w.message) for w in caught)}")


def _stamp(cache: Path, path: Path) -> None:
    """A model digest stamp (``fixtures.models.file_digests``): its HMAC under the user's key."""
    record = json.loads(read_regular(path, "model digest stamp"))
    if not tag_verifies(record.get("hmac"), models.STAMP_PURPOSE, models._stamp_bytes(record)):
        raise AssertionError(f"stamp {path}: its HMAC does not verify")


def _trained_cross_encoder(cache: Path, path: Path) -> None:
    folder = cache / "models" / "cross-encoder" / path.relative_to(cache / "models" / "cross-encoder").parts[0]
    load_sealed(folder)


def _joined_gguf(cache: Path, path: Path) -> None:
    """Checked against the digest pinned in the code (``fixtures.gguf``), not against anything in the cache."""
    assert sha256_file(path) == QWEN_CODER_SHA256


def _lock(cache: Path, path: Path) -> None:
    """A lock file: locked, never read."""


@dataclass(frozen=True)
class Store:
    """A store of the inventory: the name docs/reproducibility.md gives it, the cache paths of its files, and how
    one of its files is checked when read back (raises unless it verifies under the current key). ``keyed`` is False
    only for what needs no key: a lock (never read) and the joined GGUF (a digest pinned in the code)."""

    name: str
    patterns: tuple[str, ...]
    check: Callable[[Path, Path], None]
    keyed: bool = True


STORES = (
    Store("pool snapshots", ("pools/*.parquet", "pools/*.json", "pools/*.sha256"), _sealed),
    Store("route results", ("pools/routes/*.sqlite", "pools/routes/*.sqlite-journal"), _route_store),
    Store("embeddings", ("embeddings/*.npy", "embeddings/*.npz", "embeddings/*.sha256"), _sealed),
    Store("LambdaMART models", ("models/lambdamart/*/model.txt", "models/lambdamart/*/manifest.json",
                                "models/lambdamart/*/*.sha256"), _sealed),
    Store("trained cross-encoder", ("models/cross-encoder/*/*",), _trained_cross_encoder),
    Store("scores", ("scores/text_scores.v3.sqlite", "scores/text_scores.v3.sqlite-*"), _score_store),
    Store("memo", ("memo/*/*.memo",), _memo),
    Store("figures", ("figures/figure*.png", "figures/figure*.png.sha256"), _sealed),
    Store("explorer", ("figures/explore-*.json", "figures/explore-*.png", "figures/explore-*.sha256"), _sealed),
    Store("results", ("results/*.parquet", "results/*.trec", "results/*.sha256"), _sealed),
    Store("model digest stamps", ("*model-digests/*.json", "gguf/*.digests.json"), _stamp),
    Store("GGUF", (f"gguf/{QWEN_CODER_FILE}",), _joined_gguf, keyed=False),
    Store("locks", ("*.lock",), _lock, keyed=False),
)


def store_of(cache: Path, path: Path) -> Store | None:
    rel = path.relative_to(cache).as_posix()
    return next((s for s in STORES if any(fnmatch(rel, p) for p in s.patterns)), None)


def cache_files(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file() or p.is_symlink())


@pytest.fixture(scope="module")
def walked(empty_cache_runs) -> tuple[Path, dict[str, list[Path]]]:
    """The run's cache and its files by store; a file no store claims fails here, named."""
    cache = empty_cache_runs.cache
    by_store: dict[str, list[Path]] = {}
    unclaimed = []
    for path in cache_files(cache):
        store = store_of(cache, path)
        if store is None:
            unclaimed.append(path.relative_to(cache).as_posix())
        else:
            by_store.setdefault(store.name, []).append(path)
    assert unclaimed == [], f"files of no store in docs/reproducibility.md's inventory: {unclaimed}"
    return cache, by_store


def test_every_store_of_the_inventory_is_documented() -> None:
    text = (Path(__file__).parent.parent / "docs" / "reproducibility.md").read_text(encoding="utf-8")
    section = text.split("## What each store holds", 1)[-1]
    assert "## What each store holds" in text
    assert [s.name for s in STORES if f"| {s.name} |" not in section] == []


def test_every_file_a_run_leaves_in_its_cache_verifies_under_the_users_key_only(walked, tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cache, by_store = walked
    stores = {s.name: s for s in STORES}
    # The subset's pools are the shipped pools' rows and its models the shipped ones: nothing is retrieved, encoded or
    # trained, so no route result, embedding or cross-encoder folder (tests/faults/test_fault_cache_links.py, those).
    assert {"pool snapshots", "LambdaMART models", "scores", "memo", "figures", "explorer", "results",
            "model digest stamps"} <= set(by_store), sorted(by_store)
    for name, paths in by_store.items():
        for path in paths:
            stores[name].check(cache, path)  # raises, naming the file, unless it verifies
    copy = Path(shutil.copytree(cache, tmp_path / "cache", symlinks=True))
    other = tmp_path / "other.key"
    other.write_bytes(b"another user's key, 32 bytes....")
    other.chmod(0o600)
    monkeypatch.setenv(KEY_ENV, str(other))
    passed = []
    for name, paths in by_store.items():
        for path in paths if stores[name].keyed else ():
            try:
                stores[name].check(copy, copy / path.relative_to(cache))
            except (AssertionError, ValueError, OSError):
                continue
            passed.append(path.relative_to(cache).as_posix())
    assert passed == [], f"verified under another user's key (a plain seal): {passed}"


def test_a_link_in_place_of_any_stores_file_is_refused_by_name(walked, tmp_path: Path) -> None:
    """Each store's read refuses a link to a copy of its own file, identical bytes and seal: it is never followed."""
    cache, by_store = walked
    copy = Path(shutil.copytree(cache, tmp_path / "cache", symlinks=True))
    stores = {s.name: s for s in STORES}
    followed, linked = [], [name for name in by_store if stores[name].keyed]
    assert len(linked) >= 8, linked
    for name in linked:
        path = copy / by_store[name][0].relative_to(cache)
        if path.name.endswith(SEAL_SUFFIX):
            path = path.with_name(path.name.removesuffix(SEAL_SUFFIX))
        target = tmp_path / "elsewhere" / path.name
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, target)
        path.unlink()
        path.symlink_to(target)
        try:
            stores[name].check(copy, path)
        except (AssertionError, ValueError, OSError) as exc:
            assert f"{path}" in str(exc) and "symbolic link" in str(exc), (name, str(exc))
            continue
        followed.append(name)
    assert followed == []


def test_a_link_planted_anywhere_in_the_cache_is_refused_before_any_work(walked, tmp_path: Path) -> None:
    cache, _ = walked
    folders = sorted({p.parent for p in cache_files(cache)} | {cache})
    secret = tmp_path / "memo.key"
    secret.write_bytes(b"k" * 32)
    for i, folder in enumerate(folders):
        link = folder / "planted"
        link.symlink_to(secret if i % 2 else folder)  # a file's link, or a folder's
        try:
            with pytest.raises(OptionError, match=rf"1 of its entries are links or not regular files \(first: "
                                                  rf"{link.relative_to(cache).as_posix()} \(a symbolic link\)\)"):
                settings_for("embedded", cache_dir=cache, results_dir=tmp_path / "results")
        finally:
            os.unlink(link)


def test_a_fifo_or_a_link_where_a_cache_file_belongs_is_refused_by_name_without_blocking(tmp_path: Path) -> None:
    """``O_NONBLOCK``: a FIFO planted where a file belongs is named, never waited on."""
    cache = tmp_path / "cache"
    (cache / "pools").mkdir(parents=True)
    fifo = cache / "pools" / "test-0.parquet"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile, match=rf"{re.escape(str(fifo))}: is a FIFO, not a regular file"):
        read_regular(fifo)
    with pytest.raises(OptionError, match=r"1 of its entries are links or not regular files \(first: "
                                          r"pools/test-0\.parquet \(a FIFO\)\)"):
        settings_for("embedded", cache_dir=cache, results_dir=tmp_path / "results")
