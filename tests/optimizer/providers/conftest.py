"""Fixtures of the provider tests: a hand-built ProviderContext and a real OpenAI-compatible
HTTP server on 127.0.0.1 (http.server in a thread) that answers from a queue."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from optimizer.bundle.spec import CaseSpec, TargetSpec
from optimizer.providers.base import CaseResult, ProviderContext
from queries.models import NearestConfig
from tlxstore.events import DeviceInfo

PARENT_SOURCE = """import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x, y):
    out = x.new_empty(x.shape)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)
    return out
"""

FASTER_SOURCE = PARENT_SOURCE.replace("BLOCK=64", "BLOCK=1024").replace(
    "cdiv(n, 64)", "cdiv(n, 1024)"
)


def make_context(
    backend: str = "cuda",
    architecture: str = "sm_90",
    device_kind: str = "test device",
    **overrides: Any,
) -> ProviderContext:
    values: dict[str, Any] = {
        "run_id": "r-test",
        "round": 1,
        "candidate_index": 1,
        "target": TargetSpec(backend=backend, architecture=architecture),  # type: ignore[arg-type]
        "device": DeviceInfo(kind=device_kind, backend=backend),  # type: ignore[arg-type]
        "cases": [
            CaseSpec(case_id="n4096", parameters={"n": 4096}),
            CaseSpec(case_id="n65536", parameters={"n": 65536}, weight=2.0),
        ],
        "parent_id": "baseline",
        "parent_source": PARENT_SOURCE,
        "original_source": PARENT_SOURCE,
        "baseline_per_case": [
            CaseResult(case_id="n4096", median_us=10.0, p95_us=11.0, cv=0.02),
            CaseResult(case_id="n65536", median_us=40.0, p95_us=44.0, cv=0.03, bytes_moved=786432),
        ],
        "best_per_case": [
            CaseResult(case_id="n4096", median_us=10.0, p95_us=11.0, cv=0.02),
            CaseResult(case_id="n65536", median_us=40.0, p95_us=44.0, cv=0.03, bytes_moved=786432),
        ],
    }
    values.update(overrides)
    return ProviderContext(**values)


@pytest.fixture
def context() -> ProviderContext:
    return make_context()


def chat_completion(
    content: str, model: str = "local-model", prompt_tokens: int = 120, completion_tokens: int = 40
) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


@dataclass
class OpenAIServer:
    """Answers POST /v1/chat/completions with queued (status, body) pairs, recording requests."""

    port: int = 0
    replies: list[tuple[int, dict]] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, content: str, **usage: int) -> None:
        self.replies.append((200, chat_completion(content, **usage)))

    def enqueue_error(self, status: int, message: str) -> None:
        self.replies.append((status, {"error": {"message": message, "type": "server_error"}}))


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    server_state = OpenAIServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            server_state.requests.append(body)
            server_state.headers.append(dict(self.headers))
            if self.path != "/v1/chat/completions" or not server_state.replies:
                status, reply = 404, {"error": {"message": f"nothing queued for {self.path}"}}
            else:
                status, reply = server_state.replies.pop(0)
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        httpd.shutdown()
        httpd.server_close()


def nearest_config(**overrides: Any) -> NearestConfig:
    """A configuration another run promoted, as the view nearest_history ranks it for a run (a
    same-device run on other cases, ranked first, unless `overrides` say otherwise)."""
    values: dict[str, Any] = {
        "rank": 1,
        "from_run_id": "r-old",
        "from_candidate_id": "c001",
        "source_hash": "sha256:0",
        "speedup": 2.0,
        "distance": 1.0,
        "same_bundle": False,
        "same_device": True,
        "same_versions": True,
        "same_source": True,
        "differs": "bundle: case parameters changed; same device",
    }
    return NearestConfig(**{**values, **overrides})
