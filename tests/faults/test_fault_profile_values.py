"""Failure 12: a NUL byte in a ranker name passed validation, then failed far later with "embedded null byte"
without naming the declaration; ``order = nan`` was accepted.

Every name (ranker, sample, claim) and label is refused at profile load when it holds a control character, and
every number (order, timeout, fusion weights, gates, pins) when it is NaN or infinite: one message naming the
file, the table and the key, before any work.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.profile import load_profile
from harness.profile_records import ProfileError

HEAD = '[profile]\nname = "hostile"\nextends = "embedded"\n'
CASES = {
    "NUL in a ranker name": ('[rankers."bad\\u0000name"]\nkind = "fusion"\n', "[rankers]", "bad\\x00name"),
    "escape in a ranker name": ('[rankers."e\\u001b[31m"]\nkind = "fusion"\n', "[rankers]", "e\\x1b[31m"),
    "NUL in a sample name": ('[samples."s\\u0000"]\ndirections = 4\n', "[samples]", "s\\x00"),
    "NUL in a claim name": ('[claims."h\\u0000"]\nfamily = "H1"\n', "[claims]", "h\\x00"),
    "bell in a label": ('[rankers.f2]\nkind = "fusion"\nlabel = "fusion\\u0007"\n', "[rankers.f2]", "'label'"),
    "line break in a label": ('[rankers.f2]\nkind = "fusion"\nlabel = "two\\nlines"\n', "[rankers.f2]", "'label'"),
    "bidi override in a label": ('[rankers.f2]\nkind = "fusion"\nlabel = "a\\u202eb"\n', "[rankers.f2]",
                                 "'label'"),
    "order = nan": ('[rankers.f2]\nkind = "fusion"\norder = nan\n', "[rankers.f2]", "'order'"),
    "timeout_s = inf": ('[rankers.r]\nkind = "rerank_api"\nurl = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
                        'timeout_s = inf\n', "[rankers.r]", "'timeout_s'"),
    "fusion weight -inf": ('[rankers.fusion]\nweights = { dense = -inf, sparse = 0.3 }\n',
                           "[rankers.fusion.weights]", "'dense'"),
    "gate nan": ('[gates]\nfallback_pct_max = nan\n', "[gates]", "'fallback_pct_max'"),
    "pin nan": ('[pins.full.test]\nfusion = { strict_pct = nan }\n', "[pins.full.test.fusion]", "'strict_pct'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_control_characters_and_non_finite_numbers_are_refused_at_load(tmp_path: Path, case: str) -> None:
    body, table, key = CASES[case]
    path = tmp_path / "hostile.toml"
    path.write_text(HEAD + body, encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    message = str(info.value)
    assert message.startswith(f"{path} {table}:"), message  # the file and the table ...
    assert key in message, message  # ... and the key or name
    assert re.search(r"control character U\+[0-9A-F]{4}|finite number", message), message


def test_prose_may_break_lines(tmp_path: Path) -> None:
    path = tmp_path / "prose.toml"
    path.write_text('[profile]\nname = "prose"\nextends = "embedded"\ndescription = """two\n\tlines"""\n',
                    encoding="utf-8")
    assert load_profile(str(path)).description == "two\n\tlines"
