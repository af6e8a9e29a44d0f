"""An LLM backend whose replies a test writes: it answers each prompt from the prompt's own data.

It follows the generating backends' contract (``generate`` of prompts with ``server_messages``) so the
listwise and pairwise judges run their real prompt building, parsing and repairs on hand-written replies.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from rankers.scorers.llm.generation import Generation, GenerationSettings
from rankers.scorers.prompts.slots import SlotPrompt


class ScriptedBackend:
    """``reply(query, passages) -> text or None`` (None: a failed request); counts what it was asked."""

    chunk_size = 4

    def __init__(self, reply: Callable[[str, list[str]], str | None], name: str = "scripted") -> None:
        self.reply = reply
        self.settings = GenerationSettings(thinking=False, max_tokens=64)
        self.name = name
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    @property
    def model_key(self) -> str:
        return f"scripted:{self.name}|{self.settings.key()}"

    def generate(self, prompts: Sequence[SlotPrompt]) -> list[Generation]:
        out = []
        for prompt in prompts:
            data = dict(prompt.data)
            passages = [text for slot, text in prompt.data if slot != "QUERY"]
            self.asked.append((data["QUERY"], tuple(passages)))
            text = self.reply(data["QUERY"], passages)
            out.append(Generation(text, 100, 5, 0.01) if text is not None
                       else Generation(None, None, None, 0.01, "connection refused"))
        return out
