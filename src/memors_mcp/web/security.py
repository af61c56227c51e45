"""The web view's guards: cross-site request tokens, the login cookie a
browser carries instead of a bearer header, and the headers every answer
gets (Content-Security-Policy first).

A form's token is an HMAC of a random per-browser cookie (``memors_csrf``,
HttpOnly, SameSite=Strict) under a per-process secret: another site can
neither read the cookie nor forge the token, and a server restart makes old
forms ask to be reloaded rather than act. The login cookie is an HMAC of the
bearer token, so the token itself is never stored in the browser.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

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

    def login_value(self) -> str:
        """What the login cookie holds once the bearer token was given."""
        assert self.token is not None
        return login_cookie_value(self.token)

    def token_ok(self, given: object) -> bool:
        if self.token is None or not isinstance(given, str):
            return False
        return hmac.compare_digest(given.strip().encode(), self.token.encode())


def login_cookie_value(token: str) -> str:
    """The login cookie for ``token`` (the same HMAC :class:`Guard` sets)."""
    return hmac.new(token.encode(), b"memors web login", hashlib.sha256).hexdigest()
