"""What one judging stage will cost, known before it judges (docs/protocol.md#judging-cost).

An LLM kind's ``plan`` counts the distinct judgments a stage needs and how many the score cache holds, estimates
the prompt tokens of the rest, and reads the judge's stored history for a time estimate.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Characters per token assumed for a plan's prompt-token estimate (English BPE text runs at about 4).
CHARS_PER_TOKEN = 4
#: Judgments a plan makes to time a judge the cache holds no history of (committed: the stage reuses them); three,
#: so the median leaves out the first, which also pays for loading an in-process model.
PROBE_JUDGMENTS = 3


@dataclass(frozen=True)
class JudgePlan:
    """What one judging stage will cost, known before it judges (docs/protocol.md#judging-cost).

    ``judgments``: distinct judgments the stage needs, ``cached`` of them already stored; ``prompt_tokens``: an
    estimate for those still to judge (their texts' characters / :data:`CHARS_PER_TOKEN`, the prompt template
    not counted); ``seconds_per_judgment``: the median measured share of wall-clock of the judge's latest stored
    judgments (``history`` of them), None without history; ``probe`` judges and commits a few of the missing
    judgments to make that history.
    """

    judgments: int
    cached: int
    prompt_tokens: int
    seconds_per_judgment: float | None
    history: int
    probe: Callable[[], None] | None = field(default=None, compare=False, repr=False)

    @property
    def to_judge(self) -> int:
        return self.judgments - self.cached

    @property
    def estimate_s(self) -> float | None:
        """Seconds the stage is expected to judge for (0 when everything is cached; None: no estimate)."""
        if not self.to_judge:
            return 0.0
        return None if self.seconds_per_judgment is None else self.to_judge * self.seconds_per_judgment

    def line(self, what: str) -> str:
        """The plan as one terminal line, e.g. ``plan score lw window test: 52 judgments (40 to judge, 12
        cached), ~96,000 prompt tokens, about 23 min (34.5 s a judgment, median of 12 stored)``."""
        head = f"plan {what}: {self.judgments:,} judgments ({self.to_judge:,} to judge, {self.cached:,} cached)"
        if not self.to_judge:
            return head
        head += f", ~{self.prompt_tokens:,} prompt tokens"
        if self.seconds_per_judgment is None:
            return head + ", time unknown (no stored judgment of this judge yet)"
        minutes = self.estimate_s / 60
        return head + (f", about {minutes:.1f} min ({self.seconds_per_judgment:.3g} s a judgment, median of "
                       f"{self.history:,} stored)")


def timed_history(cache: Any, model_key: str) -> tuple[float | None, int]:
    """(median seconds per judgment, judgments it is read from) of a judge's stored history; (None, 0) without."""
    seconds = sorted(cache.history(model_key))
    if not seconds:
        return None, 0
    mid = len(seconds) // 2
    median = seconds[mid] if len(seconds) % 2 else (seconds[mid - 1] + seconds[mid]) / 2
    return median, len(seconds)
