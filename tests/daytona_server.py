"""A loopback server that speaks the part of Daytona's API that its Python SDK (0.226)
uses for what `DaytonaSandbox` does: create and delete a sandbox, run a command, upload
and download files. Its requests and responses follow the SDK's own models and
multipart parsers; they were not recorded from the live service.

Each sandbox is a directory of this machine that commands see as /home/daytona (under
bubblewrap: the rest of the system read-only, no network), so tether's file operations
run against real `find`, `stat` and a shell. Every request is kept in `requests`, for
the tests to compare with the traffic the SDK sent when the adapter was written
(tests/recorded/daytona-0.226.json).
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

HOME = "/home/daytona"


class DaytonaServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.sandboxes: dict[str, Path] = {}
        self.labels: dict[str, dict[str, str]] = {}
        self.created: list[dict[str, Any]] = []  # the create requests' bodies
        self.requests: list[tuple[str, str]] = []  # (method, path with ids as {id})
        self.url = ""
        self.failures: list[int] = []  # statuses to answer the next GETs of a sandbox with
        self.state = "started"  # what a new sandbox is (a "starting" one never starts)

    def sandbox(self, identifier: str, state: str = "started") -> dict[str, Any]:
        return {
            "id": identifier, "organizationId": "org", "name": identifier, "user": "daytona",
            "env": {}, "public": False, "networkBlockAll": True, "kvm": False,
            "target": "us", "cpu": 1, "gpu": 0, "memory": 1, "disk": 3, "state": state,
            "toolboxProxyUrl": f"{self.url}/toolbox",
            "labels": self.labels.get(identifier, {}),
        }  # fmt: skip

    def answer(  # noqa: PLR0911  (one answer a route)
        self, method: str, path: str, headers: Any, body: bytes
    ) -> tuple[int, bytes, str]:
        shape = re.sub(r"sb-[0-9a-f]+", "{id}", path.split("?", maxsplit=1)[0])
        if "socket.io" not in path:
            self.requests.append((method, shape))
        if method == "POST" and path == "/api/sandbox":
            self.created.append(json.loads(body))
            identifier = f"sb-{uuid.uuid4().hex[:8]}"
            self.labels[identifier] = self.created[-1].get("labels") or {}
            self.sandboxes[identifier] = self.root / identifier
            (self.root / identifier).mkdir(parents=True)
            made = self.sandbox(identifier, self.state)
            return 200, json.dumps(made).encode(), "application/json"
        found = re.match(r"^/(?:api/sandbox|toolbox)/(sb-[0-9a-f]+)(/.*)?$", path)
        if found is None or found.group(1) not in self.sandboxes:
            return 404, b'{"message": "not found", "statusCode": 404}', "application/json"
        identifier, rest = found.group(1), found.group(2) or ""
        home = self.sandboxes[identifier]
        if method == "GET" and rest == "":
            if self.failures:
                return self.failures.pop(0), b'{"message": "unavailable"}', "application/json"
            made = self.sandbox(identifier, self.state)
            return 200, json.dumps(made).encode(), "application/json"
        if method == "DELETE" and rest == "":
            shutil.rmtree(self.sandboxes.pop(identifier), ignore_errors=True)
            done = self.sandbox(identifier, "destroyed")
            return 200, json.dumps(done).encode(), "application/json"
        if method == "POST" and rest == "/process/execute":
            request = json.loads(body)
            return 200, json.dumps(_execute(home, request)).encode(), "application/json"
        if method == "POST" and rest == "/files/bulk-upload":
            for name, data in _uploaded(headers["Content-Type"], body):
                target = _on_host(home, name)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            return 200, b"", "application/json"
        if method == "POST" and rest == "/files/bulk-download":
            return _downloaded(home, json.loads(body)["paths"])
        return 404, b'{"message": "not found", "statusCode": 404}', "application/json"


def _on_host(home: Path, path: str) -> Path:
    if not path.startswith(HOME + "/"):
        raise ValueError(f"{path} is outside {HOME}")
    return home / path[len(HOME) + 1 :]


def _execute(home: Path, request: dict[str, Any]) -> dict[str, Any]:
    argv = [
        "bwrap", "--ro-bind", "/", "/", "--tmpfs", "/home", "--bind", str(home), HOME,
        "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--unshare-net",
        "--die-with-parent", "--chdir", HOME, "/bin/sh", "-c", request["command"],
    ]  # fmt: skip
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=request.get("timeout") or 60, check=False
        )
    except subprocess.TimeoutExpired:
        return {"exitCode": -1, "result": ""}
    output = (done.stdout + done.stderr).decode("utf-8", errors="replace")
    return {"exitCode": done.returncode, "result": output}


def _uploaded(content_type: str, body: bytes) -> Iterator[tuple[str, bytes]]:
    parser = email.parser.BytesParser(policy=email.policy.HTTP)
    message = parser.parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    fields: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[str(name)] = part.get_payload(decode=True) or b""
    for key, value in fields.items():
        if key.endswith(".path"):
            yield value.decode(), fields[key.removesuffix(".path") + ".file"]


def _downloaded(home: Path, paths: list[str]) -> tuple[int, bytes, str]:
    boundary = uuid.uuid4().hex
    body = b""
    for path in paths:
        target = _on_host(home, path)
        if target.is_file() and not target.is_symlink():
            head, data = f'name="file"; filename="{path}"', target.read_bytes()
            kind = "application/octet-stream"
        else:
            head, kind = f'name="error"; filename="{path}"', "application/json"
            data = json.dumps(
                {"message": f"{path}: no such file", "statusCode": 404, "code": "FILE_NOT_FOUND"}
            ).encode()
        body += (
            (
                f"--{boundary}\r\nContent-Disposition: form-data; {head}\r\n"
                f"Content-Type: {kind}\r\n\r\n"
            ).encode()
            + data
            + b"\r\n"
        )
    body += f"--{boundary}--\r\n".encode()
    return 200, body, f"multipart/form-data; boundary={boundary}"


@contextmanager
def daytona_server(root: Path) -> Iterator[DaytonaServer]:
    server = DaytonaServer(root)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size) if size else b""
            status, payload, kind = server.answer(
                self.command, unquote(self.path), self.headers, body
            )
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = _answer

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.url = f"http://127.0.0.1:{http.server_address[1]}"
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        http.shutdown()
        http.server_close()
