"""Backends of the LLM grader: one interface, one set of generation settings, three runtimes (SPEC §3).

- ``openai``: any OpenAI-compatible server (``vllm serve``, SGLang, llama.cpp's server) over
  httpx, with bounded concurrency, a hard per-request timeout and retries off by default;
- ``vllm``: in-process ``vllm.LLM`` for GPU machines (the paper: Qwen3-14B-AWQ, thinking mode,
  temperature 0, 8,192-token context, 6,144-token output cap);
- ``llamacpp``: in-process llama-cpp-python on a GGUF file, the embedded CPU default. It does not
  generate: it reads the logits of the five grade tokens at the answer position of a prompt it
  builds and tokenizes itself (see :class:`LlamaCppBackend`).

All three take one :class:`GenerationSettings` record; :func:`make_backend` builds any of them by
name. A backend never raises for one bad request: the affected input comes back with ``error``
set, so the grader marks it unavailable and the window falls back. A missing runtime (package,
device, model file) raises :class:`BackendUnavailable`, which tests turn into a skip.
"""
from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import ipaddress
import json
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
import numpy as np

from rankers.scorers.prompts import GradePrompt, PromptTemplate

# llama.cpp's OpenMP threads spin while waiting by default; on a shared CPU (more runnable threads
# than cores) that made 2 threads 6x slower than 1 (37 vs 220 prompt tok/s measured for SmolLM2).
# Passive waiting keeps the speed of the free cores. OpenMP reads it once, when the first OpenMP
# runtime loads (torch's libgomp, which llama.cpp then shares, or llama.cpp's own): the root
# conftest sets it before torch can load, and this module sets it before any backend imports
# llama_cpp, for use outside pytest. An explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

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
    """The grader's generation settings, the same record for every backend (SPEC §3, issue 11).

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
    concurrency: int = 4
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
        return _settings_key({"max_tokens": self.output_cap, "thinking": self.thinking,
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


class BackendUnavailable(RuntimeError):
    """The runtime a backend needs (package, CUDA device, model file) is absent on this machine."""


@runtime_checkable
class LLMBackend(Protocol):
    """Answers one grade prompt per input; ``model_key`` names everything that changes an answer.

    ``chunk_size`` is how many inputs the backend likes per call (the cache driver commits each
    call's results, so it bounds what an interruption can lose without starving the backend).
    """

    settings: GenerationSettings

    @property
    def model_key(self) -> str:
        ...

    @property
    def chunk_size(self) -> int:
        ...

    def generate(self, prompts: Sequence[GradePrompt]) -> list[Generation]:
        ...


def _settings_key(settings: dict[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, separators=(",", ":"))


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- openai


class MalformedReply(ValueError):
    """A server answered 200 with a body that does not follow the chat-completions contract."""


#: Characters per token assumed when cutting data for a server whose tokenizer the client cannot
#: see (the OpenAI contract has no tokenize call). English BPE text runs at ~4 characters per token.
CHARS_PER_TOKEN = 4


def check_base_url(url: str) -> str:
    """The base URL without a trailing slash, or a ValueError naming it (bad scheme, host or port)."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"grader URL {url!r} is empty; expected e.g. http://127.0.0.1:8000/v1")
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"grader URL {url!r} is not an http(s) URL with a host; "
                         f"expected e.g. http://127.0.0.1:8000/v1")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"grader URL {url!r} has an invalid port ({exc}); expected 1-65535") from None
    if port == 0:
        raise ValueError(f"grader URL {url!r} has an invalid port (0); expected 1-65535")
    if not _HOST_RE.fullmatch(parts.hostname) and not _is_ip(parts.hostname):
        raise ValueError(f"grader URL {url!r} is malformed: host {parts.hostname!r} is not a host name or address")
    try:
        httpx.URL(url.strip())
    except httpx.InvalidURL as exc:
        raise ValueError(f"grader URL {url!r} is malformed: {exc}") from None
    return url.strip().rstrip("/")


_HOST_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def truncate_chars(text: str, budget_tokens: int) -> str:
    """Cut ``text`` to ``budget_tokens * CHARS_PER_TOKEN`` characters (the server-side token budget)."""
    return text[:budget_tokens * CHARS_PER_TOKEN]


class OpenAIBackend:
    """Chat completions from an OpenAI-compatible endpoint, ``settings.concurrency`` requests in flight.

    ``settings.timeout_s`` bounds each attempt end to end (connect, queueing on the server,
    generation), so a dead or stuck server costs at most ``(retries + 1) * timeout_s`` per input.
    ``thinking`` goes to the server as ``chat_template_kwargs: {"enable_thinking": ...}`` (vLLM,
    SGLang); servers that return thinking separately (``reasoning_content`` or ``reasoning``) get
    it re-wrapped in ``<think>`` tags, so the grader parses every runtime's output the same way.
    With ``settings.logprobs`` the request asks for ``logprobs``/``top_logprobs``; a server that
    returns none leaves the grade's probabilities absent. Data slots are cut to their budgets at
    :data:`CHARS_PER_TOKEN` characters per token, and chat-control syntax in data is neutralized
    (the server tokenizes with special tokens on).
    """

    def __init__(self, base_url: str, model: str, *, settings: GenerationSettings | None = None,
                 revision: str = "unpinned", retries: int = 0, extra_body: dict[str, Any] | None = None,
                 api_key: str | None = None, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
        if not isinstance(model, str) or not model:
            raise ValueError(f"the openai grader backend needs a model name (the server's model id), got {model!r}")
        self.base_url = check_base_url(base_url)
        self.model = model
        self.settings = settings or GenerationSettings()
        self.revision = revision
        self.retries = retries
        self.extra_body = dict(extra_body or {})
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "none")
        self.transport = transport

    @property
    def model_key(self) -> str:
        extra = f"|{_settings_key(self.extra_body)}" if self.extra_body else ""
        return f"openai:{self.model}@{self.revision}|{self.settings.key()}{extra}|cut=chars{CHARS_PER_TOKEN}"

    @property
    def chunk_size(self) -> int:
        return max(32, 8 * self.settings.concurrency)

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

    def generate(self, prompts: Sequence[GradePrompt]) -> list[Generation]:
        batch = [p.server_messages(truncate_chars) for p in prompts]
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._generate_all(batch))
        # Called from inside an event loop (e.g. a notebook): run on a private loop in a thread.
        out: list[list[Generation]] = []
        worker = threading.Thread(target=lambda: out.append(asyncio.run(self._generate_all(batch))))
        worker.start()
        worker.join()
        return out[0]

    async def _generate_all(self, batch: list[tuple[list[dict[str, str]], bool]]) -> list[Generation]:
        concurrency = self.settings.concurrency
        semaphore = asyncio.Semaphore(concurrency)
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        headers = {"Authorization": f"Bearer {self.api_key}"}
        async with httpx.AsyncClient(base_url=self.base_url, timeout=self.settings.timeout_s, limits=limits,
                                     headers=headers, transport=self.transport) as client:
            async def run(messages: list[dict[str, str]], truncated: bool) -> Generation:
                async with semaphore:
                    generation = await self._request(client, messages)
                return dataclasses.replace(generation, truncated=truncated)

            return list(await asyncio.gather(*(run(m, t) for m, t in batch)))

    async def _request(self, client: httpx.AsyncClient, messages: list[dict[str, str]]) -> Generation:
        payload = self.payload(messages)
        timeout_s = self.settings.timeout_s
        error = "not attempted"
        start = time.perf_counter()
        for _ in range(self.retries + 1):
            start = time.perf_counter()
            try:
                async with asyncio.timeout(timeout_s):
                    response = await client.post("/chat/completions", json=payload)
                if response.status_code != 200:
                    error = f"HTTP {response.status_code}: {response.text[:300]}"
                    continue
                return parse_chat_reply(response.json(), time.perf_counter() - start)
            except TimeoutError:
                error = f"timeout after {timeout_s:g}s"
            except (httpx.HTTPError, OSError, ValueError) as exc:  # ValueError: bad JSON or MalformedReply
                error = _error_text(exc)
        return Generation(None, None, None, time.perf_counter() - start, error)


def _typed(value: Any, kinds: tuple[type, ...], where: str) -> Any:
    if not isinstance(value, kinds) or isinstance(value, bool):
        names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
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
        return Generation(None, None, None, latency_s,
                          f"no message content (finish_reason={choice.get('finish_reason')})")
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


# --------------------------------------------------------------------------- vllm


class VLLMBackend:
    """In-process vLLM batch generation (GPU), by default with the paper's Qwen3 settings.

    vLLM is imported and the model loaded on the first ``generate`` call, so ``model_key`` (and
    therefore cached scores) is usable on machines without vLLM or CUDA. Data slots are cut to
    their budgets in the model's own tokens. Per-request latency is the batch's wall time divided
    evenly: vLLM schedules the batch as a whole.
    """

    def __init__(self, model: str = "Qwen/Qwen3-14B-AWQ", *, settings: GenerationSettings | None = None,
                 revision: str = "unpinned", max_model_len: int = 8192,
                 llm_kwargs: dict[str, Any] | None = None) -> None:
        self.model = model
        self.settings = settings or GenerationSettings(thinking=True)
        self.revision = revision
        self.max_model_len = max_model_len
        self.llm_kwargs = dict(llm_kwargs or {})
        self._llm: Any = None
        self._vllm: Any = None

    @property
    def model_key(self) -> str:
        return f"vllm:{self.model}@{self.revision}|{self.settings.key()}|max_model_len={self.max_model_len}|cut=tokens"

    @property
    def chunk_size(self) -> int:
        return 512

    def _ensure_llm(self) -> Any:
        if self._llm is not None:
            return self._llm
        try:
            import vllm  # heavy: GPU runtime, only when grading in-process
        except ImportError as exc:
            raise BackendUnavailable(f"vllm backend needs the 'vllm' package (pip install vllm): {exc}") from exc
        try:
            import torch  # heavy: only to check for a CUDA device
        except ImportError as exc:
            raise BackendUnavailable(f"vllm backend needs torch with CUDA: {exc}") from exc
        if not torch.cuda.is_available():
            raise BackendUnavailable("vllm backend needs a CUDA device; torch.cuda.is_available() is False")
        kwargs = {"revision": None if self.revision == "unpinned" else self.revision, **self.llm_kwargs}
        self._vllm = vllm
        self._llm = vllm.LLM(model=self.model, max_model_len=self.max_model_len, seed=self.settings.seed, **kwargs)
        return self._llm

    def generate(self, prompts: Sequence[GradePrompt]) -> list[Generation]:
        llm = self._ensure_llm()
        if not prompts:
            return []
        tokenizer = llm.get_tokenizer()

        def truncate(text: str, budget: int) -> str:
            ids = tokenizer.encode(text, add_special_tokens=False)
            return text if len(ids) <= budget else tokenizer.decode(ids[:budget])

        prepared = [p.server_messages(truncate) for p in prompts]
        s = self.settings
        params = self._vllm.SamplingParams(temperature=float(s.temperature), max_tokens=s.output_cap, seed=s.seed,
                                           logprobs=s.logprobs or None)
        template_kwargs = {"enable_thinking": s.thinking} if s.thinking is not None else None
        start = time.perf_counter()
        try:
            outputs = llm.chat([m for m, _ in prepared], sampling_params=params, use_tqdm=False,
                               chat_template_kwargs=template_kwargs)
        except Exception as exc:  # one failed batch must not lose the run: every input becomes unavailable
            share = (time.perf_counter() - start) / len(prompts)
            return [Generation(None, None, None, share, _error_text(exc), truncated=t) for _, t in prepared]
        share = (time.perf_counter() - start) / len(prompts)
        return [Generation(out.outputs[0].text, len(out.prompt_token_ids or []), len(out.outputs[0].token_ids), share,
                           token_logprobs=_vllm_logprobs(out.outputs[0]), truncated=t)
                for out, (_, t) in zip(outputs, prepared)]


def _vllm_logprobs(completion: Any) -> tuple[TokenLogprob, ...] | None:
    """vLLM's per-position ``{token_id: Logprob}`` as (chosen text, logprob, alternatives)."""
    positions = getattr(completion, "logprobs", None)
    if not positions:
        return None
    out = []
    for token_id, alternatives in zip(completion.token_ids, positions):
        chosen = alternatives.get(token_id)
        if chosen is None or chosen.decoded_token is None:
            return None
        out.append((chosen.decoded_token, float(chosen.logprob),
                    {a.decoded_token: float(a.logprob) for a in alternatives.values() if a.decoded_token is not None}))
    return tuple(out)


# --------------------------------------------------------------------------- llama.cpp


class PromptTooLong(ValueError):
    """A prompt (after the data budgets) does not fit the context."""


@dataclass(frozen=True)
class _Frame:
    """A prompt template rendered through the model's chat template, tokenized around its slots."""

    head: tuple[int, ...]            # everything before the first data slot (system, tags), trusted
    first: str                       # the first data slot's name
    middle: tuple[int, ...]          # template text between the two slots
    second: str
    tail: tuple[int, ...]            # after the second slot, through the assistant header


class LlamaCppBackend:
    """The embedded CPU grader: the grade is read from the five grade-token logits, never generated.

    For each input the backend builds the chat prompt itself from the GGUF's chat template (so
    no free generation, no sampler, no stop strings): template text is tokenized with special
    tokens, data as plain text (a passage containing ``<|im_start|>`` stays text), each data slot
    cut to its token budget. The prompt is evaluated in three fixed chunks,

        [template up to the first slot] [first slot's data] [middle + second slot's data + tail]

    and the answer is read at the last position: ``grade_probs`` is the softmax of the five logits
    of ``"0"``..``"4"`` (restricted to those five), the grade their argmax (the lower grade on an
    exact tie).

    Why fixed chunks: llama.cpp's CPU kernels are not batch-invariant. With repacked K-quant
    weights (``REPACK`` builds, the Qwen2.5 Q4_K_M grader) the rows of a decode call are processed in
    groups by one kernel and the remainder by another, so a token's logits depend on where its decode
    call began and ended (measured on a 284-token prompt: split at token 100 or not split, identical
    logits; split at 50 or 247, logits moved by up to 0.37). ``create_chat_completion`` reused the
    KV prefix of the previous
    prompt and evaluated the rest from the first differing token: the chunking, hence the logits,
    depended on which prompt came before (order, batch, process). Here the chunk boundaries are a
    function of the prompt alone, and a cached prefix is reused only in whole chunks that were
    evaluated as exactly these chunks, so reuse is bit-identical to evaluating from scratch (tested).
    The thread count does not change the logits (each output element is one thread's dot product;
    tested with 1 and 2 threads). Across CPUs with other SIMD features the kernels differ and so do
    the last bits of the logits; the grader records the margin and flags near-ties for that reason.

    Of the settings, ``thinking`` must be false or unset and ``temperature`` 0; ``max_tokens``,
    ``logprobs``, ``concurrency`` and ``timeout_s`` do not apply (nothing is generated, and one
    context evaluates the prompts in sequence).
    """

    #: Tokens per decode call (n_batch = n_ubatch): a chunk longer than this is split at multiples of
    #: it from the chunk's own start, so the split, too, depends on the chunk alone.
    N_BATCH = 512
    #: Context: the longest prompt the default budgets allow is ~1,600 tokens; a larger one reloads.
    MIN_CONTEXT = 2048
    CONTEXT_STEP = 512

    def __init__(self, model_path: str | Path, *, settings: GenerationSettings | None = None,
                 revision: str | None = None, n_threads: int | None = None, reuse_prefix: bool = True) -> None:
        self.settings = settings or GenerationSettings(thinking=False)
        if self.settings.thinking:
            raise ValueError("the llamacpp grader reads the grade from the answer position's logits and cannot think; "
                             "set thinking = false (or leave it unset)")
        if self.settings.temperature != 0:
            raise ValueError(f"the llamacpp grader takes the argmax of the grade-token logits (temperature 0); "
                             f"got temperature {self.settings.temperature}")
        self.model_path = Path(model_path)
        self.n_threads = n_threads or os.cpu_count() or 1
        self.reuse_prefix = reuse_prefix
        self._revision = revision
        self._llm: Any = None
        self._n_ctx = 0
        self._grade_ids: list[int] = []
        self._frames: dict[str, _Frame] = {}
        self._cached: list[tuple[int, ...]] = []  # the chunks whose KV the context holds, in order

    @property
    def revision(self) -> str:
        """The GGUF's sha256 (computed once when not given): the file, not its path, identifies the model."""
        if self._revision is None:
            if not self.model_path.is_file():
                raise BackendUnavailable(f"llamacpp backend: model file not found: {self.model_path}")
            with open(self.model_path, "rb") as fh:
                self._revision = hashlib.file_digest(fh, "sha256").hexdigest()
        return self._revision

    @property
    def model_key(self) -> str:
        scheme = {"grade": "logits0-4", "chunks": "head|slot1|rest", "n_batch": self.N_BATCH, "data": "plain-text"}
        return f"llamacpp:{self.model_path.name}@sha256:{self.revision[:16]}|{_settings_key(scheme)}"

    @property
    def chunk_size(self) -> int:
        return 32

    @staticmethod
    def _import_llama() -> Any:
        try:
            import llama_cpp  # heavy: native runtime, only when grading on the CPU
        except ImportError as exc:
            raise BackendUnavailable(
                f"llamacpp backend needs llama-cpp-python (pip install llama-cpp-python): {exc}") from exc
        return llama_cpp

    def load(self, n_ctx: int | None = None) -> Any:
        """The loaded ``llama_cpp.Llama`` with at least ``n_ctx`` tokens of context."""
        need = max(self.MIN_CONTEXT, -(-(n_ctx or 0) // self.CONTEXT_STEP) * self.CONTEXT_STEP)
        if self._llm is not None and need <= self._n_ctx:
            return self._llm
        llama_cpp = self._import_llama()
        if not self.model_path.is_file():
            raise BackendUnavailable(f"llamacpp backend: model file not found: {self.model_path}")
        if self._llm is not None:
            self._llm.close()  # release the old context before allocating a larger one
        self._llm = llama_cpp.Llama(model_path=str(self.model_path), n_ctx=need, n_batch=self.N_BATCH,
                                    n_ubatch=self.N_BATCH, n_threads=self.n_threads, n_threads_batch=self.n_threads,
                                    seed=self.settings.seed, logits_all=False, verbose=False)
        self._n_ctx = need
        self._cached = []
        self._frames = {}
        self._grade_ids = []
        for digit in GRADE_TOKENS:
            ids = self._llm.tokenize(digit.encode(), add_bos=False, special=False)
            if len(ids) != 1:
                raise ValueError(f"{self.model_path.name}: grade {digit!r} is not a single token ({ids}); "
                                 f"the llamacpp grader reads one logit per grade")
            self._grade_ids.append(ids[0])
        return self._llm

    def frame(self, template: PromptTemplate) -> _Frame:
        """``template`` rendered through the GGUF's chat template and tokenized around its two slots."""
        llm = self.load()
        if template.key in self._frames:
            return self._frames[template.key]
        source = llm.metadata.get("tokenizer.chat_template")
        if not source:
            raise ValueError(f"{self.model_path.name} has no chat template (tokenizer.chat_template); "
                             f"the llamacpp grader builds its prompt from it")
        marks = {slot: f"\ue000{slot}\ue001" for slot in template.slot_order}
        user = "".join(text if slot is None else marks[slot] for text, slot in template.pieces())
        rendered = _render_chat_template(source, [{"role": "system", "content": template.system},
                                                  {"role": "user", "content": user}],
                                         bos_token=_token_text(llm, llm.token_bos()),
                                         eos_token=_token_text(llm, llm.token_eos()))
        first, second = template.slot_order
        head, rest = _split_once(rendered, marks[first], self.model_path.name)
        middle, tail = _split_once(rest, marks[second], self.model_path.name)

        def tok(text: str) -> tuple[int, ...]:
            return tuple(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else ()

        head_ids = tok(head)
        bos = llm.token_bos()
        if llm.metadata.get("tokenizer.ggml.add_bos_token") == "true" and bos >= 0 and head_ids[:1] != (bos,):
            head_ids = (bos, *head_ids)
        frame = _Frame(head_ids, first, tok(middle), second, tok(tail))
        self._frames[template.key] = frame
        return frame

    def chunks(self, prompt: GradePrompt) -> tuple[list[tuple[int, ...]], bool]:
        """The prompt's three evaluation chunks (see the class docstring) and whether data was cut."""
        frame = self.frame(prompt.template)
        llm = self._llm
        data = prompt.data()
        cut = False
        slots = {}
        for slot in (frame.first, frame.second):
            ids = llm.tokenize(data[slot].encode("utf-8"), add_bos=False, special=False) if data[slot] else []
            budget = prompt.budget(slot)
            cut |= len(ids) > budget
            slots[slot] = tuple(ids[:budget])
        return [frame.head, slots[frame.first], frame.middle + slots[frame.second] + frame.tail], cut

    def generate(self, prompts: Sequence[GradePrompt]) -> list[Generation]:
        if not prompts:
            return []
        need = max(len(f.head) + len(f.middle) + len(f.tail) + p.query_tokens + p.passage_tokens
                   for p in prompts for f in [self.frame(p.template)])
        self.load(need)
        return [self._one(p) for p in prompts]

    def _one(self, prompt: GradePrompt) -> Generation:
        start = time.perf_counter()
        try:
            chunks, cut = self.chunks(prompt)
            logits, processed = self._evaluate(chunks)
        except BackendUnavailable:
            raise
        except (RuntimeError, ValueError) as exc:  # a failed decode: this input is unavailable, not the run
            self._cached = []
            return Generation(None, None, None, time.perf_counter() - start, _error_text(exc))
        grade_logits = logits[self._grade_ids].astype(np.float64)
        probs = np.exp(grade_logits - grade_logits.max())
        probs /= probs.sum()
        full = logits.astype(np.float64)
        top = full.max()
        grade_mass = float(np.exp(grade_logits - top).sum() / np.exp(full - top).sum())
        grade = int(np.argmax(probs))
        return Generation(GRADE_TOKENS[grade], sum(map(len, chunks)), 0, time.perf_counter() - start,
                          grade_probs=tuple(float(p) for p in probs), truncated=cut,
                          extra={"processed_tokens": float(processed), "grade_mass": grade_mass})

    def reset_prefix(self) -> None:
        """Forget the cached prefix: the next prompt is evaluated from its first chunk (timings, tests)."""
        self._cached = []

    def _evaluate(self, chunks: list[tuple[int, ...]]) -> tuple[np.ndarray, int]:
        """Logits at the last prompt position, evaluating only chunks the context does not already hold."""
        llm = self._llm
        total = sum(map(len, chunks))
        if total > self._n_ctx:
            raise PromptTooLong(f"prompt of {total} tokens exceeds the context of {self._n_ctx}")
        keep = 0
        if self.reuse_prefix:
            while keep < min(len(chunks) - 1, len(self._cached)) and self._cached[keep] == chunks[keep]:
                keep += 1  # the last chunk is always evaluated: its last position is the answer
        llm.n_tokens = sum(map(len, chunks[:keep]))  # llm.eval drops the KV cells from here on
        self._cached = list(chunks[:keep])
        processed = 0
        for chunk in chunks[keep:]:
            if chunk:
                llm.eval(chunk)
                processed += len(chunk)
            self._cached.append(chunk)
        llama_cpp = self._import_llama()
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
        return logits.copy(), processed


def _token_text(llm: Any, token: int) -> str:
    return llm.detokenize([token], special=True).decode("utf-8", errors="replace") if token >= 0 else ""


def _render_chat_template(source: str, messages: list[dict[str, str]], **special: str) -> str:
    """A GGUF chat template rendered as Hugging Face renders it (sandboxed Jinja, generation prompt on)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # optional: ships with llama-cpp-python

    def raise_exception(message: str) -> None:
        raise ValueError(f"chat template: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source).render(messages=messages, add_generation_prompt=True, **special)


def _split_once(text: str, mark: str, model: str) -> tuple[str, str]:
    if text.count(mark) != 1:
        raise ValueError(f"{model}: the chat template did not keep the prompt's data slot exactly once")
    before, after = text.split(mark)
    return before, after


# --------------------------------------------------------------------------- factory


BACKENDS = {"openai": OpenAIBackend, "vllm": VLLMBackend, "llamacpp": LlamaCppBackend}


def make_backend(kind: str, *, model: str | Path, settings: GenerationSettings | None = None,
                 **backend_options: Any) -> LLMBackend:
    """Build a backend by name with the shared settings.

    ``model`` is the served model id (``openai``), the Hugging Face name (``vllm``) or the GGUF
    path (``llamacpp``). Options: ``openai`` — ``base_url`` (required), ``revision``, ``retries``,
    ``extra_body``, ``api_key``; ``vllm`` — ``revision``, ``max_model_len``, ``llm_kwargs``;
    ``llamacpp`` — ``revision`` (the file's sha256), ``n_threads``, ``reuse_prefix``.
    """
    if kind not in BACKENDS:
        raise ValueError(f"unknown LLM backend {kind!r}; expected one of {sorted(BACKENDS)}")
    try:
        if kind == "openai":
            if "base_url" not in backend_options:
                raise ValueError("the openai grader backend needs base_url (an OpenAI-compatible /v1 endpoint)")
            return OpenAIBackend(backend_options.pop("base_url"), str(model), settings=settings, **backend_options)
        if kind == "vllm":
            return VLLMBackend(str(model), settings=settings, **backend_options)
        return LlamaCppBackend(model, settings=settings, **backend_options)
    except TypeError as exc:  # an option the backend does not take
        raise ValueError(f"LLM backend {kind!r}: {exc}") from None
