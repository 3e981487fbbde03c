"""A real MCP server (the mcp SDK) using what a client offers besides calls: it asks for
the client's roots, reports progress (a few steps, or a flood), and hands out text and
binary blobs. stdio by default; streamable HTTP on loopback with `http PORT`, behind the
SDK's own bearer-token check (token "s3cret") when `bearer` follows."""

import base64
import sys
from typing import Any

from mcp import types
from mcp.server.mcpserver import Context, MCPServer

TOKEN = "s3cret"


def _auth() -> dict[str, Any]:
    if sys.argv[1:2] != ["http"] or "bearer" not in sys.argv[3:]:
        return {}
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            return (
                AccessToken(token=token, client_id="tests", scopes=[]) if token == TOKEN else None
            )

    here = f"http://127.0.0.1:{sys.argv[2]}"
    settings = AuthSettings(issuer_url=here, resource_server_url=f"{here}/mcp")
    return {"token_verifier": Verifier(), "auth": settings}


server = MCPServer("features", **_auth())


@server.tool()
async def roots(ctx: Context) -> str:
    """The client's roots, a line each: uri and name."""
    listed = await ctx.session.list_roots()
    return "\n".join(f"{r.uri} {r.name}" for r in listed.roots) or "(no roots)"


@server.tool()
async def steps(count: int, ctx: Context) -> str:
    """Reports progress `count` times, each step a notification, then answers."""
    for step in range(1, count + 1):
        await ctx.report_progress(step, count, f"step {step} of {count}")
    return "done"


@server.tool()
async def odd_progress(ctx: Context) -> str:
    """Reports progress a client should not believe (a negative count, a total that is
    not a number, a huge message), then a sound one."""
    await ctx.report_progress(-1, 10)
    await ctx.report_progress(3, float("nan"), "x" * 100_000)
    await ctx.report_progress(4, -5)
    return "done"


def _blob(uri: str, mime: str, data: bytes) -> types.EmbeddedResource:
    contents = types.BlobResourceContents(
        uri=uri, mime_type=mime, blob=base64.b64encode(data).decode()
    )
    return types.EmbeddedResource(type="resource", resource=contents)


@server.tool()
def blobs() -> list[types.ContentBlock]:
    """Embedded blobs of text, JSON, Latin-1 text, an image and a zip file."""
    return [
        _blob("file:///notes.txt", "text/plain", "héllo notes\n".encode()),
        _blob("file:///data.json", "application/json", b'{"a": 1}'),
        _blob("file:///old.txt", "text/plain; charset=iso-8859-1", "café".encode("latin-1")),
        _blob("file:///broken.txt", "text/plain", b"ok \xff\xfe end"),
        _blob("file:///pixel.png", "image/png", b"\x89PNG\r\n"),
        _blob("file:///bundle.zip", "application/zip", b"PK\x03\x04"),
    ]


@server.tool()
def big_text_blob(megabytes: int) -> list[types.ContentBlock]:
    """One text/plain blob of `megabytes` MB of 'a'."""
    return [_blob("file:///big.txt", "text/plain", b"a" * (megabytes * 1024 * 1024))]


@server.resource("file:///blob.txt", name="blob-text", mime_type="text/plain")
def blob_text() -> bytes:
    return b"plain words, sent as bytes"


@server.resource("file:///blob.csv", name="blob-csv", mime_type="text/csv")
def blob_csv() -> bytes:
    return b"a,b\n1,2\n"


@server.resource("file:///blob.bin", name="blob-bin", mime_type="application/octet-stream")
def blob_bin() -> bytes:
    return b"\x00\x01"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:  # http PORT [bearer]
        import anyio

        anyio.run(lambda: server.run_streamable_http_async(port=int(sys.argv[2])))
    else:
        server.run("stdio")
