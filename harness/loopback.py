"""A local server process on 127.0.0.1: started, polled until ready, stopped by pid.

The client benchmark's stub (``harness.stub_chat``) runs through it, and so do the tests' llama.cpp and Infinity
servers (``tests/support``). The process runs in its own session and is stopped through its own process group
(never by name); readiness is a bounded poll of one URL; a failed start reports the tail of the server's log.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import httpx

S = TypeVar("S", bound="LoopbackServer")


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LoopbackServer:
    """One server process; subclasses give its ``command``, ``ready_url``, environment and ``check``."""

    name = "server"
    poll_s = 0.2

    def __init__(self, *, port: int | None = None, startup_timeout_s: float = 120.0) -> None:
        self.port = port or free_port()
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.gettempdir()) / f"{self.name.replace(' ', '_')}_{os.getpid()}_{self.port}.log"

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def ready_url(self) -> str:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def check(self) -> None:
        """Raise before starting when the server cannot run here (missing package or model file)."""

    def start(self) -> None:
        """Start the process and block until ``ready_url`` answers 200, or fail with its log tail."""
        self.check()
        if self.process is not None and self.process.poll() is None:
            return
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.env(),
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with code {self.process.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.ready_url, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(self.poll_s)
        self.stop()
        raise TimeoutError(f"{self.name} not ready after {self.startup_timeout_s:g}s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 10.0) -> None:
        """Terminate the server (its process group, by pid), escalating to SIGKILL after ``timeout_s``."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def kill(self) -> None:
        """End the server at once (SIGKILL to its process group, by pid): its open connections drop unanswered."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def log_tail(self, n_chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return "(no log)"


@contextmanager
def running(server: S) -> Iterator[S]:
    """Start ``server`` for the block; always stopped (and its log removed) afterwards."""
    try:
        server.start()
        yield server
    finally:
        server.stop()
        server.log_path.unlink(missing_ok=True)
