"""How search ranks, in one place for both engines.

A query is its words and the entities it names (:class:`SearchQuery`).
Each engine scores a row by BM25 over the row's stemmed words and the
entity terms it carries, with the statistics of the index it is in (one
kind of row, one namespace):

- the weight of a term is :func:`idf`, ``ln(1 + (N - n + 0.5) / (n + 0.5))``
  for ``N`` indexed rows of which ``n`` hold the term: positive however
  common the term is (FTS5's own BM25 clamps a term in half the rows or
  more to 1e-6, which made small namespaces' scores meaningless);
- a row's part of it is :func:`term_part`, BM25's saturating term frequency
  with the length of the row against the index's average (k1 = 1.2,
  b = 0.75).

An entity the query names by its name or an alias (folded as merges fold
names, :func:`memors_core.domain.text.fold_name`) is searched as a term of
its own, which every passage mentioning it, its facts, its page and the
entity itself carry (:func:`entity_term`); its name's words leave the
query unless nothing else is left, so "when did Caroline move" does not
spend weight on every row that says "Caroline".

Very common terms do not make a question slow: a term held by more than
:func:`common_above` rows does not gather candidates, it only adds its
weight to the best :func:`rerank_depth` candidates the other terms found
(the MaxScore idea; ``benchmarks/retrieval.py`` measures what it costs in
recall).

``all`` merges granularities by :func:`share`: a row's score over the most
the query could score in its index (every term, saturated), a number in
[0, 1) that means the same in a small index of pages as in a large one of
passages.

With vectors (the ``semantic`` extra), passages are also ranked by meaning:
``semantic`` by the cosine of each passage's vector with the question's,
``hybrid`` by :func:`fuse`: each ranking's scores rescaled to [0, 1] over
the hits it read (min-max), then summed with the weights of
:func:`hybrid_weights` — the words :data:`WORDS_WEIGHT`, meaning the rest,
split between the vector ranking of every passage of the namespace and,
when the question names entities, that of their passages
(:data:`NAMED_SHARE`). Measured on
real long conversations (``benchmarks/retrieval.py --locomo``), this beat
reciprocal-rank fusion (whose k = 60 gives a weak ranking's noise at rank 3
as much weight as the words' rank 3) and the vector side limited to the
named entities' passages (which loses every answer told by someone the
question does not name). Pages, facts and entities have no vectors: they
are ranked by their words in every mode.

Passages found lend :data:`NEIGHBOUR_SHARE` of their score to the passages
remembered just before and after them in their namespace
(:func:`with_neighbours`): a reply rarely repeats the words of the
question it answers. By words lending only reorders what the words found;
in hybrid a neighbour not plainly unrelated in meaning joins.
"""

from __future__ import annotations

import math

from memors_core.domain import text

# Not typing.TYPE_CHECKING: ``memors-mcp search`` runs this module without
# importing typing (or attrs) at all, so it starts about as fast as Python.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Iterable
    from typing import Any

K1 = 1.2
B = 0.75
#: At most this many distinct words of a query are searched.
MAX_WORDS = 64
#: A term in more than this share of an index's rows (and more than
#: COMMON_FLOOR rows) is common: it scores candidates but does not find them.
COMMON_SHARE = 0.05
COMMON_FLOOR = 2_000
#: How many candidates the rarer terms hand to the common ones.
RERANK_DEPTH = 100
#: The longest entity name (in words) a query is read for.
MAX_NAME_WORDS = 6
#: About how many words of a page a hit shows.
SNIPPET_WORDS = 40
#: How passages are ranked: by their words, by meaning, or both fused.
MODES = ("lexical", "semantic", "hybrid")
#: Hybrid's weight of the ranking by words; meaning has the rest (:func:`hybrid_weights`).
WORDS_WEIGHT = 0.7
#: Of meaning's weight, the share of the named entities' passages' vector
#: ranking when the question names any (every passage's has the rest): a
#: passage's vector holds its entities' names, so every passage's ranking
#: already leans to the people named; theirs alone keeps them first where
#: many people said the same things.
NAMED_SHARE = 0.25
#: How deep each ranking is read before fusion (at least; 4 x the limit when larger).
FUSION_DEPTH = 50
#: A passage whose cosine with the question is below this is not found by
#: meaning: unrelated texts score about 0 to 0.15 with this model, so a
#: question about nothing the store holds finds nothing instead of the
#: least unlike passages.
MIN_COSINE = 0.2
#: A passage found lends this share of its score to the passages remembered
#: just before and after it (:func:`with_neighbours`).
NEIGHBOUR_SHARE = 0.5
#: How many of the best passages lend (at least; 2 x the limit when larger).
NEIGHBOUR_DEPTH = 20
#: In hybrid, a neighbour nothing ranked joins only if its cosine with the
#: question is at least this: not plainly unrelated (those score about 0).
NEIGHBOUR_MIN_COSINE = 0.1

#: Entity terms start with a private-use character: no word of any text
#: (:func:`memors_core.domain.text.words`) can contain it.
ENTITY_MARK = "\ue000"


class SearchQuery:
    """What a search looks for: its words (distinct, casefolded, stop words
    dropped unless nothing else was left) and the canonical entities it
    names (their ids). Frozen, compared by value."""

    __slots__ = ("entities", "words")
    words: tuple[str, ...]
    entities: tuple[str, ...]

    def __init__(self, words: tuple[str, ...], entities: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "words", tuple(words))
        object.__setattr__(self, "entities", tuple(entities))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SearchQuery is frozen: cannot set {name}")

    def __bool__(self) -> bool:
        return bool(self.words or self.entities)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SearchQuery):
            return NotImplemented
        return (self.words, self.entities) == (other.words, other.entities)

    def __hash__(self) -> int:
        return hash((self.words, self.entities))

    def __repr__(self) -> str:
        return f"SearchQuery(words={self.words!r}, entities={self.entities!r})"


class Hit:
    """One search hit: an address, its granularity, the text shown and the
    score (:class:`memors_core.domain.model.SearchHit` is its wire form)."""

    __slots__ = ("address", "granularity", "score", "text")

    def __init__(self, address: str, granularity: str, text: str, score: float) -> None:
        self.address = address
        self.granularity = granularity
        self.text = text
        self.score = score

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hit):
            return NotImplemented
        return self.fields() == other.fields()

    __hash__ = None  # type: ignore[assignment]

    def fields(self) -> tuple[str, str, str, float]:
        return (self.address, self.granularity, self.text, self.score)

    def __repr__(self) -> str:
        return f"Hit({self.address!r}, {self.granularity!r}, score={self.score!r})"


class Ranked:
    """One index's answer: ``(row, score)`` (or :class:`Hit`) best first, and
    the most the query could score there (the denominator of :func:`share`)."""

    __slots__ = ("ceiling", "rows")

    def __init__(self, rows: list, ceiling: float) -> None:
        self.rows = rows
        self.ceiling = ceiling

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Ranked):
            return NotImplemented
        return (self.rows, self.ceiling) == (other.rows, other.ceiling)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Ranked(rows={self.rows!r}, ceiling={self.ceiling!r})"

    # A sequence of its rows, as the search methods' answers were lists.
    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def query_words(query: str) -> list[str]:
    """The words of a user's text a search looks for: distinct, casefolded,
    stop words (and negations, quantifiers) dropped unless nothing else is
    left, at most :data:`MAX_WORDS`."""
    return _searched(text.index_words(query))


def _searched(words: list[str]) -> list[str]:
    """:func:`query_words` of a text's words."""
    ws = list(dict.fromkeys(words))
    stops = text.search_stop_words()
    content = [w for w in ws if w not in stops] or ws
    return content[:MAX_WORDS]


def as_query(query: str | SearchQuery) -> SearchQuery:
    """A search for ``query``: a user's text is its words, by
    :func:`query_words` (the names in it are not looked up)."""
    if isinstance(query, SearchQuery):
        return query
    return SearchQuery(tuple(query_words(query)))


def name_spans(words: list[str]) -> list[tuple[int, int, str]]:
    """Every run of up to :data:`MAX_NAME_WORDS` consecutive words, as
    ``(start, end, folded name)``, longest first: what may be an entity's name."""
    out = []
    for size in range(min(MAX_NAME_WORDS, len(words)), 0, -1):
        for start in range(len(words) - size + 1):
            out.append((start, start + size, " ".join(words[start : start + size])))
    return out


def with_entities(
    all_words: list[str], named: Callable[[list[str]], dict[str, str]]
) -> SearchQuery:
    """The search for a query of ``all_words`` (:func:`memors_core.domain.text.index_words`)
    once its names are known: ``named`` maps folded names (every
    :func:`name_spans` run of the words casefolded, as names are kept, asked
    once) to the canonical ids of the entities they name. Names are taken
    longest first, never overlapping; their words leave the query unless no
    other content word is left."""
    spans = name_spans([w.casefold() for w in all_words])
    found = named([name for _, _, name in spans])
    taken = [False] * len(all_words)
    entities: list[str] = []
    for start, end, name in spans:
        canonical = found.get(name)
        if canonical is None or any(taken[start:end]):
            continue
        taken[start:end] = [True] * (end - start)
        if canonical not in entities:
            entities.append(canonical)
    words = _searched(all_words)
    if entities:
        stops = text.search_stop_words()
        rest = [w for w, t in zip(all_words, taken, strict=True) if not t and w not in stops]
        if rest:
            words = list(dict.fromkeys(rest))[:MAX_WORDS]
    return SearchQuery(tuple(words), tuple(entities))


def entity_term(rowid: int) -> str:
    """The term a row carries for the canonical entity with ``rowid``."""
    return f"{ENTITY_MARK}{rowid}"


def idf(rows: float, holding: float) -> float:
    """A term's weight among ``rows`` rows of which ``holding`` hold it."""
    return math.log(1.0 + (rows - holding + 0.5) / (holding + 0.5))


def term_part(tf: float, length: float, average: float) -> float:
    """A row's share of a term's weight: its count saturating, damped by
    the row's length against the average."""
    return tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / max(average, 1e-9)))


def ceiling(rows: float, holding: Iterable[float]) -> float:
    """The most a query of terms held by ``holding`` rows can score."""
    return sum(idf(rows, n) for n in holding) * (K1 + 1)


def common_above(rows: int) -> float:
    """How many rows may hold a term before it is common."""
    return max(COMMON_FLOOR, COMMON_SHARE * rows)


def rerank_depth(limit: int) -> int:
    return max(RERANK_DEPTH, 4 * limit)


def split_common(rows: int, holding: dict[str, int]) -> tuple[list[str], list[str]]:
    """The present terms (``holding`` > 0) as (rare, common); when all are
    common the rarest finds the candidates."""
    present = {t: n for t, n in holding.items() if n > 0}
    cut = common_above(rows)
    rare = [t for t, n in present.items() if n <= cut]
    common = [t for t in present if t not in rare]
    if not rare and common:
        rarest = min(common, key=lambda t: (present[t], t))
        rare, common = [rarest], [t for t in common if t != rarest]
    return rare, common


def share(score: float, top: float) -> float:
    """A score on the scale ``all`` merges by."""
    return score / top if top > 0 else 0.0


def fusion_depth(limit: int) -> int:
    """How many hits of each ranking :func:`fuse` reads for ``limit`` results."""
    return max(FUSION_DEPTH, 4 * limit)


def rescaled(ranking: list[Hit]) -> list[float]:
    """Each hit's score over the span of the ranking read: the best 1, the
    last 0 (one hit, or all equal: 1)."""
    if not ranking:
        return []
    top, bottom = ranking[0].score, ranking[-1].score
    if top <= bottom:
        return [1.0] * len(ranking)
    return [(h.score - bottom) / (top - bottom) for h in ranking]


def hybrid_weights(named: bool) -> tuple[float, float, float]:
    """The weights :func:`fuse` gives, in hybrid mode, the ranking by words,
    the vector ranking of every passage, and that of the named entities'
    passages (0 when the question names none)."""
    meaning = 1.0 - WORDS_WEIGHT
    if not named:
        return (WORDS_WEIGHT, meaning, 0.0)
    return (WORDS_WEIGHT, meaning * (1.0 - NAMED_SHARE), meaning * NAMED_SHARE)


def fuse(*rankings: tuple[float, list[Hit]]) -> list[Hit]:
    """Weighted fusion of ``(weight, ranking)`` pairs: a hit scores the sum,
    over the rankings that hold it, of the weight times its
    :func:`rescaled` score there; best first, ties to the hit an earlier
    ranking placed first. A hit keeps the text of the first ranking that
    has it. A hit first in every ranking is first."""
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for weight, ranking in rankings:
        for hit, value in zip(ranking, rescaled(ranking), strict=True):
            scores[hit.address] = scores.get(hit.address, 0.0) + weight * value
            first.setdefault(hit.address, hit)
    order = sorted(scores, key=lambda a: -scores[a])  # stable: first seen wins ties
    return [Hit(a, first[a].granularity, first[a].text, scores[a]) for a in order]


def neighbour_depth(limit: int) -> int:
    """How many passages are ranked, and lend to their neighbours, for ``limit`` results."""
    return max(NEIGHBOUR_DEPTH, 2 * limit)


def with_neighbours(found: list[Hit], beside: dict[str, list[Hit]], join: bool) -> list[Hit]:
    """``found`` (passages, best first) with each one lending
    :data:`NEIGHBOUR_SHARE` of its score to its neighbours (``beside``:
    passage id -> the passages remembered just before and after it): a
    passage scores its own score plus the most a neighbour lends it. With
    ``join``, a passage found only as a neighbour joins the ranking if its
    score in ``beside`` (its cosine with the question) is at least
    :data:`NEIGHBOUR_MIN_COSINE`; without, lending only reorders ``found``. A reply ("Yes, in May")
    rarely repeats the words of what it answers, and a question asks in
    those words. Best first; ties keep ``found``'s order, then the order lent."""
    scores = {h.address: h.score for h in found}
    first = {h.address: h for h in found}
    lent: dict[str, float] = {}
    for hit in found:
        for near in beside.get(hit.address.rsplit("/", 1)[1], ()):
            if near.address in scores or (join and near.score >= NEIGHBOUR_MIN_COSINE):
                first.setdefault(near.address, near)
                value = NEIGHBOUR_SHARE * hit.score
                lent[near.address] = max(lent.get(near.address, 0.0), value)
    for address, value in lent.items():
        scores[address] = scores.get(address, 0.0) + value
    order = sorted(first, key=lambda a: -scores[a])  # stable: found's order, then lent
    return [Hit(a, first[a].granularity, first[a].text, scores[a]) for a in order]


def snippet(content: str, stems: set[str], width: int = SNIPPET_WORDS) -> str:
    """About ``width`` words of ``content`` around its first word whose start
    is one of the query's stems (the whole text when it is short), marked
    with ``…`` where it was cut."""
    tokens = content.split()
    if len(tokens) <= width:
        return " ".join(tokens)
    at = 0
    for i, token in enumerate(tokens):
        if any(w.startswith(s) for w in text.index_words(token) for s in stems):
            at = i
            break
    start = max(0, min(at - width // 4, len(tokens) - width))
    out = " ".join(tokens[start : start + width])
    return ("…" if start else "") + out + ("…" if start + width < len(tokens) else "")


def fact_line(
    subject: str, predicate: str, value: str, since: str | None, until: str | None
) -> str:
    """A fact hit's text: the fact with its validity, if it has one."""
    span = f" [{since or '…'}, {until or '…'})" if since or until else ""
    return f"{subject} {predicate} {value}{span}"


def entity_line(name: str, aliases: str | None) -> str:
    """An entity hit's text: its name with its aliases."""
    return f"{name} (also: {aliases})" if aliases else name


def hits(ranked: Ranked, texts: dict, granularity: str) -> Ranked:
    """``ranked``'s ``(row, score)`` as :class:`Hit` values, given each row's
    ``(id, text)`` (a row without one, gone meanwhile, is left out)."""
    found = [
        Hit(f"memo://{granularity}/{texts[r][0]}", granularity, texts[r][1], float(score))
        for r, score in ranked.rows
        if r in texts
    ]
    return Ranked(found, ranked.ceiling)


#: What ``search`` searches, in the order ``all`` asks them.
GRANULARITIES = ("passage", "page", "fact", "entity", "all")


def check_request(
    query: object, granularity: object, limit: object, query_chars: int, mode: object = None
) -> None:
    """Refuse a search request that cannot be run, in one line (the same
    words whichever frontend asked)."""
    from memors_core.errors import BadInput

    if mode is not None and mode not in MODES:
        raise BadInput(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")

    if not isinstance(query, str):
        raise BadInput(f"query must be a string, got {type(query).__name__}")
    if len(query) > query_chars:
        raise BadInput(
            f"query too long ({len(query)} characters; at most {query_chars}, "
            "MEMORS_MAX_QUERY_CHARS)"
        )
    from memors_core.domain.valid_text import problem

    why = problem(query)
    if why:
        raise BadInput(f"query is not valid text ({why})")
    if granularity not in GRANULARITIES:
        raise BadInput(
            f"unknown granularity {granularity!r}: use one of {', '.join(GRANULARITIES)}"
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise BadInput(f"limit must be an integer from 1 to 1000, got {limit!r}")


def run(
    search: Any,
    namespace: str,
    query: str,
    granularity: str,
    limit: int,
    as_of: str | None,
    named: Callable[[list[str]], dict[str, str]],
    mode: str = "lexical",
    vector: bytes | Callable[[], bytes] | None = None,
) -> list[Hit]:
    """A search from a user's text to its hits, on any engine: the query's
    words, the entities it names (``named``: folded names -> canonical ids),
    then one granularity's :class:`Ranked` hits from ``search`` (a
    :class:`memors_core.storage.api.Search`), or every granularity's merged
    by their :func:`share` of what the query could score in their own index.

    With ``mode`` ``semantic`` or ``hybrid`` and the question's ``vector``,
    passages are ranked by meaning, or by both fused (:func:`fuse`); under
    ``all`` they then take the places the words give passages
    (:func:`in_words_places`). ``vector`` may be a call that returns it
    (the question being embedded meanwhile): it is first called once the
    words' ranking is read."""
    words = text.index_words(query)
    if not words:
        return []  # no words: nothing can match, whatever the engine's syntax
    wanted = with_entities(words, named)
    if not wanted:
        return []

    def passages(deep: int) -> Callable[[SearchQuery], Ranked]:
        if mode != "lexical" and vector is not None:
            return _by_meaning(
                search, namespace, mode, vector, deep, limit, shares=granularity == "all"
            )
        return lambda q: search.passages(namespace, q, deep)

    if granularity == "passage" and (mode != "semantic" or vector is None):
        # By words, lending reorders what the words found, read deeper; in
        # hybrid, a neighbour joins the best passages' ranking. (Semantic
        # is the vectors alone.)
        join = mode == "hybrid" and vector is not None
        found = passages(neighbour_depth(limit) if join else fusion_depth(limit))(wanted).rows
        ids = [h.address.rsplit("/", 1)[1] for h in found]
        beside = search.passages_beside(
            namespace, ids, _given(vector) if join and vector is not None else None
        )
        return with_neighbours(found, beside, join=join)[:limit]
    searchers: dict[str, Callable[[SearchQuery], Ranked]] = {
        "passage": passages(limit),
        "page": lambda q: search.pages(namespace, q, limit),
        "fact": lambda q: search.facts(namespace, q, limit, as_of),
        "entity": lambda q: search.entities(namespace, q, limit),
    }
    if granularity != "all":
        return searchers[granularity](wanted).rows
    merged = [
        Hit(hit.address, hit.granularity, hit.text, share(hit.score, ran.ceiling))
        for ran in (searchers[g](wanted) for g in GRANULARITIES if g != "all")
        for hit in ran.rows
    ]
    merged.sort(key=lambda h: -h.score)
    return merged[:limit]


def _by_meaning(
    search: Any,
    namespace: str,
    mode: str,
    vector: bytes | Callable[[], bytes],
    limit: int,
    asked: int,
    *,
    shares: bool,
) -> Callable[[SearchQuery], Ranked]:
    """The passage searcher of ``semantic`` or ``hybrid`` mode, for
    ``limit`` passages of a search that asked ``asked`` (which sets how
    deep hybrid's rankings are read, :func:`fusion_depth`). With
    ``shares`` (for ``all``) its :class:`Ranked` has a ceiling of 1 and
    each hit's score is already its share (:func:`in_words_places`)."""

    def near(depth: int, entities: tuple[str, ...] = (), within: Any = search) -> list[Hit]:
        found = within.passages_like(namespace, _given(vector), depth, entities).rows
        return [h for h in found if h.score >= MIN_COSINE]

    def searcher(wanted: SearchQuery) -> Ranked:
        depth = max(fusion_depth(asked), limit)
        if mode == "semantic":
            lexical = search.passages(namespace, wanted, limit)
            meaning = near(limit)
            found = meaning
        else:
            # The two vector rankings beside the words' (on PostgreSQL, each
            # on a connection of its own in the same snapshot), each waiting
            # for the question's vector where it is still being made.
            by_all = search.alongside(lambda within: near(depth, (), within))
            by_named: Callable[[], list[Hit]] = (
                search.alongside(lambda within: near(depth, wanted.entities, within))
                if wanted.entities
                else list
            )
            lexical = search.passages(namespace, wanted, depth)
            meaning, named = by_all(), by_named()
            words, everyone, theirs = hybrid_weights(bool(wanted.entities))
            found = fuse((words, lexical.rows), (everyone, meaning), (theirs, named))[:limit]
        if shares:
            found = in_words_places(found, lexical, meaning)
        return Ranked(found, 1.0)

    if mode == "semantic" and not shares:
        return lambda wanted: Ranked(near(limit), 1.0)  # (no use for the words)
    return searcher


def _given(vector: bytes | Callable[[], bytes]) -> bytes:
    """The question's vector, waited for where it is still being made."""
    return vector if isinstance(vector, bytes) else vector()


def in_words_places(found: list[Hit], lexical: Ranked, meaning: list[Hit]) -> list[Hit]:
    """Passages ranked with meaning, on the scale ``all`` merges by: the
    i-th takes the share the words give the i-th passage they rank (so
    pages, facts and entities stand against passages exactly as they do by
    words, whichever passages fill those places); past the passages the
    words found, in proportion to the score (with none found by words, from
    the best cosine down)."""
    places = [share(h.score, lexical.ceiling) for h in lexical.rows]
    out = []
    for i, hit in enumerate(found):
        if i < len(places):
            value = places[i]
        elif places:
            value = places[-1] * hit.score / found[len(places) - 1].score
        else:
            value = (meaning[0].score if meaning else 0.0) * hit.score / found[0].score
        out.append(Hit(hit.address, hit.granularity, hit.text, value))
    return out
