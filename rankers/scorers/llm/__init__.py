"""The grader's LLM backends, built by name with the shared generation settings.

- ``llamacpp``: in-process llama-cpp-python on a GGUF file, the embedded CPU default
  (``llamacpp_backend``): it reads the logits of the five grade tokens instead of generating;
- ``vllm``: in-process vLLM on a GPU (``vllm_backend``; the paper: Qwen3-14B-AWQ, thinking mode,
  temperature 0, 8,192-token context, 6,144-token output cap);
- ``openai``: any OpenAI-compatible server (``openai_compatible``).

:data:`BACKENDS` is the one list of backend names: the LLM kinds check declarations against it
(``rankers.kinds.llm``). Importing this package loads no backend module: each runtime's module is imported
when a backend of that name is built, and its heavy library only when it first generates.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rankers.scorers.llm.generation import GenerationSettings, LLMBackend


def _llamacpp(model: str | Path, settings: GenerationSettings | None, **options: Any) -> LLMBackend:
    from rankers.scorers.llm.llamacpp_backend import LlamaCppBackend  # this runtime's module only when declared

    return LlamaCppBackend(model, settings=settings, **options)


def _vllm(model: str | Path, settings: GenerationSettings | None, **options: Any) -> LLMBackend:
    from rankers.scorers.llm.vllm_backend import VLLMBackend  # this runtime's module only when declared

    return VLLMBackend(str(model), settings=settings, **options)


def _openai(model: str | Path, settings: GenerationSettings | None, **options: Any) -> LLMBackend:
    from rankers.scorers.llm.openai_compatible import OpenAIBackend  # this runtime's module only when declared

    if "base_url" not in options:
        raise ValueError("the openai grader backend needs base_url (an OpenAI-compatible /v1 endpoint)")
    return OpenAIBackend(options.pop("base_url"), str(model), settings=settings, **options)


#: Backend name -> its builder, in the order a declaration's error message lists them.
BACKENDS: dict[str, Callable[..., LLMBackend]] = {"llamacpp": _llamacpp, "vllm": _vllm, "openai": _openai}


def make_backend(backend: str, *, model: str | Path, settings: GenerationSettings | None = None,
                 **backend_options: Any) -> LLMBackend:
    """Build a backend by name with the shared settings.

    ``model`` is the served model id (``openai``), the Hugging Face name (``vllm``) or the GGUF
    path (``llamacpp``). Options: ``openai`` — ``base_url`` (required), ``revision``, ``retries``,
    ``extra_body``, ``api_key``; ``vllm`` — ``revision``, ``max_model_len``, ``llm_kwargs``;
    ``llamacpp`` — ``revision`` (the file's sha256), ``n_threads``, ``reuse_prefix``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown LLM backend {backend!r}; expected one of {sorted(BACKENDS)}")
    try:
        return BACKENDS[backend](model, settings, **backend_options)
    except TypeError as exc:  # an option the backend does not take
        raise ValueError(f"LLM backend {backend!r}: {exc}") from None
