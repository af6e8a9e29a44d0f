"""A trained cross-encoder's folder as the cache keeps it: its files, their digests in its sealed manifest, and
whether a folder holds a whole model. Torch-free, so a run can tell which model it will score with (a subset run
reads the full run's model when it is cached) without loading the training code. The manifest is sealed with the
user's key, and a folder holding a link or anything but files and folders is refused by name, so the model loaded is
one this user's run trained (docs/reproducibility.md#sharing-a-cache).
"""
from __future__ import annotations

import json
from pathlib import Path

from fixtures.artifacts import ArtifactCorrupt, read_sealed, refuse_irregular, seal_path
from fixtures.identity import folder_digests

#: The model folder's manifest: how it was trained, and every file's sha256.
MANIFEST = "manifest.json"


def model_digests(folder: Path) -> dict[str, str]:
    """sha256 of every file of a model folder except the manifest and its seal (relative POSIX paths)."""
    skip = {MANIFEST, seal_path(Path(MANIFEST)).name}
    return folder_digests(folder, lambda p: p.relative_to(folder).as_posix() in skip)


def load_sealed(folder: Path) -> dict[str, object]:
    """The manifest of a trained model folder whose files all match their recorded digests.

    Raises ``ArtifactCorrupt`` naming the folder and the first file that is missing,
    added, altered or truncated since training (a folder saved before sealing has no
    seal and is refused the same way), or ``NotRegularFile`` naming a link in it (or the folder, a link itself).
    """
    folder = Path(folder)
    what = f"trained cross-encoder {folder.name}:"
    refuse_irregular(folder, what)
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise ArtifactCorrupt(manifest_path, None, "(file missing)", what)
    manifest = json.loads(read_sealed(manifest_path, what))
    recorded = manifest.get("files")
    if not isinstance(recorded, dict) or not recorded:
        raise ArtifactCorrupt(manifest_path, None, "(no file digests in the manifest)", what)
    actual = model_digests(folder)
    for name in sorted(set(recorded) | set(actual)):
        if recorded.get(name) != actual.get(name):
            raise ArtifactCorrupt(folder / name, recorded.get(name), actual.get(name, "(file missing)"), what)
    return manifest


def is_trained(folder: Path) -> bool:
    """Whether ``folder`` holds a saved, whole model (every file matches its sealed digest): a run reads it instead
    of training (a corrupt one is retrained, so it does not count)."""
    try:
        load_sealed(folder)
    except ArtifactCorrupt:
        return False
    return True
