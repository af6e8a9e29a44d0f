"""A saved run of the results history written by hand, laid out and sealed as ``reports.history.save_to_history``
seals one (``entry.json``: every file's sha256 under an HMAC with the user's key), for tests of what reads it."""
from __future__ import annotations

import json
from pathlib import Path

from fixtures.identity import folder_digests
from fixtures.userkey import seal_tag
from reports.history import ENTRY, ENTRY_PURPOSE, HISTORY, _entry_bytes


def seal_entry(results: Path, run_id: str) -> Path:
    """Write ``entry.json`` for the split folders already under ``results/.history/<run_id>``; its folder."""
    entry = Path(results) / HISTORY / run_id
    index = {"run_id": run_id, "splits": {p.name: folder_digests(p) for p in sorted(entry.iterdir()) if p.is_dir()}}
    index["hmac"] = seal_tag(ENTRY_PURPOSE, _entry_bytes(index))
    (entry / ENTRY).write_text(json.dumps(index, indent=1, sort_keys=True), encoding="utf-8")
    return entry
