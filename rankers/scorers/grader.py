"""The LLM grader: a fixed, versioned prompt asks for an integer 0–4, parsed strictly (SPEC §3).

Rubric (prompt ``grade_v1``): 0 unrelated; 1 condition contradicted or misattributed; 2 required
evidence absent; 3 satisfied with an implicit detail; 4 explicitly satisfied.

Accepted answer grammar, after removing thinking (see :func:`parse_grade`), case-insensitive and
with surrounding whitespace allowed::

    answer := [label [range] [":" | "="]] ["**"] digit ["**"] ["/4"] ["."]
    label  := "grade" | "score" | "answer" | "relevance"
    range  := "(0-4)" | "(0–4)"          (small models echo the prompt's "Grade (0-4):" cue)
    digit  := "0" | "1" | "2" | "3" | "4"

Anything else ("3 because …", "10", "3 or 4", an empty reply) is unavailable, with the raw
output kept so parse failures can be audited.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from rankers.scorers.base import ScoreBatch
from rankers.scorers.llm_backends import LLMBackend, Messages
from rankers.scorers.prompts import PromptTemplate, load_prompt

PROMPT_VERSION = "grade_v1"
GRADES = (0, 1, 2, 3, 4)

_ANSWER_RE = re.compile(
    r"^\s*(?:(?:grade|score|answer|relevance)\s*(?:\(\s*0\s*[-–]\s*4\s*\)\s*)?[:=]?\s*)?"
    r"(\*\*)?([0-4])(?(1)\*\*)(?:\s*/\s*4)?\s*\.?\s*$",
    re.IGNORECASE,
)
_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"


def strip_thinking(text: str) -> tuple[str | None, str | None]:
    """Remove the thinking block; returns (answer, error).

    Everything up to the last ``</think>`` is thinking, whether or not the opening tag was
    generated (some chat templates open the block inside the prompt). An opened block that is
    never closed means the output budget ran out mid-thought: no answer exists.
    """
    lowered = text.lower()
    close = lowered.rfind(_THINK_CLOSE)
    if close >= 0:
        return text[close + len(_THINK_CLOSE):], None
    if _THINK_OPEN in lowered:
        return None, "unterminated <think> block"
    return text, None


def parse_grade(text: str | None) -> tuple[int | None, str | None]:
    """Strictly parse one generated grade; returns (grade, None) or (None, reason)."""
    if text is None:
        return None, "no output"
    answer, error = strip_thinking(text)
    if answer is None:
        return None, error
    match = _ANSWER_RE.match(answer)
    if match is None:
        shown = answer.strip()
        return None, f"unparseable answer {shown[:80]!r}" if shown else "empty answer"
    return int(match.group(2)), None


class LLMGrader:
    """A :class:`~rankers.scorers.base.TextScorer` whose score is the parsed 0–4 grade.

    Each (query, passage) is one independent chat (no pair identity, label or other candidate).
    ``model_key`` joins the backend's key (model id, revision or file hash, generation settings)
    with the prompt version and digest, so any change that can change a grade changes the key.
    """

    def __init__(self, backend: LLMBackend, prompt: PromptTemplate | str = PROMPT_VERSION) -> None:
        self.backend = backend
        self.prompt = load_prompt(prompt) if isinstance(prompt, str) else prompt

    @property
    def model_key(self) -> str:
        return f"llm-grader|{self.backend.model_key}|prompt={self.prompt.key}"

    def messages(self, query: str, passage: str) -> Messages:
        return self.prompt.render(query, passage)

    def score(self, inputs: Sequence[tuple[str, str]]) -> ScoreBatch:
        inputs = list(inputs)
        generations = self.backend.generate([self.messages(q, p) for q, p in inputs])
        if len(generations) != len(inputs):
            raise RuntimeError(f"backend {self.backend.model_key} returned {len(generations)} generations "
                               f"for {len(inputs)} inputs")
        scores = np.full(len(inputs), np.nan)
        errors: list[str | None] = []
        usage: list[dict[str, float]] = []
        for i, g in enumerate(generations):
            if g.error is not None:
                errors.append(f"backend: {g.error}")
            else:
                grade, reason = parse_grade(g.text)
                if grade is None:
                    errors.append(f"parse: {reason}")
                else:
                    scores[i] = grade
                    errors.append(None)
            usage.append({"input_tokens": _count(g.input_tokens), "output_tokens": _count(g.output_tokens),
                          "latency_s": float(g.latency_s), "requests": 1.0})
        return ScoreBatch(scores, errors, usage, [g.text for g in generations])


def _count(value: int | None) -> float:
    return math.nan if value is None else float(value)
