"""The HTTP client side every server-backed scorer shares: URL checks, bounded requests, error text.

Used by the OpenAI-compatible LLM backend and the rerank API scorer. A request never raises for
one bad answer: ``post_json`` returns the parsed value or the reason it has none (HTTP status,
timeout, refused connection, malformed body), so the caller marks those inputs unavailable and
the window falls back for them. Each attempt is bounded end to end by ``timeout_s`` (connect,
queueing on the server, generation), so a dead or stuck server costs at most
``(retries + 1) * timeout_s`` per request; retries are off by default (a retried timeout on an
overloaded server only adds load). ``check_reachable`` is the before-any-work check of a declared
server: one cheap GET with a short timeout, any HTTP answer counting as reachable.

Several endpoints of one server (``url`` a list) are spread by ``rankers.scorers.endpoints``.
"""
from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import re
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple, TypeVar

import h11
import httpx

from fixtures import progress
from rankers.scorers.causes import exception_cause, host_of, server_cause

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


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verifying TLS context for every client: loading the CA store costs ~0.1 s each time it is built."""
    return httpx.create_ssl_context()


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """One slot's HTTP/1.1 keep-alive connection over asyncio streams, framed by h11: all a slot needs.

    httpx's default transport (httpcore over anyio) spends ~1.5 ms of CPU per request on this project's 2-core
    machine, ten times what the suite spends building and reading it; this one a fraction of that
    (``specs/bench_client.py``). A connection the server closed while idle is opened again once, before any
    answer byte; a connection that drops mid-request raises ``httpx.RemoteProtocolError``, as httpx's does.
    """

    def __init__(self) -> None:
        self._origin: tuple[str, str, int] | None = None
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._h11: h11.Connection | None = None

    async def _open(self, origin: tuple[str, str, int]) -> None:
        await self.aclose()
        scheme, host, port = origin
        try:
            self._streams = await asyncio.open_connection(host, port, ssl=_tls() if scheme == "https" else None)
        except OSError as exc:
            raise httpx.ConnectError(error_text(exc)) from exc
        self._origin, self._h11 = origin, h11.Connection(h11.CLIENT)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        body = await request.aread()
        reused = self._streams is not None and self._origin == origin
        if not reused:
            await self._open(origin)
        try:
            return await self._exchange(request, body)
        except _Stale as exc:
            if not reused:
                raise httpx.RemoteProtocolError(str(exc), request=request) from None
            await self._open(origin)  # the server closed the idle connection: once more on a fresh one
            return await self._exchange(request, body)

    async def _exchange(self, request: httpx.Request, body: bytes) -> httpx.Response:
        assert self._streams is not None and self._h11 is not None
        reader, writer = self._streams
        conn = self._h11
        headers = [(b"Host", request.url.netloc), (b"Accept-Encoding", b"identity"),
                   *((k, v) for k, v in request.headers.raw if k.lower() not in (b"host", b"accept-encoding"))]
        try:
            writer.write(conn.send(h11.Request(method=request.method.encode(), target=request.url.raw_path,
                                               headers=headers)) + conn.send(h11.Data(data=body))
                         + conn.send(h11.EndOfMessage()))
            status, reply_headers, chunks, answered = 0, [], [], False
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await reader.read(65536)
                    if not data and not answered:
                        await self.aclose()
                        raise _Stale("Server disconnected without sending a response.")
                    conn.receive_data(data)
                    answered = answered or bool(data)
                elif isinstance(event, h11.Response):
                    status, reply_headers = event.status_code, event.headers
                elif isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    break
        except h11.RemoteProtocolError as exc:
            await self.aclose()
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        except (ConnectionError, OSError) as exc:
            await self.aclose()
            raise httpx.ReadError(error_text(exc), request=request) from exc
        except BaseException:  # cancelled mid-exchange (a timeout): the connection is mid-message, never reuse it
            await self.aclose()
            raise
        if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
            await self.aclose()
        else:
            conn.start_next_cycle()
        return httpx.Response(status, headers=[(bytes(k), bytes(v)) for k, v in reply_headers],
                              content=b"".join(chunks), request=request)

    async def aclose(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
        self._streams = self._h11 = self._origin = None


class _Stale(httpx.RemoteProtocolError):
    """A reused connection ended before any answer byte (the server closed it while idle)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


@functools.lru_cache(maxsize=256)
def _parsed(url: str) -> httpx.URL:
    """``url`` parsed once: httpx parses a string URL on every request (15 us of the client's ~0.3 ms of CPU each)."""
    return httpx.URL(url)


class Reply(NamedTuple):
    """One request's end: the parsed value or the reason it has none; ``down`` when the endpoint did not answer
    at all (refused or dropped connection, timeout), as opposed to answering with an error."""

    value: Any
    error: str | None
    seconds: float
    down: bool = False
    #: The error's short cause (``rankers.scorers.causes``), set where the error is found.
    cause: str | None = None


async def post_json(transport: httpx.AsyncBaseTransport, url: str, body: dict[str, Any], *, timeout_s: float,
                    retries: int, read: Callable[[Any], T], headers: dict[str, str] | None = None,
                    where: str = "") -> Reply:
    """``Reply(read(response JSON), None, seconds)``, or ``Reply(None, reason, seconds, down)`` after the last attempt.

    The request goes straight to ``transport`` (no client layer: no redirects, cookies or auth flows, which a
    JSON POST to a model server never needs, and which cost more CPU than the request). ``read`` raises
    ValueError for a body off the contract; ``where`` (e.g. the endpoint) is added to every reason. ``seconds``
    is the last attempt's.
    """
    suffix = f" ({where})" if where else ""
    host = host_of(url)
    error, down, cause = "not attempted", False, "not attempted"
    start = time.perf_counter()
    for _ in range(retries + 1):
        start = time.perf_counter()
        down = False
        try:
            with progress.waiting():  # a stage's heartbeat says how long the oldest request has waited
                async with asyncio.timeout(timeout_s):
                    response = await transport.handle_async_request(
                        httpx.Request("POST", _parsed(url), json=body, headers=headers))
                    await response.aread()
            if response.status_code != 200:
                error = f"HTTP {response.status_code}{suffix}: {response.text[:300]}"
                cause = server_cause(f"HTTP {response.status_code}", host)
                continue
            return Reply(read(response.json()), None, time.perf_counter() - start)
        except TimeoutError:
            error, down = f"timeout after {timeout_s:g}s{suffix}", True
            cause = server_cause(f"timeout after {timeout_s:g}s", host, "to")
        except (httpx.HTTPError, OSError) as exc:
            error, down = f"{error_text(exc)}{suffix}", isinstance(exc, (httpx.TransportError, OSError))
            cause = exception_cause(exc, host)
        except ValueError as exc:  # json.JSONDecodeError included, and a reply off the contract
            error = f"malformed response{suffix}: {error_text(exc)}"
            decoding = isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError))
            cause = server_cause(type(exc).__name__ if decoding else "malformed reply", host)
    return Reply(None, error, time.perf_counter() - start, down, cause)


def base_urls(url: object, what: str = "server") -> list[str]:
    """``url`` (one base URL or a list of them) as checked base URLs, or a ValueError naming the bad one."""
    urls = url if isinstance(url, (list, tuple)) else [url]
    if not urls:
        raise ValueError(f"{what} url list is empty; give one base URL or a list of them")
    checked = [check_base_url(u, what) for u in urls]
    repeated = sorted({u for u in checked if checked.count(u) > 1})
    if repeated:
        raise ValueError(f"{what} url list names {repeated} more than once")
    return checked
