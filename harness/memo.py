"""Content-keyed memos: a warm run reads what an earlier run derived from exactly the same inputs.

A memo's key is a digest of everything its value depends on — input files' digests, the
code that computes it and the libraries it imports (``fixtures.code``), declared options —
so a changed input, a code edit or an upgraded library gives a new key and the value is
recomputed; nothing is ever invalidated by hand (``docs/protocol.md#caches``).

Values are pickled, and the load is authenticated: each memo file carries an HMAC-SHA256 of its name and bytes
under the user's key kept outside the cache (``fixtures.userkey``, the one home of the key every store is sealed
with: ``~/.config/preference-position/memo.key``, mode 0600, or ``$NEVIR_MEMO_KEY``), and ``pickle.loads`` runs
only on bytes whose HMAC verifies, read without following a link (``fixtures.artifacts.read_regular``). A memo planted in a shared cache, written by another user, or altered is named
in one warning, never unpickled, and recomputed. Why an HMAC and not a data format: memos hold values of every layer (rankings, outcome frames, judged stages, claim
tests, populations, plain dicts), so a data format would need one codec per type, each a place for a value to be
stored wrongly; the HMAC keeps one simple path for all of them, and whoever can read the key can already run code
as this user. A plain digest beside the file (as other artifacts are sealed) would not do: whoever writes the file
can write its digest too.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import os
import pickle
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from fixtures.artifacts import atomic_write, discard, read_regular
from fixtures.identity import frame_digest, parts_digest
from fixtures.userkey import KEY_ENV, UserKeyError as MemoKeyError, key_path as memo_key_path, user_key as memo_key

__all__ = ["KEY_ENV", "MAGIC", "Memo", "MemoKeyError", "MemoWarning", "content", "memo_key", "memo_key_path"]

T = TypeVar("T")

#: What a memo file starts with, before its HMAC and the pickled value.
MAGIC = b"nevir-memo hmac-sha256 v1\n"
_TAG = hashlib.sha256().digest_size


class MemoWarning(UserWarning):
    """A memo was refused (its HMAC does not verify, or it cannot be read) and is being recomputed."""


def content(value: object) -> object:
    """A value as it enters a memo key: a frame by its columns, dtypes, row hashes and attrs (a ranker's outcomes carry
    its name there); an array by its bytes; anything else as it is (JSON-able)."""
    if isinstance(value, pd.DataFrame):
        return parts_digest([[str(c) for c in value.columns], [str(t) for t in value.dtypes], frame_digest(value),
                       {str(k): v for k, v in value.attrs.items()}])
    if isinstance(value, np.ndarray):
        return parts_digest([str(value.dtype), value.shape, value.tolist()])
    return value


class Memo:
    """Pickled values under ``<root>/<key id>/<label>-<digest of parts>.memo``, each authenticated by an HMAC
    under this user's key (``memo_key``); ``label`` says what a value is.

    The folder is named by a digest of the key, so users (or homes) sharing one cache each keep their own memos
    instead of refusing and overwriting each other's on every run; a file planted in one's folder is refused.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._key: bytes | None = None

    @property
    def key(self) -> bytes:
        """This user's key, which must lie outside the cache that holds ``root`` (``<cache>/memo``)."""
        if self._key is None:
            self._key = memo_key(self.root.parent)
        return self._key

    @property
    def folder(self) -> Path:
        """This key's memos (its name reveals nothing of the key)."""
        return self.root / hashlib.sha256(b"nevir memo folder\0" + self.key).hexdigest()[:16]

    def path(self, label: str, parts: object) -> Path:
        return self.folder / f"{label}-{parts_digest(parts)}.memo"

    def _tag(self, path: Path, payload: bytes) -> bytes:
        """The HMAC of a memo's bytes and its name (a memo copied under another key's name does not verify)."""
        return hmac.new(self.key, path.name.encode() + b"\0" + payload, hashlib.sha256).digest()

    def _load(self, path: Path) -> Any:
        """The value in ``path``; ``ValueError`` unless it is a regular file (never read through a link) whose HMAC
        verifies (only then is it unpickled)."""
        data = read_regular(path, "memo")
        head, tag, payload = data[:len(MAGIC)], data[len(MAGIC):len(MAGIC) + _TAG], data[len(MAGIC) + _TAG:]
        if head != MAGIC or not hmac.compare_digest(tag, self._tag(path, payload)):
            raise ValueError("its HMAC does not verify under this user's memo key (altered, planted, or written "
                             "by another user): not loaded")
        return pickle.loads(payload)  # authenticated: these bytes were written by this user's own process

    def get(self, label: str, parts: object, compute: Callable[[], T], keep: Callable[[T], bool] | None = None) -> T:
        """The value kept under ``parts``, else ``compute()``, kept unless ``keep`` says it is not final."""
        path = self.path(label, parts)
        if os.path.lexists(path):
            try:
                return self._load(path)
            except (ValueError, pickle.UnpicklingError, EOFError, OSError) as exc:
                warnings.warn(MemoWarning(f"memo {label} {path}: {exc}; recomputing it"), stacklevel=2)
                discard(path)
        value = compute()
        if keep is not None and not keep(value):
            return value
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        atomic_write(path, lambda p: p.write_bytes(MAGIC + self._tag(path, payload) + payload))
        return value


#: Per object, the values its ``per_instance`` methods computed: weakly keyed, so they go with the object, and keyed by
#: the object itself, so a copy of it (a sequential sample's look) starts with none of them.
_PER_INSTANCE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def per_instance(method: Callable[..., T]) -> Callable[..., T]:
    """A method's value kept per object and arguments: it goes with the object, so a process that evaluates five
    times holds one session's values, not five (a class-level ``functools.cache`` keyed on ``self`` would keep
    every session alive)."""
    name = method.__name__

    @functools.wraps(method)
    def getter(self: Any, *args: Any, **kwargs: Any) -> T:
        values = _PER_INSTANCE.setdefault(self, {})
        key = (name, args, tuple(sorted(kwargs.items())))
        if key not in values:
            values[key] = method(self, *args, **kwargs)
        return values[key]

    return getter
