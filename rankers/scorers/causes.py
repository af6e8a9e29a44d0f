"""Why a judgment was unavailable, read from its stored reason as one short cause.

An unavailable result's stored reason reads as one short cause (:func:`unavailable_cause`: "HTTP 500 from
127.0.0.1:8011", "ConnectError to ...", "JSONDecodeError", "unparseable answer", "timeout after 60s",
"non-finite score"), so a run can say why its judgments were unavailable (:func:`unavailable_causes`). The
reasons are read as stored, so a cause is the same for a judgment made now and one stored by an earlier run.
"""
from __future__ import annotations

import re
import urllib.parse
from collections import Counter

import pandas as pd

#: Reasons as the scorers write them, read as short causes by :func:`unavailable_cause` (the first match decides).
_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")
_TIMEOUT = re.compile(r"\btimeout after ([\d.]+ ?s)\b", re.IGNORECASE)
_MALFORMED = re.compile(r"\bmalformed (?:response|reply)\b.*?\b(JSONDecodeError|UnicodeDecodeError)\b")
_EXCEPTION = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception|Timeout|Unavailable|Interrupt))\b")
_URL = re.compile(r"\bhttps?://[^\s)\]'\"]+")
#: Phrases of the scorers' reasons (lower case) and the cause each reads as.
_PHRASES = {"unparseable answer": "unparseable answer", "empty answer": "empty answer",
            "unterminated <think> block": "unterminated <think> block", "no output": "no output",
            "no message content": "no message content", "malformed response": "malformed reply",
            "malformed reply": "malformed reply", "non-finite": "non-finite score",
            "no score for this document": "no score for a document", "no numeric": "no numeric score"}


def unavailable_cause(error: str | None) -> str:
    """A stored reason as a short cause that counts alike across inputs: what failed and, for a server, where.

    E.g. ``ConnectError: [Errno 111] Connection refused (http://127.0.0.1:8011/v1/rerank)`` reads
    "ConnectError to 127.0.0.1:8011"; ``HTTP 500 (...): boom`` reads "HTTP 500 from 127.0.0.1:8011";
    ``parse: unparseable answer '3 because'`` reads "unparseable answer". Unknown reasons keep their
    first words, numbers masked, so they still group.
    """
    if not error or not error.strip():
        return "no reason recorded"
    text = " ".join(error.split())
    url = _URL.search(text)
    host = urllib.parse.urlsplit(url.group(0)).netloc if url else ""
    if (m := _HTTP_STATUS.search(text)) is not None:
        return f"HTTP {m.group(1)}" + (f" from {host}" if host else "")
    if (m := _TIMEOUT.search(text)) is not None:
        return f"timeout after {m.group(1).replace(' ', '')}" + (f" to {host}" if host else "")
    if (m := _MALFORMED.search(text)) is not None:
        return m.group(1) + (f" from {host}" if host else "")
    lowered = text.lower()
    cause = next((c for phrase, c in _PHRASES.items() if phrase in lowered), None)
    if cause is not None:
        return cause + (f" from {host}" if host and cause == "malformed reply" else "")
    if (m := _EXCEPTION.search(text)) is not None:
        if host:  # a connection-level failure: where matters more than the message
            return f"{m.group(1)} to {host}"
        return _masked(text[m.start():])
    return _masked(text)


def _masked(text: str) -> str:
    """The first words of a reason with numbers masked, so reasons that differ only in counts group together."""
    return re.sub(r"\d+", "N", text.split(" (http", 1)[0])[:80]


def unavailable_causes(frame: pd.DataFrame) -> dict[str, int]:
    """Unavailable unique (qid, pid) inputs of a scored frame (``score`` NaN) per cause, most frequent first."""
    unique = frame.drop_duplicates(["qid", "pid"])
    errors = unique.loc[unique["score"].isna(), "error"]
    counts = Counter(unavailable_cause(e if isinstance(e, str) else None) for e in errors)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
