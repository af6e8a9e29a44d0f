"""Why a judgment was unavailable, as one short cause that counts alike across judgments.

Where this suite finds out that a judgment is unavailable it says why twice: the full reason stored as the
judgment's error, and its short cause stored beside it (``usage["cause"]``): a server's HTTP status or a timeout
with the host that gave it, the exception a connection or an in-process engine raised, an unparseable, empty or
non-finite answer (:class:`Reason`, :func:`server_cause`, :func:`exception_cause`). A run counts the stored causes
(:func:`unavailable_causes`). A reason without a stored cause (one a researcher's own scorer returns, or one stored
by an earlier version) is read from its text by :func:`unavailable_cause`, so it still counts beside the others.
"""
from __future__ import annotations

import re
import urllib.parse
from collections import Counter
from typing import NamedTuple

import pandas as pd


class Reason(NamedTuple):
    """Why a judgment is unavailable, as the code that found out says it: ``cause``, short and the same for every
    judgment that failed alike (what a run counts), and ``detail``, the full reason stored as its error."""

    cause: str
    detail: str

    def __str__(self) -> str:
        return self.detail


def host_of(url: str) -> str:
    """The ``host:port`` a URL names ("" for none)."""
    return urllib.parse.urlsplit(url).netloc


def server_cause(what: str, host: str, preposition: str = "from") -> str:
    """A server-side cause with the host it concerns: "HTTP 500 from 127.0.0.1:8011", "timeout after 60s to ..."."""
    return f"{what} {preposition} {host}" if host else what


def exception_cause(exc: BaseException, host: str = "") -> str:
    """An exception as a cause: its type and, for a connection, where ("ConnectError to 127.0.0.1:8011"); without a
    host its message too, numbers masked, so failures that differ only in counts group together."""
    if host:
        return server_cause(type(exc).__name__, host, "to")
    text = " ".join(str(exc).split())
    return _masked(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)

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
    """A reason stored without its cause, read as one (:func:`stored_cause`): what failed and, for a server, where.

    E.g. ``ConnectError: [Errno 111] Connection refused (http://127.0.0.1:8011/v1/rerank)`` reads
    "ConnectError to 127.0.0.1:8011"; ``HTTP 500 (...): boom`` reads "HTTP 500 from 127.0.0.1:8011";
    ``parse: unparseable answer '3 because'`` reads "unparseable answer". Unknown reasons keep their
    first words, numbers masked, so they still group.
    """
    if not error or not error.strip():
        return "no reason recorded"
    text = " ".join(error.split())
    url = _URL.search(text)
    host = host_of(url.group(0)) if url else ""
    if (m := _HTTP_STATUS.search(text)) is not None:
        return server_cause(f"HTTP {m.group(1)}", host)
    if (m := _TIMEOUT.search(text)) is not None:
        return server_cause(f"timeout after {m.group(1).replace(' ', '')}", host, "to")
    if (m := _MALFORMED.search(text)) is not None:
        return server_cause(m.group(1), host)
    lowered = text.lower()
    cause = next((c for phrase, c in _PHRASES.items() if phrase in lowered), None)
    if cause is not None:
        return server_cause(cause, host) if cause == "malformed reply" else cause
    if (m := _EXCEPTION.search(text)) is not None:
        if host:  # a connection-level failure: where matters more than the message
            return server_cause(m.group(1), host, "to")
        return _masked(text[m.start():])
    return _masked(text)


def _masked(text: str) -> str:
    """The first words of a reason with numbers masked, so reasons that differ only in counts group together."""
    return re.sub(r"\d+", "N", text.split(" (http", 1)[0])[:80]


def stored_cause(error: object, usage: object) -> str:
    """A stored judgment's cause: the one stored with it, else read from its reason (:func:`unavailable_cause`)."""
    cause = usage.get("cause") if isinstance(usage, dict) else None
    return cause if isinstance(cause, str) and cause else unavailable_cause(error if isinstance(error, str) else None)


def unavailable_causes(frame: pd.DataFrame) -> dict[str, int]:
    """Unavailable unique (qid, pid) inputs of a scored frame (``score`` NaN) per cause, most frequent first."""
    unique = frame.drop_duplicates(["qid", "pid"])
    lost = unique[unique["score"].isna()]
    usage = lost["usage"].tolist() if "usage" in lost.columns else [None] * len(lost)
    counts = Counter(stored_cause(e, u) for e, u in zip(lost["error"].tolist(), usage))
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
