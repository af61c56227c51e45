"""ISO 8601 dates and datetimes for fact validity, normalised for comparison."""

from __future__ import annotations

from datetime import UTC, date, datetime

from memors_core.errors import BadInput

TS_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def parse_instant(text: object, field: str) -> datetime:
    """Parse an ISO 8601 date (midnight UTC) or datetime (naive = UTC)."""
    if not isinstance(text, str) or not text.strip():
        raise BadInput(f"{field} must be an ISO 8601 date or datetime, like 2024-05-01")
    raw = text.strip()
    try:
        if len(raw) == 10 and raw[4] == "-" and raw[7] == "-":
            d = date.fromisoformat(raw)
            return datetime(d.year, d.month, d.day, tzinfo=UTC)
        value = datetime.fromisoformat(raw)
    except (ValueError, IndexError):
        shown = raw if len(raw) <= 40 else raw[:37] + "..."
        raise BadInput(
            f"{field} {shown!r} is not an ISO 8601 date or datetime "
            "(like 2024-05-01 or 2024-05-01T12:00:00Z)"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the year 1 in UTC
        raise BadInput(f"{field} {raw[:40]!r} is out of range once converted to UTC") from None


def normalise(text: str | None, field: str) -> str | None:
    """The sortable UTC form of an optional instant (None stays None)."""
    if text is None:
        return None
    return parse_instant(text, field).strftime(TS_FORMAT)


def interval(valid_from: str | None, valid_to: str | None) -> tuple[str | None, str | None]:
    """The normalised bounds of a fact's validity ``[valid_from, valid_to)``;
    bad input unless ``valid_from`` comes before ``valid_to``."""
    from_ts = normalise(valid_from, "valid_from")
    to_ts = normalise(valid_to, "valid_to")
    if from_ts is not None and to_ts is not None and not from_ts < to_ts:
        raise BadInput(f"valid_from ({valid_from}) must be before valid_to ({valid_to})")
    return from_ts, to_ts


def now() -> str:
    """The current time as an ISO 8601 UTC timestamp with microseconds (when a row was stored)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_ts() -> str:
    return datetime.now(UTC).strftime(TS_FORMAT)


def overlaps(a_from: str | None, a_to: str | None, b_from: str | None, b_to: str | None) -> bool:
    """Whether two half-open intervals ``[from, to)`` overlap (None = unbounded).

    Arguments are normalised timestamps, which compare correctly as strings.
    """
    return (a_from is None or b_to is None or a_from < b_to) and (
        b_from is None or a_to is None or b_from < a_to
    )
