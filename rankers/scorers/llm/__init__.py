"""The grader's LLM backends, built by name with the shared generation settings.

- ``openai``: any OpenAI-compatible server (``openai_compatible``);
- ``vllm``: in-process vLLM on a GPU (``vllm_backend``; the paper: Qwen3-14B-AWQ, thinking mode,
  temperature 0, 8,192-token context, 6,144-token output cap);
- ``llamacpp``: in-process llama-cpp-python on a GGUF file, the embedded CPU default
  (``llamacpp_backend``): it reads the logits of the five grade tokens instead of generating.

Each runtime imports its heavy library only when it first generates.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rankers.scorers.llm.generation import GenerationSettings, LLMBackend
from rankers.scorers.llm.llamacpp_backend import LlamaCppBackend
from rankers.scorers.llm.openai_compatible import OpenAIBackend
from rankers.scorers.llm.vllm_backend import VLLMBackend

BACKENDS = {"openai": OpenAIBackend, "vllm": VLLMBackend, "llamacpp": LlamaCppBackend}


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
        if backend == "openai":
            if "base_url" not in backend_options:
                raise ValueError("the openai grader backend needs base_url (an OpenAI-compatible /v1 endpoint)")
            return OpenAIBackend(backend_options.pop("base_url"), str(model), settings=settings, **backend_options)
        if backend == "vllm":
            return VLLMBackend(str(model), settings=settings, **backend_options)
        return LlamaCppBackend(model, settings=settings, **backend_options)
    except TypeError as exc:  # an option the backend does not take
        raise ValueError(f"LLM backend {backend!r}: {exc}") from None
