"""The listwise judge: a list of passages in, a permutation out, RankGPT-style (``docs/protocol.md#listwise``).

The model sees the query and the window's passages with identifiers [1]..[n] in the reference's order and
answers with identifiers, most relevant first (prompt ``rankgpt_v1``). A window longer than ``sub_window``
is ranked by RankGPT's sliding windows, back to front (:func:`sliding_plan`), each sub-window one judgment.

The reply is read the way RankGPT and rank_llm read it (:func:`parse_permutation`): after any thinking
block, every maximal run of digits is an identifier, in order; repeated identifiers are dropped
(``duplicates``), identifiers outside 1..n are ignored (``out_of_range``), and identifiers the reply does not
name are appended in their input order (``missing``). Each repair is counted per judgment. A reply with no
identifier in range at all, an error or a timeout is **unusable**: the window falls back to the reference,
the judgment is stored as unusable and judged again on the next run. rank_llm keeps the input order for such
a reply; here it is a counted fallback instead, never a silent identity permutation.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

from fixtures import progress
from rankers.scorers.base import DeclaredKey
from rankers.scorers.causes import Reason, exception_cause
from rankers.scorers.judgment_records import Algorithm, Outcome, Request, WindowResult
from rankers.scorers.llm.generation import Generation, answer_text
from rankers.scorers.llm_judge import LLMJudge, generation_usage
from rankers.scorers.prompts.slots import SlotPrompt

PROMPT_VERSION = "rankgpt_v1"
#: Version of the reply reading (the rules above); enters the judge's key with the prompt's.
PARSE_VERSION = "perm1"
#: Output tokens per listed passage when ``max_tokens`` is not declared (``[12] > `` is ~5 tokens).
TOKENS_PER_ID = 6
_DIGITS = re.compile(r"\d+")
REPAIRS = ("duplicates", "out_of_range", "missing")


def parse_permutation(text: str | None, n: int) -> tuple[list[int] | None, dict[str, int], Reason | None]:
    """A reply as a 0-based permutation of ``n`` items, its repair counts, and why it is unusable (else None).

    >>> parse_permutation("[2] > [3] > [2] > [9]", 3)
    ([1, 2, 0], {'duplicates': 1, 'out_of_range': 1, 'missing': 1}, None)
    """
    counts = dict.fromkeys(REPAIRS, 0)
    answer, reason = answer_text(text)
    if answer is None:
        return None, counts, reason
    order: list[int] = []
    for match in _DIGITS.finditer(answer):
        ident = int(match.group())
        if not 1 <= ident <= n:
            counts["out_of_range"] += 1
        elif ident - 1 in order:
            counts["duplicates"] += 1
        else:
            order.append(ident - 1)
    if not order:
        shown = answer.strip()
        return None, counts, (Reason("no identifier in range", f"no identifier in 1..{n} in the reply {shown[:80]!r}")
                              if shown else Reason("empty reply", "empty reply"))
    rest = [i for i in range(n) if i not in order]
    counts["missing"] = len(rest)
    return order + rest, counts, None


def sliding_plan(n: int, sub_window: int, step: int) -> list[tuple[int, int]]:
    """RankGPT's sliding windows over ``n`` items, back to front: [start, end) ranges, as rank_llm cuts them.

    >>> sliding_plan(20, 10, 5)
    [(10, 20), (5, 15), (0, 10)]
    """
    if sub_window < 1 or not 0 < step <= sub_window:
        raise ValueError(f"need sub_window >= 1 and 0 < step <= sub_window, got {sub_window}, {step}")
    plan, end = [], n
    start = max(end - sub_window, 0)
    while end > start:
        plan.append((start, end))
        if start == 0:
            break
        end, start = end - step, max(start - step, 0)
    return plan


def sliding_windows(query: str, items: Sequence[tuple[str, str]], window: int, sub_window: int,
                    step: int) -> Algorithm:
    """Rank the first ``window`` items by sliding sub-windows; the rest keep their order below them.

    Score = -(final position), so the window rule follows the permutation (no ties).
    """
    head, tail = list(items[:window]), list(items[window:])
    counts = dict.fromkeys(("judgments", *REPAIRS), 0.0)
    for start, end in sliding_plan(len(head), sub_window, step):
        request = Request(query, tuple(head[start:end]))
        (outcome,) = yield [request]
        if not outcome.available:
            return WindowResult(None, f"judgment of [{start + 1}, {end}] unusable: {outcome.error}", (), counts)
        head[start:end] = [request.items[i] for i in outcome.result]
        counts["judgments"] += 1
        for name in REPAIRS:
            counts[name] += bool(outcome.usage.get(name))  # judgments that needed this repair
    final = head + tail
    return WindowResult({pid: -float(i + 1) for i, (pid, _) in enumerate(final)}, None,
                        tuple(pid for pid, _ in head), counts)


class ListwiseJudge(LLMJudge):
    """Permutations from an LLM backend: ``complete`` (llama.cpp greedy decoding) or ``generate`` (a server,
    vLLM) on the listwise prompt."""

    KIND = "llm-listwise"
    PARSE_VERSION = PARSE_VERSION
    LISTS = True
    IN_PROCESS_CHUNK = 1
    PROMPT = PROMPT_VERSION

    def engine(self) -> dict[str, Any]:
        return {"use": "greedy-permutation", "chunks": "head|slot|...", "max_tokens": self.backend.settings.output_cap}

    def in_process(self) -> Callable[..., list[Generation]] | None:
        return getattr(self.backend, "complete", None)

    def sort_key(self, request: Request) -> tuple:
        return (request.query, request.pids)

    def prompt(self, request: Request) -> SlotPrompt:
        return self.template.list_prompt(request.query, [t for _, t in request.items], self.query_tokens,
                                         self.passage_tokens)

    def read(self, generation: Generation, request: Request) -> Outcome:
        return self.outcome(generation, len(request.items))

    @staticmethod
    def outcome(g: Generation, n: int) -> Outcome:
        """A generation as the permutation of ``n`` listed passages (also a batch file's results, ``harness.batch``)."""
        usage = generation_usage(g)
        if g.error is not None:
            return Outcome(None, f"backend: {g.error}", usage, g.text, False)
        order, counts, reason = parse_permutation(g.text, n)
        usage.update(counts)
        if reason is not None:
            usage["cause"] = reason.cause
        return Outcome(order, None if reason is None else f"parse: {reason}", usage, g.text, False)


class RerankersListJudge(DeclaredKey):
    """The listwise types of the ``rerankers`` library (RankGPT through LiteLLM, RankLLM through rank_llm) as a
    judge: one ``rank`` call per list, whose returned order is the permutation. The library repairs and
    truncates replies itself, so no repair is counted; a failed call is unusable. The key names the library's
    version, the model type, the model and its options."""

    def __init__(self, model: str, model_type: str, options: dict[str, Any] | None = None) -> None:
        try:
            from rerankers import Reranker  # optional extra; its listwise types import litellm / rank_llm
        except ImportError as exc:
            raise RuntimeError(f"the rerankers listwise backend needs the 'rerankers' package: {exc}") from exc
        self.model, self.model_type, self.options = model, model_type, dict(options or {})
        self.ranker = Reranker(model, model_type=model_type, verbose=0, **self.options)
        if self.ranker is None:  # the library prints the missing extra and returns None instead of raising
            raise RuntimeError(f"rerankers model_type {model_type!r}: its dependencies are not installed")
        self.version = metadata.version("rerankers")

    def key_parts(self) -> dict[str, str]:
        options = {k: v for k, v in sorted(self.options.items()) if k not in ("api_key", "verbose")}
        return {"judge": "rerankers-list", "library": self.version, "model_type": str(self.model_type),
                "model": str(self.model), "options": repr(options), "parse": PARSE_VERSION}

    @property
    def chunk_size(self) -> int:
        return 1

    def sort_key(self, request: Request) -> tuple:
        return (request.query, request.pids)

    def judge(self, requests: Sequence[Request], done: Callable[[int, Outcome], None] | None = None) -> list[Outcome]:
        """One ``rank`` call per list, in order; ``done(i, outcome)`` after each."""
        out: list[Outcome] = []
        for i, request in enumerate(requests):
            out.append(self._rank(request))
            if done is not None:
                done(i, out[-1])
        return out

    def _rank(self, request: Request) -> Outcome:
        n, start = len(request.items), time.perf_counter()
        try:
            with progress.waiting():
                ranked = self.ranker.rank(request.query, [t for _, t in request.items], doc_ids=list(range(n)),
                                          rank_start=0, rank_end=n)
            order = [int(r.document.doc_id) for r in ranked.results]
        except Exception as exc:  # one failing list must not lose the run: the window falls back
            return Outcome(None, f"backend: {type(exc).__name__}: {exc}",
                           {"latency_s": time.perf_counter() - start, "requests": 1, "cause": exception_cause(exc)},
                           None, False)
        usage = {"latency_s": time.perf_counter() - start, "requests": 1}
        if sorted(order) != list(range(n)):
            return Outcome(None, f"parse: the library returned {order}, not a permutation of {n}",
                           {**usage, "cause": "not a permutation"}, repr(order), False)
        return Outcome(order, None, usage, repr(order), False)
