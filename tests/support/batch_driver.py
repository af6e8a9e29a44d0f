"""A stand-in for ``vllm run-batch`` / a hosted Batch API: an exported OpenAI batch file processed through a server.

Each request line (``custom_id``, ``method``, ``url``, ``body``) is sent as is to ``{server}{url}`` and answered
with a line of the OpenAI batch output format (``id``, ``custom_id``, ``response: {status_code, request_id,
body}``, ``error``), in input order. ``python -m tests.support.batch_driver IN OUT --server http://127.0.0.1:P``.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import httpx


def process(requests: Path, results: Path, server: str, timeout_s: float = 300.0) -> int:
    """Answer every request line of ``requests`` into ``results``; the number of lines written."""
    n = 0
    with httpx.Client(timeout=timeout_s) as http, requests.open(encoding="utf-8") as lines, \
            results.open("w", encoding="utf-8") as out:
        for number, line in enumerate(lines, 1):
            row = json.loads(line)
            response = http.request(row["method"], server.rstrip("/") + row["url"], json=row["body"])
            body = response.json() if response.headers.get("content-type", "").startswith("application/json") \
                else response.text
            out.write(json.dumps({"id": f"batch_req_{number}", "custom_id": row["custom_id"],
                                  "response": {"status_code": response.status_code, "request_id": f"req_{number}",
                                               "body": body}, "error": None}) + "\n")
            n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("requests")
    parser.add_argument("results")
    parser.add_argument("--server", required=True, help="the server's root, e.g. http://127.0.0.1:8000")
    args = parser.parse_args()
    print(process(Path(args.requests), Path(args.results), args.server))


if __name__ == "__main__":
    main()
