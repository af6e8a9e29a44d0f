"""Replacing a folder of results as one transaction: published results and exports both swap in this way.

``<root>/<name>`` are symlinks to ``.current/<name>``; ``.current`` is a symlink to the run that
is in place, ``.runs/<run id>``. A new run is staged in its own ``.runs/<run id>`` (held by a
lock file while a live process stages it) and committed by one atomic rename of ``.current``
(docs/protocol.md#publishing). Whatever stops the process before that rename (an exception,
SIGINT, SIGKILL, a full disk), readers see the previous run whole; a stopped run's staging
folder is removed on the way out, or, after a SIGKILL, by the next transaction on that root.

A root is the suite's only when the suite made it (``claim``: created empty, marked with ``MARK`` and given a
ledger sealed with the user's key, ``reports.ledger``) or an earlier version of the suite did (its ``.current``,
its ``.history`` or its per-split folders); a copied mark grants nothing, and any other non-empty folder is
refused, naming the folder and what it holds, before anything is written (docs/outputs.md#whose-folder). Inside
its own root a transaction removes or replaces only what its ledger records it wrote: its links, its run folders
and the files in them. A file, folder or link of the user's (beside them, in a split folder, under ``.runs/``) is
never moved, linked over or deleted; what a clean-up keeps is named once.
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from filelock import FileLock

from fixtures.artifacts import atomic_write_text
from reports import ledger

#: Under a root: the staged and committed runs, the symlink naming the committed one, the lock that serializes
#: swaps and clean-ups.
RUNS, CURRENT, LOCK = ".runs", ".current", ".publish.lock"
#: The file that marks a root as made by the suite.
MARK = ".preference-position"
#: Under a results root: the run history (``reports.history``), each saved run's index in it, and the prefix of a
#: run being saved there (and of its lock file), which only the suite writes: how a results folder of an earlier
#: version, made before ``MARK``, is recognized.
HISTORY, ENTRY, STAGING = ".history", "entry.json", ".staging-"
#: Under a results root: the separate root of runs that did not compute every output; what a split folder of the
#: older layout (before transactions) holds, adopted as the committed run.
PARTIAL, LEGACY_MARKER = "partial", "table2.csv"
MARK_TEXT = ("This folder is written by the preference-position suite (docs/outputs.md#whose-folder).\n"
             "A run replaces only what its ledger (.preference-position.ledger) says it wrote; anything else here "
             "is left alone.\n")
#: The root's ledger of what the suite wrote there (``reports.ledger``).
LEDGER = ledger.LEDGER
#: What the suite keeps at a root for itself: they do not make a folder non-empty.
BOOKKEEPING = (MARK, LEDGER, LOCK)


class ForeignFolder(OSError):
    """A folder the suite did not make (or an entry in it the suite did not write) where it would write."""


def unique_run_id() -> str:
    """A run id for a staging that names no run of its own (an export): UTC second, pid and a random part, so two
    stagings in one second and process never share a folder."""
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def current_run(root: Path) -> str | None:
    """The id of the run committed under ``root`` (None when there is none)."""
    link = Path(root) / CURRENT
    return Path(os.readlink(link)).name if link.is_symlink() else None


def _replace_link(link: Path, target: str) -> None:
    """Point ``link`` at ``target`` in one atomic rename (readers see the old target or the new one)."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def _ours(path: Path) -> bool:
    """Whether ``path`` is one of the root's links to the committed run (``<name>`` -> ``.current/<name>``)."""
    return path.is_symlink() and os.readlink(path) == f"{CURRENT}/{path.name}"


def _legacy(root: Path, names: Iterable[str], marker: str | None) -> list[Path]:
    """The real folders of an older layout among ``names`` (``<root>/<name>/<marker>``): what the suite wrote
    before transactions, replaced like a run's. A folder under another name is the user's, whatever it holds."""
    if marker is None:
        return []
    return [root / n for n in names if (root / n).is_dir() and not (root / n).is_symlink()
            and (root / n / marker).is_file()]


def _adopt_legacy(root: Path, names: Iterable[str], marker: str | None) -> None:
    """Real folders of an older layout become the committed run, so the first swap replaces their links like any other
    run's; the folder they move into is not in the ledger (the suite did not write what they hold), so it is kept."""
    legacy = _legacy(root, names, marker)
    if not legacy or current_run(root) is not None:
        return
    folder = root / RUNS / f"legacy-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    for name in legacy:
        name.rename(folder / name.name)
    _replace_link(root / CURRENT, f"{RUNS}/{folder.name}")
    for name in legacy:
        _replace_link(name, f"{CURRENT}/{name.name}")


def _clean(root: Path, written: ledger.Written) -> list[str]:
    """Remove what the ledger ``written`` records and no live process holds, but the committed run: a killed
    process's staging (all of it), the runs a swap replaced (the files they were committed with, and the folders
    those leave empty), and the root's recorded links to the committed run that lead nowhere. Anything else under
    ``.runs`` (a user's folder, an earlier version's run, a file the user put into a published split) is kept;
    returns those not named before (``reports.ledger.sweep``). The caller holds the root's lock and saves
    ``written``."""
    keep = current_run(root)
    _, kept = ledger.sweep(root, RUNS, written, lambda entry: entry.name in (keep, f"{keep}.lock"))
    for link in root.iterdir():
        if link.name in written.links and _ours(link) and not link.exists():
            link.unlink()
            written.links.discard(link.name)
    return kept


def _listing(paths: Iterable[Path]) -> str:
    """Up to six entries by name (a folder with ``/``, a link with ``@``), and how many more."""
    paths = list(paths)
    shown = [p.name + ("@" if p.is_symlink() else "/" if p.is_dir() else "") for p in paths[:6]]
    more = f" and {len(paths) - 6} more" if len(paths) > 6 else ""
    return f"{len(paths)} entr{'y' if len(paths) == 1 else 'ies'} ({', '.join(shown)}{more})"


def made_by_suite(root: Path, names: Iterable[str] = (), legacy_marker: str | None = None) -> bool:
    """Whether ``root`` is a folder the suite made: its ledger verifies under this user's key (``reports.ledger``;
    a copied ``MARK`` alone grants nothing), or an earlier version left it (its ``.current`` link into ``.runs``, a
    saved run's ``.history/<run id>/entry.json`` or one being saved, or a folder of the older layout among
    ``names``). A ``.history`` folder alone is not enough: other tools make folders of that name."""
    root = Path(root)
    current = root / CURRENT
    history = root / HISTORY
    return (ledger.verifies(root)
            or (history.is_dir() and any((run / ENTRY).is_file() or run.name.startswith(STAGING)
                                         for run in history.iterdir()))
            or (current.is_symlink() and os.readlink(current).startswith(f"{RUNS}/"))
            or bool(_legacy(root, names, legacy_marker)))


def _clashes(root: Path, names: Iterable[str], legacy_marker: str | None) -> list[Path]:
    """Entries where the transaction would put its links that are neither its links nor its older layout."""
    legacy = set(_legacy(root, names, legacy_marker))
    return [root / n for n in names if os.path.lexists(root / n) and not _ours(root / n) and root / n not in legacy]


def claim_problem(root: Path, names: Iterable[str], legacy_marker: str | None = None) -> str | None:
    """Why the suite may not write ``names`` into ``root`` (None: it may): a non-empty folder it did not make, or an
    entry of the user's where it would put a link. Reads only, so a command says it before any work."""
    root, names = Path(root), list(names)
    if os.path.lexists(root) and not root.is_dir():
        return f"{root} is not a folder"
    entries = sorted(p for p in root.iterdir() if p.name not in BOOKKEEPING) if root.is_dir() else []
    if entries and not made_by_suite(root, names, legacy_marker):
        return (f"{root} is not a folder this suite made (no {LEDGER} sealed with your key: a copied {MARK} "
                f"grants nothing) and it holds {_listing(entries)}: refusing to write into it, so that nothing in "
                "it is replaced; name a new or empty folder")
    clashes = _clashes(root, names, legacy_marker)
    if clashes:
        return (f"{root} holds {_listing(clashes)} where the suite would put its own links, and the suite did not "
                "write them: move them away or name another folder")
    return None


def claim(root: Path, names: Iterable[str], legacy_marker: str | None = None) -> None:
    """Make ``root`` the suite's (created, marked, its ledger sealed), or ``ForeignFolder`` naming what is in the
    way (``claim_problem``), before anything in it changed."""
    root, names = Path(root), list(names)
    problem = claim_problem(root, names, legacy_marker)
    if problem is not None:
        raise ForeignFolder(problem)
    root.mkdir(parents=True, exist_ok=True)
    if not (root / MARK).is_file():
        atomic_write_text(root / MARK, MARK_TEXT)
    if not ledger.verifies(root):
        with FileLock(str(root / LOCK)):
            ledger.save(root, ledger.read(root))


def results_problem(results_dir: Path, splits: Iterable[str]) -> str | None:
    """Why a run may not publish ``splits`` into ``results_dir`` (None: it may): a folder the suite did not make,
    or an entry of the user's where a split's link (or ``partial/``) would go. Reads only: the options check it
    before any work."""
    results_dir, splits = Path(results_dir), list(splits)
    return (claim_problem(results_dir, splits, LEGACY_MARKER)
            or claim_problem(results_dir / PARTIAL, splits, LEGACY_MARKER))


class StagedRun:
    """One run being staged under ``<root>/.runs/<run id>``: ``folder`` to write into, ``commit`` to swap it in,
    ``close`` (always) to drop it when it was not committed.

    Opening adopts a legacy layout (those of ``names``, the links it will commit, that are folders holding
    ``legacy_marker``; None: none to adopt), removes what the ledger records that killed processes left, and records
    its own staging folder before it makes it; it raises ``ForeignFolder`` when an entry of ``names`` (or the run's
    folder) is the user's, ``OSError`` or ``filelock.Timeout`` when ``root`` cannot be written, before anything in it
    changed. Whether ``root`` is the suite's at all is ``claim``'s to say. ``kept`` lists what its clean-ups left
    because the suite did not write it, each named once (``reports.ledger.kept_line``).
    """

    def __init__(self, root: Path, run_id: str, legacy_marker: str | None, names: Iterable[str] = ()) -> None:
        self.root, self.run_id = Path(root), run_id
        self.folder = self.root / RUNS / run_id
        self._name = f"{RUNS}/{run_id}"
        self.kept: list[str] = []
        self.root.mkdir(parents=True, exist_ok=True)
        names = list(names)
        with FileLock(str(self.root / LOCK)):
            clashes = _clashes(self.root, names, legacy_marker)
            if clashes:
                raise ForeignFolder(f"{self.root} holds {_listing(clashes)} where the suite would put its own "
                                    "links, and the suite did not write them: move them away or name another folder")
            _adopt_legacy(self.root, names, legacy_marker)
            written = ledger.read(self.root)
            self.kept += _clean(self.root, written)
            if os.path.lexists(self.folder):
                ledger.save(self.root, written)
                raise ForeignFolder(f"{self.folder} exists already and this run did not stage it; nothing was written")
            self.folder.parent.mkdir(parents=True, exist_ok=True)
            self._own = FileLock(str(self.folder) + ".lock", timeout=0)
            self._own.acquire()  # held while staging: another process's clean-up leaves the folder alone
            written.folders[self._name] = ledger.STAGING  # recorded before it exists: a kill leaves it recorded
            ledger.save(self.root, written)
        self.folder.mkdir()

    @property
    def previous(self) -> Path | None:
        """The folder of the run committed before this one, if any."""
        run = current_run(self.root)
        return self.root / RUNS / run if run is not None and run != self.run_id else None

    def carry(self, exclude: Iterable[str]) -> list[str]:
        """Carry the previous run's split folders but ``exclude`` into this one, as hard links (copies where the file
        system has none), and return their names: only the files the suite wrote there when the ledger records that
        run (a file of the user's stays where it is), the whole folders of an earlier version's run."""
        previous, exclude = self.previous, set(exclude)
        if previous is None:
            return []
        recorded = ledger.read(self.root).folders.get(f"{RUNS}/{previous.name}")
        splits = sorted(p.name for p in previous.iterdir()
                        if p.is_dir() and not p.is_symlink() and p.name not in exclude)
        for split in splits:
            files = [f for f in recorded if f.startswith(f"{split}/")] if recorded else \
                [f"{split}/{f}" for f in ledger.files_under(previous / split)]
            for name in files:
                (self.folder / name).parent.mkdir(parents=True, exist_ok=True)
                _link_or_copy(previous / name, self.folder / name)
        return splits

    def commit(self, names: Iterable[str]) -> None:
        """Swap the staged run in: its files recorded in the ledger, the ``names`` links (until the swap they lead to
        the previous run's folders), then ``.current`` in one atomic rename, the commit; ``ForeignFolder`` (nothing
        replaced) when an entry of ``names`` is not the suite's."""
        with FileLock(str(self.root / LOCK)):
            names = list(names)
            clashes = _clashes(self.root, names, None)
            if clashes:  # the user's, made while this run was staged: never linked over
                raise ForeignFolder(f"{self.root} holds {_listing(clashes)} where the suite would put its own "
                                    "links, and the suite did not write them: nothing was replaced")
            written = ledger.read(self.root)
            written.folders[self._name] = ledger.files_under(self.folder)
            written.links.update(names)
            ledger.save(self.root, written)
            for name in names:
                if not _ours(self.root / name):
                    _replace_link(self.root / name, f"{CURRENT}/{name}")
            _replace_link(self.root / CURRENT, f"{RUNS}/{self.run_id}")

    @property
    def committed(self) -> bool:
        return current_run(self.root) == self.run_id

    def close(self) -> None:
        """Remove the staged run unless it was committed, then what the ledger records that this run replaced (a
        leftover goes next time)."""
        committed = self.committed
        if not committed:
            shutil.rmtree(self.folder, ignore_errors=True)
        self._own.release()
        if not committed:
            Path(str(self.folder) + ".lock").unlink(missing_ok=True)
        with suppress(OSError), FileLock(str(self.root / LOCK)):
            written = ledger.read(self.root)
            if not committed:
                written.folders.pop(self._name, None)
            self.kept += _clean(self.root, written)
            ledger.save(self.root, written)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
