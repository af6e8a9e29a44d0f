"""An edited shipped pool or manifest is one message before any work, in the suite, the export and the batch export.

The probe edited a frozen pool shipped in ``data/pools``: it was refused, but as about ten failing tests each
repeating the message, and ``harness.export`` as a 13-frame traceback. Every command now checks the shipped files
in ``resolve_before_work`` (``fixtures.freeze_pools.shipped_problems``) and stops there with one message naming the
file and how to restore it, before any pool is built (docs/protocol.md#frozen-pools). The shipped folder is a copy
here (``fixtures.pools.FROZEN_DIR`` pointed at it), so the checkout is never touched.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import fixtures.pools as pools
from fixtures.freeze_pools import shipped_problems
from harness import batch, export
from harness.options import OptionError
from harness.run import evaluate


def _edit(frozen: Path, what: str) -> Path:
    """Edit one shipped file the way a user might: a manifest's identity, or bytes of a parquet."""
    if what == "manifest":
        path = frozen / "test.json"
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest["identity"]["routes"][0]["depth"] += 1
        path.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    else:
        path = frozen / "development.parquet"
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    return path


@pytest.fixture(params=["manifest", "parquet"])
def edited(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    frozen = tmp_path / "shipped"
    shutil.copytree(pools.FROZEN_DIR, frozen)
    assert shipped_problems(frozen) == []  # the copy is sound before the edit
    edited = _edit(frozen, request.param)
    monkeypatch.setattr(pools, "FROZEN_DIR", frozen)
    return edited


def _one_error(err: str, edited: Path) -> None:
    assert err.count("error:") == 1 and "Traceback" not in err, err[-3000:]
    assert f"frozen pool {edited.with_suffix('.json')}" in err and "git checkout --" in err, err[-3000:]


def test_an_edited_shipped_pool_stops_the_export_in_one_message(edited: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        export.main(["--out", str(tmp_path / "out"), "--splits", "test", "--subset-pairs", "24",
                     "--cache-dir", str(tmp_path / "cache")])
    assert exited.value.code == 2
    _one_error(capsys.readouterr().err, edited)
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache" / "pools").exists()


def test_an_edited_shipped_pool_stops_the_batch_export_in_one_message(edited: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        batch.main(["export", "--out", str(tmp_path / "out"), "--splits", "test", "--subset-pairs", "24",
                    "--cache-dir", str(tmp_path / "cache")])
    assert exited.value.code == 2
    _one_error(capsys.readouterr().err, edited)
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache" / "pools").exists()


def test_an_edited_shipped_pool_stops_the_suite_in_one_message(edited: Path, tmp_path: Path) -> None:
    with pytest.raises(OptionError) as caught:
        evaluate("embedded", splits=["test"], subset_pairs=24, cache_dir=tmp_path / "cache",
                 results_dir=tmp_path / "results")
    message = str(caught.value)
    [line] = message.splitlines()[1:]  # one problem, one line
    assert message.startswith("cannot start, nothing was computed") and line.strip().startswith(
        f"frozen pool {edited.with_suffix('.json')}: "), message
    assert not (tmp_path / "cache" / "pools").exists()
