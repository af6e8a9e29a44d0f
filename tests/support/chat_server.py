"""A chat-completions server on 127.0.0.1 whose answers a test writes (the OpenAI contract, nothing else).

``answer(body) -> reply dict`` sees each request body as the server received it, so a test can check what
a client sends (messages, settings) and answer as a real server would (content, usage, logprobs).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from tests.support.loopback import serve_in_thread, stop_thread_server


def chat_reply(content: str | None, prompt_tokens: int = 100, completion_tokens: int = 5,
               logprobs: list[dict] | None = None) -> dict:
    """A chat-completions reply body."""
    choice: dict = {"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return {"choices": [choice], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


@contextmanager
def chat_server(answer: Callable[[dict], dict]) -> Iterator[tuple[str, list[dict]]]:
    """Serve ``POST /v1/chat/completions`` for the block; yields (base URL, request bodies received)."""
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path != "/v1/chat/completions":
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            data = json.dumps(answer(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = serve_in_thread(Handler)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    finally:
        stop_thread_server(server)
