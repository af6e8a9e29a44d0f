"""A chat-completions stub server: one fixed grade reply, at once or after a fixed latency.

The client benchmark (``specs/bench_client.py``) measures the suite's own request path against it, and anyone can
measure theirs the same way: ``python -m harness.stub_chat --port P --latency-ms L`` serves on 127.0.0.1 until
stopped, and an ``llm_grader`` pointed at ``http://127.0.0.1:P/v1`` is graded "3" on every request. It runs as its
own process so it never shares the client's interpreter lock: raw asyncio streams with HTTP/1.1 keep-alive, no
framework, so what limits it is the socket work alone. Every request (any method and path) gets the same reply
("3", with the digit's top log-probabilities, as a server with ``logprobs`` answers). :func:`ceiling` is the stub's
own ceiling: requests per second a client costing next to nothing (pre-built bytes, one connection per slot, only
``Content-Length`` read) gets from it at a given concurrency.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time

from fixtures.settings import PROJECT_ROOT
from harness.loopback import LoopbackServer

_TOP = [{"token": "3", "logprob": math.log(0.7)}, {"token": "4", "logprob": math.log(0.2)},
        {"token": "2", "logprob": math.log(0.1)}]
REPLY = json.dumps({
    "model": "stub", "choices": [{"message": {"role": "assistant", "content": "3"}, "finish_reason": "stop",
                                  "logprobs": {"content": [{"token": "3", "logprob": math.log(0.7),
                                                            "top_logprobs": _TOP}]}}],
    "usage": {"prompt_tokens": 400, "completion_tokens": 1}}).encode()
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(REPLY)) + REPLY


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            return int(line[15:])
    return 0


async def serve(port: int, latency_s: float) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(_content_length(head))
                if latency_s:
                    await asyncio.sleep(latency_s)
                writer.write(RESPONSE)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


async def _ceiling(port: int, concurrency: int, requests: int, body: bytes) -> float:
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
    left = [requests]

    async def slot() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while left[0] > 0:
                left[0] -= 1
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(_content_length(head))
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(slot() for _ in range(min(concurrency, requests))))
    return requests / (time.perf_counter() - started)


def ceiling(port: int, concurrency: int, requests: int, body: bytes = b"{}") -> float:
    """Requests per second the stub serves ``requests`` requests at ``concurrency`` to a near-free client."""
    return asyncio.run(_ceiling(port, concurrency, requests, body))


class StubChatServer(LoopbackServer):
    """The stub as a loopback process, ``latency_s`` before each reply."""

    name = "stub chat server"
    poll_s = 0.05

    def __init__(self, latency_s: float = 0.0) -> None:
        super().__init__(startup_timeout_s=30.0)
        self.latency_s = latency_s

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def ready_url(self) -> str:
        return f"{self.base_url}/models"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "harness.stub_chat", "--port", str(self.port),
                "--latency-ms", f"{self.latency_s * 1000:g}"]

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.stub_chat", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.latency_ms / 1000))


if __name__ == "__main__":
    main()
