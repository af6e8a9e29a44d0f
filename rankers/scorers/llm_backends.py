"""Generation backends for the LLM grader: one interface, three runtimes (SPEC §3 "LLM grader").

- ``openai``: any OpenAI-compatible server (``vllm serve``, llama.cpp's server) over httpx,
  with bounded concurrency, a hard per-request timeout and retries off by default;
- ``vllm``: in-process ``vllm.LLM`` with the paper's settings (thinking mode, temperature 0,
  8,192-token context, 6,144-token output cap), for GPU machines;
- ``llamacpp``: in-process llama-cpp-python on a GGUF file, the embedded CPU default.

A backend never raises for one bad request: the affected input comes back with ``error`` set so
the grader can mark it unavailable and the window can fall back. Missing runtimes (package,
device, model file) raise :class:`BackendUnavailable`, which tests turn into a skip.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
from tqdm.auto import tqdm

Messages = list[dict[str, str]]

# llama.cpp's OpenMP threads spin while waiting by default; on a shared CPU (more runnable threads
# than cores) that made 2 threads 6x slower than 1 (37 vs 220 prompt tok/s measured for SmolLM2).
# Passive waiting keeps the speed of the free cores. OpenMP reads it once, when llama_cpp loads,
# so it is set here, before any backend can import llama_cpp; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@dataclass(frozen=True)
class Generation:
    """One request's outcome; ``text`` is None exactly when the request failed (``error`` says why)."""

    text: str | None
    input_tokens: int | None
    output_tokens: int | None
    latency_s: float
    error: str | None = None


class BackendUnavailable(RuntimeError):
    """The runtime a backend needs (package, CUDA device, model file) is absent on this machine."""


@runtime_checkable
class LLMBackend(Protocol):
    """Generates one completion per chat; ``model_key`` names everything that changes the text."""

    @property
    def model_key(self) -> str:
        ...

    def generate(self, messages_batch: Sequence[Messages]) -> list[Generation]:
        ...


def _settings_key(settings: dict[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, separators=(",", ":"))


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- openai


class OpenAIBackend:
    """Chat completions from an OpenAI-compatible endpoint, ``concurrency`` requests in flight at most.

    ``timeout_s`` bounds each attempt end to end (connect, queueing on the server, generation),
    so a dead or stuck server costs at most ``(retries + 1) * timeout_s`` per input. Servers
    that return thinking separately (vLLM's ``reasoning_content``) get it re-wrapped in
    ``<think>`` tags so the grader parses every runtime's output the same way.
    """

    def __init__(self, base_url: str, model: str, *, revision: str = "unpinned", max_tokens: int = 16,
                 temperature: float = 0.0, seed: int = 0, concurrency: int = 4, timeout_s: float = 120.0,
                 retries: int = 0, extra_body: dict[str, Any] | None = None, api_key: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, progress: bool = False) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.revision = revision
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retries = retries
        self.extra_body = dict(extra_body or {})
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "none")
        self.transport = transport
        self.progress = progress

    @property
    def model_key(self) -> str:
        settings = {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed, **self.extra_body}
        return f"openai:{self.model}@{self.revision}|{_settings_key(settings)}"

    def generate(self, messages_batch: Sequence[Messages]) -> list[Generation]:
        batch = list(messages_batch)
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

    async def _generate_all(self, batch: list[Messages]) -> list[Generation]:
        semaphore = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        headers = {"Authorization": f"Bearer {self.api_key}"}
        async with httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout_s, limits=limits,
                                     headers=headers, transport=self.transport) as client:
            with tqdm(total=len(batch), desc="grader (openai)", disable=not self.progress, leave=False) as bar:
                async def run(messages: Messages) -> Generation:
                    async with semaphore:
                        generation = await self._request(client, messages)
                    bar.update(1)
                    return generation

                return list(await asyncio.gather(*(run(m) for m in batch)))

    async def _request(self, client: httpx.AsyncClient, messages: Messages) -> Generation:
        payload = {"model": self.model, "messages": messages, "temperature": self.temperature,
                   "max_tokens": self.max_tokens, "seed": self.seed, **self.extra_body}
        error = "not attempted"
        start = time.perf_counter()
        for _ in range(self.retries + 1):
            start = time.perf_counter()
            try:
                async with asyncio.timeout(self.timeout_s):
                    response = await client.post("/chat/completions", json=payload)
                if response.status_code != 200:
                    error = f"HTTP {response.status_code}: {response.text[:300]}"
                    continue
                return self._parse_response(response.json(), time.perf_counter() - start)
            except TimeoutError:
                error = f"timeout after {self.timeout_s:g}s"
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
                error = _error_text(exc)
        return Generation(None, None, None, time.perf_counter() - start, error)

    @staticmethod
    def _parse_response(data: dict[str, Any], latency_s: float) -> Generation:
        message = data["choices"][0]["message"]
        content = message.get("content")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning:
            closed = content is not None
            content = f"<think>{reasoning}{'</think>' if closed else ''}{content or ''}"
        if content is None:
            return Generation(None, None, None, latency_s, f"no message content (finish_reason={data['choices'][0].get('finish_reason')})")
        usage = data.get("usage") or {}
        return Generation(content, usage.get("prompt_tokens"), usage.get("completion_tokens"), latency_s)


# --------------------------------------------------------------------------- vllm


class VLLMBackend:
    """In-process vLLM batch generation with the paper's Qwen3 settings.

    vLLM is imported and the model loaded on the first ``generate`` call, so ``model_key`` (and
    therefore cached scores) is usable on machines without vLLM or CUDA. Per-request latency is
    the batch's wall time divided evenly: vLLM schedules the batch as a whole.
    """

    def __init__(self, model: str = "Qwen/Qwen3-14B-AWQ", *, revision: str = "unpinned", max_model_len: int = 8192,
                 max_tokens: int = 6144, temperature: float = 0.0, seed: int = 0, enable_thinking: bool = True,
                 llm_kwargs: dict[str, Any] | None = None) -> None:
        self.model = model
        self.revision = revision
        self.max_model_len = max_model_len
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.enable_thinking = enable_thinking
        self.llm_kwargs = dict(llm_kwargs or {})
        self._llm: Any = None
        self._vllm: Any = None

    @property
    def model_key(self) -> str:
        settings = {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed,
                    "max_model_len": self.max_model_len, "enable_thinking": self.enable_thinking}
        return f"vllm:{self.model}@{self.revision}|{_settings_key(settings)}"

    def _ensure_llm(self) -> Any:
        if self._llm is not None:
            return self._llm
        try:
            import vllm
        except ImportError as exc:
            raise BackendUnavailable(f"vllm backend needs the 'vllm' package (pip install vllm): {exc}") from exc
        try:
            import torch
        except ImportError as exc:
            raise BackendUnavailable(f"vllm backend needs torch with CUDA: {exc}") from exc
        if not torch.cuda.is_available():
            raise BackendUnavailable("vllm backend needs a CUDA device; torch.cuda.is_available() is False")
        kwargs = {"revision": None if self.revision == "unpinned" else self.revision, **self.llm_kwargs}
        self._vllm = vllm
        self._llm = vllm.LLM(model=self.model, max_model_len=self.max_model_len, seed=self.seed, **kwargs)
        return self._llm

    def generate(self, messages_batch: Sequence[Messages]) -> list[Generation]:
        llm = self._ensure_llm()
        batch = list(messages_batch)
        if not batch:
            return []
        params = self._vllm.SamplingParams(temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed)
        start = time.perf_counter()
        try:
            outputs = llm.chat(batch, sampling_params=params, use_tqdm=True,
                               chat_template_kwargs={"enable_thinking": self.enable_thinking})
        except Exception as exc:  # one failed batch must not lose the run: every input becomes unavailable
            share = (time.perf_counter() - start) / len(batch)
            return [Generation(None, None, None, share, _error_text(exc)) for _ in batch]
        share = (time.perf_counter() - start) / len(batch)
        results = []
        for out in outputs:
            completion = out.outputs[0]
            results.append(Generation(completion.text, len(out.prompt_token_ids or []), len(completion.token_ids), share))
        return results


# --------------------------------------------------------------------------- llama.cpp


class LlamaCppBackend:
    """In-process llama-cpp-python on a GGUF file: greedy, seeded, one request at a time.

    llama.cpp keeps the KV cache of the previous prompt and re-evaluates only from the first
    differing token. The grader's prompt puts the query before the passage, so sorting a batch by
    its messages makes each query's window share the system+query prefix; ``reuse_prefix=False``
    clears the cache before every request (the measured baseline). The context is sized to the
    longest prompt seen plus ``max_tokens`` (rounded up to 256 tokens) and grown on demand.
    ``stop`` (e.g. ``["\n"]``) ends a non-thinking model's reply at its first line; it is part of
    ``model_key`` because it changes the text the parser sees.
    """

    CONTEXT_STEP = 256
    TEMPLATE_MARGIN = 64

    def __init__(self, model_path: str | Path, *, revision: str | None = None, max_tokens: int = 8,
                 temperature: float = 0.0, seed: int = 0, n_threads: int | None = None,
                 n_ctx: int | None = None, reuse_prefix: bool = True, stop: Sequence[str] = (),
                 progress: bool = False) -> None:
        self.model_path = Path(model_path)
        self.max_tokens = max_tokens
        self.stop = list(stop)
        self.temperature = temperature
        self.seed = seed
        self.n_threads = n_threads or os.cpu_count() or 1
        self.fixed_n_ctx = n_ctx
        self.reuse_prefix = reuse_prefix
        self.progress = progress
        self._revision = revision
        self._llm: Any = None
        self._vocab: Any = None
        self._n_ctx = 0

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
        settings = {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed, "stop": self.stop}
        return f"llamacpp:{self.model_path.name}@sha256:{self.revision[:16]}|{_settings_key(settings)}"

    @staticmethod
    def _import_llama() -> Any:
        try:
            import llama_cpp
        except ImportError as exc:
            raise BackendUnavailable(
                f"llamacpp backend needs llama-cpp-python (pip install llama-cpp-python): {exc}") from exc
        return llama_cpp

    def _load(self, n_ctx: int, vocab_only: bool = False) -> Any:
        llama_cpp = self._import_llama()
        if not self.model_path.is_file():
            raise BackendUnavailable(f"llamacpp backend: model file not found: {self.model_path}")
        return llama_cpp.Llama(model_path=str(self.model_path), n_ctx=n_ctx, n_threads=self.n_threads,
                               n_threads_batch=self.n_threads, seed=self.seed, vocab_only=vocab_only,
                               verbose=False)

    def _context_needed(self, batch: Sequence[Messages]) -> int:
        if self.fixed_n_ctx:
            return self.fixed_n_ctx
        if self._vocab is None:
            self._vocab = self._load(self.CONTEXT_STEP, vocab_only=True)  # llama.cpp refuses n_ctx=0 here
        longest = max(len(self._vocab.tokenize("\n".join(m["content"] for m in msgs).encode("utf-8"), add_bos=True))
                      for msgs in batch)
        need = longest + self.TEMPLATE_MARGIN + self.max_tokens
        return -(-need // self.CONTEXT_STEP) * self.CONTEXT_STEP

    def load(self, batch: Sequence[Messages]) -> Any:
        """The loaded ``llama_cpp.Llama``, with a context large enough for every chat in ``batch``."""
        need = self._context_needed(batch)
        if self._llm is None or need > self._n_ctx:
            if self._llm is not None:
                self._llm.close()  # release the old context before allocating a larger one
            self._llm = self._load(need)
            self._n_ctx = need
        return self._llm

    def generate(self, messages_batch: Sequence[Messages]) -> list[Generation]:
        batch = list(messages_batch)
        if not batch:
            return []
        llm = self.load(batch)
        order = sorted(range(len(batch)), key=lambda i: [(m["role"], m["content"]) for m in batch[i]]) \
            if self.reuse_prefix else range(len(batch))
        results: list[Generation | None] = [None] * len(batch)
        for i in tqdm(order, desc="grader (llama.cpp)", disable=not self.progress, leave=False):
            results[i] = self._one(llm, batch[i])
        return [r for r in results if r is not None]

    def _one(self, llm: Any, messages: Messages) -> Generation:
        if not self.reuse_prefix:
            llm.reset()
        start = time.perf_counter()
        try:
            out = llm.create_chat_completion(messages=messages, temperature=self.temperature,
                                             max_tokens=self.max_tokens, seed=self.seed, stop=self.stop or None)
        except Exception as exc:  # e.g. a prompt longer than the context: this input is unavailable, not the run
            return Generation(None, None, None, time.perf_counter() - start, _error_text(exc))
        latency = time.perf_counter() - start
        usage = out.get("usage") or {}
        text = out["choices"][0]["message"].get("content")
        if text is None:
            return Generation(None, None, None, latency, "no message content")
        return Generation(text, usage.get("prompt_tokens"), usage.get("completion_tokens"), latency)


BACKENDS = {"openai": OpenAIBackend, "vllm": VLLMBackend, "llamacpp": LlamaCppBackend}


def make_backend(kind: str, **kwargs: Any) -> LLMBackend:
    """Build a backend by name (``openai``, ``vllm``, ``llamacpp``) from keyword settings."""
    try:
        cls = BACKENDS[kind]
    except KeyError:
        raise ValueError(f"unknown LLM backend {kind!r}; expected one of {sorted(BACKENDS)}") from None
    return cls(**kwargs)
