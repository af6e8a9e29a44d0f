"""Reading a profile file and its ``extends`` chain: TOML, merged table by table, every key and value checked.

Each file is checked as it is read, so an error names the file that holds the value, its table and its
key; the strings it sets remember its folder (``FromFile``), where a path among them resolves, and each
check remembers the file that wrote it (``Origins``: docs/statistics.md#inherited-checks).
"""
from __future__ import annotations

import math
import tomllib
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fixtures.settings import PROJECT_ROOT
from harness.profile_records import ProfileError
from harness.profile_terms import (CLAIM_NAME_MAX, FREE_TEXT, GATES, KEY_NAME, LENGTH_LIMITS, NAME_MAX,
                                   NAMED_ELSEWHERE, NAMES, OPTION_VALUE_MAX, PROFILE_DIR, PROFILE_KEYS, RANKER_GATES,
                                   TOP_LEVEL, UNPRINTABLE, VALUE_MAX)


def resolve_path(name_or_path: str, relative_to: Path | None = None) -> Path:
    """A profile by name (specs/profiles/<name>.toml) or by path (relative to the extending file)."""
    path = Path(name_or_path).expanduser()
    if not path.suffix:
        path = PROFILE_DIR / f"{name_or_path}.toml"
    elif not path.is_absolute() and relative_to is not None:
        path = relative_to.parent / path
    if not path.is_file():
        known = sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))
        raise ProfileError(f"profile {name_or_path!r} not found ({path}); known profiles: {known}, or give a path")
    return path


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: not UTF-8 text ({exc})") from exc


def _merge(base: dict[str, Any], child: Mapping[str, Any], depth: int) -> dict[str, Any]:
    """Merge tables key by key down to ``depth`` levels; deeper values are replaced whole."""
    out = dict(base)
    for key, value in child.items():
        if depth > 0 and isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value, depth - 1)
        else:
            out[key] = value
    return out


def check_keys(path: Path, where: str, table: Mapping[str, Any], allowed: tuple[str, ...], what: str = "key") -> None:
    """The one check for keys a table does not take: names the file, the table (``where``; "" for the top) and them."""
    unknown = [k for k in table if k not in allowed]
    if unknown:
        at = f"{path} [{where}]" if where else str(path)
        raise ProfileError(f"{at}: unknown {what}(s) {unknown}; allowed: {list(allowed)}")


def _unprintable(text: str, prose: bool) -> str | None:
    """The first character of ``text`` a name (or, with ``prose``, a text that may break lines) may not hold."""
    for ch in text:
        if prose and ch in "\t\n\r":
            continue
        if unicodedata.category(ch) in UNPRINTABLE:
            return ch
    return None


def _longest(key: str, depth: int) -> int:
    """The most characters a string under ``key`` may hold: a label's or prose's limit, or ``VALUE_MAX``, in the
    profile's own tables; ``OPTION_VALUE_MAX`` in a factory's own options (deeper)."""
    return LENGTH_LIMITS.get(key, VALUE_MAX) if depth <= 2 else OPTION_VALUE_MAX


def _check_values(path: Path, table: Mapping[str, Any], where: str = "", depth: int = 0) -> None:
    """Every name portable and bounded (``profile_terms.KEY_NAME``, ``NAMES``), every string free of control
    characters, labels and prose within their lengths (``profile_terms.LENGTH_LIMITS``) and every other string
    within ``VALUE_MAX``, every number finite (``nan``, ``inf`` are valid TOML).

    Checked per file as read, so the error names the file that holds the value, its table and its key. Lengths
    apply to the profile's own tables (``depth`` 1: ``[profile]``; 2: ``[rankers.<name>]``...), not to the free
    ``options`` a factory receives.
    """
    for key, value in table.items():
        inner = f"{where}.{key}" if where else key
        bad = _unprintable(str(key), prose=False)
        if bad is not None:
            raise ProfileError(f"{path} [{where or key}]: the name {key!r} contains the control character "
                               f"U+{ord(bad):04X}; names must be printable")
        if where not in NAMED_ELSEWHERE and not (NAMES.get(where) or KEY_NAME).fullmatch(str(key)):
            most = CLAIM_NAME_MAX if where in NAMES else NAME_MAX
            raise ProfileError(f"{path} [{where or key}]: the name {ascii(str(key)[:80])} must be portable: 1 to "
                               f"{most} of A-Z a-z 0-9 . _ -{' @' if where in NAMES else ''}, a letter or digit first "
                               "(names reach file names, CSV columns and the terminal in any locale)")
        if isinstance(value, Mapping):
            _check_values(path, value, inner, depth + 1)
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, Mapping):
                _check_values(path, item, inner, depth + 1)
            elif isinstance(item, float) and not math.isfinite(item):
                raise ProfileError(f"{path} [{where or key}]: {key!r} must be a finite number, got {item!r}")
            elif isinstance(item, str) and len(item) > (most := _longest(key, depth)):
                raise ProfileError(f"{path} [{where or key}]: {key!r} holds {len(item):,} characters; at most "
                                   f"{most:,} are allowed")
            elif isinstance(item, str) and (bad := _unprintable(item, prose=key in FREE_TEXT)) is not None:
                raise ProfileError(f"{path} [{where or key}]: {key!r} = {item!r} contains the control character "
                                   f"U+{ord(bad):04X}")


class FromFile(str):
    """A string a profile file sets, remembering that file's folder: where it resolves if it is a path."""

    base: Path

    def __new__(cls, value: str, base: Path) -> FromFile:
        out = super().__new__(cls, value)
        out.base = base
        return out


def _pythonpath(path: Path, head: Mapping[str, Any]) -> list[str]:
    """``[profile] pythonpath``: folders relative to this file, each checked to exist."""
    value = head.get("pythonpath", [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ProfileError(f"{path} [profile]: pythonpath must be a list of folders (relative to the profile file), "
                           f"got {value!r}")
    folders = [(path.parent / Path(v).expanduser()).resolve() for v in value]
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise ProfileError(f"{path} [profile] pythonpath: {missing} is not a folder (paths resolve relative to "
                           f"{path.parent})")
    return [str(f) for f in folders]


def _remember_folder(path: Path, data: dict[str, Any]) -> None:
    """Mark the string values of this file's ranker, model and data tables with its folder (before any merge)."""
    for name in ("rankers", "models", "data"):
        tables = data.get(name)
        if not isinstance(tables, Mapping):
            continue
        rows = tables.values() if name == "rankers" else [tables]
        for table in rows:
            if isinstance(table, dict):
                for key, value in table.items():
                    if isinstance(value, str):
                        table[key] = FromFile(value, path.parent)


#: Where each check was written: ("claims", name, key), ("gates", key), ("gates", ranker, key) and
#: ("pins", scope, split, ranker) -> the file of the extends chain that wrote it last (what merging keeps).
Origins = dict[tuple[str, ...], Path]
#: How deep a check's key lies in its table: what ``_merge`` replaces whole below it.
CHECK_DEPTHS = {"claims": 2, "gates": 2, "pins": 3}


def _origins(path: Path, data: Mapping[str, Any]) -> Origins:
    """The checks this one file writes, each mapped to the file."""
    out: Origins = {}

    def walk(where: tuple[str, ...], value: Any, depth: int) -> None:
        if depth == 0 or not isinstance(value, Mapping):
            out[where] = path
            return
        for key, inner in value.items():
            walk((*where, key), inner, depth - 1)

    for table, depth in CHECK_DEPTHS.items():
        if isinstance(data.get(table), Mapping):
            walk((table,), data[table], depth)
    return out


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_gates(path: Path, table: Any) -> None:
    """``[gates]`` as one file writes it: profile-wide keys with numbers, ``[gates.<ranker>]`` tables of ranker gates."""
    if table is None:
        return
    if not isinstance(table, Mapping):
        raise ProfileError(f"{path} [gates]: must be a table")
    for key, value in table.items():
        if isinstance(value, Mapping):
            for gate, limit in value.items():
                if gate not in RANKER_GATES or not is_number(limit):
                    raise ProfileError(f"{path} [gates.{key}]: {gate!r} must be one of {list(RANKER_GATES)} with a "
                                       "number")
        elif key not in GATES or not is_number(value):
            raise ProfileError(f"{path} [gates]: {key!r} must be one of {list(GATES)} with a number, or a table "
                               f"[gates.<ranker>] of {list(RANKER_GATES)} (quality gates are per ranker)")


def read_chain(path: Path, seen: tuple[Path, ...] = ()) -> tuple[dict[str, Any], tuple[Path, ...], Origins]:
    if path.resolve() in seen:
        raise ProfileError(f"{path}: [profile] extends forms a cycle: {' -> '.join(map(str, (*seen, path)))}")
    data = _read(path)
    _check_values(path, data)
    check_keys(path, "", data, TOP_LEVEL, "table")
    head = data.get("profile")
    if not isinstance(head, Mapping) or not head.get("name"):
        raise ProfileError(f"{path}: missing [profile] table with a 'name'")
    check_keys(path, "profile", head, PROFILE_KEYS)
    if not isinstance(head.get("inherit_checks", False), bool):
        raise ProfileError(f"{path} [profile]: inherit_checks must be true or false, got {head['inherit_checks']!r}")
    _check_gates(path, data.get("gates"))
    _remember_folder(path, data)
    own = _pythonpath(path, head)
    origins = _origins(path.resolve(), data)
    parent_name = head.get("extends")
    if not parent_name:
        return {**data, "profile": {**head, "pythonpath": own}}, (path.resolve(),), origins
    try:
        parent_path = resolve_path(str(parent_name), path)
    except ProfileError as exc:
        raise ProfileError(f"{path} [profile] extends: {exc}") from None
    parent, chain, inherited_origins = read_chain(parent_path, (*seen, path.resolve()))
    merged = _merge(parent, {k: v for k, v in data.items() if k != "profile"}, depth=3)
    inherited = [p for p in parent["profile"]["pythonpath"] if p not in own]
    merged["profile"] = {**head, "pythonpath": own + inherited}
    return merged, (*chain, path.resolve()), {**inherited_origins, **origins}


def shown(path: Path) -> str:
    """A declaring file as messages and claims.csv name it: relative to the checkout when it lies inside it."""
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)

