"""Requests spread over several endpoints of one model (``url`` a list, ``docs/protocol.md#endpoints``).

An :class:`EndpointPool` spreads requests by least outstanding work, at most ``concurrency`` in flight per
endpoint. An endpoint that stops answering (refused or dropped connection, silence past ``timeout_s``) is taken
out while others remain, and each of its requests in flight is sent again to another one: every request comes
back once, with the endpoint that answered it and those it was taken from. An endpoint that answers with an
HTTP error stays in: that is an answer, recorded as the input's reason. Scores never depend on the endpoint (the
cache key has no URL). Each request goes through ``rankers.scorers.http.post_json``.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, TypeVar

import httpx

from rankers.scorers.http import KeepAliveTransport, Reply, base_urls, post_json

T = TypeVar("T")


class Sent(NamedTuple):
    """A request's reply, the endpoint that gave it and the endpoints it was taken from, each with the reason
    (each of them is out)."""

    reply: Reply
    endpoint: str | None
    resent_from: tuple[tuple[str, str], ...]


def endpoint_record(endpoint: str | None, resent_from: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """The usage entries naming a judgment's server: ``endpoint`` and, when re-sent, ``resent_from``."""
    out: dict[str, Any] = {}
    if endpoint is not None:
        out["endpoint"] = endpoint
    if resent_from:
        out["resent_from"] = dict(resent_from)
    return out


class EndpointPool:
    """Base URLs serving one model; keeps which were taken out (and why) across calls of the same scorer."""

    def __init__(self, urls: Sequence[str], per_endpoint: int, what: str = "server") -> None:
        if isinstance(per_endpoint, bool) or not isinstance(per_endpoint, int) or per_endpoint < 1:
            raise ValueError(f"concurrency per endpoint must be an integer >= 1, got {per_endpoint!r}")
        self.urls = base_urls(list(urls), what)
        self.per_endpoint = per_endpoint
        #: Endpoint -> the reason it was taken out (its first unanswered request).
        self.removed: dict[str, str] = {}

    @property
    def alive(self) -> list[str]:
        return [u for u in self.urls if u not in self.removed]

    @property
    def capacity(self) -> int:
        """Requests in flight at most: ``per_endpoint`` on every endpoint still in."""
        return self.per_endpoint * max(len(self.alive), 1)

    def dispatcher(self, headers: dict[str, str] | None = None,
                   transport: httpx.AsyncBaseTransport | None = None) -> Dispatcher:
        """The in-flight bookkeeping of one event loop's batch of requests (``transport``: one for every slot, a
        test's mock; by default each slot has a :class:`KeepAliveTransport` of its own)."""
        return Dispatcher(self, headers or {}, transport)


class Dispatcher:
    """Sends requests over an :class:`EndpointPool`: least outstanding first, ``per_endpoint`` at most each.

    Each slot (one request in flight) has a connection of its own (:class:`KeepAliveTransport`): a shared
    connection pool scans all its connections for every request, which at 64 and more in flight costs the
    client more than the request itself (``specs/bench_client.py``). Use as ``async with``: the slots'
    connections close at the end.
    """

    def __init__(self, pool: EndpointPool, headers: dict[str, str],
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.pool = pool
        self.headers = headers
        self.shared = transport
        self.outstanding = dict.fromkeys(pool.urls, 0)
        self.idle: dict[str, list[httpx.AsyncBaseTransport]] = {u: [] for u in pool.urls}
        self.made: list[KeepAliveTransport] = []
        self.changed = asyncio.Condition()

    async def __aenter__(self) -> Dispatcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for transport in self.made:
            await transport.aclose()

    def _connect(self) -> httpx.AsyncBaseTransport:
        if self.shared is not None:
            return self.shared
        self.made.append(KeepAliveTransport())
        return self.made[-1]

    async def _acquire(self) -> tuple[str, httpx.AsyncBaseTransport]:
        async with self.changed:
            while True:
                free = [u for u in self.pool.alive if self.outstanding[u] < self.pool.per_endpoint]
                if free:
                    chosen = min(free, key=lambda u: self.outstanding[u])  # ties: the declared order
                    self.outstanding[chosen] += 1
                    return chosen, self.idle[chosen].pop() if self.idle[chosen] else self._connect()
                await self.changed.wait()

    async def _release(self, url: str, http: httpx.AsyncBaseTransport, reply: Reply | None) -> bool:
        """Count ``url``'s request as done; True when it went unanswered there and must go to another endpoint
        (``url`` is then out: taken out now, unless it is the last one in, or by an earlier request)."""
        async with self.changed:
            self.outstanding[url] -= 1
            self.idle[url].append(http)
            again = reply is not None and reply.down
            if again and url not in self.pool.removed:
                if len(self.pool.alive) > 1:
                    self.pool.removed[url] = str(reply.error)
                else:
                    again = False
            self.changed.notify(1)  # one slot freed: one waiter (waking all would cost O(waiters) per reply)
            return again

    async def each(self, count: int, job: Callable[[int], Awaitable[T]]) -> list[T]:
        """``job(i)`` for every ``i < count`` in turn, by one worker per slot (``pool.capacity`` of them); the results
        in order.

        A worker takes the next input as soon as its request ends, in the same step of the event loop: a task per
        input waiting for a freed slot was woken only after the loop had handled every other reply ready by then,
        which at 64 in flight idled each slot 3.5 ms per request (``specs/bench_client.py``).
        """
        results: dict[int, T] = {}
        todo = iter(range(count))

        async def worker() -> None:
            for i in todo:  # one iterator shared by the workers: each input is taken once
                results[i] = await job(i)

        await asyncio.gather(*(worker() for _ in range(min(self.pool.capacity, count))))
        return [results[i] for i in range(count)]

    async def send(self, path: str, body: dict[str, Any], *, timeout_s: float, retries: int,
                   read: Callable[[Any], T]) -> Sent:
        """One request to the least busy endpoint; again to another while the one tried stops answering.

        The last endpoint in is never taken out: with none left, its failure is the request's reason.
        """
        resent_from: list[tuple[str, str]] = []
        while True:
            url, http = await self._acquire()
            reply: Reply | None = None
            try:
                reply = await post_json(http, url + path, body, timeout_s=timeout_s, retries=retries, read=read,
                                        headers=self.headers, where=url + path)
            finally:
                again = await self._release(url, http, reply)
            if not again:
                return Sent(reply, url, tuple(resent_from))
            resent_from.append((url, str(reply.error if reply is not None else "no reply")))
