"""What every LLM kind shares: the backend it names, the options that configure it, their checks and its build.

The grader (``llm_grader``), the listwise and the pairwise judges (``llm_listwise``, ``llm_pairwise``) each
declare a ``backend`` (one of :data:`BACKENDS`, the names ``rankers.scorers.llm`` builds), its ``model`` and,
for a server, its ``url`` and ``extra_body``; :class:`LLMBackendKind` checks those the same way for all three
and builds the declared backend with the grader's generation settings (``docs/protocol.md#grader``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankers.kinds.base import Context, DeclarationError, RankerDecl, RankerKind
from rankers.kinds.requirements import CUDA, Requirement, needs_module
from rankers.scorers.llm import BACKENDS as BACKEND_BUILDERS
from rankers.scorers.llm.generation import LLMBackend

_NUM = (int, float)
#: The LLM backends a declaration may name, in the order its error message lists them.
BACKENDS = tuple(BACKEND_BUILDERS)
#: Options that choose and configure the backend: its model, server and generation settings.
BACKEND_OPTIONS = {"backend": (str,), "model": (str,), "url": (str, list), "n_threads": (int,),
                   "max_model_len": (int,), "max_tokens": (int,), "thinking": (bool,), "temperature": _NUM,
                   "seed": (int,), "concurrency": (int,), "timeout_s": _NUM, "logprobs": (int,), "extra_body": (dict,)}
LLAMA_CPP = needs_module("llama_cpp", "llama-cpp-python", "the CPU grader was not set up; `bash .ci/setup` installs it")
VLLM = needs_module("vllm", "vllm", "pip install -e \".[gpu]\" on a GPU machine")


def check_backend(options: Mapping[str, Any], where: str, backends: tuple[str, ...] = BACKENDS) -> None:
    """``backend`` is one of ``backends``, and a server (``openai``) has its ``url``."""
    if options["backend"] not in backends:
        raise DeclarationError(f"{where}: backend must be one of {list(backends)}, got {options['backend']!r}")
    if options["backend"] == "openai" and not options.get("url"):
        raise DeclarationError(f"{where}: backend 'openai' needs 'url' (an OpenAI-compatible /v1 base URL)")


def check_server(options: Mapping[str, Any], where: str, what: str, url_needs_server: bool) -> None:
    """``extra_body`` only for a server; ``url`` only for a server too when ``url_needs_server``; a declared
    ``url`` (or list of them) well-formed, named ``what`` in its message."""
    if options["backend"] != "openai" and "extra_body" in options:
        raise DeclarationError(f"{where}: 'extra_body' applies to backend 'openai' only (backend is "
                               f"{options['backend']!r})")
    if url_needs_server and options["backend"] != "openai" and options.get("url"):
        raise DeclarationError(f"{where}: 'url' applies to backend 'openai' only (backend is "
                               f"{options['backend']!r})")
    if options.get("url"):
        from rankers.scorers.http import base_urls  # http client only when a server is declared

        try:
            base_urls(options["url"], what)
        except ValueError as exc:
            raise DeclarationError(f"{where}: {exc}") from None


class LLMBackendKind(RankerKind):
    """A kind whose judgments an LLM backend makes: what the backend needs installed, and how it is built."""

    required = ("backend", "model")

    def requirements(self, options: Mapping[str, Any]) -> tuple[Requirement, ...]:
        return {"llamacpp": (LLAMA_CPP,), "vllm": (VLLM, CUDA)}.get(options.get("backend"), ())

    @staticmethod
    def make_backend(decl: RankerDecl, ctx: Context, options: dict[str, Any]) -> LLMBackend:
        """The backend ``options`` declare (``backend``, ``model``, ``url`` and the backend's own options) with the
        generation settings among them: an embedded GGUF joined from its parts (``llamacpp``), a server's served
        model name (``openai``), or a hub name or local folder resolved for ``decl`` (``vllm``)."""
        from fixtures.models import require_model  # resolves hub names; no model is loaded here
        from rankers.scorers.llm import make_backend  # runtimes load lazily inside
        from rankers.scorers.llm.generation import GenerationSettings  # settings record, no runtime

        settings, options = GenerationSettings.split_options(options)
        backend, model, url = options.pop("backend"), str(options.pop("model")), options.pop("url", None)
        if backend == "llamacpp":
            from fixtures.gguf import gguf_model  # joins the GGUF parts on first use

            gguf = gguf_model(model.removeprefix("builtin:"), ctx.cache())
            return make_backend(backend, model=gguf.path, revision=gguf.sha256, settings=settings, **options)
        if backend == "openai":  # the profile check made sure it has a url
            return make_backend(backend, model=model, base_url=url, settings=settings, **options)
        return make_backend(backend, model=require_model(model, decl.name), settings=settings, **options)
