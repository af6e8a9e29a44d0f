"""A split whose every part fails (its pool cannot be read) makes the run partial: it never replaces the last
complete results, and the published partial run names the parts that failed and why."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import fake_project as fake
from fixtures.artifacts import sha256_file


def _files(results: Path) -> dict[str, str]:
    return {p.relative_to(results).as_posix(): sha256_file(p) for split in fake.SPLITS
            for p in sorted((results / split).rglob("*")) if p.is_file()}


def test_a_split_that_failed_whole_leaves_the_complete_results_intact(tmp_path: Path) -> None:
    folder, results = fake.write(tmp_path / "project"), tmp_path / "results"
    first = fake.run(folder, results, FAKE_STRICT="3")
    assert first.returncode == 0, first.stdout[-3000:]
    before, runs = _files(results), fake.published(results)
    broken = fake.run(folder, results, FAKE_STRICT="4", FAKE_BROKEN_SPLIT="test")
    assert broken.returncode == 1
    assert _files(results) == before and fake.published(results) == runs  # every complete file, byte for byte
    assert "PARTIAL RUN" in broken.stdout, broken.stdout[-3000:]
    assert not (results / "partial" / "test").exists()  # nothing of the failed split was computed
    manifest = json.loads((results / "partial" / "confirmation" / "manifest.json").read_text(encoding="utf-8"))
    [reason] = [r for r in manifest["partial"] if "failed" in r]
    assert "test_table2_row[test-fusion]" in reason and "test_manifest[test]" in reason, reason
    assert fake.strict(results / "partial", "confirmation") == [4, 4, 4]
    shutil.rmtree(results / "partial")
    fake.verify(results)
