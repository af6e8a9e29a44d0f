"""A batch result file into the score cache, checked line by line (``harness.batch``, docs/protocol.md#batch-files).

Every line must answer a request of the export (``harness.batch_export``) once, with a 200 response
from the expected model and an answer its judge can read; the good ones are stored as the online path
stores them, the others are named with their line number.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.batch_export import FORMAT, VERSION, BatchError
from rankers.scorers.cache import CacheKey, ScoreCache
from rankers.scorers.grader import read_grades
from rankers.scorers.judgment_records import Outcome, store_outcomes
from rankers.scorers.listwise import ListwiseJudge
from rankers.scorers.llm.generation import Generation
from rankers.scorers.llm.openai_compatible import MalformedReply, parse_chat_reply
from rankers.scorers.pairwise import PairwiseJudge
from rankers.scorers.pointwise import score_outcomes


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


def _numbers_problem(generation: Generation) -> str | None:
    """Why a reply's numbers cannot be read (None: they can): a log-probability is a number <= 0 (a probability
    of at most 1), a probability lies in [0, 1]. Checked per line, so one line an engine (or a hand) wrote out of
    range is named and the rest of the file is imported (``math.exp(1000)`` would abort them all)."""
    for position, (token, logprob, alternatives) in enumerate(generation.token_logprobs or ()):
        for alt, value in ((token, logprob), *alternatives.items()):
            if not isinstance(value, (int, float)) or math.isnan(value) or value > 0:
                return (f"token {position} ({alt!r:.20}) has log-probability {value!r:.20}, out of range "
                        "(a log-probability is <= 0)")
    for probs in (generation.grade_probs, generation.choice_probs):
        for value in probs or ():
            if not isinstance(value, (int, float)) or not 0 <= value <= 1:
                return f"a probability {value!r:.20} lies outside [0, 1]"
    return None


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
        out_of_range = _numbers_problem(generation)
        if out_of_range is not None:
            problems.append(_problem(results, number, f"out of range: {out_of_range}; not stored"))
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
        read = score_outcomes(read_grades([g for _, _, g in rows], judges[judge_key]["near_tie_margin"]), len(rows),
                              judge_key)
        problems += [_problem(results, number, f"no readable grade: {o.error}")
                     for (number, _, _), o in zip(rows, read) if not o.available]
        good = [(key, o) for (_, key, _), o in zip(rows, read) if o.available]
        if good:
            store_outcomes(cache, [k for k, _ in good], [o for _, o in good], int(judges[judge_key]["max_reply_chars"]))
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
