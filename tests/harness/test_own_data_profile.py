"""The own-data base profile: the embedded reference rankers without NevIR's pins, expectations or gates, and the
NevIR-format hold-out example (examples/holdout_nevir.toml) run on it with no converter and no NevIR pin."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pandas as pd
import pytest

from fixtures.settings import PROJECT_ROOT, Settings
from harness.options import fit_to_data
from harness.profile import load_profile
from harness.profile_terms import PROFILE_DIR
from harness.run import evaluate, parameters, publish

HOLDOUT = PROJECT_ROOT / "examples" / "holdout_nevir.toml"
#: What own-data declares differently from embedded, on purpose: labels, and the cross-encoder's training set.
DIFFERS_ON_PURPOSE = {"label", "train_on"}


def _profile_on(tmp_path: Path, base: str) -> Path:
    """The hold-out example's [data], extending ``base`` instead."""
    path = tmp_path / f"on_{base.replace('-', '_')}.toml"
    data = (PROJECT_ROOT / "examples" / "holdout_nevir").as_posix()
    path.write_text(f'[profile]\nname = "mine"\nextends = "{base}"\n[data]\nkind = "pairs"\n'
                    f'pairs = "{data}/holdout.jsonl"\n', encoding="utf-8")
    return path


def test_own_data_declares_the_embedded_reference_rankers_and_nothing_reviewed_on_nevir() -> None:
    own = tomllib.loads((PROFILE_DIR / "own-data.toml").read_text(encoding="utf-8"))
    embedded = tomllib.loads((PROFILE_DIR / "embedded.toml").read_text(encoding="utf-8"))
    assert list(own["rankers"]) == ["fusion", "e0", "bg8", "ce"]
    for name, table in own["rankers"].items():
        mine = {k: v for k, v in table.items() if k not in DIFFERS_ON_PURPOSE}
        theirs = {k: v for k, v in embedded["rankers"][name].items() if k not in DIFFERS_ON_PURPOSE}
        assert mine == theirs, name
    assert own["models"] == embedded["models"] and own["margins"] == embedded["margins"]
    assert "pins" not in own and "gates" not in own
    assert not [name for name, claim in own["claims"].items() if "expect" in claim or "@" in name]
    h1 = {n: {k: v for k, v in c.items() if k not in ("expect", "reason")}
          for n, c in embedded["claims"].items() if c.get("family") == "H1"}
    assert h1 == own["claims"]  # H1's comparisons, less their expectations


@pytest.mark.parametrize("base, pinned", [("embedded", True), ("own-data", False)])
def test_a_dataset_on_own_data_plans_no_nevir_pin_or_expectation(tmp_path: Path, base: str, pinned: bool) -> None:
    """Extending embedded, a dataset inherits NevIR's pins (the "fusion moved: then 2735, now 72" warnings);
    extending own-data it plans none, whatever the run's scope."""
    profile = load_profile(str(_profile_on(tmp_path, base)))
    for settings in (Settings(), Settings(subset_pairs=24, grader_sample=4)):
        settings = fit_to_data(settings, profile)
        assert bool(parameters(profile, settings)["pin"]) is pinned
    assert bool([c for c in profile.claims.values() if c.full or c.subset]) is pinned
    assert bool(profile.gates) is pinned


def test_the_nevir_format_holdout_runs_with_no_converter_and_its_report_carries_no_nevir_pin(tmp_path: Path) -> None:
    """The example's NevIR-format file, declared as it is: fusion's row on its 24 directions and no pin checked or
    reported; the same file under embedded has NevIR's pins checked against it."""
    cache = tmp_path / "cache"
    on_embedded = evaluate(_profile_on(tmp_path, "embedded"), rankers=["fusion"], cache_dir=cache,
                           results_dir=tmp_path / "embedded")
    assert [key for key in on_embedded.parts if key[0] == "pin"]  # what own-data spares it: NevIR's pins, moved
    assert on_embedded.checks["message"].str.contains("pinned fusion.n changed", regex=False).any()
    record = evaluate(HOLDOUT, rankers=["fusion"], cache_dir=cache, results_dir=tmp_path / "results")
    assert list(record.splits) == ["test"]
    t2 = record["test"].tables["table2"].set_index("ranker")
    assert int(t2.loc["fusion", "n"]) == 24
    assert not [key for key in record.parts if key[0] == "pin"]
    assert not record.checks["message"].str.contains("pinned", regex=False).any()
    assert record.failures.empty
    publish(record, tmp_path / "results")
    published = tmp_path / "results" / "partial" / "test"
    assert (published / "table2.csv").is_file()
    directions = pd.read_csv(published / "directions.csv")  # the file's own field, carried
    assert directions.set_index("qid").at["h05-3_q1", "data.topic"] == "transport"
    # pins are claims.csv rows (family "pin"); this run checked none, so it wrote no claims.csv at all
    claims = pd.read_csv(published / "claims.csv") if (published / "claims.csv").is_file() else pd.DataFrame(
        columns=["claim", "family"])
    assert "pin" not in set(claims["family"]) and not claims["claim"].astype(str).str.startswith("pin").any()
    report = (published / "report.md").read_text(encoding="utf-8")
    assert "## Gates and pins" not in report and "moved" not in report
    assert "the paper's published Table II" not in report  # NevIR's published numbers: not this dataset's reference
    embedded_report = publish(on_embedded, tmp_path / "embedded").published["test"] / "report.md"
    assert "## Gates and pins" in embedded_report.read_text(encoding="utf-8")
