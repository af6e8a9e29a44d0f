"""Judgments as a batch job: ``python -m harness.batch export`` / ``import`` (``docs/protocol.md#batch-files``).

``export --out DIR`` (with the suite's options: ``--profile``, ``--splits``, ``--subset-pairs``,
``--grader-sample``, ``--cache-dir`` ... and ``--rankers a,b``) writes every judgment request the run
would still send, cache misses only, as OpenAI batch JSONL (``custom_id``, ``method``, ``url``,
``body``): one ``<judge>.jsonl`` per judge (rankers with the same judge key share it), beside it
``<judge>.index.jsonl`` (what each ``custom_id`` stands for: its score-cache key, one to one) and
``manifest.json`` (per judge: the key, the prompt version, the model, the count). Only LLM judges on
``backend = "openai"`` have requests to export (their bodies are exactly what the online client
sends); in-process backends judge on this machine and are listed as skipped. A batch export sends
nothing to a server, so a declaration's server check does not hold it back.

Any engine that reads OpenAI batch files turns a request file into a result file (``vllm run-batch``,
a hosted Batch API, Ray Data over the file: README "Scale out"); ``import FILE`` then checks every
result line — a known ``custom_id``, not repeated, a 200 response from the expected model with an
answer the judge can read — and stores the good ones in the score cache exactly as the online path
does (the same reading, the same row; the ``endpoint`` recorded is ``batch:<file name>``). A line
that fails is named with its line number and never cached; requests with no result line are named
by their line in the request file. A later pytest run reads the stored judgments like any others.

Listwise and pairwise judges depend on earlier answers within a window (RankGPT's sliding
sub-windows, PRP's bubble passes): the export holds each window's next round only (the step its
algorithm reaches through what the cache holds), so such a judge takes one export -> process ->
import cycle per round until an export is empty; all-pair comparisons and designated pairs are one
round.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fixtures.corpus import text_hash
from fixtures.settings import pin_cpu_kernels
from harness.options import OptionError, argument_parser, path_option, read_profile, resolve_before_work, \
    settings_from
from harness.session import Evaluation
from rankers.registry import RankerDecl
from rankers.scorers.base import ScoreBatch
from rankers.scorers.cache import MAX_REPLY_CHARS, CacheKey, ScoreCache, store_batch
from rankers.scorers.grader import read_grades
from rankers.scorers.judgments import Outcome, pending_requests, store_outcomes
from rankers.scorers.listwise import ListwiseJudge
from rankers.scorers.llm.generation import Generation
from rankers.scorers.llm.openai_compatible import MalformedReply, parse_chat_reply
from rankers.scorers.pairwise import PairwiseJudge

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
    return hashlib.sha256(json.dumps(list(key)).encode("utf-8")).hexdigest()


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
    cache = ScoreCache.in_folder(ev.settings.cache("scores"))
    judges: dict[str, JudgeExport] = {}
    for name in names:
        decl = ev.profile.rankers[name]
        ev.refused.pop(name, None)  # nothing is sent to the declared server by an export
        cap = int(decl.options.get("max_reply_chars", MAX_REPLY_CHARS))
        if decl.kind == "llm_grader":
            scorer = ev.scorer(name)
            judge = judges.setdefault(scorer.model_key, JudgeExport(
                name, scorer.model_key, decl.kind, scorer.backend.model, scorer.prompt.key, scorer.near_tie_margin, cap))
            for split in ev.settings.splits:
                for scope in _scopes(decl):
                    unique: dict[CacheKey, tuple[str, str]] = {}
                    hashes: dict[str, str] = {}
                    for _, pid, query, passage in ev.inputs(split, name, scope):
                        qh = hashes.setdefault(query, text_hash(query))
                        ph = hashes.setdefault(passage, text_hash(passage))
                        unique.setdefault((scorer.model_key, qh, str(pid), ph), (query, passage))
                    found, _ = cache.lookup(unique)
                    for key, (query, passage) in unique.items():
                        if key not in found or not found[key].available:
                            body, truncated = scorer.backend.request(scorer.grade_prompt(query, passage))
                            judge.add(key, body, truncated)
        else:
            kind = decl.spec
            model_judge = kind.judge_of(decl, ev.context)
            judge = judges.setdefault(model_judge.model_key, JudgeExport(
                name, model_judge.model_key, decl.kind, model_judge.backend.model, model_judge.template.key, None, cap))
            for split in ev.settings.splits:
                for scope in _scopes(decl):
                    algorithms = kind.algorithms(decl, ev.context, ev.inputs(split, name, scope))
                    for key, request in pending_requests(model_judge.model_key, cache, algorithms).items():
                        body, truncated = model_judge.backend.request(model_judge.prompt(request))
                        judge.add(key, body, truncated, len(request.items))
        if name not in judge.rankers:
            judge.rankers.append(name)
    cache.close()
    return list(judges.values())


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")


def write_export(ev: Evaluation, out: Path, names: Sequence[str], skipped: dict[str, str]) -> dict[str, Any]:
    """The export folder, written into a staging folder and swapped in whole (never a folder of two exports)."""
    judges = collect(ev, names)
    staging = out.with_name(f".{out.name}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for judge in judges:
            _write_jsonl(staging / f"{judge.slug}.jsonl", judge.requests.values())
            _write_jsonl(staging / f"{judge.slug}.index.jsonl", judge.index.values())
        manifest = {"format": FORMAT, "version": VERSION, "route": ROUTE,
                    "cache_dir": str(ev.settings.cache("scores")), "profile": str(ev.profile.path),
                    "splits": list(ev.settings.splits), "subset_pairs": ev.settings.subset_pairs,
                    "grader_sample": ev.settings.grader_sample, "judges": [j.manifest() for j in judges],
                    "skipped": [{"ranker": r, "reason": why} for r, why in skipped.items()]}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


# ---- import -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Imported:
    """What an import stored and what it refused: ``problems`` name result lines (and missing requests)."""

    stored: int
    problems: list[str]
    missing: int


def _load_export(folder: Path) -> tuple[dict[str, Any], dict[str, tuple[dict[str, Any], dict[str, Any], int]]]:
    """The export manifest, and per ``custom_id`` (its judge, its index entry, its line in the request file)."""
    path = folder / "manifest.json"
    if not path.is_file():
        raise BatchError(f"{path}: no export manifest here; pass --export DIR, the folder `export` wrote")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise BatchError(f"{path}: not a {FORMAT} v{VERSION} manifest")
    known: dict[str, tuple[dict[str, Any], dict[str, Any], int]] = {}
    for judge in manifest["judges"]:
        with (folder / judge["index"]).open(encoding="utf-8") as index:
            for number, line in enumerate(index, 1):
                entry = json.loads(line)
                known[entry["custom_id"]] = (judge, entry, number)
    return manifest, known


def _problem(results: Path, number: int, text: str) -> str:
    return f"{results.name} line {number}: {text}"


def _answer(line: str, number: int, results: Path, known: dict[str, tuple[dict[str, Any], dict[str, Any], int]]
            ) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """(custom_id, the response body, None) of a sound line, else (custom_id or None, None, the problem)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, None, _problem(results, number, f"not JSON ({exc.msg} at column {exc.colno})")
    if not isinstance(row, dict) or not isinstance(row.get("custom_id"), str):
        return None, None, _problem(results, number, "no custom_id")
    cid = row["custom_id"]
    if cid not in known:
        return cid, None, _problem(results, number, f"custom_id {cid[:16]}… is not a request of this export")
    if row.get("error"):
        return cid, None, _problem(results, number, f"the request failed: {json.dumps(row['error'])[:200]}")
    response = row.get("response")
    if not isinstance(response, dict) or response.get("status_code") != 200 or not isinstance(response.get("body"),
                                                                                               dict):
        status = response.get("status_code") if isinstance(response, dict) else None
        return cid, None, _problem(results, number, f"no 200 response with a body (status {status!r})")
    judge = known[cid][0]
    model = response["body"].get("model")
    if model != judge["model"]:
        return cid, None, _problem(results, number, f"answered by model {model!r}, expected {judge['model']!r}")
    return cid, response["body"], None


def import_results(results: Path, export_dir: Path, cache_dir: Path | None = None) -> Imported:
    """Check every line of a result file, then store the sound ones (one transaction per judge)."""
    manifest, known = _load_export(export_dir)
    problems: list[str] = []
    bodies: dict[str, tuple[int, dict[str, Any]]] = {}
    seen: dict[str, int] = {}
    repeated: set[str] = set()
    with results.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            cid, body, problem = _answer(line, number, results, known)
            if cid is not None and cid in seen:
                problems.append(_problem(results, number, f"custom_id {cid[:16]}… repeats line {seen[cid]}"))
                repeated.add(cid)
                continue
            if cid is not None:
                seen[cid] = number
            if problem is not None:
                problems.append(problem)
            elif cid is not None:
                bodies[cid] = (number, body)
    for cid in repeated:  # which of two answers is the engine's own cannot be told: neither is stored
        if cid in bodies:
            number, _ = bodies.pop(cid)
            problems.append(_problem(results, number, f"custom_id {cid[:16]}… is repeated later; not stored"))
    where = f"batch:{results.name}"
    grades: dict[str, list[tuple[int, CacheKey, Generation]]] = {}
    outcomes: dict[str, tuple[list[CacheKey], list[Outcome]]] = {}
    for cid, (number, body) in sorted(bodies.items(), key=lambda kv: kv[1][0]):
        judge, entry, _ = known[cid]
        key: CacheKey = tuple(entry["key"])  # type: ignore[assignment]
        try:
            generation = parse_chat_reply(body, math.nan)  # a batch result has no latency of its own
        except MalformedReply as exc:
            problems.append(_problem(results, number, f"malformed reply: {exc}"))
            continue
        generation = dataclasses.replace(generation, truncated=bool(entry["truncated"]), endpoint=where)
        if judge["reading"] == "grade":
            grades.setdefault(judge["judge_key"], []).append((number, key, generation))
            continue
        read = ListwiseJudge.outcome(generation, int(entry["items"])) if judge["reading"] == "listwise" \
            else PairwiseJudge.outcome(generation)
        if not read.available:
            problems.append(_problem(results, number, f"no readable answer: {read.error}"))
            continue
        keys, reads = outcomes.setdefault(judge["judge_key"], ([], []))
        keys.append(key)
        reads.append(read)
    judges = {j["judge_key"]: j for j in manifest["judges"]}
    cache = ScoreCache.in_folder(cache_dir or Path(manifest["cache_dir"]))
    stored = 0
    for judge_key, rows in grades.items():
        batch = read_grades([g for _, _, g in rows], judges[judge_key]["near_tie_margin"])
        good = [i for i, score in enumerate(batch.scores) if math.isfinite(score)]
        problems += [_problem(results, rows[i][0], f"no readable grade: {batch.errors[i]}")
                     for i in range(len(rows)) if i not in set(good)]
        if good:
            kept = ScoreBatch(batch.scores[good], [batch.errors[i] for i in good], [batch.usage[i] for i in good],
                              [batch.raw[i] for i in good])
            store_batch(cache, [rows[i][1] for i in good], kept, math.nan, int(judges[judge_key]["max_reply_chars"]))
            stored += len(good)
    for keys, reads in outcomes.values():
        store_outcomes(cache, keys, reads)
        stored += len(keys)
    cache.close()
    # A result file answers one judge's file: requests of the judges it has lines for, and of every judge when
    # it has none, are the ones it misses.
    answered = {known[cid][0]["judge_key"] for cid in seen if cid in known} or set(judges)
    missing = [(n, cid) for cid, (judge, _, n) in known.items() if cid not in seen and judge["judge_key"] in answered]
    for number, cid in sorted(missing)[:20]:
        judge = known[cid][0]
        problems.append(f"missing: {judge['file']} line {number} (custom_id {cid[:16]}…) has no result line")
    if len(missing) > 20:
        problems.append(f"missing: {len(missing) - 20} more requests have no result line")
    return Imported(stored, problems, len(missing))


# ---- command line ------------------------------------------------------------------------------------------------


def _export_main(argv: Sequence[str]) -> int:
    parser = argument_parser("python -m harness.batch export", "Write every judgment request the run would still "
                             "send (cache misses only) as OpenAI batch JSONL, one file per judge.")
    parser.add_argument("--out", required=True, help="folder to write the batch files and manifest.json into "
                                                     "(replaced whole)")
    parser.add_argument("--rankers", default=None, help="comma-separated window rankers (default: every LLM judge "
                                                        "on backend 'openai')")
    args = parser.parse_args(argv)
    try:
        settings = settings_from(lambda name: getattr(args, name))
        profile = read_profile(settings)
        chosen = [n.strip() for n in args.rankers.split(",") if n.strip()] if args.rankers else None
        unknown = [n for n in chosen or () if n not in profile.rankers]
        if unknown:
            raise OptionError(f"--rankers: {unknown} are not declared in {profile.path}")
        skipped = {d.name: why for d in profile.ordered() if d.is_window and (why := exportable(d)) is not None}
        refused = [f"{n}: {skipped[n]}" for n in chosen or () if n in skipped]
        if refused:
            raise OptionError("--rankers: no batch requests for " + "; ".join(refused))
        names = chosen or [d.name for d in profile.ordered() if d.is_window and d.name not in skipped]
        resolve_before_work(settings, profile, lambda decl: decl.name in names)
    except (OptionError, pytest.UsageError) as exc:
        parser.exit(2, f"error: {exc}\n")
    out = path_option(args.out)
    manifest = write_export(Evaluation(settings, profile), out, names,
                            {n: why for n, why in skipped.items() if chosen is None})
    for judge in manifest["judges"]:
        print(f"{out / judge['file']}: {judge['count']} requests for {', '.join(judge['rankers'])} "
              f"(prompt {judge['prompt_version']}, model {judge['model']})")
    for entry in manifest["skipped"]:
        print(f"skipped {entry['ranker']}: {entry['reason']}")
    return 0


def _import_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.batch import", description="Check a batch result file "
                                     "line by line and store its judgments in the score cache as the online path "
                                     "would.")
    parser.add_argument("file", help="the result JSONL (OpenAI batch output: custom_id, response.body, error)")
    parser.add_argument("--export", default=None, help="the folder `export` wrote (default: the file's folder)")
    parser.add_argument("--cache-dir", default=None, help="score-cache folder (default: the export's)")
    args = parser.parse_args(argv)
    results = path_option(args.file)
    if not results.is_file():
        parser.exit(2, f"error: {results} is not a file\n")
    try:
        done = import_results(results, path_option(args.export) if args.export else results.parent,
                              path_option(args.cache_dir) if args.cache_dir else None)
    except (BatchError, OSError, json.JSONDecodeError, KeyError) as exc:
        parser.exit(2, f"error: {exc}\n")
    for problem in done.problems:
        print(problem, file=sys.stderr)
    print(f"{results}: {done.stored} judgments stored, {len(done.problems)} problems, {done.missing} requests "
          "without a result")
    return 1 if done.problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"export": _export_main, "import": _import_main}
    if not argv or argv[0] not in commands:
        print("usage: python -m harness.batch {export,import} ...  (see --help of each)", file=sys.stderr)
        return 2
    if argv[0] == "export":
        pin_cpu_kernels()  # as the suite does, before anything loads torch: a pool built here is the suite's pool
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
