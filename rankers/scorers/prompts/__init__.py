"""Versioned grading prompts, rendered as chat messages with the query and passage as fenced DATA.

The prompt text lives in ``<version>.txt`` beside this module so that a change of wording is a
reviewed file change; its version name and content digest enter every grader cache key.
Rendering substitutes the two slots in one pass, so a passage can never inject into the
template (a passage containing ``{{QUERY}}`` stays inside its slot), and :func:`escape_data`
neutralizes the fence tags inside data, so a passage cannot close its own block. For servers,
chat-control syntax in data is neutralized too (:func:`escape_control`, from
:mod:`rankers.scorers.prompts.hostile`: the one function every server-bound prompt uses).

The slot order is the template's: ``grade_v1`` puts the query first, ``grade_v2`` the passage
first, so that grades of one passage under several queries share the longest prompt prefix
(see :mod:`rankers.scorers.grader` for the measurement behind that choice).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fixtures.identity import text_digest
from rankers.scorers.prompts.hostile import escape_control

PROMPT_DIR = Path(__file__).resolve().parent
SLOTS = ("QUERY", "PASSAGE")
_SLOT_RE = re.compile(r"\{\{(QUERY|PASSAGE)\}\}")
#: Anything that could read as a fence tag inside data: ``<passage>``, ``</passage x=1>``,
#: ``< /passage>``, ``</PASSAGE\n>`` and a bare ``</passage`` whose ``>`` never comes. The
#: opening ``<`` becomes ``&lt;``; the rest of the text is left as it was.
_TAG_RE = re.compile(r"<(?=\s*/?\s*(?:query|passage)(?![A-Za-z0-9_\-]))", re.IGNORECASE)
_SECTION_RE = re.compile(r"^\[(system|user)\]\s*$", re.MULTILINE)

Messages = list[dict[str, str]]


def cut_slots(data: Mapping[str, str], budget: Callable[[str], int],
              truncate: Callable[[str, int], str]) -> tuple[dict[str, str], bool]:
    """Each slot's text with control syntax neutralized and cut to its budget by ``truncate`` (in the backend's token
    unit), and whether any slot was cut."""
    values, truncated = {}, False
    for slot, text in data.items():
        text = escape_control(text)
        cut = truncate(text, budget(slot))
        truncated |= cut != text
        values[slot] = cut
    return values, truncated


class Versioned:
    """A prompt file's identity in cache keys: its version and its content digest."""

    version: str
    sha256: str

    @property
    def key(self) -> str:
        """Version plus content digest: an edited file without a version bump still changes cache keys."""
        return f"{self.version}:{self.sha256[:12]}"


@dataclass(frozen=True)
class PromptTemplate(Versioned):
    """One prompt version: a system message and a user template with one query and one passage slot."""

    version: str
    system: str
    user: str
    sha256: str

    @property
    def slot_order(self) -> tuple[str, str]:
        """The data slots in prompt order, e.g. ``("PASSAGE", "QUERY")``."""
        first, second = _SLOT_RE.findall(self.user)
        return first, second

    def pieces(self) -> list[tuple[str, str | None]]:
        """The user template as ``(text, None)`` template pieces and ``("", slot)`` data slots, in order."""
        out: list[tuple[str, str | None]] = []
        pos = 0
        for match in _SLOT_RE.finditer(self.user):
            out.append((self.user[pos:match.start()], None))
            out.append(("", match.group(1)))
            pos = match.end()
        out.append((self.user[pos:], None))
        return out

    def render(self, query: str, passage: str) -> Messages:
        """Chat messages for one (query, passage); data is escaped so the fences stay unique."""
        return self.render_data(escape_data(query), escape_data(passage))

    def render_data(self, query: str, passage: str) -> Messages:
        """Chat messages from data that is already escaped (and possibly truncated) by the caller."""
        values = {"QUERY": query, "PASSAGE": passage}
        user = _SLOT_RE.sub(lambda m: values[m.group(1)], self.user)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


def escape_data(text: str) -> str:
    """Neutralize the template's fence tags inside data so a passage cannot open or close a block."""
    return _TAG_RE.sub("&lt;", text)


def parse_template(version: str, text: str, source: str = "<string>") -> PromptTemplate:
    """Split a prompt file into its [system] and [user] sections and check the slots."""
    sections = _SECTION_RE.split(text)
    # sections: [preamble, name1, body1, name2, body2]
    if len(sections) != 5 or sections[1] != "system" or sections[3] != "user":
        raise ValueError(f"{source}: expected a [system] section followed by a [user] section")
    preamble = [ln for ln in sections[0].splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if preamble:
        raise ValueError(f"{source}: unexpected text before [system]: {preamble[0]!r}")
    system, user = sections[2].strip("\n"), sections[4].strip("\n")
    if _SLOT_RE.search(system):
        raise ValueError(f"{source}: the [system] section must not contain data slots")
    found = _SLOT_RE.findall(user)
    if sorted(found) != sorted(SLOTS):
        raise ValueError(f"{source}: [user] must contain {{{{QUERY}}}} and {{{{PASSAGE}}}} exactly once each, "
                         f"found {found}")
    return PromptTemplate(version, system, user, text_digest(text))


def prompt_file(version: str) -> Path:
    """``<version>.txt`` in the prompt folder; a missing version names the ones there are."""
    path = PROMPT_DIR / f"{version}.txt"
    if not path.is_file():
        available = sorted(p.stem for p in PROMPT_DIR.glob("*.txt"))
        raise FileNotFoundError(f"no prompt {version!r} at {path}; available: {available}")
    return path


@lru_cache(maxsize=None)
def load_prompt(version: str) -> PromptTemplate:
    """Load ``<version>.txt`` from the prompt folder."""
    path = prompt_file(version)
    return parse_template(version, path.read_text(encoding="utf-8"), str(path))


#: Token budgets of the data slots (``docs/protocol.md#grader``): NevIR passages run to a few hundred
#: tokens and queries to a few dozen, so these caps only bite on hostile or broken text; a
#: 12k-token passage is cut to its first 1,024 tokens and counted as truncated.
PASSAGE_TOKENS = 1024
QUERY_TOKENS = 256


@dataclass(frozen=True)
class GradePrompt:
    """One judgment's prompt: the template, the untrusted data and each slot's token budget.

    Backends turn it into model input their own way: llama.cpp tokenizes the escaped data as
    plain text and cuts it to the budget in model tokens; a server backend sends chat messages
    whose data is cut by :meth:`server_messages` (see the backend for its unit of truncation).
    """

    template: PromptTemplate
    query: str
    passage: str
    query_tokens: int = QUERY_TOKENS
    passage_tokens: int = PASSAGE_TOKENS

    def data(self) -> dict[str, str]:
        """The escaped data per slot (fence tags neutralized), not yet truncated."""
        return {"QUERY": escape_data(self.query), "PASSAGE": escape_data(self.passage)}

    def budget(self, slot: str) -> int:
        return {"QUERY": self.query_tokens, "PASSAGE": self.passage_tokens}[slot]

    def server_messages(self, truncate: Callable[[str, int], str]) -> tuple[Messages, bool]:
        """Chat messages for a server, data escaped (fences and control syntax) and cut by ``truncate``.

        ``truncate(text, budget)`` returns the text cut to ``budget`` tokens in the backend's unit;
        the flag says whether any slot was cut.
        """
        values, truncated = cut_slots(self.data(), self.budget, truncate)
        return self.template.render_data(values["QUERY"], values["PASSAGE"]), truncated
