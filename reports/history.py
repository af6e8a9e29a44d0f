"""Run history: each published run kept as a typed record, read back only whole, unedited and sealed by this user.

``results/.history/<run id>/`` keeps each published run, complete or partial, as a typed record per split
(``<split>/table2.parquet``: Table II; ``<split>/outcomes.parquet``: every ranker's per-direction outcomes;
``<split>/manifest.json``) beside the split's small published files for people to read, and ``entry.json``: the
sha256 of every file, sealed by an HMAC under the user's key (``fixtures.userkey``). ``--compare-to``, pins and the
reviewed-run lookup read only the typed record, through ``SavedSplit``, after checking ``entry.json``'s HMAC and
every file of the split against it: an edited file, or an index whose digests were recomputed, is refused, named,
never used. An entry is staged whole in ``.history/.staging-<run id>`` (held by its lock file while a live process
writes it) and renamed into place with ``entry.json`` already inside, so a run id under ``.history`` is complete or
absent; the next save removes, under the results folder's lock, what a killed run left (``heal``) and says so:
only the stagings the results folder's ledger records it opened (``reports.ledger``); a folder in ``.history/`` the
suite did not write (an editor's local history, an earlier version's cut run) is kept and named once.

A partial run (``-k``, ``-m``, ...) is marked in its run id (``-partial-``) and its manifest (``partial``: why),
so the researcher's ``-m "not llm"`` loop has runs to compare with, and a pin's reviewed run is only ever a
complete one (docs/protocol.md#publishing). How two runs are compared, measure by measure, is
``reports.run_comparison``'s.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
from filelock import FileLock

from fixtures.artifacts import ArtifactCorrupt, atomic_write_text, file_sha256
from fixtures.identity import folder_digests
from fixtures.userkey import seal_tag, tag_verifies
from reports import ledger
from reports.measures import TABLE2
from reports.record import SplitRecord, profile_of
from reports.tables import RANKER_FIELDS
from reports.transaction import ENTRY, HISTORY, LOCK, STAGING

#: The purpose of ``entry.json``'s HMAC under the user's key (docs/reproducibility.md#sharing-a-cache).
ENTRY_PURPOSE = "nevir history entry v1"
#: Published files kept beside the typed record, for people to read (never read back).
KEEP = ("*.csv", "*.json", "*.md", "*.tex")
#: The typed record of a split in the history.
TABLE2_FILE, OUTCOMES_FILE, MANIFEST_FILE = "table2.parquet", "outcomes.parquet", "manifest.json"
#: Table II measures compared across runs (``compared`` in the registry), in table2.csv's order.
COMPARED = tuple(m.name for m in TABLE2 if m.compared)
#: Per-direction outcome fields of a ranker (``reports.tables.RANKER_FIELDS``).
FIELDS = tuple(RANKER_FIELDS)
#: ``outcomes.parquet``: one row per ranker and eligible direction, with the direction's source group.
STORED_OUTCOME_COLUMNS = ("ranker", "qid", "group", *FIELDS)

#: The mark of a partial run in its run id.
PARTIAL_MARK = "partial"


class HistoryError(ValueError):
    """A saved run that cannot be used: incomplete, edited since it was saved (the file is named), or absent."""


class UnsealedEntry(HistoryError):
    """A saved run whose ``entry.json`` is not sealed with this user's key: saved by an earlier version of the
    suite or by another user, or forged (its digests recomputed); never used."""


def _entry_bytes(index: Mapping[str, Any]) -> bytes:
    """What an entry's HMAC covers: its index less the HMAC, as canonical JSON."""
    return json.dumps({k: v for k, v in index.items() if k != "hmac"}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def run_id(records: Sequence[SplitRecord], partial: bool = False) -> str:
    """``<UTC time to the microsecond>-<commit>-<profile>-<scope>[-partial]-<pid><random>`` from the manifest
    entries of any split: sortable by time, readable (a partial run says so), and unique across processes started
    together (pid and random bits)."""
    entries: dict[str, object] = {}
    profile = "profile"
    for record in records:
        entries.update(record.entries)
        profile = record.profile_name or profile
    commit = str(entries.get("code_commit", "nocommit"))[:8]
    scope = str(entries.get("scope", "run"))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    unique = f"{os.getpid()}{secrets.token_hex(3)}"
    scope = f"{scope}-{PARTIAL_MARK}" if partial else scope
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{stamp}-{commit}-{profile}-{scope}-{unique}")


def record_outcomes(record: SplitRecord) -> pd.DataFrame:
    """Every ranker's per-direction outcomes of a split in one frame (``STORED_OUTCOME_COLUMNS``), from the record's
    sealed outcome artifacts; ``group`` from its population (NA without one)."""
    population = record.artifact("population")
    groups = (record.frame(population).assign(qid=lambda f: f["qid"].astype(str)).set_index("qid")["group"]
              if population is not None else None)
    frames = []
    for ranker in record.rankers:
        artifact = record.artifact("outcomes", ranker)
        if artifact is None:
            continue
        rows = record.frame(artifact)
        qids = rows["qid"].astype(str)
        frame = pd.DataFrame({"ranker": ranker, "qid": qids.to_numpy(),
                              "group": groups.reindex(qids).to_numpy() if groups is not None else pd.NA})
        for name, dtype in RANKER_FIELDS.items():
            frame[name] = rows[name].astype(dtype).to_numpy()
        frames.append(frame)
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=RANKER_FIELDS.get(c, "object")) for c in STORED_OUTCOME_COLUMNS})
    out = pd.concat(frames, ignore_index=True)
    out["group"] = out["group"].astype("string")
    return out


@dataclass(frozen=True)
class Saved:
    """A run saved in the history, the line saying what a killed run's leftovers were removed (None: none), and what
    the history holds that the suite did not write, kept and not named before (paths relative to the results)."""

    path: Path
    healed: str | None = None
    kept: list[str] = field(default_factory=list)


def _lock(path: Path) -> FileLock:
    return FileLock(str(path) + ".lock", timeout=0)


def _heal(history: Path, written: ledger.Written) -> tuple[str | None, list[str]]:
    """Remove what killed saves left in the history (the caller holds the results folder's lock and saves
    ``written``, its ledger): the staging folders the ledger records that no live process holds, with their lock
    files (``reports.ledger.sweep``). Returns the one line saying so, and what it keeps because the suite did not
    write it (a folder without ``entry.json``, a staging the ledger does not list), not named before."""
    def complete(path: Path) -> bool:  # a saved run, or a file of no staging: never the heal's
        return not (path.name.startswith(STAGING) or (path.is_dir() and not path.name.startswith(".")
                                                      and not (path / ENTRY).is_file()))

    removed, kept = ledger.sweep(history.parent, HISTORY, written, complete)
    if not removed:
        return None, kept
    shown = ", ".join(removed[:3]) + (f" and {len(removed) - 3} more" if len(removed) > 3 else "")
    return (f"history: removed {len(removed)} incomplete run(s) left by killed or failed saves in {history} ({shown})",
            kept)


def save_to_history(results_dir: Path, ident: str, records: Mapping[str, SplitRecord],
                    published: Mapping[str, Path]) -> Saved:
    """Keep a published run in the history under its run id: per split its typed record (Table II, every ranker's
    outcomes, manifest) and its small published files, with ``entry.json`` listing every file's sha256.

    Under the results folder's lock it first removes what killed runs left (``Saved.healed`` says what) and opens
    its own staging folder, ``.history/.staging-<run id>``, whose lock it holds while it writes; the entry is
    renamed into place under that lock again, ``entry.json`` already inside. A kill or a full disk leaves no entry
    (the error says why; the staging folder is removed on the way out, or by the next save after a SIGKILL).
    """
    results_dir = Path(results_dir)
    history, lock = results_dir / HISTORY, FileLock(str(results_dir / LOCK))
    staging = history / f"{STAGING}{ident}"
    own = _lock(staging)
    history.mkdir(parents=True, exist_ok=True)
    with lock:
        written = ledger.read(results_dir)
        healed, kept = _heal(history, written)
        own.acquire()
        written.folders[f"{HISTORY}/{staging.name}"] = ledger.STAGING  # before it exists: a kill leaves it recorded
        ledger.save(results_dir, written)
    try:
        staging.mkdir()
        files: dict[str, dict[str, str]] = {}
        for split, folder in published.items():
            out = staging / split
            out.mkdir()
            for pattern in KEEP:
                for path in sorted(Path(folder).glob(pattern)):
                    shutil.copyfile(path, out / path.name)
            records[split].tables["table2"].to_parquet(out / TABLE2_FILE, index=False)
            record_outcomes(records[split]).to_parquet(out / OUTCOMES_FILE, index=False)
            files[split] = folder_digests(out)
        index: dict[str, Any] = {"run_id": ident, "splits": files}
        index["hmac"] = seal_tag(ENTRY_PURPOSE, _entry_bytes(index))  # a recomputed sha256 never verifies
        atomic_write_text(staging / ENTRY, json.dumps(index, indent=1, sort_keys=True))
        with lock:
            staging.rename(history / ident)
            _forget(results_dir, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        with lock:
            _forget(results_dir, staging)
        raise
    finally:
        own.release()
        Path(str(staging) + ".lock").unlink(missing_ok=True)
    return Saved(history / ident, healed, kept)


def _forget(results_dir: Path, staging: Path) -> None:
    """The staging folder is gone (renamed into place, or removed): the ledger no longer lists it."""
    written = ledger.read(results_dir)
    written.folders.pop(f"{HISTORY}/{staging.name}", None)
    ledger.save(results_dir, written)


@dataclass(frozen=True)
class SavedSplit:
    """One split of a saved run, its files checked against ``entry.json`` when opened (``open_saved``)."""

    run_id: str
    split: str
    folder: Path
    manifest: Mapping[str, Any]

    def table2(self) -> pd.DataFrame:
        return pd.read_parquet(self.folder / TABLE2_FILE)

    @cached_property
    def all_outcomes(self) -> pd.DataFrame:
        """Every ranker's outcomes (``STORED_OUTCOME_COLUMNS``)."""
        return pd.read_parquet(self.folder / OUTCOMES_FILE)

    def outcomes(self, ranker: str) -> pd.DataFrame | None:
        """A ranker's per-direction outcomes (qid and ``FIELDS``), None when the run holds none of it."""
        return ranker_outcomes(self.all_outcomes, ranker)


def ranker_outcomes(outcomes: pd.DataFrame, ranker: str) -> pd.DataFrame | None:
    """One ranker's rows of an ``STORED_OUTCOME_COLUMNS`` frame (qid and ``FIELDS``); None when it has none."""
    rows = outcomes[outcomes["ranker"] == ranker]
    return rows[["qid", *FIELDS]].reset_index(drop=True) if len(rows) else None


def _index(entry: Path) -> dict[str, Any]:
    """An entry's ``entry.json``; ``HistoryError`` naming it when it cannot be read."""
    path = entry / ENTRY
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(index, dict) or not isinstance(index.get("splits"), dict):
            raise ValueError("no 'splits' table")
    except (OSError, ValueError) as exc:
        raise HistoryError(f"saved run {entry.name}: {path} cannot be read ({exc}); it cannot be used") from exc
    if index.get("run_id") != entry.name or not tag_verifies(index.get("hmac"), ENTRY_PURPOSE, _entry_bytes(index)):
        raise UnsealedEntry(f"saved run {entry.name}: {path} is not sealed with this user's key (saved by an earlier "
                            "version of the suite or by another user, or its digests were recomputed after an edit); "
                            "refusing to use it: compare with a run saved since")
    return index


def _verify(entry: Path, split: str, files: Mapping[str, str], names: Sequence[str] | None = None) -> None:
    """Check ``names`` (default: every listed file) of a split against their digests in ``entry.json``."""
    for name in files if names is None else names:
        path = entry / split / name
        if name not in files or not path.is_file():
            why = "is missing" if name in files else f"is not listed in {entry / ENTRY}"
            raise HistoryError(f"saved run {entry.name}: {path} {why}; it cannot be used")
        try:
            actual = file_sha256(path, "saved file")  # never through a link
        except (ArtifactCorrupt, OSError) as exc:
            raise HistoryError(f"saved run {entry.name}: {exc}; it cannot be used") from None
        if actual != files[name]:
            raise HistoryError(f"saved run {entry.name}: {path} was changed after the run saved it (its sha256 "
                               f"differs from {entry / ENTRY}); refusing to use it: restore it, or compare with "
                               f"another run")


def open_saved(entry: Path, split: str) -> SavedSplit:
    """A split of a complete history entry, every file of it checked; ``HistoryError`` (naming the file) when the
    entry is incomplete, holds no such split, or a file was changed."""
    entry = Path(entry)
    if not (entry / ENTRY).is_file():
        raise HistoryError(f"saved run {entry.name} is incomplete (no {ENTRY}: cut by a killed or failed save); it "
                           f"cannot be used, and the next run removes it")
    index = _index(entry)
    files = index["splits"].get(split)
    if not isinstance(files, dict):
        raise HistoryError(f"saved run {entry.name} holds no split {split!r} (it holds {sorted(index['splits'])})")
    _verify(entry, split, files)
    return SavedSplit(entry.name, split, entry / split, _manifest(entry, split) if MANIFEST_FILE in files else {})


def _manifest(entry: Path, split: str) -> dict[str, Any]:
    path = entry / split / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HistoryError(f"saved run {entry.name}: {path} cannot be read ({exc}); it cannot be used") from exc
    return manifest if isinstance(manifest, dict) else {}


def _entries(results_dir: Path) -> list[Path]:
    """Complete history entries (those holding ``entry.json``), oldest first."""
    history = Path(results_dir) / HISTORY
    return sorted(p for p in history.iterdir() if not p.name.startswith(".") and (p / ENTRY).is_file()) \
        if history.is_dir() else []


def saved_runs(results_dir: Path) -> list[str]:
    """Run ids of the complete runs under ``<results>/.history``, oldest first (a partial run's id carries
    ``-partial-``); an incomplete one is never listed."""
    return [p.name for p in _entries(results_dir)]


def pool_digest(manifest: Mapping) -> str | None:
    """The pool snapshot a published split was evaluated on (its parquet's sha256), from its manifest."""
    pool = manifest.get("pool")
    return str(pool.get("parquet_sha256")) if isinstance(pool, Mapping) and pool.get("parquet_sha256") else None


def partial_reasons(manifest: Mapping) -> list[str]:
    """Why a published run is partial (its manifest's ``partial``); empty for a complete run."""
    reasons = manifest.get("partial")
    return [str(r) for r in reasons] if isinstance(reasons, list) else []


def reviewed_run(results_dir: Path, profile: str, scope: str, split: str, pool: str,
                 pins: Mapping[tuple[str, str], float]) -> SavedSplit | None:
    """The newest complete saved run of this profile, scope and pool snapshot whose Table II reproduces every pin
    of the split exactly (counts equal, rates to the digits they are written with): the run a pin was reviewed
    on, or one that cannot be told apart from it. None when the history holds no such run; ``HistoryError`` when
    a candidate's files were changed after it was saved."""
    for entry in reversed(_entries(results_dir)):
        try:
            files = _index(entry)["splits"].get(split)
        except UnsealedEntry:
            continue  # not this user's: never the run a pin was reviewed on
        if not isinstance(files, dict) or MANIFEST_FILE not in files:
            continue
        _verify(entry, split, files, [MANIFEST_FILE])
        manifest = _manifest(entry, split)
        if (profile_of(manifest).get("name") != profile or manifest.get("scope") != scope
                or pool_digest(manifest) != pool or partial_reasons(manifest)):
            continue
        saved = open_saved(entry, split)
        table = saved.table2().set_index("ranker")
        if all(r in table.index and m in table.columns and abs(float(table.at[r, m]) - v) <= 5e-7
               for (r, m), v in pins.items()):
            return saved
    return None


def saved_split(results_dir: Path, other: str, split: str) -> SavedSplit:
    """The split ``--compare-to other`` means: a run id in the history, or a results folder (or one of its split
    folders), whose ``manifest.json`` names the run that the history beside it keeps. ``HistoryError`` with what
    to do when there is none, it is incomplete, or a file of it was changed."""
    history = Path(results_dir) / HISTORY
    what = f"--compare-to {other}"
    if other and "/" not in other and ((history / other).is_dir() or (history / f"{STAGING}{other}").exists()):
        try:
            return open_saved(history / other, split)
        except HistoryError as exc:
            raise HistoryError(f"{what}: {exc}; complete saved runs: {saved_runs(results_dir)[-5:]}") from exc
    folder = Path(other).expanduser()
    if folder.is_dir():
        manifest = next((p for p in (folder / split / MANIFEST_FILE, folder / MANIFEST_FILE) if p.is_file()), None)
        if manifest is None:
            raise HistoryError(f"{what}: holds no {split}/{MANIFEST_FILE} (no published split {split!r}); compare "
                               f"with a run of the same splits, or choose --splits accordingly")
        try:
            ident = str(json.loads(manifest.read_text(encoding="utf-8"))["run_id"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise HistoryError(f"{what}: {manifest} names no run_id ({exc})") from exc
        root = manifest.parent.parent if manifest.parent.name == split else manifest.parent
        for base in (root, root.parent):
            if (base / HISTORY / ident).is_dir():
                try:
                    return open_saved(base / HISTORY / ident, split)
                except HistoryError as exc:
                    raise HistoryError(f"{what}: {exc}") from exc
        raise HistoryError(f"{what}: {manifest} names run {ident}, which no history beside it keeps "
                           f"({root / HISTORY}, {root.parent / HISTORY}); compare with a saved run id instead")
    raise HistoryError(f"--compare-to {other!r} is neither a saved run id under {history} (latest: "
                       f"{saved_runs(results_dir)[-5:]}) nor a results directory")


def compare_problem(results_dir: Path, other: str, splits: Sequence[str]) -> str | None:
    """Why ``--compare-to other`` cannot be used for these splits (one message each, before any work); None."""
    problems = []
    for split in splits:
        try:
            saved_split(results_dir, other, split)
        except HistoryError as exc:
            problems.append(str(exc))
    return "; ".join(dict.fromkeys(problems)) or None
