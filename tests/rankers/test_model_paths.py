"""A model value that can only be a path (``/``, ``~``, ``.``) and names nothing is a missing path, said before any
work, and never a name looked up on a model hub, whatever the kind or the model type."""
from __future__ import annotations

from pathlib import Path

import pytest

import fixtures.models
from fixtures.settings import Settings
from harness.options import OptionError, resolve_before_work
from harness.profile import load_profile

MISSING = "does not exist (model paths resolve relative to the profile file)"


@pytest.fixture
def no_hub(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every name sent to the hub check, which answers as an unreachable hub would."""
    asked: list[str] = []

    def hub_problem(name: str, offline: bool) -> str:
        asked.append(name)
        return "is not on the hub"

    monkeypatch.setattr(fixtures.models, "_hub_problem", hub_problem)
    return asked


def _profile(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(f'[profile]\nname = "mine"\nextends = "embedded"\n{body}', encoding="utf-8")
    return path


@pytest.mark.parametrize("table, shown", [
    ('kind = "rerankers"\nmodel = "./models/flash"\nmodel_type = "flashrank"', "{tmp}/models/flash"),
    ('kind = "rerankers"\nmodel = "./models/mine"', "{tmp}/models/mine"),
    ('kind = "rerankers"\nmodel = "~/no-such-models/mine"\nmodel_type = "cross-encoder"', "{home}/no-such-models/mine"),
    ('kind = "cross_encoder"\nmodel = "/x/y"', "/x/y"),
    ('kind = "cross_encoder"\nmodel = "../no-such/ce"', "{parent}/no-such/ce"),
])
def test_a_path_like_model_that_names_nothing_is_a_missing_path_never_a_hub_name(
        tmp_path: Path, no_hub: list[str], table: str, shown: str) -> None:
    profile = load_profile(str(_profile(tmp_path, f"[rankers.mine]\n{table}\n")))
    with pytest.raises(OptionError) as info:
        resolve_before_work(Settings(cache_dir=tmp_path / "cache"), profile, lambda decl: decl.name == "mine")
    where = shown.format(tmp=tmp_path, home=Path.home(), parent=tmp_path.parent)
    assert f"[rankers.mine]: {profile.rankers['mine'].kind} model folder {where} {MISSING}" in str(info.value)
    assert no_hub == []
    assert not (tmp_path / "cache").exists()


def test_a_route_model_path_that_names_nothing_is_a_missing_path(tmp_path: Path, no_hub: list[str]) -> None:
    profile = load_profile(str(_profile(tmp_path, '[models]\ndense = "./models/dense"\n')))
    with pytest.raises(OptionError) as info:
        resolve_before_work(Settings(cache_dir=tmp_path / "cache"), profile, lambda decl: False)
    assert f"[models] dense: dense route model folder {tmp_path}/models/dense {MISSING}" in str(info.value)
    assert no_hub == []


def test_a_name_that_is_not_path_like_is_still_a_hub_name(tmp_path: Path, no_hub: list[str]) -> None:
    """The contrast: ``org/name`` that names nothing under the profile's folder is looked up as a hub model."""
    profile = load_profile(str(_profile(tmp_path, '[rankers.mine]\nkind = "cross_encoder"\nmodel = "org/ce"\n')))
    with pytest.raises(OptionError, match=r"cross_encoder model 'org/ce' is not on the hub"):
        resolve_before_work(Settings(cache_dir=tmp_path / "cache"), profile, lambda decl: decl.name == "mine")
    assert no_hub == ["org/ce"]


@pytest.mark.parametrize("options", ['{ model = "./models/mine" }', '{ base_model = "/x/y", batch = 8 }',
                                     '{ model = "~/no-such-models/mine" }'])
def test_a_factorys_path_like_model_option_that_names_nothing_stops_the_run_before_work(
        tmp_path: Path, no_hub: list[str], monkeypatch: pytest.MonkeyPatch, options: str) -> None:
    """A python factory gets its options as written: a path-like model option is read from the working directory,
    and one that names nothing is said there, before the factory hands it to a library's hub lookup."""
    monkeypatch.chdir(tmp_path)
    profile = load_profile(str(_profile(tmp_path, '[rankers.mine]\nkind = "python"\n'
                                                  'factory = "examples.bi_encoder_reranker:make_scorer"\n'
                                                  f'options = {options}\n')))
    with pytest.raises(OptionError) as info:
        resolve_before_work(Settings(cache_dir=tmp_path / "cache"), profile, lambda decl: decl.name == "mine")
    assert "[rankers.mine]: python option " in str(info.value) and "is a path, and " in str(info.value)
    assert "does not exist" in str(info.value) and no_hub == []


def test_a_factorys_existing_model_folder_or_model_name_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rankers.kinds.base import missing_model_paths

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "mine").mkdir(parents=True)
    assert missing_model_paths({"model": "./models/mine", "tokenizer_model": str(tmp_path / "models")}, "python") == []
    assert missing_model_paths({"model": "org/name", "url": "/v1/rerank", "model_size": 3}, "python") == []
