"""Versioned grading prompts, rendered as chat messages with the query and passage as delimited DATA.

The prompt text lives in ``<version>.txt`` beside this module so that a change of wording is a
reviewed file change; its version name and content digest enter every grader cache key.
Rendering substitutes the two slots in one pass, so a passage can never inject into the
template (a passage containing ``{{QUERY}}`` or ``</passage>`` stays inside its slot).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PROMPT_DIR = Path(__file__).resolve().parent
SLOTS = ("QUERY", "PASSAGE")
_SLOT_RE = re.compile(r"\{\{(QUERY|PASSAGE)\}\}")
#: The delimiter tags of the template; occurrences inside data are neutralized ("<" -> "&lt;").
_TAG_RE = re.compile(r"<(/?\s*(?:query|passage)\s*)>", re.IGNORECASE)
_SECTION_RE = re.compile(r"^\[(system|user)\]\s*$", re.MULTILINE)

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt version: a system message and a user template with a query slot before a passage slot."""

    version: str
    system: str
    user: str
    sha256: str

    @property
    def key(self) -> str:
        """Version plus content digest: an edited file without a version bump still changes cache keys."""
        return f"{self.version}:{self.sha256[:12]}"

    def render(self, query: str, passage: str) -> Messages:
        """Chat messages for one (query, passage); data is escaped so the delimiters stay unique."""
        values = {"QUERY": escape_data(query), "PASSAGE": escape_data(passage)}
        user = _SLOT_RE.sub(lambda m: values[m.group(1)], self.user)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


def escape_data(text: str) -> str:
    """Neutralize the template's own tags inside data so a passage cannot close its slot early."""
    return _TAG_RE.sub(r"&lt;\1>", text)


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
    if found != list(SLOTS):
        raise ValueError(f"{source}: [user] must contain {{{{QUERY}}}} then {{{{PASSAGE}}}} exactly once each, found {found}")
    return PromptTemplate(version, system, user, hashlib.sha256(text.encode("utf-8")).hexdigest())


@lru_cache(maxsize=None)
def load_prompt(version: str) -> PromptTemplate:
    """Load ``<version>.txt`` from the prompt folder."""
    path = PROMPT_DIR / f"{version}.txt"
    if not path.is_file():
        available = sorted(p.stem for p in PROMPT_DIR.glob("*.txt"))
        raise FileNotFoundError(f"no prompt {version!r} at {path}; available: {available}")
    return parse_template(version, path.read_text(encoding="utf-8"), str(path))
