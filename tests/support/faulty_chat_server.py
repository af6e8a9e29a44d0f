"""An in-process OpenAI-compatible chat server on 127.0.0.1 that answers with chosen faults, for fault tests.

``GET /v1/models`` lists one model; ``POST /v1/chat/completions`` answers each request with one of
:data:`ANSWERS`, chosen by ``choose(user message)`` — deterministic in the message, so an input gets
the same answer in every run and a cached good answer never hides a fault. ``served`` counts what
was answered, per answer, so a test can compare the suite's account of causes with the server's;
``requests`` keeps every request body.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.loopback import serve_in_thread, stop_thread_server

#: What the server can answer: a grade, HTTP 500, a body that is not JSON, an answer the grader cannot parse,
#: a grade followed by megabytes of blanks (parsable), megabytes of text (not), or a grade after a delay.
ANSWERS = ("grade", "http500", "not_json", "unparseable", "huge_grade", "huge_text", "slow")


def _chat(content: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 1}}).encode()


def cycle(answers: Sequence[str]) -> Callable[[str], str]:
    """A ``choose`` that spreads messages over ``answers`` by a digest of the message."""
    return lambda text: answers[int(hashlib.sha256(text.encode()).hexdigest(), 16) % len(answers)]


class FaultyChatServer:
    """Loopback chat-completions server; ``model`` is the id it lists, ``huge_chars`` the size of a huge reply."""

    def __init__(self, choose: Callable[[str], str], *, model: str = "faulty", huge_chars: int = 5_000_000,
                 slow_s: float = 1.0) -> None:
        self.choose = choose
        self.model = model
        self.huge_chars = huge_chars
        self.slow_s = slow_s
        self.served: Counter[str] = Counter()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def answer(self, body: dict[str, Any]) -> tuple[int, bytes]:
        user = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"), "")
        kind = self.choose(user)
        if kind not in ANSWERS:
            raise ValueError(f"unknown answer {kind!r}; choose one of {ANSWERS}")
        with self._lock:
            self.served[kind] += 1
            self.requests.append(body)
        if kind == "http500":
            return 500, b'{"error": "injected failure"}'
        if kind == "not_json":
            return 200, b"<html>upstream proxy error</html>"
        if kind == "unparseable":
            return 200, _chat("3 because the passage mentions the film")
        if kind == "huge_grade":
            return 200, _chat("3" + " " * (self.huge_chars - 1))
        if kind == "huge_text":
            return 200, _chat("x" * self.huge_chars)
        if kind == "slow":
            time.sleep(self.slow_s)
        return 200, _chat("3")

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [{"id": server.model}]}).encode())
                else:
                    self._send(404, b'{"error": "not found"}')

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, b'{"error": "not found"}')
                    return
                self._send(*server.answer(body))

            def log_message(self, format: str, *args: object) -> None:  # quiet under pytest
                pass

        self._httpd = serve_in_thread(Handler)

    def stop(self) -> None:
        if self._httpd is not None:
            stop_thread_server(self._httpd)
            self._httpd = None


@contextmanager
def faulty_chat_server(choose: Callable[[str], str], **kwargs: Any) -> Iterator[FaultyChatServer]:
    """A :class:`FaultyChatServer` for the block; always stopped afterwards."""
    server = FaultyChatServer(choose, **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()
