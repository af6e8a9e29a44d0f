"""A batch export: every judgment request a run would still send, as OpenAI batch JSONL (``harness.batch``).

The request files, their index (what each ``custom_id`` stands for) and the manifest that ``import``
checks result lines against (``harness.batch_import``; docs/protocol.md#batch-files).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixtures.identity import json_digest
from harness.session import Evaluation
from rankers.declarations import RankerDecl
from rankers.kinds.base import score_store
from rankers.scorers.cache import MAX_REPLY_CHARS, CacheKey
from rankers.scorers.judgments import plan_requests
from rankers.scorers.pointwise import point_requests
from reports.transaction import StagedRun, unique_run_id

FORMAT = "preference-position/openai-batch"
VERSION = 1
#: The route every exported request names (relative to the engine's OpenAI base URL).
ROUTE = "/v1/chat/completions"
#: Kinds whose judgments are chat completions, and how each reads an answer.
READINGS = {"llm_grader": "grade", "llm_listwise": "listwise", "llm_pairwise": "pairwise"}


class BatchError(ValueError):
    """A batch file or export folder that cannot be used, named with what is wrong."""


def custom_id(key: CacheKey) -> str:
    """The request's id in a batch file: the sha256 of its score-cache key (one to one, and stable)."""
    return json_digest(list(key))


@dataclass
class JudgeExport:
    """One judge's requests: its key, how its answers are read, and per ``custom_id`` the request and index entry."""

    slug: str
    judge_key: str
    kind: str
    model: str
    prompt_version: str
    near_tie_margin: float | None
    max_reply_chars: int
    rankers: list[str] = field(default_factory=list)
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    index: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, key: CacheKey, body: dict[str, Any], truncated: bool, items: int | None = None) -> None:
        cid = custom_id(key)
        if cid in self.requests:
            return
        self.requests[cid] = {"custom_id": cid, "method": "POST", "url": ROUTE, "body": body}
        entry: dict[str, Any] = {"custom_id": cid, "key": list(key), "truncated": truncated}
        if items is not None:
            entry["items"] = items
        self.index[cid] = entry

    def manifest(self) -> dict[str, Any]:
        return {"file": f"{self.slug}.jsonl", "index": f"{self.slug}.index.jsonl", "judge_key": self.judge_key,
                "kind": self.kind, "reading": READINGS[self.kind], "model": self.model,
                "prompt_version": self.prompt_version, "near_tie_margin": self.near_tie_margin,
                "max_reply_chars": self.max_reply_chars, "rankers": self.rankers, "count": len(self.requests)}


def exportable(decl: RankerDecl) -> str | None:
    """Why a declaration has no batch requests (None when it has)."""
    if decl.kind not in READINGS:
        return f"kind {decl.kind!r} makes no chat-completion judgments"
    if decl.options.get("backend") != "openai":
        return f"backend {decl.options.get('backend')!r} judges in-process on this machine (declare backend 'openai')"
    return None


def _scopes(decl: RankerDecl) -> tuple[str, ...]:
    return ("pair",) if decl.designated_only else ("window", "pair")


def collect(ev: Evaluation, names: Sequence[str]) -> list[JudgeExport]:
    """Every cache miss of the named rankers over the run's splits and scopes, grouped by judge key."""
    cache = score_store(ev.context)
    judges: dict[str, JudgeExport] = {}
    for name in names:
        decl = ev.profile.rankers[name]
        cap = int(decl.options.get("max_reply_chars", MAX_REPLY_CHARS))
        if decl.kind == "llm_grader":
            scorer = ev.scorer(name)
            judge = judges.setdefault(scorer.model_key, JudgeExport(
                name, scorer.model_key, decl.kind, scorer.backend.model, scorer.prompt.key, scorer.near_tie_margin, cap))
            for split in ev.settings.splits:
                for scope in _scopes(decl):
                    _, _, unique = point_requests(scorer.model_key, ev.inputs(split, name, scope))
                    found, _ = cache.lookup(unique)
                    for key, request in unique.items():
                        if key not in found or not found[key].available:
                            (_, passage), = request.items
                            body, truncated = scorer.backend.request(scorer.grade_prompt(request.query, passage))
                            judge.add(key, body, truncated)
        else:
            kind = decl.ranker_kind
            model_judge = kind.judge_of(decl, ev.context)
            judge = judges.setdefault(model_judge.model_key, JudgeExport(
                name, model_judge.model_key, decl.kind, model_judge.backend.model, model_judge.template.key, None, cap))
            for split in ev.settings.splits:
                for scope in _scopes(decl):
                    algorithms = kind.algorithms(decl, ev.context, ev.inputs(split, name, scope))
                    _, _, pending = plan_requests(model_judge.model_key, cache, algorithms, kind.placeholder)
                    for key, request in pending.items():
                        body, truncated = model_judge.backend.request(model_judge.prompt(request))
                        judge.add(key, body, truncated, len(request.items))
        if name not in judge.rankers:
            judge.rankers.append(name)
    return list(judges.values())


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")


def write_export(ev: Evaluation, out: Path, names: Sequence[str], skipped: dict[str, str]) -> dict[str, Any]:
    """The export's files, staged and swapped in as one transaction, as results publish (``reports.transaction``):
    ``out`` holds the previous export or this one, never a mix and never nothing; the result files and score cache
    a user keeps in ``out`` are left alone."""
    judges = collect(ev, names)
    run = StagedRun(out, unique_run_id(), legacy_marker=None)
    staging = run.folder
    try:
        files = []
        for judge in judges:
            for name, rows in ((f"{judge.slug}.jsonl", judge.requests.values()),
                               (f"{judge.slug}.index.jsonl", judge.index.values())):
                _write_jsonl(staging / name, rows)
                files.append(name)
        manifest = {"format": FORMAT, "version": VERSION, "route": ROUTE,
                    "cache_dir": str(ev.settings.cache("scores")), "profile": str(ev.profile.path),
                    "splits": list(ev.settings.splits), "subset_pairs": ev.settings.subset_pairs,
                    "grader_sample": ev.settings.grader_sample, "judges": [j.manifest() for j in judges],
                    "skipped": [{"ranker": r, "reason": why} for r, why in skipped.items()]}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        run.commit([*files, "manifest.json"])
    finally:
        run.close()
    return manifest


# ---- import -----------------------------------------------------------------------------------------------------
