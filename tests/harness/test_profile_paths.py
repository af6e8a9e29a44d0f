"""Every path in a profile resolves relative to the file that writes it, whichever profile extends it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fixtures.models import model_location
from fixtures.settings import Settings
from harness.options import OptionError, resolve_before_work, settings_from, use_pythonpath
from harness.profile import load_profile
from harness.profile_records import ProfileError
from tests.reports.saved_runs import save, small_run


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """``team/base.toml`` declares a run, a model folder and code next to it; ``me/mine.toml`` extends it."""
    write(tmp_path / "team" / "runs" / "test.trec", "1000-2_q1 Q0 p 1 1.0 s\n")
    (tmp_path / "team" / "models" / "ce").mkdir(parents=True)
    (tmp_path / "team" / "code").mkdir()
    (tmp_path / "me" / "mycode").mkdir(parents=True)
    write(tmp_path / "team" / "base.toml", '[profile]\nname = "base"\nextends = "embedded"\npythonpath = ["code"]\n'
          '[models]\ndense = "models/ce"\n'
          '[rankers.their_run]\nkind = "trec_run"\npath = "runs/{split}.trec"\n'
          '[rankers.their_ce]\nkind = "cross_encoder"\nmodel = "models/ce"\n'
          '[rankers.hub_ce]\nkind = "cross_encoder"\nmodel = "BAAI/bge-reranker-base"\n'
          '[rankers.served]\nkind = "rerank_api"\nurl = "http://127.0.0.1:9/v1"\nmodel = "models/ce"\n')
    return write(tmp_path / "me" / "mine.toml", '[profile]\nname = "mine"\nextends = "../team/base.toml"\n'
                 'pythonpath = ["mycode"]\n[rankers.my_run]\nlike = "their_run"\n'
                 '[rankers.mine_ce]\nkind = "cross_encoder"\nmodel = "./local-ce"\n')


def test_paths_resolve_relative_to_the_file_that_writes_them(chain: Path) -> None:
    team = chain.parent.parent / "team"
    profile = load_profile(str(chain))
    r = profile.rankers
    assert r["their_run"].options["path"] == str(team / "runs" / "{split}.trec")
    assert r["my_run"].options["path"] == str(team / "runs" / "{split}.trec")  # copied with `like`, base kept
    assert r["their_ce"].options["model"] == str(team / "models" / "ce")
    assert r["mine_ce"].options["model"] == str(chain.parent / "local-ce")  # explicit ./: a path even if absent
    assert r["hub_ce"].options["model"] == "BAAI/bge-reranker-base"  # nothing of that name there: a hub name
    assert r["served"].options["model"] == "models/ce"  # a server's model name is not a path
    assert profile.models["dense"] == str(team / "models" / "ce")
    assert profile.pythonpath == (chain.parent / "mycode", team / "code")  # the child's folders first
    assert all(type(v) is str for d in r.values() for v in d.options.values() if isinstance(v, str))


def test_pythonpath_leads_sys_path_and_must_name_folders(chain: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    profile = load_profile(str(chain))
    use_pythonpath(profile)
    assert sys.path[:2] == [str(chain.parent / "mycode"), str(chain.parent.parent / "team" / "code")]
    bad = write(chain.parent / "bad.toml", '[profile]\nname = "bad"\nextends = "embedded"\npythonpath = ["nope"]\n')
    with pytest.raises(ProfileError, match=rf"{bad} \[profile\] pythonpath: \['{chain.parent / 'nope'}'\] is not a "
                                           "folder"):
        load_profile(str(bad))
    with pytest.raises(ProfileError, match="pythonpath must be a list of folders"):
        load_profile(str(write(chain.parent / "worse.toml", '[profile]\nname = "w"\nextends = "embedded"\n'
                                                             'pythonpath = [1]\n')))


def test_a_missing_model_folder_and_run_file_are_named_before_any_work(chain: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    profile = load_profile(str(chain))
    settings = Settings(splits=("test", "confirmation"))
    with pytest.raises(OptionError) as caught:
        resolve_before_work(settings, profile, lambda d: d.name in ("my_run", "mine_ce"))
    message = str(caught.value)
    assert f"{chain} [rankers.my_run]: run file(s) not found: ['{chain.parent.parent / 'team' / 'runs'}" \
           f"/confirmation.trec']" in message
    assert f"{chain} [rankers.mine_ce]: cross_encoder model folder {chain.parent / 'local-ce'} does not exist" in message
    assert f"{chain} [models] dense" not in message  # the team's model folder exists
    resolve_before_work(Settings(splits=("test",)), profile, lambda d: d.name == "my_run")  # nothing missing


def test_model_location_rules(tmp_path: Path) -> None:
    (tmp_path / "here").mkdir()
    assert model_location("here", tmp_path) == str(tmp_path / "here")
    assert model_location("org/name", tmp_path) == "org/name"
    assert model_location("../up", tmp_path) == str((tmp_path / "../up").resolve())
    assert model_location("/abs/model", tmp_path) == "/abs/model"
    assert model_location("builtin:all-MiniLM-L6-v2", tmp_path) == "builtin:all-MiniLM-L6-v2"


def test_compare_to_must_hold_every_split_of_the_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    save(results, "run-1", {"test": small_run(tmp_path / "records")["test"]})
    options = {"splits": "test", "results_dir": str(results), "cache_dir": str(tmp_path / "cache"), "data_dir": None,
               "profile": "embedded", "subset_pairs": None, "subset_seed": 0, "grader_sample": None,
               "compare_to": "run-1"}
    assert settings_from(options.get).compare_run == "run-1"
    with pytest.raises(OptionError, match=r"--compare-to run-1: saved run run-1 holds no split 'confirmation'"):
        settings_from({**options, "splits": "test,confirmation"}.get)
    with pytest.raises(OptionError, match=r"--compare-to 'run-2' is neither a saved run id .*\['run-1'\]"):
        settings_from({**options, "compare_to": "run-2"}.get)
