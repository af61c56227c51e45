"""A PostgreSQL store's address as memors shows it: never with its password."""

from __future__ import annotations

import psycopg


def safe_location(url: str) -> str:
    """The address without its password, for messages and logs."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(an address that does not parse)"
    user = params.get("user")
    host = params.get("host") or "localhost"
    port = params.get("port")
    db = params.get("dbname") or ""
    who = f"{user}@" if user else ""
    where = f"{host}:{port}" if port else host
    return f"postgresql://{who}{where}/{db}"


def one_line(exc: BaseException, secret: str | None = None) -> str:
    """A driver error as one line, never holding the password."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if secret:
        text = text.replace(secret, "***")
    return text


def password(url: str) -> str | None:
    """The password the address carries, to mask it in a driver's message."""
    try:
        found = psycopg.conninfo.conninfo_to_dict(url).get("password")
        return None if found is None else str(found)
    except psycopg.ProgrammingError:
        return None
