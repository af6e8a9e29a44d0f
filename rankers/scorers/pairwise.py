"""The pairwise judge: which of two passages answers the query better, PRP-style (``docs/protocol.md#pairwise``).

Pairwise Ranking Prompting (Qin et al. 2023, "Large Language Models are Effective Text Rankers with Pairwise
Ranking Prompting") asks about each pair in both orders, (A, B) and (B, A). A pair is **consistent** when the
two orders prefer the same passage, **inconsistent** when they do not (both answers name the same position:
position bias). Each order is one judgment, cached on its own, so every algorithm and every window that needs
a comparison reuses it.

How an answer is read:

- **llama.cpp** (embedded CPU default): from the logits of the tokens ``"A"`` and ``"B"`` at the answer
  position (nothing is generated), the choice their argmax (``A`` on an exact tie); the two probabilities
  and their share of the whole next-token distribution are stored.
- **Servers and vLLM**: the generated answer after any thinking block, read by :func:`parse_choice`;
  with ``logprobs``, the two letters' probabilities at the answer token are stored too.

Algorithms (:func:`allpair`, :func:`sliding`):

- ``allpair``: every pair of the window in both orders, k(k-1) judgments. A passage's score is its wins:
  1 per pair it wins consistently, 0.5 per inconsistent pair (PRP-Allpair). Equal wins are ties of the
  window rule, broken by its tie-breaker.
- ``sliding``: PRP-Sliding-K, K bubble passes from the bottom of the window up; adjacent passages swap only
  when the lower one wins consistently (an inconsistent pair keeps the reference order). Score = -position.
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

from rankers.scorers.causes import Reason
from rankers.scorers.judgment_records import Algorithm, Outcome, Request, WindowResult
from rankers.scorers.llm.generation import Generation, TokenLogprob, answer_text
from rankers.scorers.llm_judge import LLMJudge, generation_usage
from rankers.scorers.prompts.slots import SlotPrompt

PROMPT_VERSION = "prp_v1"
PARSE_VERSION = "choice1"
CHOICES = ("A", "B")
ALGORITHMS = ("allpair", "sliding")
#: Output cap for a server answering without thinking: the letter and a little slack ("Passage A.").
ANSWER_MAX_TOKENS = 8
#: Accepted answers, case-insensitive, surrounding whitespace allowed: [label] letter [punctuation].
_ANSWER_RE = re.compile(r"^\s*(?:(?:answer|passage|output)\s*[:=]?\s*)?(?:passage\s+)?\**\s*([AB])\s*\**\s*[.)]?\s*$",
                        re.IGNORECASE)


def parse_choice(text: str | None) -> tuple[int | None, Reason | None]:
    """A generated answer as 0 (passage A) or 1 (passage B), or (None, reason).

    >>> parse_choice("Passage B"), parse_choice("<think>A or B?</think> A."), parse_choice("A and B")[0]
    ((1, None), (0, None), None)
    """
    answer, reason = answer_text(text)
    if answer is None:
        return None, reason
    match = _ANSWER_RE.match(answer)
    if match is None:
        shown = answer.strip()
        return None, (Reason("unparseable answer", f"unparseable answer {shown[:80]!r}") if shown
                      else Reason("empty answer", "empty answer"))
    return CHOICES.index(match.group(1).upper()), None


def choice_probs_from_logprobs(tokens: Sequence[TokenLogprob]) -> tuple[float, float] | None:
    """p(A), p(B) renormalized over the two, at the last generated token that is a bare letter A or B."""
    for token, logprob, alternatives in reversed(tokens):
        if token.strip().upper() in CHOICES:
            candidates = {**alternatives, token: logprob}
            mass = {c: 0.0 for c in CHOICES}
            for alt, lp in candidates.items():
                letter = alt.strip()
                if letter in mass and math.isfinite(lp):
                    mass[letter] += math.exp(lp)
            total = sum(mass.values())
            return (mass["A"] / total, mass["B"] / total) if total > 0 else None
    return None


def _outcomes(first_then_second: Outcome, second_then_first: Outcome) -> str:
    """'first', 'second' (consistently preferred) or 'inconsistent' for the pair (first, second)."""
    first_in_first = first_then_second.result == 0
    first_in_second = second_then_first.result == 1
    if first_in_first and first_in_second:
        return "first"
    if not first_in_first and not first_in_second:
        return "second"
    return "inconsistent"


def allpair(query: str, items: Sequence[tuple[str, str]], window: int) -> Algorithm:
    """PRP-Allpair over the first ``window`` items: wins + 0.5 per inconsistent pair; the rest below, in order."""
    head, tail = list(items[:window]), list(items[window:])
    pairs = list(combinations(range(len(head)), 2))
    requests = [Request(query, (head[i], head[j])) for i, j in pairs] + \
               [Request(query, (head[j], head[i])) for i, j in pairs]
    outcomes = yield requests if requests else []
    counts = {"judgments": float(len(requests)), "pairs": float(len(pairs)), "inconsistent": 0.0}
    bad = next((o for o in outcomes if not o.available), None)
    if bad is not None:
        return WindowResult(None, f"a comparison is unusable: {bad.error}", (), counts)
    wins = [0.0] * len(head)
    for (i, j), ij, ji in zip(pairs, outcomes[:len(pairs)], outcomes[len(pairs):]):
        verdict = _outcomes(ij, ji)
        if verdict == "first":
            wins[i] += 1
        elif verdict == "second":
            wins[j] += 1
        else:
            wins[i] += 0.5
            wins[j] += 0.5
            counts["inconsistent"] += 1
    scores = {pid: wins[i] for i, (pid, _) in enumerate(head)}
    scores.update({pid: -float(len(head) + i + 1) for i, (pid, _) in enumerate(tail)})
    order = tuple(pid for _, _, pid in sorted((-w, i, head[i][0]) for i, w in enumerate(wins)))
    return WindowResult(scores, None, order, counts)


def sliding(query: str, items: Sequence[tuple[str, str]], window: int, passes: int) -> Algorithm:
    """PRP-Sliding-K: ``passes`` bubble passes over the first ``window`` items, bottom up, each adjacent pair
    judged in both orders and swapped only when the lower passage wins consistently."""
    head, tail = list(items[:window]), list(items[window:])
    counts = {"judgments": 0.0, "pairs": 0.0, "inconsistent": 0.0}
    seen: dict[frozenset[str], str] = {}
    for p in range(min(passes, max(len(head) - 1, 0))):
        for i in range(len(head) - 1, p, -1):
            lower, upper = head[i], head[i - 1]
            lower_first, upper_first = yield [Request(query, (lower, upper)), Request(query, (upper, lower))]
            counts["judgments"] += 2
            if not (lower_first.available and upper_first.available):
                error = lower_first.error if not lower_first.available else upper_first.error
                return WindowResult(None, f"a comparison is unusable: {error}", (), counts)
            verdict = _outcomes(lower_first, upper_first)
            seen[frozenset((lower[0], upper[0]))] = verdict
            if verdict == "first":
                head[i - 1], head[i] = lower, upper
    counts["pairs"] = float(len(seen))
    counts["inconsistent"] = float(sum(v == "inconsistent" for v in seen.values()))
    final = head + tail
    return WindowResult({pid: -float(i + 1) for i, (pid, _) in enumerate(final)}, None,
                        tuple(pid for pid, _ in head), counts)


class PairwiseJudge(LLMJudge):
    """Comparisons from an LLM backend: ``choose`` (llama.cpp: the answer tokens' logits) or ``generate``
    (a server, vLLM: the parsed answer, with the letters' probabilities where ``logprobs`` come back)."""

    KIND = "llm-pairwise"
    PARSE_VERSION = PARSE_VERSION
    LISTS = False
    IN_PROCESS_CHUNK = 8
    PROMPT = PROMPT_VERSION

    def engine(self) -> dict[str, Any]:
        return {"use": "choice-logits", "choices": "A|B", "chunks": "head|slot|..."}

    def in_process(self) -> Callable[..., list[Generation]] | None:
        choose = getattr(self.backend, "choose", None)
        return None if choose is None else functools.partial(choose, choices=CHOICES)

    def sort_key(self, request: Request) -> tuple:
        """Comparisons sorted by this share prompt prefixes: passage A, then B, then the query (``prp_v1``)."""
        (a, text_a), (b, text_b) = request.items
        return (text_a, text_b, request.query)

    def prompt(self, request: Request) -> SlotPrompt:
        return self.template.pair_prompt(request.query, request.items[0][1], request.items[1][1], self.query_tokens,
                                         self.passage_tokens)

    def read(self, generation: Generation, request: Request) -> Outcome:
        return self.outcome(generation)

    @staticmethod
    def outcome(g: Generation) -> Outcome:
        """A generation as a comparison's outcome (also a batch file's results, ``harness.batch``)."""
        usage = generation_usage(g)
        if g.error is not None:
            return Outcome(None, f"backend: {g.error}", usage, g.text, False)
        choice, reason = parse_choice(g.text)
        if choice is None:
            return Outcome(None, f"parse: {reason}", {**usage, "cause": reason.cause}, g.text, False)
        probs = g.choice_probs
        if probs is None and g.token_logprobs:
            probs = choice_probs_from_logprobs(g.token_logprobs)
        if probs is not None:
            usage["choice_probs"] = [float(p) for p in probs]
        return Outcome(choice, None, usage, g.text, False)
