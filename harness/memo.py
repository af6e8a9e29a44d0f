"""Content-keyed memos: a warm run reads what an earlier run derived from exactly the same inputs.

A memo's key is a digest of everything its value depends on — input files' digests, the
code that computes it and the libraries it imports (``fixtures.code``), declared options —
so a changed input, a code edit or an upgraded library gives a new key and the value is
recomputed; nothing is ever invalidated by hand (``docs/protocol.md#caches``).

Values are pickled, and the load is authenticated: each memo file carries an HMAC-SHA256 of its name and bytes
under a per-user key kept outside the cache (``memo_key_path``: ``~/.config/preference-position/memo.key``, mode
0600, or ``$NEVIR_MEMO_KEY``), and ``pickle.loads`` runs only on bytes whose HMAC verifies. A memo planted in a
shared cache, written by another user, or altered is named in one warning, never unpickled, and recomputed. Why
an HMAC and not a data format: memos hold values of every layer (rankings, outcome frames, judged stages, claim
tests, populations, plain dicts), so a data format would need one codec per type, each a place for a value to be
stored wrongly; the HMAC keeps one simple path for all of them, and whoever can read the key can already run code
as this user. A plain digest beside the file (as other artifacts are sealed) would not do: whoever writes the file
can write its digest too.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import secrets
import stat
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from fixtures.artifacts import atomic_write
from fixtures.identity import frame_digest, json_digest

T = TypeVar("T")

#: The environment variable naming the memo key file (tests, or a home that cannot be written).
KEY_ENV = "NEVIR_MEMO_KEY"
#: What a memo file starts with, before its HMAC and the pickled value.
MAGIC = b"nevir-memo hmac-sha256 v1\n"
_TAG = hashlib.sha256().digest_size


class MemoWarning(UserWarning):
    """A memo was refused (its HMAC does not verify, or it cannot be read) and is being recomputed."""


class MemoKeyError(RuntimeError):
    """The per-user memo key cannot be made or is not private to this user."""


def memo_key_path() -> Path:
    """``$NEVIR_MEMO_KEY``, else ``preference-position/memo.key`` under ``$XDG_CONFIG_HOME`` (default ``~/.config``)."""
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV]).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / "preference-position" / "memo.key"


def _create_key(path: Path) -> None:
    """A new random key at ``path`` (mode 0600), unless another process made one first: written under a private
    temporary name and linked into place, so no process ever reads a half-written key."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it: use that one
    finally:
        tmp.unlink(missing_ok=True)


def memo_key(cache_root: Path) -> bytes:
    """This user's memo key, made on first use; refused (``MemoKeyError``, naming the file) when it lies inside the
    cache, belongs to another user, or others may read or write it."""
    path = memo_key_path()
    where = f"memo key {path} (set {KEY_ENV} to choose another file)"
    if path.resolve().is_relative_to(Path(cache_root).resolve()):
        raise MemoKeyError(f"{where}: lies inside the cache {cache_root}, where whoever writes the cache could "
                           "read it; keep it outside")
    try:
        if not path.exists():
            _create_key(path)
        info = path.stat()
        key = path.read_bytes()
    except OSError as exc:
        raise MemoKeyError(f"{where}: cannot be made or read ({exc})") from exc
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise MemoKeyError(f"{where}: must belong to this user with mode 0600 (it has uid {info.st_uid}, mode "
                           f"{stat.S_IMODE(info.st_mode):o}): chmod 600 it, or remove it to make a new one")
    if len(key) < 32:
        raise MemoKeyError(f"{where}: holds {len(key)} bytes, fewer than 32; remove it to make a new one")
    return key


def digest(parts: object) -> str:
    """Digest of JSON-able parts (dict keys in any order)."""
    return json_digest(parts, default=str)[:24]


def items_digest(items: Iterable[tuple[Any, ...]]) -> str:
    """Order-independent digest of rows (e.g. (qid, pid, score) of a ranker's text scores)."""
    h = hashlib.sha256()
    for row in sorted(repr(tuple(r)) for r in items):
        h.update(row.encode())
    return h.hexdigest()[:24]


def texts_digest(rows: Iterable[tuple[str, ...]]) -> str:
    """Digest of rows of texts in their order (e.g. a judging stage's (qid, pid, query, passage) inputs)."""
    h = hashlib.sha256()
    for row in rows:
        h.update(b"".join(str(text).encode() + b"\0" for text in row) + b"\1")
    return h.hexdigest()[:24]


def content(value: object) -> object:
    """A value as it enters a memo key: a frame by its columns, dtypes, row hashes and attrs (a ranker's outcomes carry
    its name there); an array by its bytes; anything else as it is (JSON-able)."""
    if isinstance(value, pd.DataFrame):
        return digest([[str(c) for c in value.columns], [str(t) for t in value.dtypes], frame_digest(value),
                       {str(k): v for k, v in value.attrs.items()}])
    if isinstance(value, np.ndarray):
        return digest([str(value.dtype), value.shape, value.tolist()])
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
        return self.folder / f"{label}-{digest(parts)}.memo"

    def _tag(self, path: Path, payload: bytes) -> bytes:
        """The HMAC of a memo's bytes and its name (a memo copied under another key's name does not verify)."""
        return hmac.new(self.key, path.name.encode() + b"\0" + payload, hashlib.sha256).digest()

    def _load(self, path: Path) -> Any:
        """The value in ``path``; ``ValueError`` unless its HMAC verifies (only then is it unpickled)."""
        data = path.read_bytes()
        head, tag, payload = data[:len(MAGIC)], data[len(MAGIC):len(MAGIC) + _TAG], data[len(MAGIC) + _TAG:]
        if head != MAGIC or not hmac.compare_digest(tag, self._tag(path, payload)):
            raise ValueError("its HMAC does not verify under this user's memo key (altered, planted, or written "
                             "by another user): not loaded")
        return pickle.loads(payload)  # authenticated: these bytes were written by this user's own process

    def get(self, label: str, parts: object, compute: Callable[[], T], keep: Callable[[T], bool] | None = None) -> T:
        """The value kept under ``parts``, else ``compute()``, kept unless ``keep`` says it is not final."""
        path = self.path(label, parts)
        if path.is_file():
            try:
                return self._load(path)
            except (ValueError, pickle.UnpicklingError, EOFError, OSError) as exc:
                warnings.warn(MemoWarning(f"memo {label} {path}: {exc}; recomputing it"), stacklevel=2)
                path.unlink(missing_ok=True)
        value = compute()
        if keep is not None and not keep(value):
            return value
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        atomic_write(path, lambda p: p.write_bytes(MAGIC + self._tag(path, payload) + payload))
        return value
