"""Run history and comparisons between runs: changed, unchanged or undetermined, direction by direction.

``results/.history/<run id>/<split>/`` keeps the small files of each published run (tables,
``directions.csv`` with every ranker's per-direction outcomes, manifest, report; not the
large runs or pool), complete or partial: a partial run (``-k``, ``-m``, ...) is marked in its
run id (``-partial-``) and its manifest (``partial``: why), so the researcher's ``-m "not llm"``
loop has runs to compare with, and a pin's reviewed run is only ever a complete one
(docs/protocol.md#publishing). Two runs are compared as a paired experiment when they share the pool
snapshot, so both evaluated the same directions; each measure's decision (changed, unchanged, ...)
is ``reports.changes``'s. Without per-direction outcomes of both runs (an older run, another pool
snapshot) the comparison is *unpaired*: it says so, and a pin falls back to its tolerance. The
paper's published values ride along as a labeled reference column for Test.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from fixtures.environment import version_changes
from fixtures.settings import SEED
from reports.measures import TABLE2, paired_measure
from reports.paper import paper_table2
from reports.changes import ChangeVerdict, paired_change
from reports.record import SplitRecord, profile_of

HISTORY = ".history"
KEEP = ("*.csv", "*.json", "*.md", "*.tex")
#: Table II measures compared across runs (``compared`` in the registry), in table2.csv's order.
COMPARED = tuple(m.name for m in TABLE2 if m.compared)
#: Per-direction outcome fields a ranker leaves in directions.csv (``<ranker>__<field>``).
FIELDS = ("strict", "rank_pos", "rank_neg", "tie", "fallback")
COMPARISON_COLUMNS = ("ranker", "measure", "now", "then", "delta", "delta_lo", "delta_hi", "p_changed",
                      "p_unchanged", "margin", "certifiable_margin", "decision", "basis", "n", "differing_groups",
                      "discordant", "paper")

#: The mark of a partial run in its run id.
PARTIAL_MARK = "partial"


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


def save_to_history(results_dir: Path, ident: str, split: str, published: Path) -> Path:
    """Copy a published split's small files into the history under the run id, as a transaction: they are
    copied into a hidden staging folder and renamed into place whole, so a full disk or a kill leaves no
    empty or cut file in the history (the error says why, and the staging folder is removed)."""
    history = Path(results_dir) / HISTORY
    target = history / ident / split
    staging = history / f".staging-{ident}-{split}-{os.getpid()}"
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for pattern in KEEP:
            for path in published.glob(pattern):
                shutil.copyfile(path, staging / path.name)
        target.parent.mkdir(exist_ok=True)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        with suppress(OSError):
            target.parent.rmdir()  # only when empty: this run saved no other split
        raise
    return target


def ranker_outcomes(directions: pd.DataFrame, ranker: str) -> pd.DataFrame | None:
    """A ranker's per-direction outcomes from a published ``directions.csv`` (eligible rows); None if absent."""
    columns = [f"{ranker}__{f}" for f in FIELDS]
    if any(c not in directions.columns for c in columns):
        return None
    rows = directions[directions[f"{ranker}__strict"].notna()]
    out = rows[["qid", *columns]].rename(columns=dict(zip(columns, FIELDS))).reset_index(drop=True)
    out["qid"] = out["qid"].astype(str)
    for f in ("strict", "tie", "fallback"):
        out[f] = out[f].astype(str).str.lower().map({"true": True, "false": False, "1": True, "0": False,
                                                     "1.0": True, "0.0": False})
    for f in ("rank_pos", "rank_neg"):
        out[f] = pd.to_numeric(out[f]).astype("Int64")
    return out


def _read_manifest(folder: Path) -> dict:
    path = folder / "manifest.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def pool_digest(manifest: Mapping) -> str | None:
    """The pool snapshot a published split was evaluated on (its parquet's sha256), from its manifest."""
    pool = manifest.get("pool")
    return str(pool.get("parquet_sha256")) if isinstance(pool, Mapping) and pool.get("parquet_sha256") else None


def partial_reasons(manifest: Mapping) -> list[str]:
    """Why a published run is partial (its manifest's ``partial``); empty for a complete run."""
    reasons = manifest.get("partial")
    return [str(r) for r in reasons] if isinstance(reasons, list) else []


def reviewed_run(results_dir: Path, profile: str, scope: str, split: str, pool: str,
                 pins: Mapping[tuple[str, str], float]) -> Path | None:
    """The newest complete saved run of this profile, scope and pool snapshot whose Table II reproduces every pin
    of the split exactly (counts equal, rates to the digits they are written with): the run a pin was reviewed
    on, or one that cannot be told apart from it. None when the history holds no such run."""
    root = Path(results_dir) / HISTORY
    if not root.is_dir():
        return None
    for folder in sorted((p / split for p in root.iterdir() if (p / split / "directions.csv").is_file()),
                         reverse=True):
        manifest = _read_manifest(folder)
        named = profile_of(manifest).get("name")
        if (named != profile or manifest.get("scope") != scope or pool_digest(manifest) != pool
                or partial_reasons(manifest)):
            continue
        try:
            table = pd.read_csv(folder / "table2.csv").set_index("ranker")
        except (OSError, ValueError, KeyError):
            continue
        if all(r in table.index and m in table.columns and abs(float(table.at[r, m]) - v) <= 5e-7
               for (r, m), v in pins.items()):
            return folder
    return None


def saved_runs(results_dir: Path) -> list[str]:
    """Run ids kept under ``<results>/.history``, oldest first (a partial run's id carries ``-partial-``)."""
    history = Path(results_dir) / HISTORY
    return sorted(p.name for p in history.glob("*") if p.is_dir() and not p.name.startswith(".")) \
        if history.is_dir() else []


def saved_run(results_dir: Path, other: str, split: str) -> Path | None:
    """The folder ``--compare-to other`` means for a split: a run id's split in the history, or another results
    directory's split folder (or that folder itself); None when none holds a table2.csv."""
    candidates = [Path(results_dir) / HISTORY / other / split, Path(other) / split, Path(other)]
    return next((folder for folder in candidates if (folder / "table2.csv").is_file()), None)


def _locate(results_dir: Path, other: str, split: str) -> Path:
    """The folder of a run id's split in the history, or of another results directory (or its split folder)."""
    folder = saved_run(results_dir, other, split)
    if folder is not None:
        return folder
    raise FileNotFoundError(f"--compare-to {other!r}: no {split}/table2.csv as a saved run id or a results "
                            f"directory; saved runs: {saved_runs(results_dir)[-5:]}")


def compare_tables(now: pd.DataFrame, then: pd.DataFrame, split: str,
                   now_directions: pd.DataFrame | None = None, then_directions: pd.DataFrame | None = None,
                   margins: Mapping[str, float] | None = None, seed: int = SEED) -> pd.DataFrame:
    """Per ranker and measure: now, then, Δ and the decision (paired where both runs' directions are given).

    ``now_directions``/``then_directions`` are the two runs' ``directions.csv`` on the same pool
    snapshot; a measure without a paired test (n, paired_pct) or a ranker missing from either
    is compared unpaired: Δ only, decision ``undetermined`` unless the values are equal.
    """
    paper = paper_table2(split, int(now["n"].max()) if len(now) else None)
    paper_rows = paper.set_index("ranker") if paper is not None else None
    then_rows = then.set_index("ranker")
    rows = []
    for _, row in now.iterrows():
        name = row["ranker"]
        pair = _paired_outcomes(name, now_directions, then_directions)
        for measure in COMPARED:
            if measure not in now.columns:
                continue
            old = then_rows.at[name, measure] if name in then_rows.index and measure in then_rows.columns else np.nan
            value = row[measure]
            verdict = _verdict(measure, value, old, pair, margins or {}, seed)
            ref = np.nan
            if paper_rows is not None and name in paper_rows.index and measure in paper_rows.columns:
                ref = paper_rows.at[name, measure]
            rows.append({"ranker": name, "measure": measure, "now": value, "then": old, "delta": verdict.delta,
                         "delta_lo": verdict.lo, "delta_hi": verdict.hi, "p_changed": verdict.p_changed,
                         "p_unchanged": verdict.p_unchanged, "margin": verdict.margin,
                         "certifiable_margin": verdict.certifiable, "decision": verdict.decision,
                         "basis": verdict.basis, "n": verdict.n if verdict.basis == "paired" else np.nan,
                         "differing_groups": verdict.differing_groups if verdict.basis == "paired" else np.nan,
                         "discordant": verdict.discordant if verdict.basis == "paired" else np.nan, "paper": ref})
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))


def _paired_outcomes(ranker: str, now: pd.DataFrame | None, then: pd.DataFrame | None):
    """(now outcomes, then outcomes aligned to them, their groups), or None when the runs cannot be paired."""
    if now is None or then is None:
        return None
    a, b = ranker_outcomes(now, ranker), ranker_outcomes(then, ranker)
    if a is None or b is None or len(a) != len(b) or set(a["qid"]) != set(b["qid"]):
        return None
    b = b.set_index("qid").loc[a["qid"]].reset_index()
    groups = now.set_index(now["qid"].astype(str))["group"].loc[a["qid"]].to_numpy()
    return a, b, groups


def _verdict(measure: str, value: float, old: float, pair, margins: Mapping[str, float], seed: int) -> ChangeVerdict:
    nan = float("nan")
    if pd.isna(old) and pd.isna(value):
        return ChangeVerdict("unchanged", "measured in neither run", value, old, nan)
    if pd.isna(old) or pd.isna(value):
        return ChangeVerdict("undetermined", "not in both runs", value, old, nan)
    if pair is not None:
        try:
            paired = paired_measure(measure)
        except KeyError:
            paired = None
        if paired is not None and (not paired.position or all(o["rank_pos"].notna().all() for o in pair[:2])):
            return paired_change(measure, pair[0], pair[1], pair[2], margins.get(paired.name), seed)
    why = "unpaired" if pair is None else "no per-direction test for this measure"
    return ChangeVerdict("unchanged" if value == old else "undetermined", why, value, old, value - old)


def compare_with(results_dir: Path, other: str, split: str, table2: pd.DataFrame, manifest: Mapping,
                 directions: pd.DataFrame | None) -> pd.DataFrame:
    """This run's Table II, manifest and ``directions.csv`` (as published, or about to be) against a saved run,
    paired when both runs' directions exist and share the pool snapshot; margins from this run's manifest."""
    folder = _locate(results_dir, other, split)
    theirs = _read_manifest(folder)
    paired = (pool_digest(manifest) is not None and pool_digest(manifest) == pool_digest(theirs)
              and directions is not None and (folder / "directions.csv").is_file())
    now_dirs = directions if paired else None
    then_dirs = pd.read_csv(folder / "directions.csv") if paired else None
    margins = manifest.get("margins") if isinstance(manifest.get("margins"), Mapping) else {}
    return compare_tables(table2, pd.read_csv(folder / "table2.csv"), split, now_dirs, then_dirs, margins)


def comparison_table(results_dir: Path, other: str, split: str, table2: pd.DataFrame, manifest: Mapping,
                     directions: pd.DataFrame | None) -> pd.DataFrame:
    """``compare_with`` with the rankers matched by name made explicit, for ``comparison.csv``: a ``side``
    column says whether a ranker is in both runs (compared), in this run only, or in the saved run only (one
    row each, not compared)."""
    folder = _locate(results_dir, other, split)
    then = pd.read_csv(folder / "table2.csv")
    table = compare_with(results_dir, other, split, table2, manifest, directions)
    mine, theirs = manifest.get("environment"), _read_manifest(folder).get("environment")
    moved = version_changes(mine, theirs) if isinstance(mine, Mapping) and isinstance(theirs, Mapping) else []
    # A value that moved may owe it to the libraries: say which versions differ (or that the saved run lacks them).
    table["versions_differ"] = "; ".join(moved) if moved else ("" if isinstance(theirs, Mapping) else "not recorded")
    now_names, then_names = set(table2["ranker"]), set(then["ranker"])
    table.insert(1, "side", ["both" if r in then_names else "this run only" for r in table["ranker"]])
    only_then = [r for r in then["ranker"] if r not in now_names]
    extra = pd.DataFrame({"ranker": only_then, "side": "saved run only", "measure": "(not compared)"})
    table = pd.concat([table, extra], ignore_index=True) if only_then else table
    # A partial saved run holds only what it selected: the rankers both hold are compared, the rest listed.
    table["saved_partial"] = "; ".join(partial_reasons(_read_manifest(folder)))
    return table
