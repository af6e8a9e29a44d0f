"""The HTTP client side every server-backed scorer shares: URL checks, bounded requests, error text.

Used by the OpenAI-compatible LLM backend and the rerank API scorer. A request never raises for
one bad answer: ``post_json`` returns the parsed value or the reason it has none (HTTP status,
timeout, refused connection, malformed body), so the caller marks those inputs unavailable and
the window falls back for them. Each attempt is bounded end to end by ``timeout_s`` (connect,
queueing on the server, generation), so a dead or stuck server costs at most
``(retries + 1) * timeout_s`` per request; retries are off by default (a retried timeout on an
overloaded server only adds load). ``check_reachable`` is the before-any-work check of a declared
server: one cheap GET with a short timeout, any HTTP answer counting as reachable.
"""
from __future__ import annotations

import asyncio
import ipaddress
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx

T = TypeVar("T")
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?")


def error_text(exc: BaseException) -> str:
    """``Type: message`` (or the type alone when the message is empty): how a failure is recorded."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def check_base_url(url: object, what: str = "server") -> str:
    """A server's base URL without a trailing slash, or a ValueError naming it and what is wrong.

    Accepted: http or https, a host name or address, a port in 1..65535 if any, a path; no query
    or fragment (the client appends its routes).
    """
    example = "expected e.g. http://127.0.0.1:8000/v1"
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"{what} URL {url!r} is empty; {example}")
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{what} URL {url!r} is not an http(s) URL: scheme must be http or https, "
                         f"got {parts.scheme!r}; {example}")
    if not parts.hostname:
        raise ValueError(f"{what} URL {url!r} is not an http(s) URL: no host; {example}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{what} URL {url!r} has an invalid port ({exc}); expected 1-65535") from None
    if port == 0:
        raise ValueError(f"{what} URL {url!r} has an invalid port (0, outside 1..65535)")
    if not _HOST.fullmatch(parts.hostname) and not _is_ip(parts.hostname):
        raise ValueError(f"{what} URL {url!r} is malformed: host {parts.hostname!r} is not a host name or address")
    if parts.query or parts.fragment:
        raise ValueError(f"{what} URL {url!r}: give the server's base URL without query or fragment")
    try:
        httpx.URL(url.strip())
    except httpx.InvalidURL as exc:
        raise ValueError(f"{what} URL {url!r} is malformed: {exc}") from None
    return url.strip().rstrip("/")


#: Seconds the before-any-work check waits for a server: to connect, and for the whole answer.
REACH_CONNECT_S, REACH_TOTAL_S = 5.0, 10.0


def check_reachable(url: str, path: str = "", what: str = "server") -> None:
    """A ValueError naming the URL and why unless ``GET {url}{path}`` gets an HTTP answer (any status) in time.

    Any status counts: a server that says 404 or 405 to the probe is there and speaks HTTP; what a
    scorer's own requests get is recorded per input as its reason. Refused connections, unknown
    hosts, TLS failures and silence within :data:`REACH_TOTAL_S` do not.
    """
    base = check_base_url(url, what)
    target = base + path
    try:
        with httpx.Client(timeout=httpx.Timeout(REACH_TOTAL_S, connect=REACH_CONNECT_S)) as http:
            http.get(target)
    except httpx.HTTPError as exc:
        raise ValueError(f"{what} URL {base} is unreachable: {error_text(exc)} (GET {target}, "
                         f"{REACH_TOTAL_S:g} s limit); start the server or correct the url") from None


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion, also when the caller already sits in an event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    out: list[T] = []
    worker = threading.Thread(target=lambda: out.append(asyncio.run(coro)))
    worker.start()
    worker.join()
    return out[0]


def client(concurrency: int, timeout_s: float, *, base_url: str = "", headers: dict[str, str] | None = None,
           transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """An async client holding at most ``concurrency`` connections."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(base_url=base_url, timeout=timeout_s, limits=limits, headers=headers or {},
                             transport=transport)


async def post_json(client: httpx.AsyncClient, url: str, body: dict[str, Any], *, timeout_s: float, retries: int,
                    read: Callable[[Any], T], where: str = "") -> tuple[T | None, str | None, float]:
    """(value, None, seconds) from ``read(response JSON)``, or (None, reason, seconds) after the last attempt.

    ``read`` raises ValueError for a body off the contract; ``where`` (e.g. the endpoint) is added
    to every reason. ``seconds`` is the last attempt's.
    """
    suffix = f" ({where})" if where else ""
    error = "not attempted"
    start = time.perf_counter()
    for _ in range(retries + 1):
        start = time.perf_counter()
        try:
            async with asyncio.timeout(timeout_s):
                response = await client.post(url, json=body)
            if response.status_code != 200:
                error = f"HTTP {response.status_code}{suffix}: {response.text[:300]}"
                continue
            return read(response.json()), None, time.perf_counter() - start
        except TimeoutError:
            error = f"timeout after {timeout_s:g}s{suffix}"
        except (httpx.HTTPError, OSError) as exc:
            error = f"{error_text(exc)}{suffix}"
        except ValueError as exc:  # json.JSONDecodeError included, and a reply off the contract
            error = f"malformed response{suffix}: {error_text(exc)}"
    return None, error, time.perf_counter() - start
