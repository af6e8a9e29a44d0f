"""The grader on any OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp's server).

Over httpx with bounded concurrency, a hard per-request timeout and retries off by default
(``rankers.scorers.http``). ``thinking`` goes to the server as ``chat_template_kwargs``; servers that
return thinking separately get it re-wrapped in ``<think>`` tags, so the grader parses every runtime's
output the same way; grade-token probabilities come from ``logprobs`` where the server returns them.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from rankers.scorers.base import DeclaredKey
from rankers.scorers.endpoints import EndpointPool
from rankers.scorers.http import run_sync
from rankers.scorers.llm.generation import Generation, GenerationSettings, TokenLogprob, settings_key
from rankers.scorers.prompts import GradePrompt
from rankers.scorers.prompts.hostile import ESCAPE_VERSION


class MalformedReply(ValueError):
    """A server answered 200 with a body that does not follow the chat-completions contract."""


#: Characters per token assumed when cutting data for a server whose tokenizer the client cannot
#: see (the OpenAI contract has no tokenize call). English BPE text runs at ~4 characters per token.
CHARS_PER_TOKEN = 4


def truncate_chars(text: str, budget_tokens: int) -> str:
    """Cut ``text`` to ``budget_tokens * CHARS_PER_TOKEN`` characters (the server-side token budget)."""
    return text[:budget_tokens * CHARS_PER_TOKEN]


class OpenAIBackend(DeclaredKey):
    """Chat completions from an OpenAI-compatible endpoint, ``settings.concurrency`` requests in flight.

    ``settings.timeout_s`` bounds each attempt end to end (connect, queueing on the server,
    generation), so a dead or stuck server costs at most ``(retries + 1) * timeout_s`` per input.
    ``thinking`` goes to the server as ``chat_template_kwargs: {"enable_thinking": ...}`` (vLLM,
    SGLang); servers that return thinking separately (``reasoning_content`` or ``reasoning``) get
    it re-wrapped in ``<think>`` tags, so the grader parses every runtime's output the same way.
    With ``settings.logprobs`` the request asks for ``logprobs``/``top_logprobs``; a server that
    returns none leaves the grade's probabilities absent. Data slots are cut to their budgets at
    :data:`CHARS_PER_TOKEN` characters per token, and chat-control syntax in data is neutralized
    (the server tokenizes with special tokens on; ``rankers.scorers.prompts.hostile``).
    """

    def __init__(self, base_url: str | Sequence[str], model: str, *, settings: GenerationSettings | None = None,
                 revision: str = "unpinned", retries: int = 0, extra_body: dict[str, Any] | None = None,
                 api_key: str | None = None, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
        if not isinstance(model, str) or not model:
            raise ValueError(f"the openai grader backend needs a model name (the server's model id), got {model!r}")
        self.settings = settings or GenerationSettings()
        #: The endpoints (``url`` one base URL or a list): ``settings.concurrency`` requests in flight on each.
        self.pool = EndpointPool([base_url] if isinstance(base_url, str) else list(base_url),
                                 self.settings.concurrency, "grader")
        self.base_url = self.pool.urls[0]
        self.model = model
        self.revision = revision
        self.retries = retries
        self.extra_body = dict(extra_body or {})
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "none")
        self.transport = transport

    def key_parts(self) -> dict[str, str]:
        """The engine, its generation settings, the server's extra body where declared, how text is cut."""
        extra = {"extra": settings_key(self.extra_body)} if self.extra_body else {}
        return {"engine": f"openai:{self.model}@{self.revision}", "settings": self.settings.key(), **extra,
                "cut": f"cut=chars{CHARS_PER_TOKEN}", "escape": f"escape={ESCAPE_VERSION}"}

    @property
    def chunk_size(self) -> int:
        return max(32, 8 * self.pool.capacity)

    def payload(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """The request body: greedy by default, thinking switch and logprobs as the settings say."""
        s = self.settings
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": float(s.temperature),
                                "max_tokens": s.output_cap, "seed": s.seed}
        if s.thinking is not None:
            body["chat_template_kwargs"] = {"enable_thinking": s.thinking}
        if s.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = s.logprobs
        return {**body, **self.extra_body}

    def request(self, prompt: GradePrompt) -> tuple[dict[str, Any], bool]:
        """The body sent for ``prompt`` (also what a batch file holds, ``harness.batch``) and whether a data slot
        was cut to its budget."""
        messages, truncated = prompt.server_messages(truncate_chars)
        return self.payload(messages), truncated

    def generate(self, prompts: Sequence[GradePrompt],
                 done: Callable[[int, Generation], None] | None = None) -> list[Generation]:
        """One generation per prompt; ``done(i, generation)`` is called as each request finishes (in the order they
        finish), so the caller can store it at once (docs/protocol.md#judging-cost)."""
        return run_sync(self._generate_all(list(prompts), done))

    async def _generate_all(self, prompts: list[GradePrompt],
                            done: Callable[[int, Generation], None] | None = None) -> list[Generation]:
        headers = {"Authorization": f"Bearer {self.api_key}"}
        async with self.pool.dispatcher(headers, self.transport) as dispatcher:
            async def run(i: int) -> Generation:
                body, truncated = self.request(prompts[i])  # built as its slot frees: the first ones leave at once
                sent = await dispatcher.send("/chat/completions", body, timeout_s=self.settings.timeout_s,
                                             retries=self.retries, read=lambda data: parse_chat_reply(data, 0.0))
                reply = sent.reply
                where = {"endpoint": sent.endpoint, "resent_from": sent.resent_from}
                if reply.value is None:
                    out = Generation(None, None, None, reply.seconds, reply.error, truncated=truncated,
                                     cause=reply.cause, **where)
                else:
                    out = dataclasses.replace(reply.value, latency_s=reply.seconds, truncated=truncated, **where)
                if done is not None:
                    done(i, out)
                return out

            return await dispatcher.each(len(prompts), run)


def _typed(value: Any, types: tuple[type, ...], where: str) -> Any:
    if not isinstance(value, types) or isinstance(value, bool):
        names = " or ".join("null" if k is type(None) else k.__name__ for k in types)
        raise MalformedReply(f"{where} is {type(value).__name__} {str(value)[:60]!r}, expected {names}")
    return value


def parse_chat_reply(data: Any, latency_s: float) -> Generation:
    """A chat-completions reply as a :class:`Generation`; a reply off the contract raises MalformedReply."""
    _typed(data, (dict,), "the reply")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedReply(f"the reply has no choices (keys: {sorted(data)[:8]})")
    choice = _typed(choices[0], (dict,), "choices[0]")
    message = _typed(choice.get("message"), (dict,), "choices[0].message")
    content = _typed(message.get("content"), (str, type(None)), "choices[0].message.content")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    _typed(reasoning, (str, type(None)), "choices[0].message.reasoning_content")
    usage = data.get("usage") or {}
    usage = usage if isinstance(usage, dict) else {}
    if reasoning:
        content = f"<think>{reasoning}</think>{content}" if content is not None else f"<think>{reasoning}"
    if content is None:
        reason = f"no message content (finish_reason={choice.get('finish_reason')})"
        return Generation(None, None, None, latency_s, reason, cause="no message content")
    return Generation(content, _int_or_none(usage.get("prompt_tokens")), _int_or_none(usage.get("completion_tokens")),
                      latency_s, token_logprobs=_reply_logprobs(choice.get("logprobs")))


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _reply_logprobs(logprobs: Any) -> tuple[TokenLogprob, ...] | None:
    """Generated tokens with their alternatives, from the chat format (``content`` list) or the
    legacy completions format (``tokens``/``token_logprobs``/``top_logprobs``); None when absent or off
    the contract (the grade's probabilities are then absent, the grade itself stands)."""
    if not isinstance(logprobs, dict):
        return None
    try:
        if isinstance(logprobs.get("content"), list):
            out = []
            for item in logprobs["content"]:
                alts = {str(a["token"]): float(a["logprob"]) for a in item.get("top_logprobs") or []}
                out.append((str(item["token"]), float(item["logprob"]), alts))
            return tuple(out) or None
        tokens, lps, tops = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
        if isinstance(tokens, list) and isinstance(lps, list) and len(tokens) == len(lps):
            tops = tops if isinstance(tops, list) and len(tops) == len(tokens) else [{}] * len(tokens)
            return tuple((str(t), float(lp), {str(k): float(v) for k, v in (top or {}).items()})
                         for t, lp, top in zip(tokens, lps, tops)) or None
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return None
