"""The bearer token's guard in front of the app."""

from __future__ import annotations

import hmac
from typing import Any

__all__ = ["TokenGuard"]


class TokenGuard:
    """Refuses requests without the bearer token (compared in constant time), but for
    the page and its static files, which hold nothing of the agents'."""

    def __init__(self, app: Any, *, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # none is served: refused before anything reads it
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] == "http" and self._refused(scope):
            from starlette.responses import JSONResponse

            response = JSONResponse(
                {"error": "a valid token is needed: Authorization: Bearer <token>"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refused(self, scope: Any) -> bool:
        if scope["path"] == "/" or scope["path"].startswith("/static/"):
            return False  # the page and its files hold nothing of the agents'
        return scope["method"] != "OPTIONS" and not self._allowed(scope)

    def _allowed(self, scope: Any) -> bool:
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
        return hmac.compare_digest(given, self.expected)
