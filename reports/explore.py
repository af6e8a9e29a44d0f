"""The explorer page: why a verdict holds, read direction by direction (docs/protocol.md#outputs).

``explore.html`` is one self-contained file per split (data embedded as JSON, figures as
base64 PNG, no network): Table II and the claims (a claim on a sequential sample with where
the sample stopped), every planned direction with each ranker's outcome, and a direction
view (the query, both designated passages with the words that differ marked, each ranker's
positions and text scores, the grader's grade probabilities, the top of the pool with route
scores, the pair's other direction).
``explore_page`` is a pure function of its inputs; the publishing step gathers the inputs
from the run's tables and cached artifacts (``load_inputs``) and writes the page, so the
page a user opens and the page the browser test drives come from the same code.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fixtures.artifacts import atomic_write, atomic_write_text
from rankers.base import Ranking
from rankers.window import WINDOW_K
from reports.measures import COUNT, PAIRED_MEASURES, POPULATION, TABLE2, BaselineMeasure, shown_in
from reports.sequential import StoppingPoint, stopping_points
from reports.tables import directions_table

#: Where the page's HTML, CSS and JavaScript live (plain files: no build step, nothing fetched at run time).
ASSETS = Path(__file__).with_name("explore_assets")
#: No published file may exceed this; the page is checked before it is written.
MAX_PAGE_BYTES = 25 * 2**20
#: Passages of the pool shown per direction, in the reference ranker's order: the window the rerankers see.
POOL_TOP = WINDOW_K
#: Outcome codes in the page: not evaluated on the direction, strict success, wrong order, tie.
NOT_EVALUATED, SUCCESS, WRONG, TIE = 0, 1, 2, 3
#: Branch codes of the tie-branch analysis (``reports.tie_branch.BRANCHES``), one letter per direction.
BRANCH_CODES = {"equal_score": "e", "different_score": "d", "outside_window_or_fallback": "o"}
#: The scopes of a window ranker's judgments (``judgments:<ranker>:<scope>`` artifacts, ``judgments_table``) the
#: page reads, first present first: its window's, or its designated pairs' for a ranker that scores only those.
JUDGMENT_SCOPES = ("window", "pair")
#: The report tables the page reads (besides the artifacts they name).
PAGE_TABLES = ("table2", "claims", "pairwise", "sequential", "artifacts")
#: Chromium flags that need no GPU, sandbox, network or profile (headless screenshots).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--mute-audio")
#: The state the published screenshot shows: the directions a window ranker gets wrong and its baseline right,
#: the first one open (``demo`` in explore.js).
SCREENSHOT_STATE = "#view=directions&demo=1&first=1"
SCREENSHOT_SIZE = (1440, 1000)


@dataclass(frozen=True)
class ExploreInputs:
    """Everything one split's page shows; built by ``load_inputs`` from a run's tables and artifacts."""

    split: str
    meta: dict[str, Any]
    rankers: list[dict[str, Any]]
    table2: pd.DataFrame
    directions: pd.DataFrame
    queries: dict[str, str]
    passages: dict[str, str]
    claims: pd.DataFrame | None = None
    pairwise: pd.DataFrame | None = None
    pool_top: pd.DataFrame | None = None
    reference: str | None = None
    judgments: dict[str, pd.DataFrame] = field(default_factory=dict)  # ``judgments_table`` frames, per ranker
    branches: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, bytes] = field(default_factory=dict)
    sequential: dict[str, StoppingPoint] = field(default_factory=dict)  # claim -> where its sequential sample stopped


def _artifacts(tables: Mapping[str, pd.DataFrame]) -> dict[str, Path]:
    if "artifacts" not in tables:
        return {}
    return {str(a): Path(p) for a, p in zip(tables["artifacts"]["artifact"], tables["artifacts"]["path"])}


def _judgments(name: str, paths: Mapping[str, Path]) -> Path | None:
    """The judgments artifact the page shows for a ranker (``JUDGMENT_SCOPES``); None for a full-pool ranker."""
    return next((paths[a] for s in JUDGMENT_SCOPES if (a := f"judgments:{name}:{s}") in paths), None)


def top_of(ranking: Ranking, k: int = POOL_TOP) -> pd.DataFrame:
    """The first ``k`` passages of every query of a ranking (qid, pid, rank): what the page shows of a pool."""
    frame = ranking.frame
    return frame.loc[frame["rank"] <= k, ["qid", "pid", "rank"]].reset_index(drop=True)


def _pool_top(pool: Path, top: Path) -> pd.DataFrame:
    """The reference ranker's top of every pool (``top_of``) with each route's score and rank."""
    routes = pd.read_parquet(pool)
    joined = pd.read_parquet(top).merge(routes, on=["qid", "pid"], how="left", validate="one_to_one")
    return joined.sort_values(["qid", "rank"], kind="mergesort").reset_index(drop=True)


def _meta(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies this run in the page's header (the rest of the page depends on its results only)."""
    return {"commit": str(manifest.get("code_commit", "?")), "run_id": manifest.get("run_id")}


def load_inputs(split: str, tables: Mapping[str, pd.DataFrame], manifest: Mapping[str, Any],
                figures: Sequence[Path] = ()) -> ExploreInputs:
    """The page's inputs from a split's report tables and the cached artifacts they name (read once here)."""
    paths = _artifacts(tables)
    if "table2" not in tables or "population" not in paths:
        raise ValueError(f"{split}: the explorer needs Table II and the population artifact "
                         f"(have tables {sorted(tables)}, artifacts {sorted(paths)})")
    table2 = tables["table2"]
    names = [str(r) for r in table2["ranker"]]
    annotated = pd.read_parquet(paths["population"])
    outcomes = {r: pd.read_parquet(paths[f"outcomes:{r}"]) for r in names if f"outcomes:{r}" in paths}
    profile = manifest.get("profile") if isinstance(manifest.get("profile"), Mapping) else {}
    declared = profile.get("rankers", {}) if isinstance(profile.get("rankers"), Mapping) else {}
    rankers = []
    for row in table2.to_dict("records"):
        name = str(row["ranker"])
        decl = declared.get(name, {}) if isinstance(declared.get(name), Mapping) else {}
        rankers.append({"name": name, "label": decl.get("label") or name, "n": int(row["n"]),
                        "compare_to": decl.get("compare_to"), "window": _judgments(name, paths) is not None})
    references = [declared[r]["reference"] for r in names if isinstance(declared.get(r), Mapping)
                  and declared[r].get("reference") and _judgments(r, paths) is not None]
    reference = next((r for r in [*references, *names] if f"top:{r}" in paths), None)
    pool_top = None
    if reference is not None and "pool" in paths:
        pool_top = _pool_top(paths["pool"], paths[f"top:{reference}"])
    corpus = pd.read_parquet(paths["corpus"]) if "corpus" in paths else pd.DataFrame({"pid": [], "text": []})
    wanted = set(annotated["preferred_pid"].astype(str)) | set(annotated["counterpart_pid"].astype(str))
    if pool_top is not None:
        wanted |= set(pool_top["pid"].astype(str))
    corpus = corpus[corpus["pid"].astype(str).isin(wanted)]
    return ExploreInputs(
        split=split,
        meta={"split": split, "profile": profile.get("name", "?"), "scope": manifest.get("scope"),
              **_meta(manifest)},
        rankers=rankers, table2=table2, directions=directions_table(annotated, outcomes),
        queries=dict(zip(annotated["qid"].astype(str), annotated["query"].astype(str))),
        passages=dict(zip(corpus["pid"].astype(str), corpus["text"].astype(str))),
        claims=tables.get("claims"), pairwise=tables.get("pairwise"), pool_top=pool_top, reference=reference,
        judgments={r: pd.read_parquet(p) for r in names if (p := _judgments(r, paths)) is not None},
        branches={r: pd.read_parquet(paths[f"branches:{r}"]) for r in names if f"branches:{r}" in paths},
        figures={p.stem: Path(p).read_bytes() for p in figures if Path(p).suffix == ".png"},
        sequential=stopping_points(tables.get("sequential")))


# ---- the embedded data ---------------------------------------------------------------------------


def _num(value: Any, digits: int = 6) -> float | int | None:
    """A JSON number rounded to ``digits`` significant digits; None for missing or non-finite values."""
    if value is None or value is pd.NA:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v):
        return None
    if v == int(v) and abs(v) < 2**53:
        return int(v)
    return float(f"{v:.{digits}g}")


def _strings(values: pd.Series) -> list[str]:
    """A column as a list of Python strings (one conversion, not an iteration over an Arrow-backed column)."""
    return values.astype(str).tolist()


def _flags(values: pd.Series) -> list[int]:
    return values.fillna(False).to_numpy(dtype=bool).astype(int).tolist()


def _column(values: Any, digits: int = 6) -> list[float | int | None]:
    """``_num`` over a whole column, vectorized (a full Test page holds about half a million numbers)."""
    a = pd.to_numeric(pd.Series(values, copy=False), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    finite = np.isfinite(a)
    v = a[finite]
    p = np.zeros(len(v), dtype=np.int64)
    nonzero = v != 0
    p[nonzero] = np.clip(digits - 1 - np.floor(np.log10(np.abs(v[nonzero]))).astype(np.int64), -300, 300)
    up = p >= 0  # divide by an exact power of ten, so each value prints as its shortest decimal
    rounded = np.where(up, np.round(v * 10.0 ** np.maximum(p, 0)) / 10.0 ** np.maximum(p, 0),
                       np.round(v / 10.0 ** np.maximum(-p, 0)) * 10.0 ** np.maximum(-p, 0))
    out = np.full(len(a), np.nan)
    out[finite] = rounded
    return [None if x != x else int(x) if x.is_integer() and abs(x) < 2**53 else x for x in out.tolist()]


def _sparse(values: list[Any]) -> list[Any] | dict[str, list[Any]]:
    """A mostly empty column (a sampled ranker's) as {"i": indices, "v": values}; the page expands it on load."""
    present = [i for i, v in enumerate(values) if v is not None]
    if 2 * len(present) >= len(values):
        return values
    return {"i": present, "v": [values[i] for i in present]}


def _records(frame: pd.DataFrame | None, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    if frame is None or not len(frame):
        return []
    cols = [c for c in (columns or frame.columns) if c in frame.columns]
    out = []
    for row in frame[cols].to_dict("records"):
        out.append({k: (_num(v) if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                        else None if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA
                        else v if isinstance(v, (bool, str)) else str(v))
                    for k, v in row.items()})
    return out


def _outcome_codes(directions: pd.DataFrame, name: str) -> tuple[str, str]:
    strict = directions[f"{name}__strict"]
    tie = directions[f"{name}__tie"]
    codes = np.where(strict.isna().to_numpy(), NOT_EVALUATED,
                     np.where(strict.fillna(False).to_numpy(dtype=bool), SUCCESS,
                              np.where(tie.fillna(False).to_numpy(dtype=bool), TIE, WRONG)))
    fallback = directions[f"{name}__fallback"].fillna(False).to_numpy(dtype=bool)
    return "".join(map(str, codes)), "".join("1" if f else "0" for f in fallback)


def _keyed(judgments: pd.DataFrame) -> pd.DataFrame:
    """A ``judgments_table`` frame indexed by (qid, pid) as strings, one row each (the first, as the table keeps)."""
    frame = judgments.drop_duplicates(["qid", "pid"])
    return frame.set_index(pd.MultiIndex.from_arrays([frame["qid"].astype(str), frame["pid"].astype(str)],
                                                     names=["qid", "pid"]))


def _probabilities(values: pd.Series) -> np.ndarray:
    """The grader's five grade probabilities per row (``grade_probs``, a JSON list), NaN where it stored none."""
    out = np.full((len(values), 5), np.nan)
    for i, text in enumerate(values):
        probs = json.loads(text) if isinstance(text, str) else None
        if isinstance(probs, list) and len(probs) == 5:
            out[i] = probs
    return out


def table2_columns() -> list[dict[str, Any]]:
    """The Table II columns the page shows, described for explore.js (which lists none of its own): name, heading,
    digits, how the value is written (``int``, ``fixed``, ``interval``, ``signed`` with its interval), the interval's
    columns, and whether it compares with the row's baseline."""
    out = []
    for m in shown_in("explorer"):
        bounds = m.bounds if "explorer" not in m.bare else None
        baseline = isinstance(m, BaselineMeasure)
        how = ("int" if m.unit in (COUNT, POPULATION) else "fixed" if bounds is None
               else "signed" if baseline else "interval")
        out.append({"name": m.name, "label": m.label, "digits": m.digits, "format": how,
                    "lo": bounds[0] if bounds else None, "hi": bounds[1] if bounds else None, "baseline": baseline})
    return out


def page_data(inputs: ExploreInputs) -> dict[str, Any]:
    """The JSON the page embeds: columnar arrays aligned with the directions table, texts stored once."""
    d = inputs.directions
    qids = _strings(d["qid"])
    passage_index: dict[str, int] = {}

    def pidx(pid: str) -> int:
        if pid not in passage_index:
            passage_index[pid] = len(passage_index)
        return passage_index[pid]

    query_texts: dict[str, int] = {}
    query_of = [query_texts.setdefault(inputs.queries.get(q, ""), len(query_texts)) for q in qids]
    data: dict[str, Any] = {
        "meta": {**inputs.meta, "n_directions": len(d), "reference": inputs.reference, "pool_top": POOL_TOP},
        "rankers": inputs.rankers,
        "table2": _records(inputs.table2, ("ranker", *(m.name for m in TABLE2))),
        "table2_columns": table2_columns(),
        "position_measures": {m.name: m.position for m in PAIRED_MEASURES},
        "claims": _records(inputs.claims),
        "pairwise": _records(inputs.pairwise),
        "sequential": {claim: point.record() for claim, point in inputs.sequential.items()},
        "figures": [{"name": n, "src": "data:image/png;base64," + base64.b64encode(b).decode("ascii")}
                    for n, b in sorted(inputs.figures.items())],
        "dirs": {"qid": qids, "pair": _strings(d["pair_id"]), "dir": _strings(d["direction"]),
                 "group": _strings(d["group"]), "query": query_of,
                 "eligible": _flags(d["eligible"]), "covered": _flags(d["covered"]), "conflict": _flags(d["conflict"]),
                 "pos": [pidx(p) for p in _strings(d["preferred_pid"])],
                 "neg": [pidx(p) for p in _strings(d["counterpart_pid"])]},
        "outcomes": {}, "judgments": {}, "branches": {},
    }
    for r in inputs.rankers:
        name = r["name"]
        if f"{name}__strict" not in d.columns:
            continue
        codes, fallback = _outcome_codes(d, name)
        data["outcomes"][name] = {"o": codes, "f": fallback, "rp": _sparse(_column(d[f"{name}__rank_pos"])),
                                  "rn": _sparse(_column(d[f"{name}__rank_neg"]))}
    for name, frame in inputs.judgments.items():
        j = _keyed(frame)
        per_side = {}
        for side, column in (("p", "preferred_pid"), ("n", "counterpart_pid")):
            idx = pd.MultiIndex.from_arrays([d["qid"].astype(str), d[column].astype(str)])
            part = j.reindex(idx)
            per_side[f"s{side}"] = _column(part["rule_score"], 6)  # what the rule read, never recomputed here
            probs = _probabilities(part["grade_probs"])
            if np.isfinite(probs).any():
                per_side[f"g{side}"] = [None if any(v is None for v in row) else row for row in
                                        ([_num(v, 3) for v in vals] for vals in probs)]
                per_side[f"m{side}"] = _column(part["grade_margin"], 3)
                per_side[f"t{side}"] = _column(part["near_tie"])
            per_side[f"e{side}"] = [None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
                                    for v in part["reason"]]
        data["judgments"][name] = {k: _sparse(v) for k, v in per_side.items()}
    for name, frame in inputs.branches.items():
        b = frame.set_index("qid")["branch"].reindex(qids)
        data["branches"][name] = "".join(BRANCH_CODES.get(v, "-") if isinstance(v, str) else "-" for v in b)
    if inputs.pool_top is not None:
        data["pool"] = _pool_data(inputs, qids, pidx)
    data["passages"] = [inputs.passages.get(pid) for pid in passage_index]
    data["pids"] = list(passage_index)
    data["queries"] = list(query_texts)
    return data


def _pool_data(inputs: ExploreInputs, qids: list[str], pidx) -> dict[str, Any]:
    """Per direction, the top of its pool: offsets into flat arrays of passages, route scores and ranks, and the
    text score each window ranker gave each passage it saw."""
    top = inputs.pool_top
    top = top[top["qid"].astype(str).isin(set(qids))]
    by_qid = {q: (s, e) for q, s, e in _runs(np.asarray(_strings(top["qid"]), dtype=object))}
    order = np.concatenate([np.arange(*by_qid[q]) for q in qids if q in by_qid]) if by_qid else np.array([], int)
    top = top.iloc[order].reset_index(drop=True)
    start, cursor = [], 0
    for q in qids:
        s, e = by_qid.get(q, (0, 0))
        start.append(cursor)
        cursor += e - s
    start.append(cursor)
    routes = [c[:-6] for c in top.columns if c.endswith("_score")]
    out: dict[str, Any] = {"start": start, "pid": [pidx(p) for p in _strings(top["pid"])], "routes": routes,
                           "text": {}}
    for r in routes:
        out[f"{r}_score"] = _column(top[f"{r}_score"], 4)
        out[f"{r}_rank"] = _column(top[f"{r}_rank"])
    keys = pd.MultiIndex.from_arrays([top["qid"].astype(str), top["pid"].astype(str)])
    for name, frame in inputs.judgments.items():
        scores = _keyed(frame)["rule_score"].reindex(keys)
        if scores.notna().any():
            out["text"][name] = _sparse(_column(scores, 4))
    return out


def _runs(values: np.ndarray) -> list[tuple[str, int, int]]:
    """(value, start, end) of each run of equal consecutive values."""
    if not len(values):
        return []
    cuts = np.flatnonzero(values[1:] != values[:-1]) + 1
    bounds = np.concatenate([[0], cuts, [len(values)]])
    return [(str(values[s]), int(s), int(e)) for s, e in zip(bounds[:-1], bounds[1:])]


#: Characters written as JSON ``\\u`` escapes in the embedded data, so no text can end the script block
#: (``</script>``), open an HTML comment or script state (``<!--``, ``<script``) or form a template marker.
SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
#: The template's markers, each replaced once, in one pass over the template (never over inserted text).
MARKERS = ("/*CSS*/", "/*JS*/", "/*DATA*/", "<!--TITLE-->")


def script_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script>`` element (``SCRIPT_UNSAFE`` escaped; JSON.parse reads it back)."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return re.sub("[<>&\u2028\u2029]", lambda m: SCRIPT_UNSAFE[m.group(0)], payload)


def render(data: Mapping[str, Any]) -> str:
    """The page: the HTML template with its stylesheet, script and data inlined; the data as ``script_json``, the
    title as HTML text."""
    template = (ASSETS / "explore.html").read_text(encoding="utf-8")
    parts = {"/*CSS*/": (ASSETS / "explore.css").read_text(encoding="utf-8"),
             "/*JS*/": (ASSETS / "explore.js").read_text(encoding="utf-8"),
             "/*DATA*/": script_json(data),
             "<!--TITLE-->": html.escape(f"Explorer · {data['meta']['split']} · {data['meta'].get('profile', '')}")}
    for marker in MARKERS:
        if template.count(marker) != 1:
            raise ValueError(f"{ASSETS / 'explore.html'}: marker {marker!r} must occur exactly once")
    return re.sub("|".join(re.escape(m) for m in MARKERS), lambda m: parts[m.group(0)], template)


def explore_page(inputs: ExploreInputs) -> str:
    """The self-contained explorer page of one split."""
    return render(page_data(inputs))


# ---- publishing ----------------------------------------------------------------------------------


def chromium() -> str | None:
    """The system Chromium (``NEVIR_CHROMIUM`` overrides): the only browser the suite ever runs."""
    path = os.environ.get("NEVIR_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return path if path and Path(path).is_file() else None


def screenshot(page: Path, png: Path, state: str = SCREENSHOT_STATE, size: tuple[int, int] = SCREENSHOT_SIZE,
               timeout_s: float = 60.0) -> str | None:
    """A headless-Chromium PNG of ``page`` opened at ``state``; returns why not when it cannot be taken."""
    browser = chromium()
    if browser is None:
        return "no system Chromium (install Debian's chromium; .ci/setup does)"
    with tempfile.TemporaryDirectory(prefix="nevir-chromium-") as profile:
        command = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
                   f"--screenshot={png}", "--virtual-time-budget=3000", Path(page).resolve().as_uri() + state]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"Chromium failed: {type(exc).__name__}: {exc}"
    if done.returncode != 0 or not Path(png).is_file():
        return f"Chromium exited {done.returncode}: {done.stderr.strip()[-300:]}"
    return None


def _data_key(split: str, tables: Mapping[str, pd.DataFrame], manifest: Mapping[str, Any],
              figures: Sequence[Path]) -> str:
    """What the page's data depend on: this code, the tables, the profile, the figures and the artifact files (their
    names are content digests or frozen snapshot identities; sizes are added as a check). Not the run id or commit."""
    h = hashlib.sha256(split.encode())
    for asset in (Path(__file__), *sorted(ASSETS.iterdir())):
        h.update(asset.read_bytes())
    for name in PAGE_TABLES:  # only what the page reads: other tables hold run-specific timings
        if name in tables:
            h.update(name.encode() + tables[name].to_csv(index=False).encode())
    for artifact, path in sorted(_artifacts(tables).items()):
        h.update(f"{artifact}={path}:{path.stat().st_size if path.is_file() else -1}".encode())
    h.update(json.dumps({k: manifest.get(k) for k in ("profile", "scope")}, sort_keys=True, default=str).encode())
    for figure in sorted(Path(f) for f in figures):
        h.update(figure.name.encode() + hashlib.sha256(figure.read_bytes()).digest())
    return h.hexdigest()[:24]


def write_explore(out: Path, split: str, tables: Mapping[str, pd.DataFrame], manifest: Mapping[str, Any],
                  figures: Sequence[Path] = (), cache_dir: Path | None = None) -> dict[str, Any]:
    """Write ``explore.html`` (and ``explore.png`` when a system Chromium exists); returns the manifest entry.

    With ``cache_dir``, the page's data and its screenshot are kept under the key of what they depend on
    (``_data_key``): a rerun on the same results only stamps this run's id and commit into the page. The
    screenshot shows the direction view, which covers the header's run id, so a kept one is this page's picture.
    """
    key = _data_key(split, tables, manifest, figures) if cache_dir is not None else None
    kept = Path(cache_dir) / f"explore-{split}-{key}.json" if key else None
    if kept is not None and kept.is_file():
        data = json.loads(kept.read_text(encoding="utf-8"))
        data["meta"].update(_meta(manifest))
    else:
        data = page_data(load_inputs(split, tables, manifest, figures))
        if kept is not None:
            atomic_write_text(kept, json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    page = render(data).encode("utf-8")
    if len(page) > MAX_PAGE_BYTES:
        raise ValueError(f"{split}: explore.html would be {len(page):,} bytes, over the {MAX_PAGE_BYTES:,}-byte limit")
    path = Path(out) / "explore.html"
    path.write_bytes(page)
    entry: dict[str, Any] = {"file": path.name, "bytes": len(page), "sha256": hashlib.sha256(page).hexdigest()}
    png = Path(out) / "explore.png"
    shot = Path(cache_dir) / f"explore-{split}-{key}.png" if key else None
    if shot is not None and shot.is_file():
        shutil.copyfile(shot, png)
        why = None
    else:
        why = screenshot(path, png)
        if why is None and shot is not None:
            atomic_write(shot, lambda p: shutil.copyfile(png, p))
    entry["screenshot"] = png.name if why is None else None
    if why is not None:
        entry["screenshot_skipped"] = why
    return entry
