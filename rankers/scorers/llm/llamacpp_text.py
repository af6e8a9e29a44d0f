"""Text around llama.cpp: a GGUF's chat template rendered, tokens shown as text, answers read from logits (with what
evaluating their prompt gave besides them)."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rankers.scorers.llm.generation import Generation


@dataclass(frozen=True)
class Decoded:
    """What evaluating one prompt gave besides its logits: its length, whether data was cut, the tokens evaluated
    now (the rest came from the cached prefix) and when it started."""

    prompt_tokens: int
    cut: bool
    processed: int
    started: float

    def seconds(self) -> float:
        return time.perf_counter() - self.started


def each_prompt(prompts: Sequence[Any], one: Callable[[Any], Generation],
          done: Callable[[int, Generation], None] | None) -> list[Generation]:
    """``one`` over the prompts in order, handing each result to ``done`` as soon as it exists."""
    out = []
    for i, prompt in enumerate(prompts):
        out.append(one(prompt))
        if done is not None:
            done(i, out[-1])
    return out


def answer_probs(logits: np.ndarray, ids: Sequence[int]) -> tuple[np.ndarray, float]:
    """The answer tokens' probabilities renormalized among themselves, and the share of the whole next-token
    distribution they hold (how much the model meant to answer at all)."""
    chosen = logits[list(ids)].astype(np.float64)
    probs = np.exp(chosen - chosen.max())
    probs /= probs.sum()
    full = logits.astype(np.float64)
    top = full.max()
    return probs, float(np.exp(chosen - top).sum() / np.exp(full - top).sum())


def token_text(llm: Any, token: int) -> str:
    return llm.detokenize([token], special=True).decode("utf-8", errors="replace") if token >= 0 else ""


def render_chat_template(source: str, messages: list[dict[str, str]], **special: str) -> str:
    """A GGUF chat template rendered as Hugging Face renders it (sandboxed Jinja, generation prompt on)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # optional: ships with llama-cpp-python

    def raise_exception(message: str) -> None:
        raise ValueError(f"chat template: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source).render(messages=messages, add_generation_prompt=True, **special)


def split_once(text: str, mark: str, model: str) -> tuple[str, str]:
    if text.count(mark) != 1:
        raise ValueError(f"{model}: the chat template did not keep the prompt's data slot exactly once")
    before, after = text.split(mark)
    return before, after
