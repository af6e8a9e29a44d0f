"""Prompts with several data slots: a query and a list of passages (listwise) or two passages (pairwise).

A template file (``<version>.txt`` beside this module) has a ``[system]`` and a ``[user]`` section like
the grader's, and a list template also an ``[item]`` section, the text of one passage in the list.
Slots: ``{{QUERY}}`` (any number of times: RankGPT repeats the query after the list), ``{{PASSAGE_A}}``
and ``{{PASSAGE_B}}`` (pairwise), or ``{{ITEMS}}`` once in ``[user]`` with ``{{ID}}`` and
``{{PASSAGE}}`` once each in ``[item]``, and ``{{COUNT}}`` (listwise). ``ID`` and ``COUNT`` are trusted
text made here (the identifiers 1..n); the query and passages are untrusted data: fenced by the
template's tags, with fence tags inside data neutralized (``escape_data``), substituted in one pass
(a passage containing ``{{QUERY}}`` stays text), cut to a token budget per slot, and, for a server
that tokenizes with special tokens on, chat-control syntax neutralized (``escape_control``).

A rendered prompt is a :class:`SlotPrompt`: the system text and the user message as a sequence of
trusted pieces and data slots. A server backend sends it as chat messages (``server_messages``, the
same call the grader's prompts answer); the llama.cpp backend tokenizes trusted pieces with special
tokens and data as plain text, and evaluates the prompt in chunks cut at the data slots
(``LlamaCppBackend.slot_chunks``).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from fixtures.identity import text_digest
from rankers.scorers.prompts import Messages, Versioned, cut_slots, escape_data, prompt_file

_SECTION_RE = re.compile(r"^\[(system|user|item)\]\s*$", re.MULTILINE)
_SLOT_RE = re.compile(r"\{\{([A-Z_]+)\}\}")
#: Slots that carry untrusted data; everything else a template names is trusted text made here.
DATA_SLOTS = ("QUERY", "PASSAGE", "PASSAGE_A", "PASSAGE_B")
LIST_SLOTS = {"user": {"QUERY", "ITEMS", "COUNT"}, "item": {"ID", "PASSAGE"}}
PAIR_SLOTS = {"user": {"QUERY", "PASSAGE_A", "PASSAGE_B"}}

Piece = tuple[str, str | None]  # (trusted text, None) or ("", data slot name)


@dataclass(frozen=True)
class SlotPrompt:
    """One judgment's prompt: system text, the user message as pieces, the data per slot and its budget.

    ``pieces`` alternate trusted text ``(text, None)`` and data slots ``("", name)``; a slot may occur
    more than once (the query). ``data`` and ``budgets`` map slot names to the raw untrusted text and
    to its token budget.
    """

    template_key: str
    system: str
    pieces: tuple[Piece, ...]
    data: tuple[tuple[str, str], ...]
    budgets: tuple[tuple[str, int], ...]

    def layout(self) -> tuple:
        """Everything trusted in the prompt (what a backend may render once and reuse)."""
        return self.template_key, self.system, self.pieces

    def escaped(self) -> dict[str, str]:
        """Data per slot with fence tags neutralized, not yet cut."""
        return {slot: escape_data(text) for slot, text in self.data}

    def budget(self, slot: str) -> int:
        return dict(self.budgets)[slot]

    def server_messages(self, truncate: Callable[[str, int], str]) -> tuple[Messages, bool]:
        """Chat messages for a server (data escaped, control syntax neutralized, cut by ``truncate``) and
        whether any slot was cut."""
        values, truncated = cut_slots(self.escaped(), self.budget, truncate)
        user = "".join(text if slot is None else values[slot] for text, slot in self.pieces)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}], truncated


@dataclass(frozen=True)
class SlotTemplate(Versioned):
    """One prompt version of a listwise (``item`` set) or pairwise template."""

    version: str
    system: str
    user: str
    item: str | None
    sha256: str

    @property
    def is_list(self) -> bool:
        return self.item is not None

    def list_prompt(self, query: str, passages: Sequence[str], query_tokens: int,
                    passage_tokens: int) -> SlotPrompt:
        """The prompt for a list of passages, identified [1]..[n] in the given order."""
        if self.item is None:
            raise ValueError(f"prompt {self.version!r} is a pairwise template; it takes two passages")
        if not passages:
            raise ValueError("a list prompt needs at least one passage")
        items: list[Piece] = []
        for i in range(len(passages)):
            items += [*_pieces(self.item, {"ID": str(i + 1)}, {"PASSAGE": f"P{i + 1}"}), ("\n\n", None)]
        pieces = _pieces(self.user, {"COUNT": str(len(passages))}, {"QUERY": "QUERY"}, items=items)
        data = (("QUERY", query), *((f"P{i + 1}", p) for i, p in enumerate(passages)))
        budgets = (("QUERY", query_tokens), *((f"P{i + 1}", passage_tokens) for i in range(len(passages))))
        return SlotPrompt(self.key, self.system, _merge(pieces), data, budgets)

    def pair_prompt(self, query: str, first: str, second: str, query_tokens: int, passage_tokens: int) -> SlotPrompt:
        """The prompt comparing ``first`` (passage A) with ``second`` (passage B)."""
        if self.item is not None:
            raise ValueError(f"prompt {self.version!r} is a listwise template; it takes a list of passages")
        pieces = _pieces(self.user, {}, {"QUERY": "QUERY", "PASSAGE_A": "A", "PASSAGE_B": "B"})
        return SlotPrompt(self.key, self.system, _merge(pieces), (("QUERY", query), ("A", first), ("B", second)),
                          (("QUERY", query_tokens), ("A", passage_tokens), ("B", passage_tokens)))


def _pieces(text: str, trusted: dict[str, str], slots: dict[str, str], items: list[Piece] | None = None) -> list[Piece]:
    """``text`` as pieces: trusted values substituted, data slots named, ``{{ITEMS}}`` replaced by ``items``."""
    out: list[Piece] = []
    pos = 0
    for match in _SLOT_RE.finditer(text):
        out.append((text[pos:match.start()], None))
        name = match.group(1)
        if name in trusted:
            out.append((trusted[name], None))
        elif name in slots:
            out.append(("", slots[name]))
        elif name == "ITEMS" and items is not None:
            out += items
        else:  # parse_slot_template rules this out for shipped files
            raise ValueError(f"unexpected slot {{{{{name}}}}}")
        pos = match.end()
    out.append((text[pos:], None))
    return out


def _merge(pieces: list[Piece]) -> tuple[Piece, ...]:
    """Adjacent trusted pieces joined, empty ones dropped: one trusted piece between two slots."""
    out: list[Piece] = []
    for text, slot in pieces:
        if slot is None:
            if not text:
                continue
            if out and out[-1][1] is None:
                out[-1] = (out[-1][0] + text, None)
                continue
        out.append((text, slot))
    return tuple(out)


def parse_slot_template(version: str, text: str, source: str = "<string>") -> SlotTemplate:
    """Split a listwise or pairwise prompt file into its sections and check its slots."""
    parts = _SECTION_RE.split(text)
    preamble = [ln for ln in parts[0].splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if preamble:
        raise ValueError(f"{source}: unexpected text before [system]: {preamble[0]!r}")
    names = parts[1::2]
    sections = {name: body.strip("\n") for name, body in zip(names, parts[2::2])}
    if names not in (["system", "user"], ["system", "user", "item"]):
        raise ValueError(f"{source}: expected [system], [user] and, for a list prompt, [item] sections in that "
                         f"order; found {names}")
    if _SLOT_RE.search(sections["system"]):
        raise ValueError(f"{source}: the [system] section must not contain slots")
    rules = LIST_SLOTS if "item" in sections else PAIR_SLOTS
    for section, allowed in rules.items():
        found = _SLOT_RE.findall(sections[section])
        unknown = sorted(set(found) - allowed)
        if unknown:
            raise ValueError(f"{source}: [{section}] has unknown slots {unknown}; allowed: {sorted(allowed)}")
        once = allowed - {"QUERY", "COUNT", "ID"}
        wrong = sorted(s for s in once if found.count(s) != 1)
        if wrong or "QUERY" in allowed and "QUERY" not in found:
            raise ValueError(f"{source}: [{section}] must contain {sorted(once)} exactly once each"
                             f"{' and {{QUERY}} at least once' if 'QUERY' in allowed else ''}; found {found}")
    return SlotTemplate(version, sections["system"], sections["user"], sections.get("item"),
                        text_digest(text))


@lru_cache(maxsize=None)
def load_slot_template(version: str) -> SlotTemplate:
    """Load ``<version>.txt`` from the prompt folder as a listwise or pairwise template."""
    path = prompt_file(version)
    return parse_slot_template(version, path.read_text(encoding="utf-8"), str(path))
