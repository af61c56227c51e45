"""Kind ``duplicate``: live passages from different documents whose word
3-gram Jaccard is at least 0.75, one item per cluster.

The scan is exact and never compares all pairs: identical shingle sets are
grouped first (real corpora are dominated by exact copies), then the
distinct sets are joined with a prefix filter over a global token order
(rarest first), a length filter, and exact verification in integers.
Qualifying pairs are grouped into connected components; each component is
one item whose payload lists its ``passages``, the lowest qualifying
``jaccard``, up to 1,000 ``pairs`` and the ``pair_count``.

Submit ``keep`` = one or more member addresses; a member is forgotten only
if it is itself a near duplicate (Jaccard >= 0.75, another document) of a
kept member, so a chain A~B~C never loses C for keeping A when A and C are
unlike. Each payload passage shows its ``best_jaccard`` to another member
and that ``best_match``; the report lists ``kept``, ``forgotten`` and
``left`` (members left live).
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import attrs

from memors_core import hookimpl
from memors_core.domain.ids import address, parse_address
from memors_core.errors import BadInput
from memors_core.log import get_logger
from memors_core.plugins.kinds import Candidate, Item, Kind, KindContext, fingerprint
from memors_core.storage.sqlite.ops import live

log = get_logger("memors.duplicate")

THRESHOLD = Fraction(3, 4)
MAX_LISTED_PAIRS = 1000


@attrs.frozen
class DuplicateResolution:
    keep: list[str]


def _prefix_length(size: int, t: Fraction) -> int:
    """Tokens of a set's prefix: any set with Jaccard >= t shares one of them."""
    # size - ceil(t * size) + 1, in exact arithmetic
    need = -((-t.numerator * size) // t.denominator)
    return size - need + 1


def similar_pairs(
    sets: Sequence[Sequence[int]], t: Fraction = THRESHOLD
) -> list[tuple[int, int, int, int]]:
    """All pairs ``(i, j, intersection, union)`` of ``sets`` with Jaccard >= t.

    ``sets`` are distinct, non-empty sets of 64-bit integer tokens.
    """
    import numpy as np

    sizes = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    flat = np.fromiter((tok for s in sets for tok in s), dtype=np.uint64, count=int(offsets[-1]))
    return join(flat, offsets, t)


def join(
    flat: Any,
    offsets: Any,
    t: Fraction = THRESHOLD,
    labels: Any = None,
    stats: dict[str, int] | None = None,
    progress: Callable[..., None] | None = None,
) -> list[tuple[int, int, int, int]]:
    """The exact set-similarity self-join over sets laid end to end.

    Set ``i`` is ``flat[offsets[i]:offsets[i+1]]`` (distinct uint64 tokens).
    A prefix filter over one global token order — rarest first, ties by
    value — yields candidates; a length filter drops pairs whose sizes
    alone rule them out, and a positional filter those whose first shared
    token comes too late in either set (every common token is at or after
    it, so the overlap is at most what is left of the shorter tail); every
    candidate is verified in integers (``intersection * den >= num *
    union``), so the result is exact.

    ``labels`` (optional, one integer per set) names the document of a set:
    two sets with the same label >= 0 are never paired, and a prefix group
    whose sets all have one label is skipped whole, so one huge document of
    look-alike passages costs no candidates (SPEC §5: pairs in one document
    are never duplicates). A negative label (a set found in several
    documents) pairs with every set. ``stats["candidates"]`` counts the
    candidate pairs verified.

    Tokens found in one set only rank first and can never be shared: a set
    whose whole prefix is such tokens is neither probed nor indexed. The
    token statistics are vectorised with numpy, in chunks, so memory stays
    a few bytes per token even at a million passages.
    """
    import numpy as np

    n = len(offsets) - 1
    if n < 2:
        return []
    num, den = t.numerator, t.denominator
    sizes = np.diff(offsets)
    prefix = sizes - (-((-num * sizes) // den)) + 1  # size - ceil(t * size) + 1

    srt = np.sort(flat)
    starts = np.flatnonzero(np.r_[True, srt[1:] != srt[:-1]])
    counts = np.diff(np.r_[starts, len(srt)])
    several = counts > 1
    shared = srt[starts[several]]  # tokens in two or more sets, sorted
    freq = counts[several]
    del srt, starts, counts, several
    if len(shared) == 0:
        return []
    order = np.lexsort((shared, freq))  # rarest first, ties by value
    rank = np.empty(len(shared), dtype=np.int64)
    rank[order] = np.arange(len(shared), dtype=np.int64)
    del order, freq

    # Per chunk of sets: which tokens are shared, and each probing set's prefix ranks.
    chunk_sets = max(1, int(2_000_000 // max(1, int(sizes.mean()))))
    pre_set: list[Any] = []
    pre_rank: list[Any] = []
    pre_pos: list[Any] = []  # the token's position in its set, in the global order
    for a in range(0, n, chunk_sets):
        b = min(n, a + chunk_sets)
        tok = flat[offsets[a] : offsets[b]]
        at = np.minimum(np.searchsorted(shared, tok), len(shared) - 1)
        is_shared = shared[at] == tok
        owner = np.repeat(np.arange(a, b, dtype=np.int64), sizes[a:b])
        n_shared = np.bincount(owner[is_shared] - a, minlength=b - a)
        reach = prefix[a:b] - (sizes[a:b] - n_shared)  # prefix positions past unique tokens
        keep = is_shared & (reach[owner - a] > 0)
        ps, pr = owner[keep], rank[at[keep]]
        o = np.lexsort((pr, ps))  # by set, then rank
        ps, pr = ps[o], pr[o]
        within = np.arange(len(ps)) - np.searchsorted(ps, ps, "left")
        m = within < reach[ps - a]
        pre_set.append(ps[m])
        pre_rank.append(pr[m])
        # Tokens found in one set only rank first: they precede its shared ones.
        pre_pos.append((within + (sizes[a:b] - n_shared)[ps - a])[m])
    ps = np.concatenate(pre_set)
    pr = np.concatenate(pre_rank)
    pp = np.concatenate(pre_pos)
    o = np.lexsort((ps, pr))  # by rank, then set
    ps, pr, pp = ps[o], pr[o], pp[o]
    starts = np.flatnonzero(np.r_[True, pr[1:] != pr[:-1]])
    lengths = np.diff(np.r_[starts, len(pr)])
    multi = lengths > 1
    lab = None
    if labels is not None and multi.any():
        # A group whose sets all belong to one document yields no pair.
        lab = np.asarray(labels, dtype=np.int64)[ps]
        low = np.minimum.reduceat(lab, starts)
        high = np.maximum.reduceat(lab, starts)
        multi &= (low != high) | (low < 0)

    # Candidate pairs, vectorised: in each prefix group (its sets sorted by
    # size), each set pairs with the later ones up to its size limit; a
    # slice of sets at a time, so that memory stays bounded.
    e = np.flatnonzero(np.repeat(multi, lengths))  # entries (indices into ps) of groups kept
    group_of = np.repeat(np.arange(len(starts), dtype=np.int64), lengths)[e]
    entry_size = sizes[ps[e]]
    o = np.lexsort((entry_size, group_of))  # by group, then size
    e, group_of, entry_size = e[o], group_of[o], entry_size[o]
    span = int(sizes.max()) * den // num + 1
    keyed = group_of * span + entry_size
    upper = np.searchsorted(keyed, keyed - entry_size + entry_size * den // num, "right")
    count = upper - np.arange(len(e), dtype=np.int64) - 1  # later sets within t-reach
    total = np.cumsum(count)
    found: list[Any] = []
    step = 4_000_000
    a = 0
    while a < len(e):
        done = int(total[a - 1]) if a else 0
        b = max(a + 1, int(np.searchsorted(total, done + step, "right")))
        c = count[a:b]
        left = np.repeat(np.arange(a, b, dtype=np.int64), c)
        right = left + 1 + (np.arange(len(left), dtype=np.int64) - np.repeat(np.cumsum(c) - c, c))
        ex, ey = e[left], e[right]
        i, j = ps[ex], ps[ey]
        si, sj = sizes[i], sizes[j]
        # overlap <= what is left of either set from this token on, and
        # Jaccard >= t needs (1 + t) overlap >= t (|i| + |j|)
        ok = np.minimum(si - pp[ex], sj - pp[ey]) * (num + den) >= num * (si + sj)
        if lab is not None:
            ok &= (lab[ex] != lab[ey]) | (lab[ex] < 0)  # never two sets of one document
        found.append(np.minimum(i, j)[ok] * n + np.maximum(i, j)[ok])
        a = b
    candidates = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    if stats is not None:
        stats["candidates"] = stats.get("candidates", 0) + len(candidates)
    size_list = sizes.tolist()

    out: list[tuple[int, int, int, int]] = []
    frozen: dict[int, frozenset[int]] = {}

    def as_set(i: int) -> frozenset[int]:
        got = frozen.get(i)
        if got is None:
            got = frozen[i] = frozenset(flat[offsets[i] : offsets[i + 1]].tolist())
        return got

    pairs = len(candidates)
    for k, (i, j) in enumerate(
        zip((candidates // n).tolist(), (candidates % n).tolist(), strict=True)
    ):
        if progress is not None and not k & 4095:
            progress("verifying pairs", k, pairs, "pairs")
        inter = len(as_set(i) & as_set(j))
        union = size_list[i] + size_list[j] - inter
        if inter * den >= num * union:
            out.append((i, j, inter, union))
    return out


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        parent = self.parent
        root = x
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _cross_pairs(g: list[tuple[str, str]], h: list[tuple[str, str]]) -> int:
    """Pairs (p in g, q in h) from different documents."""
    dg = Counter(doc for _p, doc in g)
    dh = Counter(doc for _p, doc in h)
    return len(g) * len(h) - sum(n * dh.get(d, 0) for d, n in dg.items())


def _inner_pairs(g: list[tuple[str, str]]) -> int:
    n = len(g)
    if n < 2:
        return 0
    return n * (n - 1) // 2 - sum(k * (k - 1) // 2 for k in Counter(d for _p, d in g).values())


def clusters(
    records: Iterable[tuple[str, str, bytes]],
    t: Fraction = THRESHOLD,
    stats: dict[str, int] | None = None,
    progress: Callable[..., None] | None = None,
) -> list[dict[str, Any]]:
    """Group passages ``(id, document, shingle blob)`` into duplicate clusters.

    Identical shingle sets are grouped first (one representative each goes
    to the join, labelled with its document when all its passages share
    one, so that the join never pairs two sets of one document). Each
    cluster: ``members`` (ids, sorted), ``jaccard`` (lowest qualifying),
    ``pairs`` (up to 1,000 ``(a, b, jaccard)``) and ``pair_count`` (all
    qualifying pairs of passages from different documents). ``stats``
    counts the ``passages`` read and the join's ``candidates``;
    ``progress(step, done, total, unit)`` hears the join's steps.
    """
    import numpy as np

    group_of: dict[bytes, int] = {}
    members: list[list[tuple[str, str]]] = []
    buffer = bytearray()
    bounds = [0]
    for ident, doc, blob in records:
        if not blob:
            continue
        key = hashlib.blake2b(blob, digest_size=16).digest()
        gi = group_of.get(key)
        if gi is None:
            gi = group_of[key] = len(members)
            members.append([])
            buffer += blob
            bounds.append(len(buffer) // 8)
        members[gi].append((ident, doc))
    del group_of
    flat = np.frombuffer(buffer, dtype=np.uint64)  # no copy: the array keeps the buffer
    offsets = np.asarray(bounds, dtype=np.int64)
    doc_label: dict[str, int] = {}
    labels = np.fromiter(
        (
            doc_label.setdefault(g[0][1], len(doc_label))
            if all(d == g[0][1] for _p, d in g)
            else -1
            for g in members
        ),
        dtype=np.int64,
        count=len(members),
    )
    del doc_label
    if stats is not None:
        stats["passages"] = stats.get("passages", 0) + sum(map(len, members))

    # Qualifying edges between groups (i == j: inside one group of identical sets),
    # each with a witness: a passage that has a qualifying partner in the edge.
    edges: list[tuple[int, int, Fraction]] = []
    for gi, g in enumerate(members):
        if _inner_pairs(g):
            edges.append((gi, gi, Fraction(1)))
    if progress is not None:
        progress("comparing", 0, len(members), "sets")
    for i, j, inter, union in join(flat, offsets, t, labels, stats, progress):
        if _cross_pairs(members[i], members[j]):
            edges.append((i, j, Fraction(inter, union)))

    uf = _UnionFind()
    witness: list[str] = []
    for i, j, _jac in edges:
        g, h = members[i], members[j]
        if i == j:
            for p, _d in g[1:]:
                uf.union(g[0][0], p)
            witness.append(g[0][0])
            continue
        first = None
        for side, other in ((g, h), (h, g)):
            other_docs = Counter(d for _q, d in other)
            for p, doc in side:
                if other_docs.keys() - {doc}:
                    partner = next(q for q, d in other if d != doc)
                    uf.union(p, partner)
                    first = first or p
        witness.append(first)

    if progress is not None:
        progress("grouping", 0, len(edges), "pairs")
    comp_edges: dict[str, list[tuple[int, int, Fraction]]] = defaultdict(list)
    for edge, seen_by in zip(edges, witness, strict=True):
        comp_edges[uf.find(seen_by)].append(edge)
    by_root: dict[str, list[str]] = defaultdict(list)
    for p in list(uf.parent):
        by_root[uf.find(p)].append(p)
    out = []
    for root, es in comp_edges.items():
        pairs: list[tuple[str, str, float]] = []
        count = 0
        for i, j, jac in es:
            g, h = members[i], members[j]
            count += _inner_pairs(g) if i == j else _cross_pairs(g, h)
            if len(pairs) >= MAX_LISTED_PAIRS:
                continue
            if i == j:
                it = ((g[x], g[y]) for x in range(len(g)) for y in range(x + 1, len(g)))
            else:
                it = ((a, b) for a in g for b in h)
            for (p, dp), (q, dq) in it:
                if dp != dq:
                    pairs.append((min(p, q), max(p, q), float(jac)))
                    if len(pairs) >= MAX_LISTED_PAIRS:
                        break
        out.append(
            {
                "members": sorted(by_root[root]),
                "jaccard": float(min(e[2] for e in es)),
                "pairs": sorted(pairs),
                "pair_count": count,
            }
        )
    out.sort(key=lambda c: c["members"][0])
    return out


_PREFIX_COLUMNS = """(
    token INTEGER NOT NULL,
    size INTEGER NOT NULL,
    passage INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    PRIMARY KEY (token, size, passage)
) WITHOUT ROWID;"""

STATE_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS dup_prefix{_PREFIX_COLUMNS}
CREATE TABLE IF NOT EXISTS dup_recent{_PREFIX_COLUMNS}
CREATE TABLE IF NOT EXISTS dup_folded(
    one INTEGER PRIMARY KEY CHECK (one = 1),
    passage_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS dup_members(
    namespace TEXT NOT NULL,
    passage TEXT NOT NULL,
    cluster TEXT NOT NULL,
    PRIMARY KEY (namespace, passage)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS dup_members_cluster ON dup_members(namespace, cluster);
CREATE TABLE IF NOT EXISTS dup_indexed(
    namespace TEXT PRIMARY KEY,
    passage_seq INTEGER NOT NULL
) WITHOUT ROWID;
"""
"""The duplicate kind's own state, kept beside the store's tables:

``dup_prefix`` and ``dup_recent`` — each passage's prefix under the *fixed*
token order (token value: content-word 3-grams first, see
:func:`memors_core.domain.text.shingle_hashes`), keyed by token and size, so a new
passage finds every passage it can reach Jaccard >= 0.75 with by a few
index range look-ups. A full scan indexes into ``dup_prefix``; an
incremental one into the small ``dup_recent``, whose inserts touch few
pages (a token-ordered insert into the big index dirties most of its
pages), folded into ``dup_prefix`` once the passages since the last fold
(``dup_folded``) reach 1/``FOLD_RATIO`` of those before it.
``dup_members`` — the clusters of the last scan; ``dup_indexed`` — up to
which passage row each namespace's passages are indexed.
"""

PREFIX_TABLES = ("dup_prefix", "dup_recent")
FOLD_RATIO = 8


def _prefix_piece(blob: bytes) -> tuple[int, bytes]:
    """A passage's size and the bytes of its indexed prefix under the fixed
    order: one token longer than the prefix filter's, so that a pair's first
    *two* common tokens both fall inside it (see :func:`_probe_sql`). The
    blob is sorted by token value, so the prefix is its head."""
    size = len(blob) // 8
    return size, blob[: 8 * min(size, _prefix_length(size, THRESHOLD) + 1)]


def _prepare_state(store: Any) -> None:
    """Create the kind's tables; an index of an older layout (keyed by token
    and passage) is dropped, so the next scan of each namespace is full and
    rebuilds it."""
    if store.one("SELECT 1 FROM pragma_table_info('dup_prefix') WHERE name = 'size' AND pk = 0"):
        store.conn.execute("DROP TABLE dup_prefix; DELETE FROM dup_indexed")
    store.conn.execute(STATE_SCHEMA)


def _index_prefixes(store: Any, passages: list[tuple[int, int, bytes]], table: str) -> None:
    """Add prefix rows for ``(rowid, size, prefix bytes)`` passages to
    ``table``, in key order."""
    if not passages:
        return
    insert = f"INSERT OR IGNORE INTO {table}(token, size, passage, pos) VALUES (?, ?, ?, ?)"
    if len(passages) < 20_000:  # an incremental scan's few: no need for numpy
        rows = []
        for rowid, size, piece in passages:
            head = array("q")  # the uint64 tokens read as SQLite's signed integers
            head.frombytes(piece)
            rows.extend((tok, size, rowid, pos) for pos, tok in enumerate(head))
        rows.sort()
        store.conn.executemany(insert, rows)
        return
    import numpy as np

    counts = [len(piece) // 8 for _r, _s, piece in passages]
    # The blob's uint64 tokens read as int64 are exactly SQLite's signed integers.
    tokens = np.frombuffer(b"".join(piece for _r, _s, piece in passages), dtype="<i8")
    owners = np.repeat(np.fromiter((r for r, _s, _p in passages), dtype=np.int64), counts)
    sizes = np.repeat(np.fromiter((s for _r, s, _p in passages), dtype=np.int64), counts)
    starts = np.repeat(np.cumsum([0, *counts[:-1]]), counts)
    positions = np.arange(len(tokens), dtype=np.int64) - starts
    order = np.lexsort((owners, sizes, tokens))  # B-tree inserts in key order are much faster
    step = 200_000  # bounded memory: Python ints are made a slice at a time
    for a in range(0, len(order), step):
        part = order[a : a + step]
        store.conn.executemany(
            insert,
            zip(
                tokens[part].tolist(),
                sizes[part].tolist(),
                owners[part].tolist(),
                positions[part].tolist(),
                strict=True,
            ),
        )


def _fold(store: Any) -> None:
    """Move ``dup_recent`` into ``dup_prefix`` (in key order: each page of
    the big index is written once) and note where the fold happened."""
    store.conn.execute(
        "INSERT OR IGNORE INTO dup_prefix(token, size, passage, pos) "
        "SELECT token, size, passage, pos FROM dup_recent ORDER BY token, size, passage;"
        "DELETE FROM dup_recent;"
        "INSERT INTO dup_folded(one, passage_seq) "
        "VALUES (1, (SELECT COALESCE(MAX(rowid), 0) FROM passages)) "
        "ON CONFLICT(one) DO UPDATE SET passage_seq = excluded.passage_seq"
    )


def _fold_due(store: Any) -> bool:
    """Passages since the last fold reach 1/FOLD_RATIO of those before it
    (row ids stand in for counts: passages are never deleted but by purge)."""
    folded = store.scalar("SELECT passage_seq FROM dup_folded") or 0
    newest = store.scalar("SELECT COALESCE(MAX(rowid), 0) FROM passages")
    return (newest - folded) * FOLD_RATIO > folded


def _probe_sql() -> str:
    """Candidates of one new passage x, from both prefix tables.

    Parameters: ?1 x's indexed prefix (a JSON array of signed tokens, in
    order), ?2 the smallest size that can reach the threshold, ceil(t|x|),
    ?3 |x|, ?4 x's row id.

    A pair (x, y) with Jaccard >= t = num/den shares at least
    a = t(|x| + |y|) / (1 + t) tokens. Take its first two common tokens in
    the fixed order, at positions i1 < i2 in x and j1 < j2 in y: every other
    common token comes after them, so a <= |x| - i2 + 1 and a <= |y| - j2 + 1.
    Both tokens therefore meet den|x| - (num+den)(i - 1) >= num|y| (a range of
    y's size per probing token, read straight off the index key) and
    den|y| - (num+den)(j - 1) >= num|x| (which keeps them inside y's indexed
    prefix of |y| - ceil(t|y|) + 2 tokens). A candidate is a passage with two
    such rows — one when |x| = 1, the only size where a = 1. Every qualifying
    pair passes, so none is missed; requiring two shared prefix tokens
    rather than one drops almost every chance match on one common 3-gram.
    """
    num, den = THRESHOLD.numerator, THRESHOLD.denominator
    rows = " UNION ALL ".join(
        f"""SELECT d.passage FROM json_each(?1) j CROSS JOIN {table} d
            ON d.token = j.value
               AND d.size BETWEEN ?2 AND ({den} * ?3 - {num + den} * (j.key - 1)) / {num}
            WHERE {den} * d.size - {num + den} * (d.pos - 1) >= {num} * ?3
              AND d.passage <> ?4"""
        for table in PREFIX_TABLES
    )
    return f"SELECT passage FROM ({rows}) GROUP BY passage HAVING count(*) >= min(2, ?3)"


def _partners(
    store: Any,
    ns: str,
    new: list[tuple[int, str, str, bytes]],
    stats: dict[str, int] | None = None,
) -> dict[str, list[str]]:
    """For each new passage ``(rowid, id, document, blob)``, the live passages
    of other documents with Jaccard >= 0.75 to it.

    Candidates come from the prefix index (see :func:`_probe_sql`; the new
    passages are indexed already, so they find each other); each one of
    another document is verified exactly (``stats["candidates"]`` counts
    them). The candidates' shingles are read together, once each.
    """
    verified = 0
    num, den = THRESHOLD.numerator, THRESHOLD.denominator
    sql = _probe_sql()
    wanted: dict[int, list[int]] = {}
    for rowid, _ident, _doc, blob in new:
        size, piece = _prefix_piece(blob)
        head = array("q")  # the uint64 tokens read as SQLite's signed integers
        head.frombytes(piece)
        low = -((-num * size) // den)  # ceil(t * size)
        found = store.all(sql, (json.dumps(head.tolist()), low, size, rowid))
        if found:
            wanted[rowid] = [r[0] for r in found]
    needed = sorted(set().union(*wanted.values())) if wanted else []
    shingles: dict[int, tuple[str, str, array]] = {}
    for start in range(0, len(needed), 20_000):
        for rowid, ident, doc, blob in store.all(
            f"""SELECT p.rowid, p.id, p.document, p.shingles FROM passages p
                WHERE p.rowid IN (SELECT value FROM json_each(?)) AND p.namespace = ?
                  AND {live("p")}""",
            (json.dumps(needed[start : start + 20_000]), ns),
        ):
            theirs = array("Q")
            theirs.frombytes(blob)
            shingles[rowid] = (ident, doc, theirs)
    out: dict[str, list[str]] = {}
    for rowid, ident, doc, blob in new:
        if rowid not in wanted:
            continue
        mine = array("Q")
        mine.frombytes(blob)
        mine_set = frozenset(mine)
        found = []
        for other in wanted[rowid]:
            got = shingles.get(other)
            if got is None or got[1] == doc:
                continue
            verified += 1
            inter = len(mine_set.intersection(got[2]))
            if inter * den >= num * (len(mine_set) + len(got[2]) - inter):
                found.append(got[0])
        if found:
            out[ident] = found
    if stats is not None:
        stats["candidates"] = stats.get("candidates", 0) + verified
    return out


def _remember_clusters(store: Any, ns: str, found: list[dict[str, Any]]) -> None:
    store.conn.executemany(
        "INSERT OR REPLACE INTO dup_members(namespace, passage, cluster) VALUES (?, ?, ?)",
        [(ns, member, c["members"][0]) for c in found for member in c["members"]],
    )


def _set_indexed(store: Any, ns: str) -> None:
    store.conn.execute(
        "INSERT INTO dup_indexed(namespace, passage_seq) "
        "VALUES (?, (SELECT COALESCE(MAX(rowid), 0) FROM passages)) "
        "ON CONFLICT(namespace) DO UPDATE SET passage_seq = excluded.passage_seq",
        (ns,),
    )


class DuplicateKind(Kind):
    name = "duplicate"
    description = "drop near-duplicate passages (word 3-gram Jaccard >= 0.75) across documents"
    resolution = DuplicateResolution
    hint = (
        "keep = one or more passage addresses (--keep memo://passage/…); only members "
        "that are near duplicates of a kept one are forgotten"
    )

    incremental = True

    def scan(self, ctx: KindContext) -> Iterator[Candidate]:
        _prepare_state(ctx.store)
        indexed = ctx.store.scalar(
            "SELECT passage_seq FROM dup_indexed WHERE namespace = ?", (ctx.namespace,)
        )
        if ctx.changes is None or indexed is None:
            found = self._full_scan(ctx, indexed or 0)
        else:
            found = self._incremental_scan(ctx, indexed)
        ctx.progress("items", 0, len(found), "items")
        for cluster in found:
            yield self._candidate(ctx, cluster)

    # -- full: the exact join over every live passage ------------------------------

    def _full_scan(self, ctx: KindContext, indexed: int) -> list[dict[str, Any]]:
        store, ns = ctx.store, ctx.namespace
        _fold(store)  # the scan reads every passage anyway: one index after it
        fresh: list[tuple[int, int, bytes]] = []
        # How many there are to read (for the progress line): passages with text.
        total = store.scalar(
            f"""SELECT COUNT(*) FROM passages p
                WHERE p.namespace = ? AND length(p.shingles) > 0 AND {live("p")}""",
            (ns,),
        )
        ctx.progress("reading passages", 0, total, "passages")

        def records() -> Iterator[tuple[str, str, bytes]]:
            for n, (rowid, ident, doc, blob) in enumerate(
                store.conn.execute(
                    f"""SELECT p.rowid, p.id, p.document, p.shingles FROM passages p
                        WHERE p.namespace = ? AND length(p.shingles) > 0 AND {live("p")}
                        ORDER BY p.rowid""",
                    (ns,),
                )
            ):
                if not n & 1023:
                    ctx.progress("reading passages", n, total, "passages")
                if rowid > indexed:
                    fresh.append((rowid, *_prefix_piece(blob)))
                    if len(fresh) >= 100_000:  # index as we go: bounded memory
                        _index_prefixes(store, fresh, "dup_prefix")
                        fresh.clear()
                yield ident, doc, blob

        stats: dict[str, int] = {}
        found = clusters(records(), stats=stats, progress=ctx.progress)
        log.debug("duplicates_scanned", namespace=ns, scan="full", clusters=len(found), **stats)
        ctx.progress("indexing", 0, len(fresh), "passages")
        _index_prefixes(store, fresh, "dup_prefix")
        store.conn.execute("DELETE FROM dup_members WHERE namespace = ?", (ns,))
        _remember_clusters(store, ns, found)
        _set_indexed(store, ns)
        return found

    # -- incremental: new passages probe the prefix index ------------------------------

    def _incremental_scan(self, ctx: KindContext, indexed: int) -> list[dict[str, Any]]:
        store, ns, changes = ctx.store, ctx.namespace, ctx.changes
        assert changes is not None
        new = store.all(
            f"""SELECT p.rowid, p.id, p.document, p.shingles FROM passages p
                WHERE p.namespace = ? AND p.rowid > ? AND length(p.shingles) > 0
                  AND {live("p")} ORDER BY p.rowid""",
            (ns, indexed),
        )
        # Forgotten passages stay in dup_prefix; every look-up checks liveness.
        gone = [
            r[0]
            for r in store.all(
                "SELECT target FROM tombstones WHERE namespace = ? AND type = 'passage' "
                "AND rowid > ?",
                (ns, changes.tombstone_seq),
            )
        ]
        _index_prefixes(
            store, [(rowid, *_prefix_piece(blob)) for rowid, _i, _d, blob in new], "dup_recent"
        )
        touched: set[str] = set()
        stats: dict[str, int] = {"passages": len(new)}
        for ident, partners in _partners(store, ns, new, stats).items():
            touched.add(ident)
            touched.update(partners)
        touched.update(gone)
        _set_indexed(store, ns)
        if _fold_due(store):
            _fold(store)
        log.debug("duplicates_scanned", namespace=ns, scan="incremental", **stats)
        if not touched:
            ctx.scope = set()
            return []
        # Every cluster that holds a touched passage is recomputed whole:
        # components are closed under qualifying pairs, so no pair crosses
        # out of this set except through the new passages, whose partners
        # were all found above.
        old_keys = {
            r[0]
            for r in store.all(
                "SELECT DISTINCT cluster FROM dup_members WHERE namespace = ? "
                "AND passage IN (SELECT value FROM json_each(?))",
                (ns, json.dumps(sorted(touched))),
            )
        }
        members = set(touched)
        members.update(
            r[0]
            for r in store.all(
                "SELECT passage FROM dup_members WHERE namespace = ? "
                "AND cluster IN (SELECT value FROM json_each(?))",
                (ns, json.dumps(sorted(old_keys))),
            )
        )
        rows = store.all(
            f"""SELECT p.id, p.document, p.shingles FROM passages p
                WHERE p.id IN (SELECT value FROM json_each(?)) AND length(p.shingles) > 0
                  AND {live("p")} ORDER BY p.rowid""",
            (json.dumps(sorted(members)),),
        )
        found = clusters(rows)
        store.conn.execute(
            "DELETE FROM dup_members WHERE namespace = ? AND cluster IN "
            "(SELECT value FROM json_each(?))",
            (ns, json.dumps(sorted(old_keys))),
        )
        _remember_clusters(store, ns, found)
        ctx.scope = old_keys | {c["members"][0] for c in found}
        return found

    def erase(self, ctx: KindContext, passages: list[tuple[int, str]]) -> None:
        """A purged passage's prefix tokens are hashes of its words: drop them."""
        store = ctx.store
        if not store.one("SELECT 1 FROM sqlite_master WHERE name = 'dup_prefix'"):
            return  # never scanned: nothing kept
        _prepare_state(store)
        # Row ids above the highest that stays are handed out again: marks
        # come down to it, so a passage that reuses one is indexed and probed.
        top = store.scalar(
            "SELECT COALESCE(MAX(rowid), 0) FROM passages "
            "WHERE rowid NOT IN (SELECT value FROM json_each(?))",
            (json.dumps([rowid for rowid, _ident in passages]),),
        )
        store.conn.execute(
            "UPDATE dup_indexed SET passage_seq = ? WHERE passage_seq > ?", (top, top)
        )
        for rowid, ident in passages:
            blob = store.scalar("SELECT shingles FROM passages WHERE rowid = ?", (rowid,)) or b""
            size, piece = _prefix_piece(blob)  # the rows _index_prefixes added
            keys = [
                (int.from_bytes(piece[i : i + 8], "little", signed=True), size, rowid)
                for i in range(0, len(piece), 8)
            ]
            for table in PREFIX_TABLES:
                store.conn.executemany(
                    f"DELETE FROM {table} WHERE token = ? AND size = ? AND passage = ?", keys
                )
            store.conn.execute("DELETE FROM dup_members WHERE passage = ?", (ident,))

    def _candidate(self, ctx: KindContext, cluster: dict[str, Any]) -> Candidate:
        members = cluster["members"]

        def payload() -> dict[str, Any]:
            refs = ctx.ops.passage_refs(members)
            near = _NearDuplicates.of(ctx, members)
            passages = []
            for r in refs:
                ident = parse_address(r.address)[1]
                best = near.best(ident)
                passages.append(
                    {
                        **attrs.asdict(r),
                        "best_jaccard": float(best[0]) if best else None,
                        "best_match": address("passage", best[1]) if best else None,
                    }
                )
            return {
                "passages": passages,
                "jaccard": cluster["jaccard"],
                "pairs": [
                    {"a": address("passage", a), "b": address("passage", b), "jaccard": j}
                    for a, b, j in cluster["pairs"]
                ],
                "pair_count": cluster["pair_count"],
            }

        return Candidate(members[0], fingerprint(members), payload)

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        # Members all still live: the item stands as handed out.
        members = [parse_address(p["address"])[1] for p in item.payload.get("passages", [])]
        if not members or not all(ctx.ops.is_live(m) for m in members):
            return None
        return Candidate(item.key, fingerprint(sorted(members)), lambda: item.payload)

    def validate(self, ctx: KindContext, item: Item, resolution: DuplicateResolution) -> None:
        offered = [p["address"] for p in item.payload["passages"]]
        if not resolution.keep:
            raise BadInput("keep at least one passage of the cluster")
        for keep in resolution.keep:
            parse_address(keep, expect=("passage",))
            if keep not in offered:
                raise BadInput(f"{keep} is not a member of item {item.id}'s cluster")
        ctx.report = self._plan(ctx, item, resolution)[0]

    def _plan(
        self, ctx: KindContext, item: Item, resolution: DuplicateResolution
    ) -> tuple[dict[str, list[str]], dict[str, tuple[Fraction, str]]]:
        """What keeping ``resolution.keep`` does: the report's ``kept``,
        ``forgotten`` and ``left`` addresses, and for each forgotten member
        the kept one it is a near duplicate of."""
        offered = [p["address"] for p in item.payload["passages"]]
        kept = list(dict.fromkeys(resolution.keep))
        ids = [parse_address(a)[1] for a in offered]
        near = _NearDuplicates.of(ctx, ids)
        matched = near.matches(ids, {parse_address(a)[1] for a in kept})
        forgotten = [a for a, i in zip(offered, ids, strict=True) if i in matched]
        done = {*kept, *forgotten}
        left = [a for a in offered if a not in done]
        return {"kept": kept, "forgotten": forgotten, "left": left}, matched

    def apply(self, ctx: KindContext, item: Item, resolution: DuplicateResolution) -> str:
        report, matched = self._plan(ctx, item, resolution)
        for ident, (jac, other) in sorted(matched.items()):
            ctx.ops.tombstone(
                ctx.namespace,
                "passage",
                ident,
                "forgotten",
                f"near duplicate (jaccard {float(jac):.2f}) of {address('passage', other)}, "
                f"kept (item {item.id})",
                item.id,
            )
        ctx.report = report
        return resolution.keep[0]


class _NearDuplicates:
    """The qualifying pairs among a cluster's members, computed as the scan
    does (integer verification, ``inter * den >= num * union``; members of
    other documents only).

    Identical shingle sets form one group, so a cluster of many exact copies
    costs one set, not the square of its size. All pairs (for each member's
    best match) are found only when asked: by brute force for a few groups,
    by the exact join for more; which members a keep forgets needs only the
    kept groups against the others.
    """

    SMALL = 48  # groups up to which pairs are verified one by one

    def __init__(self, rows: list[tuple[str, str, bytes]]) -> None:
        self.doc: dict[str, str] = {}
        self.group: dict[str, int] = {}
        self.members: list[list[str]] = []
        self.docs: list[Counter[str]] = []
        self.blobs: list[bytes] = []
        index: dict[bytes, int] = {}
        for ident, doc, blob in rows:
            if not blob:
                continue
            gi = index.get(blob)
            if gi is None:
                gi = index[blob] = len(self.members)
                self.members.append([])
                self.docs.append(Counter())
                self.blobs.append(blob)
            self.doc[ident] = doc
            self.group[ident] = gi
            self.members[gi].append(ident)
            self.docs[gi][doc] += 1
        for group in self.members:
            group.sort()
        self._sets: dict[int, frozenset[int]] = {}
        self._adjacent: list[dict[int, Fraction]] | None = None

    @classmethod
    def of(cls, ctx: KindContext, members: Sequence[str]) -> _NearDuplicates:
        rows = ctx.store.all(
            "SELECT p.id, p.document, p.shingles FROM json_each(?) j "
            "CROSS JOIN passages p ON p.id = j.value WHERE p.namespace = ? ORDER BY p.id",
            (json.dumps(sorted(members)), ctx.namespace),
        )
        return cls([(r[0], r[1], r[2] or b"") for r in rows])

    def _set(self, g: int) -> frozenset[int]:
        got = self._sets.get(g)
        if got is None:
            tokens = array("Q")
            tokens.frombytes(self.blobs[g])
            got = self._sets[g] = frozenset(tokens)
        return got

    def _jaccard(self, g: int, h: int) -> Fraction | None:
        """The Jaccard of two groups' sets if it qualifies, else None."""
        if g == h:
            return Fraction(1)
        a, b = self._set(g), self._set(h)
        inter = len(a & b)
        union = len(a) + len(b) - inter
        if inter * THRESHOLD.denominator >= THRESHOLD.numerator * union:
            return Fraction(inter, union)
        return None

    @property
    def adjacent(self) -> list[dict[int, Fraction]]:
        """For each group, the groups it qualifies with (itself at 1: its
        copies in other documents) and their Jaccard."""
        if self._adjacent is not None:
            return self._adjacent
        n = len(self.blobs)
        adjacent: list[dict[int, Fraction]] = [{g: Fraction(1)} for g in range(n)]
        if n <= self.SMALL:
            for g in range(n):
                for h in range(g + 1, n):
                    jac = self._jaccard(g, h)
                    if jac is not None:
                        adjacent[g][h] = adjacent[h][g] = jac
        else:
            import numpy as np

            flat = np.frombuffer(b"".join(self.blobs), dtype=np.uint64)
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum([len(b) // 8 for b in self.blobs], out=offsets[1:])
            for i, j, inter, union in join(flat, offsets, THRESHOLD):
                adjacent[i][j] = adjacent[j][i] = Fraction(inter, union)
        self._adjacent = adjacent
        return adjacent

    def _partner(self, ident: str, among: Iterable[str]) -> str | None:
        """The first of ``among`` in another document than ``ident``."""
        mine = self.doc[ident]
        return next((m for m in among if self.doc[m] != mine), None)

    def best(self, ident: str) -> tuple[Fraction, str] | None:
        """The highest Jaccard of ``ident`` to a member of another document,
        and that member (the smallest id among equals)."""
        g = self.group.get(ident)
        if g is None:
            return None
        found: tuple[Fraction, str] | None = None
        for h, jac in self.adjacent[g].items():
            other = self._partner(ident, self.members[h])
            if other is not None and (
                found is None or jac > found[0] or (jac == found[0] and other < found[1])
            ):
                found = (jac, other)
        return found

    def matches(self, members: Iterable[str], kept: set[str]) -> dict[str, tuple[Fraction, str]]:
        """Each member that is not kept but is a near duplicate of a kept
        one, with its best such Jaccard and that kept member."""
        kept_in: dict[int, list[str]] = defaultdict(list)
        for k in sorted(kept):
            if k in self.group:
                kept_in[self.group[k]].append(k)
        near: dict[int, dict[int, Fraction]] = defaultdict(dict)  # group -> kept group -> J
        for k in kept_in:
            for g in range(len(self.blobs)):
                jac = self._jaccard(g, k)
                if jac is not None:
                    near[g][k] = jac
        out: dict[str, tuple[Fraction, str]] = {}
        for ident in members:
            g = self.group.get(ident)
            if ident in kept or g is None:
                continue
            best: tuple[Fraction, str] | None = None
            for h, jac in near[g].items():
                other = self._partner(ident, kept_in[h])
                if other is not None and (best is None or jac > best[0]):
                    best = (jac, other)
            if best is not None:
                out[ident] = best
        return out


@hookimpl
def memors_register_kinds(registry) -> None:
    registry.add(DuplicateKind())
