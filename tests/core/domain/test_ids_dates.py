"""Ids, addresses and dates (SPEC §3): UUIDv7, memo:// addresses, half-open intervals."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memors_core import BadAddress, BadInput
from memors_core.domain import dates
from memors_core.domain.ids import TYPES, parse_address, uuid7

pytestmark = pytest.mark.engine_independent("pure functions of the domain layer, no store")

# --- UUIDv7 ---------------------------------------------------------------------


def test_uuid7_is_a_lowercase_dashed_version_7_rfc_9562_uuid_carrying_the_time():
    before = time.time_ns() // 1_000_000
    ident = uuid7()
    after = time.time_ns() // 1_000_000
    u = uuid.UUID(ident)
    assert str(u) == ident  # lowercase, dashed, canonical
    assert u.version == 7
    assert u.variant == uuid.RFC_4122
    assert before <= u.int >> 80 <= after + 1  # the first 48 bits are Unix milliseconds


@given(st.integers(min_value=2, max_value=6000))
def test_uuid7_is_strictly_increasing_within_a_process(n):
    ids = [uuid7() for _ in range(n)]
    assert ids == sorted(ids)
    assert len(set(ids)) == n
    assert all(uuid.UUID(i).version == 7 for i in ids[:: max(1, n // 50)])


def test_uuid7_stays_unique_and_ordered_across_threads():
    out: list[list[str]] = [[] for _ in range(4)]

    def work(k: int) -> None:
        out[k] = [uuid7() for _ in range(3000)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for ids in out for i in ids]
    assert len(set(every)) == len(every)
    for ids in out:
        assert ids == sorted(ids)


# --- addresses ------------------------------------------------------------------------

# Fixed ids in parameters, so every test worker collects the same tests.
V7 = "0199a000-0000-7000-8000-000000000000"
V4 = "5b2c6a1e-3f0d-4c8e-9a71-2d4e6f8a0b1c"


@pytest.mark.parametrize("kind", [t for t in TYPES if t != "item"])
def test_an_address_of_each_type_round_trips(kind):
    ident = uuid7()
    assert parse_address(f"memo://{kind}/{ident}") == (kind, ident)
    assert parse_address(f"  memo://{kind}/{ident}\n") == (kind, ident)


def test_work_items_are_small_integers_with_or_without_the_scheme():
    assert parse_address("42") == ("item", "42")
    assert parse_address("memo://item/42") == ("item", "42")
    assert parse_address("memo://item/007") == ("item", "7")


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("", "malformed address"),
        ("fact/0199", "malformed address"),
        ("memo://", "malformed address"),
        ("memo://fact/", "malformed address"),
        ("memo://fact/abc", "lowercase UUIDv7"),
        ("memo://fact/" + V4, "lowercase UUIDv7"),
        ("memo://fact/" + V7.upper(), "lowercase UUIDv7"),
        ("memo://widget/" + V7, "unknown address type 'widget'"),
        ("memo://item/x", "item ids are integers"),
        ("memo://item/-1", "item ids are integers"),
        ("-3", "malformed address"),
        ("http://fact/" + V7, "malformed address"),
        ("memo://FACT/" + V7, "malformed address"),
    ],
)
def test_malformed_and_unknown_addresses_are_clear_errors(bad, says):
    with pytest.raises(BadAddress, match=says) as err:
        parse_address(bad)
    assert "\n" not in str(err.value)


def test_an_address_of_the_wrong_type_names_what_was_expected():
    with pytest.raises(BadAddress, match="is a fact address; expected a passage address"):
        parse_address("memo://fact/" + uuid7(), expect=("passage",))


@given(st.text(max_size=200))
def test_any_text_either_parses_or_is_a_one_line_bad_address(raw):
    try:
        kind, ident = parse_address(raw)
    except BadAddress as exc:
        assert "\n" not in exc.message
        assert len(exc.message) < 300
    else:
        assert kind in TYPES and ident


# --- dates --------------------------------------------------------------------------------


def test_dates_are_midnight_utc_and_naive_datetimes_are_utc():
    assert dates.parse_instant("2024-05-01", "t") == datetime(2024, 5, 1, tzinfo=UTC)
    assert dates.parse_instant("2024-05-01T12:30:00", "t") == datetime(
        2024, 5, 1, 12, 30, tzinfo=UTC
    )
    assert dates.normalise("2024-05-01T14:30:00+02:00", "t") == dates.normalise(
        "2024-05-01T12:30:00Z", "t"
    )


@pytest.mark.parametrize(
    "bad", ["", "  ", "yesterday", "2024-13-01", "2024-02-30", "2024/05/01", "01-05-2024", "2024-5"]
)
def test_bad_dates_are_bad_input_naming_the_field(bad):
    with pytest.raises(BadInput, match="valid_from") as err:
        dates.parse_instant(bad, "valid_from")
    assert "\n" not in str(err.value)


_instants = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@given(_instants, _instants)
def test_normalised_instants_sort_as_strings_in_time_order(a, b):
    na = dates.normalise(a.isoformat(), "t")
    nb = dates.normalise(b.isoformat(), "t")
    assert (na < nb) == (a < b)
    assert (na == nb) == (a == b)


_bound = st.one_of(st.none(), st.integers(0, 20))


def _contains(lo, hi, t):
    return (lo is None or lo <= t) and (hi is None or t < hi)


@given(_bound, _bound, _bound, _bound)
def test_intervals_are_half_open_and_touching_ones_do_not_overlap(a0, a1, b0, b1):
    # Only proper intervals (from < to) are stored.
    if a0 is not None and a1 is not None and a0 >= a1:
        return
    if b0 is not None and b1 is not None and b0 >= b1:
        return

    def ts(v):
        return None if v is None else dates.normalise(f"2024-01-01T00:00:{v:02d}", "t")

    # Overlap means some instant lies in both [a0, a1) and [b0, b1).
    expected = any(_contains(a0, a1, t) and _contains(b0, b1, t) for t in range(-1, 22))
    assert dates.overlaps(ts(a0), ts(a1), ts(b0), ts(b1)) == expected
