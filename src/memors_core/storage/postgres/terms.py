"""A bulk insert's passages' search terms, counted here (issue 32 point 1).

A bulk load's flush spent half its time stemming: ``to_tsvector`` over
each passage's text, in the server, while the client waited. A text is
mostly the same few thousand words again and again, so this module splits
each ASCII passage into its words here, asks the server to stem only the
words it has not seen (with the very function the index uses,
``memors_search_vector``, one word at a time), and counts each passage's
terms from what it has kept. The counts go to ``search_staged`` in the
insert's transaction; the flush at commit takes them instead of stemming
the text (migration 19, ``schema.py``).

The counts are what the server would make of the whole text, exactly:

- an ASCII text's words are its runs of ``[A-Za-z0-9]`` (the index splits
  a text at every character that is not a letter or digit, and folds
  nothing away in ASCII), lowercased (the stemmer lowercases a word
  first), and the server's parser never joins two such runs into one
  token, so a word stemmed alone gives what it gives in its text;
- a term's count is capped at 255, as a ``tsvector`` keeps at most 255
  positions of a lexeme; the terms are hashed with the namespace's index
  number (the seed), in no particular order (the index reads a passage's
  terms by value);
- a text beyond ASCII, of 100,000 characters or more, or of 16,000 words
  or more (beyond which a ``tsvector`` folds positions together) is left
  to the server, as is every text of an insert of fewer than
  :data:`STAGED_FROM` passages (a flush that small stems its passages
  itself).

``tests/core/storage/postgres/test_search_terms.py`` holds the server to
that, text by text, on shapes made to break it.
"""

from __future__ import annotations

import struct
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import postgres
from psycopg.adapt import Dumper
from psycopg.pq import Format

from memors_core.domain.rows import NewPassage

#: An insert of this many passages or more has its terms counted here (the
#: flush of fewer does not read them: migration 15's path).
STAGED_FROM = 64
#: A ``tsvector`` keeps at most this many positions of one lexeme.
TF_CAP = 255
#: Texts this long or longer are stemmed by the server (a ``tsvector``'s
#: positions stop at 16,383; its size at 1 MB).
MAX_WORDS = 16_000
MAX_CHARS = 100_000
#: Texts a transaction's announced texts are split and counted by at a time.
EXPECT_BATCH = 1000
#: Words kept stemmed per namespace; past it, the cache starts again.
CACHE_WORDS = 100_000
#: The table the counted terms go to (emptied by the flush at commit).
STAGED = "search_staged"

T = TypeVar("T")

# The namespace's index number (first row, no word; made if the namespace
# has no index yet), then each word's lexemes: hashed with it, and how many
# positions each takes in the word (a word that yields nothing, too long to
# index, has no row).
_STEM = (
    "WITH s AS (SELECT memors_search_index_of(%b) AS id) "
    "SELECT s.id, NULL, NULL, NULL, NULL FROM s "
    "UNION ALL "
    "SELECT s.id, w.word, u.lexeme, hashtextextended(u.lexeme, s.id), "
    "coalesce(array_length(u.positions, 1), 1) "
    "FROM s, unnest(%b::text[]) AS w(word), unnest(memors_search_vector(w.word)) AS u"
)
# Each passage's terms and counts: the batch's in one array each, sent in
# binary (joined here from elements kept in that format, not dumped a
# number at a time), each passage's its slice of them. (As array literals, parsing them was a
# tenth of the server's time in a bulk load.)
_STAGE = (
    "INSERT INTO search_staged(id, ix, terms, tfs, n) "
    "SELECT u.id, %b, (%b::bigint[])[u.lo:u.hi], (%b::smallint[])[u.lo:u.hi], u.n "
    "FROM unnest(%b::text[], %b::int[], %b::int[], %b::int[]) AS u(id, lo, hi, n)"
)
#: A text's ASCII letters and digits kept, lowercased (the index's stemmer
#: lowercases a word before anything else), every other ASCII character a space.
_SPACES = bytes(
    (c | 32 if chr(c).isalpha() else c) if chr(c).isascii() and chr(c).isalnum() else 32
    for c in range(256)
)


def words(text: str) -> list[str] | None:
    """The words of ``text`` in order, or None when the server must stem the
    text itself (beyond ASCII, or too long)."""
    if len(text) >= MAX_CHARS or not text.isascii():
        return None
    return text.encode("ascii").translate(_SPACES).decode("ascii").split()


class _Stemmed:
    """The words of one namespace stemmed with one seed. Nearly every word
    is one lexeme at one position: ``lexeme`` maps it to that lexeme, and
    ``term`` to the lexeme's hashed term, as an element of a ``bigint[]`` in
    binary. The others (none: too long to index; several) are kept whole in
    ``odd``, and ``lexeme`` maps them to None. ``terms`` holds each
    lexeme's hashed term."""

    __slots__ = ("lexeme", "odd", "seed", "term", "terms")

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.lexeme: dict[str, str | None] = {}
        self.term: dict[str, bytes] = {}  # a one-lexeme word's term
        self.odd: dict[str, list[tuple[str, int]]] = {}  # word -> [(lexeme, positions)]
        self.terms: dict[str, bytes] = {}

    def __len__(self) -> int:
        return len(self.lexeme)

    def add(self, word: str, stems: list[tuple[str, int, int]]) -> None:
        for lexeme, term, _ in stems:
            self.terms[lexeme] = Int8Array.element_of(term)
        if len(stems) == 1 and stems[0][2] == 1:
            self.lexeme[word] = stems[0][0]
            self.term[word] = self.terms[stems[0][0]]
        else:
            self.lexeme[word] = None
            self.odd[word] = [(lexeme, positions) for lexeme, _, positions in stems]

    def counted(self, tokens: list[str]) -> tuple[list[bytes], list[int]]:
        """The hashed terms (in binary) of a text whose words are ``tokens``,
        and each one's number of positions (in no particular order: the
        index reads a passage's terms by value)."""
        try:
            # (nearly always: every word one lexeme at one position, so its
            # term is counted as it comes, and words of one lexeme add up;
            # counting the words first, then their terms, took twice as long)
            counts = Counter(map(self.term.__getitem__, tokens))
        except KeyError:  # (an odd word, or one not stemmed yet: below)
            pass
        else:
            return list(counts), list(counts.values())
        times = Counter(tokens)
        lexemes = list(map(self.lexeme.__getitem__, times))
        tally: dict[str, int] = {}  # (some words odd: counted by lexeme)
        for word, one, n in zip(times, lexemes, times.values(), strict=True):
            if one is not None:
                tally[one] = tally.get(one, 0) + n
            else:
                for lexeme, positions in self.odd[word]:
                    tally[lexeme] = tally.get(lexeme, 0) + n * positions
        return list(map(self.terms.__getitem__, tally)), list(tally.values())


class Staging:
    """What one write transaction's inserts know of their terms (cleared
    when it ends): the stemmed words each namespace's were learned into,
    and the terms of the texts it said were coming, counted then, with
    the index number they were hashed with (per namespace)."""

    __slots__ = ("counted", "stemmed")

    def __init__(self) -> None:
        self.stemmed: dict[str, _Stemmed] = {}
        #: (a text's counted terms; None: the server's to count)
        self.counted: dict[str, tuple[int, dict[str, Counted | None]]] = {}

    def clear(self) -> None:
        self.stemmed.clear()
        self.counted.clear()


_UNSEEN: Any = object()


class TermCache:
    """The words a store's process has had stemmed, per namespace, with the
    seed their terms were hashed with (a new seed starts the namespace's
    words again). Shared by the store's threads; a race costs a word
    stemmed twice, never a wrong term."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_namespace: dict[str, _Stemmed] = {}
        #: Passages staged so far.
        self.staged = 0

    def ahead(
        self, conn: psycopg.Connection[Any], namespace: str, texts: Sequence[str]
    ) -> Ahead | None:
        """:meth:`expect` outside any transaction (``conn`` in autocommit):
        ``texts`` counted for a later transaction (a bulk load's next batch,
        while the one before it commits), which :meth:`expect` of the same
        texts takes instead of counting them again."""
        staging = Staging()
        self.expect(conn, namespace, texts, staging)
        counted = staging.counted.get(namespace)
        return None if counted is None else Ahead(namespace, *counted)

    def expect(
        self,
        conn: psycopg.Connection[Any],
        namespace: str,
        texts: Sequence[str],
        staging: Staging,
        ahead: Ahead | None = None,
    ) -> None:
        """Split ``texts`` into words, have the server stem the new ones (and
        say its index number) in one round trip, now, and count each text's
        terms: the inserts of the transaction that adds them then send
        without waiting, and stage what was counted here. The texts
        ``ahead`` counted (with the index number then) are not counted again."""
        if len(texts) < STAGED_FROM:
            return  # (an insert this small is stemmed by the server)
        seed, done = staging.counted.get(namespace, (None, {}))
        if ahead is not None and ahead.namespace == namespace and seed is None:
            seed, done = ahead.seed, ahead.counted
        known = self._known(conn, namespace, set(), staging)  # (its number, once a transaction)
        if seed is not None and seed != known.seed:
            done = {}  # (hashed with the number before: counted again)
        fresh = [t for t in dict.fromkeys(texts) if t not in done]
        # A thousand texts at a time, each counted at once when its words
        # are known, the others once their new words are stemmed: only a
        # thousand texts' words are held at once.
        for start in range(0, len(fresh), EXPECT_BATCH):
            waiting = []
            for text in fresh[start : start + EXPECT_BATCH]:
                found = words(text)
                if found is None:
                    done[text] = None
                    continue
                try:
                    done[text] = _count(known, found)
                except KeyError:  # (a word not stemmed yet)
                    waiting.append((text, found))
            if waiting:
                every = set().union(*(found for _, found in waiting))
                learned = self._known(conn, namespace, every, staging)
                if learned.seed != known.seed:
                    done = {}  # (the index was made again meanwhile: counted when stored)
                known = learned
                done.update((text, _count(known, found)) for text, found in waiting)
        staging.counted[namespace] = (known.seed, done)

    def stage(
        self,
        conn: psycopg.Connection[Any],
        namespace: str,
        rows: Sequence[NewPassage],
        send: Callable[[], T],
        staging: Staging,
    ) -> T:
        """Send the rows' insert (``send()``, whose answer it returns), then
        count the terms of ``rows`` while the server stores them and stage
        those it need not stem, in ``conn``'s transaction. A text
        :meth:`expect` counted is staged as counted there; another's words
        new to the cache are stemmed before the insert. (The flush takes a passage's
        staged terms only when hashed with the index's number at its
        commit: one changed meanwhile costs a stemming, never a term.)"""
        if len(rows) < STAGED_FROM:
            return send()
        seed, done = staging.counted.get(namespace, (None, {}))
        split: list[tuple[str, Any]] = []
        every: set[str] = set()
        for p in rows:
            found = done.get(p.text, _UNSEEN)
            if found is _UNSEEN:
                found = words(p.text)
                if found is not None:
                    every.update(found)
            split.append((p.id, found))
        known = self._known(conn, namespace, every, staging)
        if seed is not None and seed != known.seed and done:
            # The index was made again since the texts were counted: every
            # text is counted here, its words asked for with the new number.
            split = [(p.id, words(p.text)) for p in rows]
            every = set().union(*(found for _, found in split if found is not None))
            known = self._known(conn, namespace, every, staging)
        answer = send()
        ids, terms, tfs, los, his, lengths = _counted_rows(known, split)
        if ids:
            with _binary(psycopg.Cursor(conn)) as cur:
                cur.execute(_STAGE, (known.seed, terms, tfs, ids, los, his, lengths))
        with self._lock:
            self.staged += len(ids)
        return answer

    def _known(
        self, conn: psycopg.Connection[Any], namespace: str, every: set[str], staging: Staging
    ) -> _Stemmed:
        """The stemmed words of ``namespace`` that hold ``every`` word (the
        new ones asked for, with the index number, once a transaction at
        least): the transaction keeps them."""
        mine = staging.stemmed.get(namespace)
        known = mine
        if known is None:
            with self._lock:
                known = self._by_namespace.get(namespace)
        new = sorted(every.difference(known.lexeme if known is not None else ()))
        if known is None or mine is None or new:
            known = self._learn(conn, namespace, known, every, new)
        staging.stemmed[namespace] = known
        return known

    def _learn(
        self,
        conn: psycopg.Connection[Any],
        namespace: str,
        known: _Stemmed | None,
        every: set[str],
        new: list[str],
    ) -> _Stemmed:
        """The namespace's stemmed words with ``new`` added (and its index
        number read): kept for the next insert."""
        seen = known.lexeme if known is not None else {}
        seed, stems = self._stem(conn, namespace, new)
        if known is None or known.seed != seed or len(known) + len(stems) > CACHE_WORDS:
            # Start again (the index was made again since, its words hashed
            # with another seed; or the cache is full): the words needed
            # now that were known before are asked for again.
            again = every.intersection(seen)
            if again:
                stems.update(self._stem(conn, namespace, sorted(again))[1])
            known = _Stemmed(seed)
        for word, found in stems.items():
            known.add(word, found)
        with self._lock:
            self._by_namespace[namespace] = known
        return known

    @staticmethod
    def _stem(
        conn: psycopg.Connection[Any], namespace: str, new: list[str]
    ) -> tuple[int, dict[str, list[tuple[str, int, int]]]]:
        """The namespace's seed and the stems of ``new``, each a list of
        (lexeme, hashed term, positions) in lexeme order."""
        found: dict[str, list[tuple[str, int, int]]] = {w: [] for w in new}
        with psycopg.Cursor(conn) as cur:
            cur.execute(_STEM, (namespace, new))
            rows = iter(cur)
            seed: int = next(rows)[0]
            for _, word, lexeme, term, positions in rows:
                found[word].append((lexeme, term, positions))
        return seed, found


#: A text's terms counted: its hashed terms and their counts (each an
#: element of its array, in binary), and its length.
Counted = tuple[list[bytes], list[bytes], int]


class Ahead:
    """Texts of a namespace counted ahead of the transaction that adds them
    (:meth:`TermCache.ahead`): each one's terms (None: the server's to
    count), hashed with the index number ``seed``."""

    __slots__ = ("counted", "namespace", "seed")

    def __init__(self, namespace: str, seed: int, counted: dict[str, Counted | None]) -> None:
        self.namespace = namespace
        self.seed = seed
        self.counted = counted


def _count(known: _Stemmed, tokens: list[str]) -> Counted | None:
    """The counted terms of a text whose words are ``tokens`` (None: the
    server's to count)."""
    hashed, counts = known.counted(tokens)
    length = sum(counts)
    if length >= MAX_WORDS:
        return None  # positions past 16,383 fold together: the server's to count
    if counts and max(counts) > TF_CAP:
        counts = [min(n, TF_CAP) for n in counts]
        length = sum(counts)
    return hashed, list(map(_TFS.__getitem__, counts)), length


def _counted_rows(known: _Stemmed, split: list[tuple[str, Any]]) -> tuple[Any, ...]:
    """The staged rows of the passages ``split``, each its id with its words
    (to count), its terms counted already, or None (the server's to count):
    their ids, the terms and counts of them all (in binary), where each
    passage's begin and end in them (from 1), and their lengths."""
    ids: list[str] = []
    terms: list[bytes] = []
    tfs: list[bytes] = []
    los: list[int] = []
    his: list[int] = []
    lengths: list[int] = []
    for ident, found in split:
        one = _count(known, found) if isinstance(found, list) else found
        if one is None:
            continue
        hashed, counts, length = one
        ids.append(ident)
        los.append(len(terms) + 1)
        terms.extend(hashed)
        tfs.extend(counts)
        his.append(len(terms))
        lengths.append(length)
    return ids, Int8Array(terms), Int2Array(tfs), los, his, lengths


class _Packed:
    """A one-dimensional array in PostgreSQL's binary format, made from its
    elements already in that format: joined at once, not dumped a number
    at a time."""

    __slots__ = ("data",)
    #: The elements' type, and an element's layout: the value's length,
    #: then the value (big-endian).
    element = postgres.types["int8"].oid
    layout = struct.Struct(">iq")

    def __init__(self, elements: list[bytes]) -> None:
        if elements:
            head = struct.pack(">iiIii", 1, 0, self.element, len(elements), 1)
            self.data = head + b"".join(elements)
        else:
            self.data = struct.pack(">iiI", 0, 0, self.element)

    @classmethod
    def element_of(cls, value: int) -> bytes:
        """``value`` as an element of this array, in binary."""
        return cls.layout.pack(cls.layout.size - 4, value)

    @classmethod
    def of(cls, values: list[int]) -> _Packed:
        """The array of ``values``."""
        return cls(list(map(cls.element_of, values)))


class Int8Array(_Packed):
    """A ``bigint[]``."""

    __slots__ = ()


class Int2Array(_Packed):
    """A ``smallint[]``."""

    __slots__ = ()
    element = postgres.types["int2"].oid
    layout = struct.Struct(">ih")


#: Each count's element of a ``smallint[]``, up to the cap.
_TFS = [Int2Array.element_of(n) for n in range(TF_CAP + 1)]


class _PackedDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: _Packed) -> bytes:
        return obj.data


class _Int8ArrayDumper(_PackedDumper):
    oid = postgres.types["int8"].array_oid


class _Int2ArrayDumper(_PackedDumper):
    oid = postgres.types["int2"].array_oid


def _binary(cur: psycopg.Cursor[Any]) -> psycopg.Cursor[Any]:
    """``cur``, sending :class:`Int8Array` and :class:`Int2Array` as they are."""
    cur.adapters.register_dumper(Int8Array, _Int8ArrayDumper)
    cur.adapters.register_dumper(Int2Array, _Int2ArrayDumper)
    return cur
