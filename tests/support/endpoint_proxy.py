"""A loopback proxy in front of one server, for the several-endpoints tests: counts what passes, and can die.

Every request is forwarded to ``target`` and its answer returned. With ``die_at = K``, the K-th chat request
sets ``reached`` and waits for ``killed`` (the test kills the server behind it meanwhile, on that event), then
drops the connection unanswered, as every later request is dropped: the client sees an endpoint that stopped
answering mid-request.
"""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler

import httpx

from tests.support.loopback import serve_in_thread, stop_thread_server


class EndpointProxy:
    def __init__(self, target: str, die_at: int | None = None) -> None:
        self.target = target.rstrip("/")
        self.die_at = die_at
        self.chat_requests = 0
        #: The body of every chat request that reached the proxy, in order.
        self.bodies: list[bytes] = []
        self.reached, self.killed = threading.Event(), threading.Event()
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if method == "POST" and self.path.endswith("/chat/completions"):
                    with proxy._lock:
                        proxy.chat_requests += 1
                        proxy.bodies.append(body)
                        dying = proxy.die_at is not None and proxy.chat_requests >= proxy.die_at
                    if dying:
                        proxy.reached.set()
                        proxy.killed.wait()
                        self.close_connection = True  # dropped: no status line, nothing
                        return
                try:
                    answer = httpx.request(method, proxy.target + self.path, content=body or None,
                                           headers={"Content-Type": "application/json"}, timeout=600)
                except httpx.HTTPError:
                    self.close_connection = True
                    return
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("content-type", "application/json"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                self._forward("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._forward("POST")

            def log_message(self, *args: object) -> None:
                pass

        self.server = serve_in_thread(Handler)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    def close(self) -> None:
        self.killed.set()
        stop_thread_server(self.server)
