"""What the listwise and the pairwise judge share over an LLM backend (``docs/protocol.md#listwise``, ``#pairwise``).

Both show the model a slot template filled with a query and several passages, each cut to its token budget; both
call the backend in process (llama.cpp: a method of its own) or through ``generate`` (a server, vLLM), streaming
each finished judgment where the backend can; both read a generation as an :class:`Outcome` with the same usage
record. A subclass declares its name in the key, its reply reading's version, the template kind it needs and
its in-process call; it says how a request becomes a prompt and how a generation becomes its outcome.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rankers.scorers.base import DeclaredKey, streams
from rankers.scorers.judgment_records import Outcome, Request
from rankers.scorers.llm.generation import Generation, LLMBackend
from rankers.scorers.prompts.slots import SlotPrompt, SlotTemplate, load_slot_template


class LLMJudge(DeclaredKey):
    """A judge of several passages at once on an LLM backend; ``model_key`` is built from its declared parts."""

    #: The judge's name, first in its key.
    KIND: ClassVar[str]
    #: The version of its reply reading, last in its key.
    PARSE_VERSION: ClassVar[str]
    #: Whether its template lists passages (an ``[item]`` section) or names two.
    LISTS: ClassVar[bool]
    #: How many requests one in-process call takes.
    IN_PROCESS_CHUNK: ClassVar[int]
    #: The prompt used unless declared.
    PROMPT: ClassVar[str]
    #: Token budgets per data slot unless declared: NevIR passages run to ~200 words, so these only bite on hostile
    #: text.
    PASSAGE_TOKENS: ClassVar[int] = 320
    QUERY_TOKENS: ClassVar[int] = 128

    def __init__(self, backend: LLMBackend, prompt: str | None = None, *, passage_tokens: int | None = None,
                 query_tokens: int | None = None) -> None:
        self.backend = backend
        prompt = self.PROMPT if prompt is None else prompt
        self.template: SlotTemplate = load_slot_template(prompt)
        if self.template.is_list != self.LISTS:
            needed = "a listwise template (with an [item] section)" if self.LISTS else "a pairwise template"
            raise ValueError(f"prompt {prompt!r} is not {needed}, as the {self.KIND} judge needs")
        self.passage_tokens = self.PASSAGE_TOKENS if passage_tokens is None else passage_tokens
        self.query_tokens = self.QUERY_TOKENS if query_tokens is None else query_tokens

    def engine(self) -> dict[str, Any]:
        """What the in-process engine does for this judge (it enters the engine's part of the key)."""
        raise NotImplementedError

    def in_process(self) -> Callable[..., list[Generation]] | None:
        """The backend's own call for this judge (llama.cpp), None on a backend that only generates."""
        raise NotImplementedError

    def prompt(self, request: Request) -> SlotPrompt:
        raise NotImplementedError

    def read(self, generation: Generation, request: Request) -> Outcome:
        """A generation as the outcome of ``request``."""
        raise NotImplementedError

    def key_parts(self) -> dict[str, str]:
        """judge | engine | prompt | budgets | reading: every part that changes a judgment."""
        key_with = getattr(self.backend, "key_with", None)
        engine = key_with(self.engine()) if key_with else self.backend.model_key
        return {"judge": self.KIND, "engine": engine, "prompt": f"prompt={self.template.key}",
                "budget": f"budget=p{self.passage_tokens},q{self.query_tokens}", "parse": self.PARSE_VERSION}

    @property
    def chunk_size(self) -> int:
        return self.IN_PROCESS_CHUNK if self.in_process() is not None else self.backend.chunk_size

    def judge(self, requests: Sequence[Request], done: Callable[[int, Outcome], None] | None = None) -> list[Outcome]:
        """Outcomes of ``requests``; ``done(i, outcome)`` as each finishes where the backend streams."""
        prompts = [self.prompt(r) for r in requests]
        call = self.in_process() or self.backend.generate
        if done is not None and streams(call):
            generations = call(prompts, done=lambda i, g: done(i, self.read(g, requests[i])))
        else:
            generations = call(prompts)
        return [self.read(g, r) for g, r in zip(generations, requests)]


def generation_usage(g: Generation) -> dict[str, Any]:
    """A generation's usage record as a judgment stores it: tokens, latency, one request, truncation, the backend's
    extra numbers, where it was made and, for a failed one, its cause."""
    return {"input_tokens": g.input_tokens, "output_tokens": g.output_tokens, "latency_s": float(g.latency_s),
            "requests": 1, "truncated": int(g.truncated), **{k: float(v) for k, v in g.extra.items()}, **g.where(),
            **g.failure()}
