"""What the suite wrote under a results or export folder: all a publish may remove (docs/outputs.md#whose-folder).

A folder the suite publishes into (``reports.transaction``) keeps ``.preference-position.ledger``: the run
folders it staged under ``.runs/`` (each with the files it wrote there), the history stagings it opened under
``.history/``, and the links it made, sealed with the user's key (``fixtures.userkey``). A publish removes or
replaces only what the ledger lists. So a file of the user's put into a published split folder (``results/test/``
is ``.runs/<run id>/test/``), a folder under ``.runs/`` or ``.history/`` the suite did not write (an editor's
local history, a copy, an earlier version's run), or a copied mark is never deleted: it is kept, and named once
(the ledger remembers what it named). A ledger that does not verify (absent, edited, another user's, copied
from another key's folder) lists nothing, so it grants nothing either.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from fixtures.artifacts import atomic_write_text
from fixtures.userkey import seal_tag, tag_verifies

#: The ledger's file under a root, and the purpose of its HMAC under the user's key.
LEDGER, PURPOSE = ".preference-position.ledger", "nevir written ledger v1"
#: A recorded folder the suite is staging: it made the folder empty and everything in it is its own until it
#: records the files (a staging killed before that is removed whole).
STAGING = None


@dataclass
class Written:
    """A root's ledger: ``folders`` (a folder's path relative to the root -> the files under it the suite wrote, or
    ``STAGING``; its ``<folder>.lock`` is the suite's with it), ``links`` (names of links at the root it made) and
    ``named`` (entries it did not write that it has already named, so each is named once)."""

    folders: dict[str, list[str] | None] = field(default_factory=dict)
    links: set[str] = field(default_factory=set)
    named: set[str] = field(default_factory=set)

    def _body(self) -> dict:
        return {"folders": dict(sorted(self.folders.items())), "links": sorted(self.links),
                "named": sorted(self.named)}


def _bytes(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _verified(root: Path) -> dict | None:
    """The root's ledger as written, when it is a regular file whose HMAC verifies under this user's key."""
    path = Path(root) / LEDGER
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() and not path.is_symlink() else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not tag_verifies(data.get("hmac"), PURPOSE,
                                                      _bytes({k: v for k, v in data.items() if k != "hmac"})):
        return None
    return data


def read(root: Path) -> Written:
    """The root's ledger when it verifies (``_verified``); an empty one otherwise: it grants nothing."""
    data = _verified(root)
    if data is None:
        return Written()
    folders = data.get("folders") if isinstance(data.get("folders"), dict) else {}
    return Written({str(k): (None if v is None else [str(f) for f in v]) for k, v in folders.items()},
                   {str(x) for x in data.get("links", [])}, {str(x) for x in data.get("named", [])})


def verifies(root: Path) -> bool:
    """Whether ``root`` holds a ledger sealed with this user's key: what makes a folder the suite's (a copied mark
    alone does not)."""
    return _verified(root) is not None


def save(root: Path, written: Written) -> None:
    """Seal and write the ledger (the caller holds the root's lock); what it named and is gone is forgotten."""
    root = Path(root)
    written.named = {n for n in written.named if os.path.lexists(root / n)}
    body = written._body()
    atomic_write_text(root / LEDGER, json.dumps({**body, "hmac": seal_tag(PURPOSE, _bytes(body))}, indent=1,
                                                sort_keys=True))


def files_under(folder: Path) -> list[str]:
    """Every file and link under ``folder`` (relative POSIX paths): what a staging wrote, recorded at its commit."""
    return sorted(p.relative_to(folder).as_posix() for p in Path(folder).rglob("*")
                  if p.is_symlink() or not p.is_dir())


def remove_written(folder: Path, files: list[str] | None) -> list[str]:
    """Remove what the suite wrote in ``folder``: all of it while it was ``STAGING``, else the listed files and the
    folders they leave empty. Returns what is left (relative paths of the user's entries, never removed)."""
    folder = Path(folder)
    if files is STAGING:
        shutil.rmtree(folder, ignore_errors=True)
        return []
    parents: set[Path] = set()
    for name in files:
        path = folder / name
        if path.is_symlink() or path.is_file():
            path.unlink(missing_ok=True)
        parents.update(p for p in path.parents if p != folder and folder in p.parents)
    for parent in sorted(parents, key=lambda p: len(p.parts), reverse=True):  # deepest first
        if parent.is_dir() and not parent.is_symlink() and not any(parent.iterdir()):
            parent.rmdir()
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        return []
    return files_under(folder) if folder.is_dir() else []


def sweep(root: Path, under: str, written: Written, skip: Callable[[Path], bool]) -> tuple[list[str], list[str]]:
    """Clean ``<root>/<under>`` (the caller holds the root's lock and saves ``written``): each folder the ledger
    records that no live process holds (its ``<folder>.lock``) loses what the suite wrote there
    (``remove_written``), its lock file and its record; a record whose folder is gone, and unheld, is dropped.
    Entries ``skip`` accepts (the committed run, a complete history entry) are left unnamed. Returns the recorded
    folders removed whole, and what is kept because the suite did not write it, not named before (``name_once``)."""
    folder = Path(root) / under
    removed: list[str] = []
    kept: list[str] = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        name = f"{under}/{entry.name}"
        if skip(entry) or (entry.name.endswith(".lock") and (name[:-5] in written.folders or entry.name[:-5] in removed
                                                             or os.path.lexists(str(entry)[:-5]))):
            continue  # a lock file goes (or is named) with its folder
        if name not in written.folders:
            kept.append(name + ("/" if entry.is_dir() and not entry.is_symlink() else ""))
            continue
        try:
            with FileLock(str(entry) + ".lock", timeout=0):
                left = remove_written(entry, written.folders[name])
        except Timeout:
            continue  # a live process is staging it
        Path(str(entry) + ".lock").unlink(missing_ok=True)
        del written.folders[name]
        kept += [f"{name}/{rest}" for rest in left]
        if left:
            written.named.add(name)  # the folder itself, now the user's: named through what it holds
        else:
            removed.append(entry.name)
    for name in [n for n in written.folders if n.startswith(f"{under}/") and not os.path.lexists(Path(root) / n)]:
        try:  # recorded, never made: killed before its mkdir, unless a live process holds it
            with FileLock(str(Path(root) / name) + ".lock", timeout=0):
                pass
        except Timeout:
            continue
        Path(str(Path(root) / name) + ".lock").unlink(missing_ok=True)
        del written.folders[name]
    return removed, name_once(written, kept)


def name_once(written: Written, entries: Iterable[str]) -> list[str]:
    """The entries not named before (each is then remembered as named)."""
    new = [e for e in dict.fromkeys(entries) if e.rstrip("/") not in written.named]
    written.named.update(e.rstrip("/") for e in new)
    return new


def kept_line(root: Path, entries: list[str]) -> str:
    """The one line naming what a publish kept in ``root`` because the suite did not write it."""
    shown = ", ".join(entries[:6]) + (f" and {len(entries) - 6} more" if len(entries) > 6 else "")
    return (f"{root}: kept {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} the suite did not write ({shown}); "
            "it never deletes what it did not write: remove them yourself if they are not wanted (said once)")
