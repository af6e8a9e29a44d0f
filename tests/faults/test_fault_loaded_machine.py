"""What a loaded machine does to the suite's own measuring instruments: a thread that runs late must not change what
a test counts. Each case forces the late thread with an event, so the interleaving a busy core produces once in a
thousand runs happens every run."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from rankers.scorers.rerank_api import RerankAPIScorer
from tests.support.rerank_server import contract_rerank_server


def test_a_handler_finishing_late_is_not_counted_beside_the_next_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rerank server's ``peak`` counts requests received and not yet answered. A handler thread that has sent its
    reply but not yet finished (descheduled on a busy core) must not count beside the client's next request: that
    read as a client breaking its concurrency bound (a peak of 3 under ``concurrency=2`` in a loaded CI run)."""
    second_arrived = threading.Event()
    original_setup = BaseHTTPRequestHandler.setup

    def setup_with_late_finish(handler: BaseHTTPRequestHandler) -> None:
        original_setup(handler)
        wfile = handler.wfile

        class LateAfterReply:
            """The handler's writer: after the reply's body is out, the thread waits for the next request."""

            def write(self, data: bytes) -> int:
                written = wfile.write(data)
                if not bytes(data).startswith(b"HTTP/"):  # the body (the status line and headers go first)
                    second_arrived.wait(timeout=60)
                return written

            def __getattr__(self, name: str) -> Any:
                return getattr(wfile, name)

        handler.wfile = LateAfterReply()  # type: ignore[assignment]

    monkeypatch.setattr(BaseHTTPRequestHandler, "setup", setup_with_late_finish)
    with contract_rerank_server(lambda q, d: float(len(d))) as server:
        answer = server.answer

        def answer_and_release(path: str, body: dict[str, Any]) -> tuple[int, bytes]:
            if len(server.requests) >= 2:
                second_arrived.set()  # counted: the first handler may finish now
            return answer(path, body)

        server.answer = answer_and_release  # type: ignore[method-assign]
        batch = RerankAPIScorer(server.base_url, "m", concurrency=1).score([("q1", "a"), ("q2", "bb")])
    assert second_arrived.is_set() and batch.errors == [None, None]
    assert server.peak == 1, "a request that had been answered was still counted when the next one arrived"
