"""A ``[data]`` set may declare its own reference rows (docs/reference-results.md): read and checked when the profile
is read, named by file, line and field when bad, carried into the manifest's dataset entry the report reads; NevIR's
reference is the paper's."""
from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.settings import PROJECT_ROOT
from harness.profile import load_profile
from harness.profile_records import ProfileError
from reports.paper import reference_rows

POLICY = PROJECT_ROOT / "examples" / "policy_pairs"
PROFILE = f'''[profile]
name = "own"
[data]
kind = "pairs"
pairs = "{POLICY / 'pairs.jsonl'}"
corpus = "{POLICY / 'corpus.jsonl'}"
{{reference}}
[rankers.fusion]
kind = "fusion"
'''


def write(folder: Path, reference: str, rows: str | None = None) -> Path:
    if rows is not None:
        (folder / "reference.csv").write_text(rows, encoding="utf-8")
    path = folder / "own.toml"
    path.write_text(PROFILE.format(reference=reference), encoding="utf-8")
    return path


def test_declared_reference_rows_are_read_with_the_profile(tmp_path: Path) -> None:
    path = write(tmp_path, 'reference = "reference.csv"', "source,split,ranker,strict_pct,mrr\n"
                                                         "Our 2025 study,test,fusion,51.0,0.61\n")
    profile = load_profile(str(path))
    assert profile.reference == {"file": str((tmp_path / "reference.csv").resolve()), "rows": [
        {"source": "Our 2025 study", "split": "test", "ranker": "fusion", "strict_pct": 51.0, "mrr": 0.61}]}
    rows = reference_rows({"kind": "pairs", "reference": profile.reference}, "test")
    assert rows.source == "Our 2025 study" and rows.frame.to_dict("records") == [
        {"ranker": "fusion", "strict_pct": 51.0, "mrr": 0.61}]
    assert load_profile(str(write(tmp_path, ""))).reference is None  # none declared: the report says so


@pytest.mark.parametrize("reference, rows, message", [
    ('reference = "missing.csv"', None, r"\[data\]: reference = 'missing.csv': .*missing.csv is not a file"),
    ('reference = "reference.csv"', "source,split,ranker,mrr\nx,test,fusion,lots\n",
     r"\[data\]: reference: .*reference.csv:2: field 'mrr' must be a number, got 'lots'"),
    ('reference = "reference.csv"', "source,split,ranker,shoe_size\nx,test,fusion,9\n", r"unknown: \['shoe_size'\]"),
])
def test_a_bad_reference_is_refused_naming_the_file(tmp_path: Path, reference: str, rows: str | None,
                                                    message: str) -> None:
    path = write(tmp_path, reference, rows)
    with pytest.raises(ProfileError, match=message) as info:
        load_profile(str(path))
    assert str(info.value).startswith(str(path))


def test_nevir_is_compared_with_the_paper_not_a_declared_reference(tmp_path: Path) -> None:
    (tmp_path / "reference.csv").write_text("source,split,ranker,mrr\nx,test,fusion,0.5\n", encoding="utf-8")
    path = tmp_path / "nevir.toml"
    path.write_text('[profile]\nname = "n"\nextends = "embedded"\n[data]\nreference = "reference.csv"\n',
                    encoding="utf-8")
    with pytest.raises(ProfileError, match="reference applies to kind = 'pairs'"):
        load_profile(str(path))
