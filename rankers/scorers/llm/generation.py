"""What every LLM backend of the grader shares: one record of generation settings, one reply record.

Three runtimes implement :class:`LLMBackend` (``rankers.scorers.llm``): an OpenAI-compatible server
(``openai_compatible``), in-process vLLM on a GPU (``vllm_backend``) and in-process llama.cpp on a
GGUF file, the embedded CPU default (``llamacpp_backend``). All take one :class:`GenerationSettings`;
a backend never raises for one bad request: the affected input comes back with ``error`` set, so the
grader marks it unavailable and the window falls back. A missing runtime (package, device, model
file) raises :class:`BackendUnavailable`, which tests turn into a skip.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rankers.scorers.base import Batched
from rankers.scorers.causes import Reason
from rankers.scorers.prompts import GradePrompt


#: Output cap when the model may think (the paper's 6,144 tokens) and when it answers at once.
THINKING_MAX_TOKENS = 6144
ANSWER_MAX_TOKENS = 16
#: The most alternatives OpenAI's API (and vLLM's default ``max_logprobs``) return per token.
MAX_TOP_LOGPROBS = 20
GRADE_TOKENS = ("0", "1", "2", "3", "4")

#: One generated token: its text, its log-probability and the top alternatives (text -> logprob).
TokenLogprob = tuple[str, float, dict[str, float]]


@dataclass(frozen=True)
class GenerationSettings:
    """The grader's generation settings, the same record for every backend (``docs/protocol.md#grader``).

    ``max_tokens=None`` resolves to :data:`THINKING_MAX_TOKENS` unless ``thinking`` is False (then
    :data:`ANSWER_MAX_TOKENS`): a thinking model's answer comes after its thinking block, and a cap
    of 16 tokens can never close ``</think>``. ``thinking=None`` leaves the model's default;
    True/False is sent to the chat template as ``enable_thinking``. ``logprobs`` is the number of
    alternatives requested per generated token (``top_logprobs``; 0 = none), from which the
    grader reads the five grade-token probabilities. ``concurrency`` and ``timeout_s`` change speed
    and availability, never a grade, so they stay out of :meth:`key` (a finished cache stays valid
    when they change; an unavailable result is retried on the next run).
    """

    max_tokens: int | None = None
    thinking: bool | None = None
    temperature: float = 0.0
    seed: int = 0
    #: Requests in flight per server endpoint unless declared: 1, what a one-at-a-time server (llama.cpp's, a
    #: single-slot llama-cpp-python) answers without queueing past ``timeout_s``; declare more for a batching
    #: server (vLLM, SGLang) (docs/protocol.md#judging-cost).
    concurrency: int = 1
    timeout_s: float = 300.0
    logprobs: int = MAX_TOP_LOGPROBS

    def __post_init__(self) -> None:
        problems = []
        if self.max_tokens is not None and (isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int)
                                            or self.max_tokens < 1):
            problems.append(f"max_tokens must be a positive integer or None, got {self.max_tokens!r}")
        if self.thinking is not None and not isinstance(self.thinking, bool):
            problems.append(f"thinking must be true, false or None (model default), got {self.thinking!r}")
        if not isinstance(self.temperature, (int, float)) or not 0 <= self.temperature <= 2:
            problems.append(f"temperature must be in [0, 2], got {self.temperature!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            problems.append(f"seed must be an integer, got {self.seed!r}")
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or self.concurrency < 1:
            problems.append(f"concurrency must be an integer >= 1, got {self.concurrency!r}")
        if not isinstance(self.timeout_s, (int, float)) or not self.timeout_s > 0:
            problems.append(f"timeout_s must be > 0, got {self.timeout_s!r}")
        if isinstance(self.logprobs, bool) or not isinstance(self.logprobs, int) \
                or not 0 <= self.logprobs <= MAX_TOP_LOGPROBS:
            problems.append(f"logprobs must be an integer in [0, {MAX_TOP_LOGPROBS}], got {self.logprobs!r}")
        if problems:
            raise ValueError("invalid grader generation settings: " + "; ".join(problems))

    @property
    def output_cap(self) -> int:
        """``max_tokens`` as sent: the explicit value, or the default for the thinking mode."""
        if self.max_tokens is not None:
            return self.max_tokens
        return ANSWER_MAX_TOKENS if self.thinking is False else THINKING_MAX_TOKENS

    @classmethod
    def split_options(cls, options: Mapping[str, Any]) -> tuple[GenerationSettings, dict[str, Any]]:
        """Settings from the generation keys of ``options`` (e.g. a profile's ranker table), and the rest."""
        names = {f.name for f in dataclasses.fields(cls)}
        chosen = {k: v for k, v in options.items() if k in names}
        return cls(**chosen), {k: v for k, v in options.items() if k not in names}

    def key(self) -> str:
        """Everything here that can change a grade or its stored probabilities, as canonical JSON."""
        return settings_key({"max_tokens": self.output_cap, "thinking": self.thinking,
                              "temperature": float(self.temperature), "seed": self.seed, "logprobs": self.logprobs})


@dataclass(frozen=True)
class Generation:
    """One request's outcome; ``text`` is None exactly when the request failed (``error`` says why).

    ``grade_probs`` is set by a backend that reads the grade-token logits itself (llama.cpp);
    ``token_logprobs`` by one that generates text with log-probabilities, from which the grader
    extracts the grade token's alternatives. ``truncated`` says a data slot was cut to its budget;
    ``extra`` carries backend-specific per-request accounting (e.g. processed prompt tokens).
    """

    text: str | None
    input_tokens: int | None
    output_tokens: int | None
    latency_s: float
    error: str | None = None
    grade_probs: tuple[float, ...] | None = None
    token_logprobs: tuple[TokenLogprob, ...] | None = None
    truncated: bool = False
    extra: dict[str, float] = field(default_factory=dict)
    #: Probabilities of a closed set of answers read from their tokens' logits (the pairwise judge's "A"/"B").
    choice_probs: tuple[float, ...] | None = None
    #: For a server: the base URL that answered, and the (URL, reason) of those the request was sent to first and
    #: that were taken out (``rankers.scorers.endpoints.EndpointPool``).
    endpoint: str | None = None
    resent_from: tuple[tuple[str, str], ...] = ()
    #: The error's short cause (``rankers.scorers.causes``), set where the error is found.
    cause: str | None = None

    def where(self) -> dict[str, Any]:
        """What a judgment records about the server that made it, if any: ``endpoint`` and ``resent_from``
        (URL -> why it was taken out)."""
        from rankers.scorers.endpoints import endpoint_record  # heavy: httpx, which an in-process backend never needs

        return endpoint_record(self.endpoint, self.resent_from)

    def failure(self) -> dict[str, str]:
        """What a judgment records about its failure beside the reason: its cause, where the backend set one."""
        return {"cause": self.cause} if self.error is not None and self.cause else {}


class BackendUnavailable(RuntimeError):
    """The runtime a backend needs (package, CUDA device, model file) is absent on this machine."""


@runtime_checkable
class LLMBackend(Batched, Protocol):
    """Answers one grade prompt per input (``model_key`` and ``chunk_size``: ``Batched``).

    A backend whose ``generate`` takes ``done`` calls ``done(i, generation)`` as each input finishes, and the cache
    driver commits it then (``rankers.scorers.base.streams``); otherwise the call's results are committed when it
    returns.
    """

    settings: GenerationSettings

    def generate(self, prompts: Sequence[GradePrompt]) -> list[Generation]:
        ...


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def answer_text(text: str | None) -> tuple[str | None, Reason | None]:
    """The answer part of a generated text: what follows the last ``</think>``, or all of it when it has no
    thinking block; (None, reason) when there is no output or the thinking block never closes."""
    if text is None:
        return None, Reason("no output", "no output")
    lowered = text.lower()
    close = lowered.rfind(THINK_CLOSE)
    if close >= 0:
        return text[close + len(THINK_CLOSE):], None
    if THINK_OPEN in lowered:
        return None, Reason("unterminated <think> block", "unterminated <think> block")
    return text, None


def settings_key(settings: dict[str, Any]) -> str:
    """Canonical JSON of settings that enter a model key."""
    return json.dumps(settings, sort_keys=True, separators=(",", ":"))
