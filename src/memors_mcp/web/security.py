"""The web view's guards: cross-site request tokens, the login cookie a
browser carries instead of a bearer header, and the headers every answer
gets (Content-Security-Policy first).

A form's token is an HMAC of a random per-browser cookie (``memors_csrf``,
HttpOnly, SameSite=Strict) under a per-process secret: another site can
neither read the cookie nor forge the token, and a server restart makes old
forms ask to be reloaded rather than act.

A login (remote mode) is a random session id in the ``memors_login`` cookie,
known to this process only (:class:`Logins`): it expires after a set time,
``POST /logout`` revokes it, and a restart signs everyone out. The token itself
is never stored in the browser.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

CSRF_COOKIE = "memors_csrf"
LOGIN_COOKIE = "memors_login"
CSRF_FIELD = "csrf"

#: Scripts and styles only from the server itself, no inline script, no
#: frames, forms posting only back here.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


class Guard:
    """Per-process secrets for the web view's forms and logins."""

    def __init__(self, token: str | None) -> None:
        self.secret = secrets.token_bytes(32)
        self.token = token

    def new_browser(self) -> str:
        """A fresh value for the ``memors_csrf`` cookie."""
        return secrets.token_urlsafe(24)

    def form_token(self, browser: str) -> str:
        """The hidden form field that goes with that cookie."""
        return hmac.new(self.secret, browser.encode(), hashlib.sha256).hexdigest()

    def form_ok(self, browser: str | None, given: object) -> bool:
        if not browser or not isinstance(given, str):
            return False
        return hmac.compare_digest(self.form_token(browser), given)

    def token_ok(self, given: object) -> bool:
        if self.token is None or not isinstance(given, str):
            return False
        return hmac.compare_digest(given.strip().encode(), self.token.encode())


#: Signed-in browsers kept at most (past it, the oldest login ends).
MAX_LOGINS = 1000


class Logins:
    """The web view's signed-in browsers: a random id per login, each valid for
    ``ttl_s`` seconds from sign-in unless revoked first; at most
    ``max_logins`` (a new one past that ends the oldest).

    Not thread-safe: the HTTP app calls it from the event loop only.
    """

    def __init__(
        self,
        ttl_s: float,
        max_logins: int = MAX_LOGINS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_logins = max_logins
        self.clock = clock
        self.ends: OrderedDict[str, float] = OrderedDict()  # id -> when it expires

    def __len__(self) -> int:
        return len(self.ends)

    def start(self) -> str:
        """A new login's id (the cookie's value)."""
        now = self.clock()
        for old in [k for k, end in self.ends.items() if end <= now]:
            del self.ends[old]
        while len(self.ends) >= self.max_logins:
            self.ends.popitem(last=False)
        login = secrets.token_urlsafe(32)
        self.ends[login] = now + self.ttl_s
        return login

    def valid(self, login: str | None) -> bool:
        if not login:
            return False
        end = self.ends.get(login)
        if end is None:
            return False
        if end <= self.clock():
            del self.ends[login]
            return False
        return True

    def end(self, login: str | None) -> bool:
        """Revoke a login (logout); whether it was one."""
        return self.ends.pop(login or "", None) is not None


def cookie_value(raw: str | None, name: str) -> str | None:
    """The value of cookie ``name`` in a ``Cookie`` header, or None."""
    for part in (raw or "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value.strip()
    return None
