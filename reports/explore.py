"""The explorer page: why a verdict holds, read direction by direction (docs/protocol.md#outputs).

``explore.html`` is one self-contained file per split (data embedded as JSON, figures as
base64 PNG, no network): Table II and the claims (a claim on a sequential sample with where
the sample stopped), every planned direction with each ranker's outcome, and a direction
view (the query, both designated passages with the words that differ marked, each ranker's
positions and text scores, the grader's grade probabilities, the top of the pool with route
scores, the pair's other direction).
``explore_page`` is a pure function of its inputs (``reports.explore_data``); the publishing
step gathers the inputs from a split's record (``load_inputs``: its tables and the artifacts it
names, read through their seals) and writes the page, so the page a user opens and the page the
browser test drives come from the same code. The screenshot comes from ``reports.browser``.
"""
from __future__ import annotations

import hashlib
import html
import json
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fixtures.artifacts import ArtifactCorrupt, discard, read_sealed, write_sealed
from fixtures.code import code_digest
from fixtures.identity import bytes_digest
from reports.browser import screenshot
from reports.explore_data import ExploreInputs, page_data
from reports.record import Artifact, SplitRecord
from reports.sequential import stopping_points

#: Where the page's HTML, CSS and JavaScript live (plain files: no build step, nothing fetched at run time).
ASSETS = Path(__file__).with_name("explore_assets")
#: No published file may exceed this; the page is checked before it is written.
MAX_PAGE_BYTES = 25 * 2**20
#: The scopes of a window ranker's judgments the page reads, first present first: its window's, or its designated
#: pairs' for a ranker that scores only those.
JUDGMENT_SCOPES = ("window", "pair")
#: The report tables the page reads (besides the artifacts the record names).
PAGE_TABLES = ("table2", "claims", "pairwise", "sequential")


def _judgments(record: SplitRecord, name: str) -> Artifact | None:
    """The judgments artifact the page shows for a ranker (``JUDGMENT_SCOPES``); None for a full-pool ranker."""
    return next((a for s in JUDGMENT_SCOPES if (a := record.artifact("judgments", name, s)) is not None), None)


def _pool_top(record: SplitRecord, pool: Artifact, top: Artifact) -> pd.DataFrame:
    """The reference ranker's top of every pool (``top_of``) with each route's score and rank."""
    joined = record.frame(top).merge(record.frame(pool), on=["qid", "pid"], how="left", validate="one_to_one")
    return joined.sort_values(["qid", "rank"], kind="mergesort").reset_index(drop=True)


def _meta(record: SplitRecord, run_id: str | None) -> dict[str, Any]:
    """What identifies this run in the page's header (the rest of the page depends on its results only)."""
    return {"commit": str(record.entries.get("code_commit", "?")), "run_id": run_id}


def load_inputs(record: SplitRecord, tables: Mapping[str, pd.DataFrame] | None = None, run_id: str | None = None,
                figures: Sequence[Path] = ()) -> ExploreInputs:
    """The page's inputs from a split's record: its tables (``tables``: as published, Table II with labels) and the
    artifacts it names, each read through its seal once per record."""
    tables = record.tables if tables is None else tables
    split = record.split
    population = record.artifact("population")
    if "table2" not in tables or population is None:
        raise ValueError(f"{split}: the explorer needs Table II and the population artifact "
                         f"(have tables {sorted(tables)}, artifacts {sorted(a.name for a in record.artifacts)})")
    table2 = tables["table2"]
    names = [str(r) for r in table2["ranker"]]
    annotated = record.frame(population)
    rankers = []
    for row in table2.to_dict("records"):
        name = str(row["ranker"])
        decl = record.declared.get(name)
        rankers.append({"name": name, "label": record.label(name), "n": int(row["n"]),
                        "compare_to": decl.compare_to if decl is not None else None,
                        "window": _judgments(record, name) is not None})
    references = [record.declared[r].reference for r in names if r in record.declared
                  and record.declared[r].reference and _judgments(record, r) is not None]
    reference = next((r for r in [*references, *names] if record.artifact("top", r) is not None), None)
    pool, pool_top = record.artifact("pool"), None
    if reference is not None and pool is not None:
        pool_top = _pool_top(record, pool, record.artifact("top", reference))
    corpus_artifact = record.artifact("corpus")
    corpus = record.frame(corpus_artifact) if corpus_artifact is not None else pd.DataFrame({"pid": [], "text": []})
    wanted = set(annotated["preferred_pid"].astype(str)) | set(annotated["counterpart_pid"].astype(str))
    if pool_top is not None:
        wanted |= set(pool_top["pid"].astype(str))
    corpus = corpus[corpus["pid"].astype(str).isin(wanted)]
    return ExploreInputs(
        split=split,
        meta={"split": split, "profile": record.profile_name or "?", "scope": record.entries.get("scope"),
              "dataset": record.entries.get("dataset"), **_meta(record, run_id)},
        rankers=rankers, table2=table2, directions=record.directions,
        queries=dict(zip(annotated["qid"].astype(str), annotated["query"].astype(str))),
        passages=dict(zip(corpus["pid"].astype(str), corpus["text"].astype(str))),
        claims=tables.get("claims"), pairwise=tables.get("pairwise"), pool_top=pool_top, reference=reference,
        judgments={r: record.frame(a) for r in names if (a := _judgments(record, r)) is not None},
        branches={r: record.frame(a) for r in names if (a := record.artifact("branches", r)) is not None},
        figures={p.stem: Path(p).read_bytes() for p in figures if Path(p).suffix == ".png"},
        sequential=stopping_points(tables.get("sequential")))


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


def _data_key(record: SplitRecord, tables: Mapping[str, pd.DataFrame], figures: Sequence[Path]) -> str:
    """What the page's data depend on: the code that makes them (this module and every project module it imports,
    ``fixtures.code``), the page's assets, the tables, the profile, the figures and the artifact files (their names
    are content digests or frozen snapshot identities; sizes are added as a check). Not the run id or commit."""
    h = hashlib.sha256(record.split.encode() + code_digest(__name__).encode())
    for asset in sorted(ASSETS.iterdir()):
        h.update(asset.read_bytes())
    for name in PAGE_TABLES:  # only what the page reads: other tables hold run-specific timings
        if name in tables:
            h.update(name.encode() + tables[name].to_csv(index=False).encode())
    for artifact in sorted(record.artifacts, key=lambda a: a.name):
        path = artifact.path
        h.update(f"{artifact.name}={path}:{path.stat().st_size if path.is_file() else -1}".encode())
    h.update(json.dumps({k: record.entries.get(k) for k in ("profile", "scope", "dataset")}, sort_keys=True,
                        default=str).encode())
    for figure in sorted(Path(f) for f in figures):
        h.update(figure.name.encode() + hashlib.sha256(figure.read_bytes()).digest())
    return h.hexdigest()[:24]


def _kept(path: Path) -> bytes | None:
    """A kept file's bytes as sealed with the user's key (``fixtures.artifacts.read_sealed``: never through a link),
    or None when there is none or it fails."""
    try:
        return read_sealed(path, "kept explorer file")
    except (ArtifactCorrupt, OSError):
        return None


def _kept_data(path: Path) -> dict[str, Any] | None:
    """The page data kept in the cache, or None (recomputed) unless it is sealed with the user's key: a co-user of a
    shared cache who plants values never changes this user's page (docs/reproducibility.md#sharing-a-cache)."""
    if not os.path.lexists(path):
        return None
    kept = _kept(path)
    if kept is None:
        warnings.warn(f"explorer data {path}: not sealed with this user's key (planted, altered, a link, or written "
                      "by an earlier version); recomputed", stacklevel=3)
        discard(path)
        return None
    try:
        data = json.loads(kept.decode("utf-8"))
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("meta"), dict) else None


def write_explore(out: Path, record: SplitRecord, tables: Mapping[str, pd.DataFrame] | None = None,
                  run_id: str | None = None, figures: Sequence[Path] = (),
                  cache_dir: Path | None = None) -> dict[str, Any]:
    """Write ``explore.html`` (and ``explore.png`` when a system Chromium exists); returns the manifest entry.

    With ``cache_dir``, the page's data and its screenshot are kept under the key of what they depend on
    (``_data_key``), sealed with the user's key: a rerun on the same results only stamps this run's id and commit
    into the page; kept data not sealed with the key is recomputed. The
    screenshot shows the direction view, which covers the header's run id, so a kept one is this page's picture.
    """
    tables = record.tables if tables is None else tables
    split = record.split
    key = _data_key(record, tables, figures) if cache_dir is not None else None
    kept = Path(cache_dir) / f"explore-{split}-{key}.json" if key else None
    data = _kept_data(kept) if kept is not None else None
    if data is not None:
        data["meta"].update(_meta(record, run_id))
    else:
        data = page_data(load_inputs(record, tables, run_id, figures))
        if kept is not None:
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            write_sealed(kept, lambda p: p.write_text(text, encoding="utf-8"))
    page = render(data).encode("utf-8")
    if len(page) > MAX_PAGE_BYTES:
        raise ValueError(f"{split}: explore.html would be {len(page):,} bytes, over the {MAX_PAGE_BYTES:,}-byte limit")
    path = Path(out) / "explore.html"
    path.write_bytes(page)
    entry: dict[str, Any] = {"file": path.name, "bytes": len(page), "sha256": bytes_digest(page)}
    png = Path(out) / "explore.png"
    shot = Path(cache_dir) / f"explore-{split}-{key}.png" if key else None
    kept_shot = _kept(shot) if shot is not None else None
    if kept_shot is not None:
        png.write_bytes(kept_shot)
        why = None
    else:
        why = screenshot(path, png)
        if why is None and shot is not None:
            drawn = png.read_bytes()
            discard(shot)  # whatever was there (a link, a planted folder) goes, never written through
            write_sealed(shot, lambda p: p.write_bytes(drawn))
    entry["screenshot"] = png.name if why is None else None
    if why is not None:
        entry["screenshot_skipped"] = why
    return entry
