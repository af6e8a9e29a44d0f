"""The README's table of the study's rankers names exactly the rankers the embedded profile declares, and own-data's
are its first four: a renamed or added ranker cannot leave the README behind."""
from __future__ import annotations

import re
import tomllib

from fixtures.settings import PROJECT_ROOT

PROFILES = PROJECT_ROOT / "specs" / "profiles"


def _table_names() -> list[str]:
    text = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("**The study's rankers**", 1)[1].split("\n\n", 2)[1]
    return [name for line in table.splitlines()[2:] for name in re.findall(r"`([a-z0-9_]+)`", line.split("|")[1])]


def test_the_readme_names_every_ranker_of_the_embedded_profile_in_its_order() -> None:
    embedded = tomllib.loads((PROFILES / "embedded.toml").read_text(encoding="utf-8"))["rankers"]
    own = tomllib.loads((PROFILES / "own-data.toml").read_text(encoding="utf-8"))["rankers"]
    assert _table_names() == list(embedded)
    assert list(own) == _table_names()[:4]
