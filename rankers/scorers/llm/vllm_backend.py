"""The grader in-process on vLLM (GPU), by default with the paper's Qwen3 settings."""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fixtures import progress
from rankers.scorers.base import DeclaredKey
from rankers.scorers.causes import exception_cause
from rankers.scorers.http import error_text
from rankers.scorers.llm.generation import BackendUnavailable, Generation, GenerationSettings, TokenLogprob
from rankers.scorers.prompts import GradePrompt
from rankers.scorers.prompts.hostile import ESCAPE_VERSION


class VLLMBackend(DeclaredKey):
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

    def key_parts(self) -> dict[str, str]:
        return {"engine": f"vllm:{self.model}@{self.revision}", "settings": self.settings.key(),
                "max_model_len": f"max_model_len={self.max_model_len}", "cut": "cut=tokens",
                "escape": f"escape={ESCAPE_VERSION}"}

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
            with progress.waiting():  # one batch in flight: a stage's heartbeat says how long it has run
                outputs = llm.chat([m for m, _ in prepared], sampling_params=params, use_tqdm=False,
                                   chat_template_kwargs=template_kwargs)
        except Exception as exc:  # one failed batch must not lose the run: every input becomes unavailable
            share = (time.perf_counter() - start) / len(prompts)
            return [Generation(None, None, None, share, error_text(exc), truncated=t, cause=exception_cause(exc))
                    for _, t in prepared]
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
