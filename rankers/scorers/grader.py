"""The LLM grader: a fixed, versioned prompt asks for an integer 0–4 (``docs/protocol.md#grader``).

Rubric (prompts ``grade_v1``/``grade_v2``): 0 unrelated; 1 condition contradicted or
misattributed; 2 required evidence absent; 3 satisfied with an implicit detail; 4 explicitly
satisfied.

How a grade is decided:

- **llama.cpp (embedded, non-thinking)**: from the logits of the tokens ``"0"``..``"4"`` at the
  answer position; the grade is their argmax. Nothing is generated, so there is nothing to parse.
- **Generating backends** (OpenAI-compatible servers, vLLM): the generated text is parsed strictly
  after removing any thinking block (:func:`parse_grade`); when the server returns
  ``top_logprobs``, the five grade probabilities are read at the token that produced the digit.

Per judgment, ``ScoreBatch.usage`` (stored as JSON in the score cache) holds:

- ``grade_probs``: [p0..p4], the softmax restricted to the five grade tokens (sums to 1). Absent
  when the backend returned no log-probabilities (a server without ``logprobs`` support, a
  failed or unparseable answer, a grade token the server's alternatives do not cover). From a
  server's ``top_logprobs``, a grade missing from the listed alternatives counts as probability 0.
- ``grade_margin``: the best minus the second-best of ``grade_probs``; ``near_tie``: 1 when the
  margin is below :data:`NEAR_TIE_MARGIN`, else 0 (the grade stays the argmax; near-ties are
  counted because the last bits of the logits differ between CPUs with different SIMD kernels).
  ``grade_mass``: the five grade tokens' share of the whole next-token distribution (top-k for
  servers), a check that the model meant to answer with a digit.
- ``input_tokens``, ``output_tokens`` (0 for llama.cpp: a logit read generates nothing),
  ``latency_s``, ``requests`` (1), ``truncated`` (1 when a data slot was cut to its token budget),
  and for llama.cpp ``processed_tokens`` (prompt tokens evaluated, the rest came from the reused
  prefix).

Accepted answer grammar for generated text, after removing thinking, case-insensitive and with
surrounding whitespace allowed::

    answer := [label [range] [":" | "="]] ["**"] digit ["**"] ["/4"] ["."]
    label  := "grade" | "score" | "answer" | "relevance"
    range  := "(0-4)" | "(0–4)"          (small models echo the prompt's "Grade (0-4):" cue)
    digit  := "0" | "1" | "2" | "3" | "4"

Anything else ("3 because …", "10", "3 or 4", an empty reply) is unavailable, with the raw
output kept so parse failures can be audited.

Prompt layout (``grade_v2``: passage before query). With inputs sorted by
:meth:`LLMGrader.sort_key`, the system block is evaluated once per process, each passage block once
per run of inputs that share it, and the query block (~40 tokens with the answer cue) per judgment.
Measured on NevIR Test (``specs/bench_grader.py::test_bench_prompt_layout``: 150 seeded whole pairs,
BM25 top-20 windows of 8 of them; Qwen2.5 tokenizer; prompts ~420 tokens), prompt tokens evaluated
per judgment, query first (``grade_v1``) vs passage first (``grade_v2``): designated pairs 190 vs
115 (the two directions of a pair share both passages), windows 178 vs 131 (the two directions'
windows share most passages), both together 185 vs 116. On the 1.5B grader at 2 threads that was
3.3 s per judgment instead of 5.6 s (60 judgments of 30 directions, one run, shared 2-core machine),
with strict preference unchanged within noise (by expected grade 13/30 vs 15/30; by argmax 0/30
vs 1/30, nearly all ties).
Query first would win only for one query's window graded alone (by a query block per passage);
across a sample, windows of different queries share passages too (one direction per pair, 16
pairs: still 172 vs 168).
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from rankers.scorers.base import DeclaredKey, ScoreBatch, streams
from rankers.scorers.causes import Reason
from rankers.scorers.llm.generation import Generation, LLMBackend, TokenLogprob, answer_text
from rankers.scorers.prompts import PASSAGE_TOKENS, QUERY_TOKENS, GradePrompt, PromptTemplate, load_prompt

PROMPT_VERSION = "grade_v2"
GRADES = (0, 1, 2, 3, 4)
#: A margin (best minus second-best grade probability) below this is a near-tie: a grade another
#: CPU might flip. Measured on the 1.5B grader over 20 NevIR Test judgments: evaluating the same
#: prompts in another chunking (what other kernels do to the last bits) moved a grade probability
#: by up to 0.021; the threshold leaves 2.5x room for kernels that differ more than that.
NEAR_TIE_MARGIN = 0.05
#: Version of what the grader stores per judgment (the usage keys above); enters ``model_key``.
RECORD_VERSION = "r2"

_ANSWER_RE = re.compile(
    r"^\s*(?:(?:grade|score|answer|relevance)\s*(?:\(\s*0\s*[-–]\s*4\s*\)\s*)?[:=]?\s*)?"
    r"(\*\*)?([0-4])(?(1)\*\*)(?:\s*/\s*4)?\s*\.?\s*$",
    re.IGNORECASE,
)


def locate_grade(text: str | None) -> tuple[int | None, int | None, Reason | None]:
    """Strictly parse one generated grade; returns (grade, offset of its digit in ``text``, None)
    or (None, None, reason)."""
    answer, reason = answer_text(text)
    if answer is None or text is None:
        return None, None, reason
    match = _ANSWER_RE.match(answer)
    if match is None:
        shown = answer.strip()
        return None, None, (Reason("unparseable answer", f"unparseable answer {shown[:80]!r}") if shown
                            else Reason("empty answer", "empty answer"))
    return int(match.group(2)), len(text) - len(answer) + match.start(2), None


def parse_grade(text: str | None) -> tuple[int | None, Reason | None]:
    """Strictly parse one generated grade; returns (grade, None) or (None, reason)."""
    grade, _, reason = locate_grade(text)
    return grade, reason


def grade_probs_from_logprobs(text: str, offset: int,
                              tokens: Sequence[TokenLogprob]) -> tuple[tuple[float, ...], float] | None:
    """The five grade probabilities at the token that produced the digit at ``text[offset]``, and
    their unnormalized sum (the grade tokens' share of the listed alternatives).

    The generated tokens are aligned with ``text`` from the end (a server may return thinking
    separately and its tokens with or without it, but the answer is always the text's tail). In
    the digit's token, ``pre + digit + post``, an alternative ``pre + g + post`` (whitespace aside)
    counts for grade g; the five are renormalized. None when the alignment fails or the chosen
    grade has no probability.
    """
    joined = "".join(t for t, _, _ in tokens).rstrip()
    tail = text[offset:].rstrip()
    if not tail or not joined.endswith(tail):
        return None
    pos = len(joined) - len(tail)
    start = 0
    for token, logprob, alternatives in tokens:
        if start <= pos < start + len(token):
            break
        start += len(token)
    else:
        return None
    pre, post = token[:pos - start], token[pos - start + 1:]
    spelled = {f"{pre}{g}{post}".strip(): g for g in GRADES}
    candidates = dict(alternatives)
    candidates.setdefault(token, logprob)
    mass = [0.0] * len(GRADES)
    for alt, alt_logprob in candidates.items():
        g = spelled.get(alt.strip())
        if g is not None and math.isfinite(alt_logprob):
            mass[g] += math.exp(alt_logprob)
    total = sum(mass)
    if total <= 0 or mass[int(text[offset])] <= 0:
        return None
    return tuple(m / total for m in mass), total


def probability_record(probs: Sequence[float], near_tie_margin: float = NEAR_TIE_MARGIN) -> dict[str, object]:
    """``grade_probs``, ``grade_margin`` and ``near_tie`` of one judgment (see the module docstring)."""
    ranked = sorted(probs, reverse=True)
    margin = float(ranked[0] - ranked[1])
    return {"grade_probs": [float(p) for p in probs], "grade_margin": margin,
            "near_tie": 1.0 if margin < near_tie_margin else 0.0}


class LLMGrader(DeclaredKey):
    """A :class:`~rankers.scorers.base.TextScorer` whose score is the 0–4 grade.

    Each (query, passage) is one independent prompt (no pair identity, label or other candidate).
    ``model_key`` joins the backend's key (model id, revision or file hash, generation settings,
    grading scheme) with the prompt version and digest, the data budgets, the near-tie threshold
    and the record version, so any change that can change a grade or its stored record changes the
    key. ``sort_key`` and ``chunk_size`` tell the cache driver how to order and cut the inputs it
    still has to score so that consecutive prompts share the longest prefix (first data slot, then
    the second) and each call is large enough for the backend.
    """

    def __init__(self, backend: LLMBackend, prompt: PromptTemplate | str = PROMPT_VERSION, *,
                 passage_tokens: int = PASSAGE_TOKENS, query_tokens: int = QUERY_TOKENS,
                 near_tie_margin: float = NEAR_TIE_MARGIN) -> None:
        for name, value in (("passage_tokens", passage_tokens), ("query_tokens", query_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 0 <= near_tie_margin < 1:
            raise ValueError(f"near_tie_margin must be in [0, 1), got {near_tie_margin!r}")
        self.backend = backend
        self.prompt = load_prompt(prompt) if isinstance(prompt, str) else prompt
        self.passage_tokens = passage_tokens
        self.query_tokens = query_tokens
        self.near_tie_margin = near_tie_margin

    def key_parts(self) -> dict[str, str]:
        return {"judge": "llm-grader", "engine": self.backend.model_key, "prompt": f"prompt={self.prompt.key}",
                "budget": f"budget=p{self.passage_tokens},q{self.query_tokens}",
                "near_tie": f"near_tie<{self.near_tie_margin:g}", "record": RECORD_VERSION}

    @property
    def chunk_size(self) -> int:
        return self.backend.chunk_size

    def sort_key(self, query: str, passage: str) -> tuple[str, str]:
        """Inputs sorted by this share prompt prefixes: the first slot's text, then the second's."""
        values = {"QUERY": query, "PASSAGE": passage}
        first, second = self.prompt.slot_order
        return values[first], values[second]

    def grade_prompt(self, query: str, passage: str) -> GradePrompt:
        return GradePrompt(self.prompt, query, passage, self.query_tokens, self.passage_tokens)

    def score(self, inputs: Sequence[tuple[str, str]],
              done: Callable[[int, ScoreBatch], None] | None = None) -> ScoreBatch:
        """Grades of ``inputs``; ``done(i, batch of one)`` as each finishes where the backend streams."""
        inputs = list(inputs)
        prompts = [self.grade_prompt(q, p) for q, p in inputs]
        if done is not None and streams(self.backend.generate):
            generations = self.backend.generate(prompts, done=lambda i, g: done(i, read_grades([g],
                                                                                              self.near_tie_margin)))
        else:
            generations = self.backend.generate(prompts)
        if len(generations) != len(inputs):
            raise RuntimeError(f"backend {self.backend.model_key} returned {len(generations)} generations "
                               f"for {len(inputs)} inputs")
        return read_grades(generations, self.near_tie_margin)


def read_grades(generations: Sequence[Generation], near_tie_margin: float = NEAR_TIE_MARGIN) -> ScoreBatch:
    """The grades of generations as stored (grade, reason, usage, reply): the one reading of the online path and of
    a batch file's results (``harness.batch``)."""
    scores = np.full(len(generations), np.nan)
    errors: list[str | None] = []
    usage: list[dict[str, object]] = []
    for i, g in enumerate(generations):
        record = _usage(g)
        if g.error is not None:
            errors.append(f"backend: {g.error}")
        else:
            grade, offset, reason = locate_grade(g.text)
            if grade is None:
                errors.append(f"parse: {reason}")
                record["cause"] = reason.cause
            else:
                scores[i] = grade
                errors.append(None)
                probs = g.grade_probs
                if probs is None and g.token_logprobs is not None:
                    found = grade_probs_from_logprobs(g.text, offset, g.token_logprobs)
                    if found is not None:
                        probs, record["grade_mass"] = found
                if probs is not None:
                    record.update(probability_record(probs, near_tie_margin))
        usage.append(record)
    return ScoreBatch(scores, errors, usage, [g.text for g in generations])


def _usage(g: Generation) -> dict[str, object]:
    """What a judgment stores beside its grade (see the module docstring)."""
    return {"input_tokens": _count(g.input_tokens), "output_tokens": _count(g.output_tokens),
            "latency_s": float(g.latency_s), "requests": 1.0, "truncated": 1.0 if g.truncated else 0.0,
            **{k: float(v) for k, v in g.extra.items()}, **g.where(), **g.failure()}


def _count(value: int | None) -> float:
    return math.nan if value is None else float(value)


def expected_grade(usage: Mapping[str, object] | None) -> float:
    """E[g] = Σ g·p(g) over the five grade tokens of one judgment; NaN when the backend gave no probabilities.

    Beyond the paper: the argmax grade throws away how sure the model was, so two passages that
    both get "2" can still be told apart by their expected grades, at no extra model call.
    """
    probs = (usage or {}).get("grade_probs")
    if not isinstance(probs, Sequence) or len(probs) != len(GRADES):
        return math.nan
    p = np.asarray(probs, dtype=float)
    total = p.sum()
    if not np.isfinite(p).all() or total <= 0:
        return math.nan
    return float((p / total) @ np.asarray(GRADES, dtype=float))
