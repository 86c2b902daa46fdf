"""ClusterAuth against a fake Kubernetes API server on loopback (its HTTP boundary only):
the audience check, and the API's own token read again when the kubelet rotates it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any, ClassVar

import pytest

from dirigent.api.auth import ClusterAuth, KubeAccess


class _Reviews(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.headers["Authorization"], body))
        token = body["spec"]["token"]
        audiences = ["https://kubernetes.default.svc"] if token == "general" else ["dirigent"]
        status = {"authenticated": True, "user": {"username": f"u-{token}"}, "audiences": audiences}
        data = json.dumps({"status": status}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Reviews)
    thread = Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Reviews.seen = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


async def test_a_token_for_another_audience_is_refused(server: str) -> None:
    auth = ClusterAuth(KubeAccess(server=server, token="api-sa"), audiences=("dirigent",))
    try:
        assert (await auth.authenticate("scoped")) is not None
        assert await auth.authenticate("general") is None
    finally:
        await auth.aclose()
    assert _Reviews.seen[0][1]["spec"]["audiences"] == ["dirigent"]


async def test_the_apis_own_token_is_read_again_after_rotation(server: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    auth = ClusterAuth(KubeAccess(server=server, token_file=str(token)), ttl=0)
    try:
        await auth.authenticate("a")
        token.write_text("second\n")
        os.utime(token, ns=(1, 1))  # a new mtime, as the kubelet's atomic swap gives
        await auth.authenticate("b")
    finally:
        await auth.aclose()
    assert [seen[0] for seen in _Reviews.seen] == ["Bearer first", "Bearer second"]
