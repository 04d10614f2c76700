"""Who may open the served console: a token in the URL, an `Authorization: Bearer` header, or the cookie.

textual-serve has no authentication of its own, and every browser session it serves is a console process
with the operator's SSH keys, so nothing is answered without the token. This module is pure (no aiohttp):
the server asks it about each request's parts.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit

TOKEN_BYTES = 24
"""secrets.token_urlsafe(24): 32 URL-safe characters, 192 bits."""

TOKEN_ENV = "DFLASH_SERVE_TOKEN"
"""A fixed token from the environment (a bookmark that survives restarts); never from argv, which `ps` shows."""

MIN_TOKEN_LEN = 16


class Verdict(Enum):
    OK = "ok"
    """Authenticated by header or cookie: serve the request."""
    OK_FROM_URL = "ok-from-url"
    """Authenticated by `?token=`: set the cookie and redirect to the same path without it."""
    MISSING = "missing"
    WRONG = "wrong"


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def valid_token(token: str) -> str | None:
    """Why a token given through the environment is unusable, or None."""
    if len(token) < MIN_TOKEN_LEN:
        return f"{TOKEN_ENV} must be at least {MIN_TOKEN_LEN} characters"
    if not all(c.isascii() and (c.isalnum() or c in "-_.~") for c in token):
        return f"{TOKEN_ENV} may hold only letters, digits and -_.~ (it goes into a URL unescaped)"
    return None


@dataclass(frozen=True)
class TokenGate:
    """Checks a request's token in constant time; the cookie is named after the token so two consoles on
    one host (cookies ignore the port) do not overwrite each other's."""

    token: str

    @property
    def cookie_name(self) -> str:
        return "dfc-serve-" + hashlib.sha256(self.token.encode()).hexdigest()[:12]

    def _same(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token.encode())

    def check(self, *, query_token: str | None, authorization: str | None, cookie: str | None) -> Verdict:
        """The URL's token wins (a wrong one is refused even with a good cookie: the user typed it)."""
        if query_token is not None:
            return Verdict.OK_FROM_URL if self._same(query_token) else Verdict.WRONG
        if authorization is not None:
            scheme, _, value = authorization.strip().partition(" ")
            if scheme.lower() == "bearer" and self._same(value.strip()):
                return Verdict.OK
            return Verdict.WRONG
        if cookie is not None:
            return Verdict.OK if self._same(cookie) else Verdict.WRONG
        return Verdict.MISSING


def same_origin(origin: str | None, host: str | None) -> bool:
    """A websocket's Origin names the host it was opened against (`Host`, with its port).

    Cookies ignore ports, so a page served by anything else on localhost would carry our cookie into a
    websocket of its own; the browser's Origin header says where that page came from. A client that is
    not a browser (no Origin) is judged by its token alone."""
    if origin is None:
        return True
    if not host:
        return False
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()
