"""The duplicate kind's exact set-similarity join: pure maths over shingle
sets (numpy prefix filter, integer verification, union-find into
clusters), with no store and no engine in sight.

A shingle set is a passage's ``shingles`` blob: distinct uint64 tokens,
sorted by value, 8 little-endian bytes each (see
:func:`memors_core.domain.text.shingle_hashes`).
"""

from __future__ import annotations

import hashlib
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

THRESHOLD = Fraction(3, 4)
MAX_LISTED_PAIRS = 1000


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

    ranked = _shared_ranks(flat)
    if ranked is None:
        return []
    ps, pr, pp = _prefix_entries(flat, offsets, sizes, prefix, *ranked)
    del ranked
    candidates = _candidates(ps, pr, pp, sizes, labels, t)
    del ps, pr, pp
    if stats is not None:
        stats["candidates"] = stats.get("candidates", 0) + len(candidates)
    return _verified(flat, offsets, sizes, candidates, t, progress)


def _shared_ranks(flat: Any) -> tuple[Any, Any] | None:
    """The tokens found in two or more sets, sorted, and each one's rank in
    the global order (rarest first, ties by value); None when there are none."""
    import numpy as np

    srt = np.sort(flat)
    starts = np.flatnonzero(np.r_[True, srt[1:] != srt[:-1]])
    counts = np.diff(np.r_[starts, len(srt)])
    several = counts > 1
    shared = srt[starts[several]]  # tokens in two or more sets, sorted
    freq = counts[several]
    del srt, starts, counts, several
    if len(shared) == 0:
        return None
    order = np.lexsort((shared, freq))  # rarest first, ties by value
    rank = np.empty(len(shared), dtype=np.int64)
    rank[order] = np.arange(len(shared), dtype=np.int64)
    del order, freq
    return shared, rank


def _prefix_entries(
    flat: Any, offsets: Any, sizes: Any, prefix: Any, shared: Any, rank: Any
) -> tuple[Any, Any, Any]:
    """Each set's prefix tokens that other sets share, as three arrays
    ordered by rank, then set: the set, the token's rank and its position in
    the set (in the global order)."""
    import numpy as np

    n = len(offsets) - 1
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
    return ps[o], pr[o], pp[o]


def _candidates(ps: Any, pr: Any, pp: Any, sizes: Any, labels: Any, t: Fraction) -> Any:
    """The candidate pairs of the prefix entries (``i * n + j``, i < j,
    distinct, sorted): sets sharing a prefix token that the length,
    positional and label filters leave."""
    import numpy as np

    n = len(sizes)
    num, den = t.numerator, t.denominator
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
    return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


def _verified(
    flat: Any,
    offsets: Any,
    sizes: Any,
    candidates: Any,
    t: Fraction,
    progress: Callable[..., None] | None,
) -> list[tuple[int, int, int, int]]:
    """The candidates whose Jaccard is at least ``t``, counted in integers:
    ``(i, j, intersection, union)``."""
    n = len(sizes)
    num, den = t.numerator, t.denominator
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
    members, flat, offsets, labels = _identical_groups(records)
    if stats is not None:
        stats["passages"] = stats.get("passages", 0) + sum(map(len, members))
    edges = _edges(members, flat, offsets, labels, t, stats, progress)
    uf, witness = _linked(members, edges)
    if progress is not None:
        progress("grouping", 0, len(edges), "pairs")
    comp_edges: dict[str, list[tuple[int, int, Fraction]]] = defaultdict(list)
    for edge, seen_by in zip(edges, witness, strict=True):
        comp_edges[uf.find(seen_by)].append(edge)
    by_root: dict[str, list[str]] = defaultdict(list)
    for p in list(uf.parent):
        by_root[uf.find(p)].append(p)
    out = [_cluster(members, by_root[root], es) for root, es in comp_edges.items()]
    out.sort(key=lambda c: c["members"][0])
    return out


def _identical_groups(
    records: Iterable[tuple[str, str, bytes]],
) -> tuple[list[list[tuple[str, str]]], Any, Any, Any]:
    """Passages ``(id, document, shingle blob)`` grouped by identical sets
    (the empty left out): each group's ``(id, document)`` members, and its
    set laid end to end with the others' (``flat``, ``offsets``) with its
    label for the join (its document's number when all its passages share
    one, else -1)."""
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
    return members, flat, offsets, labels


def _edges(
    members: list[list[tuple[str, str]]],
    flat: Any,
    offsets: Any,
    labels: Any,
    t: Fraction,
    stats: dict[str, int] | None,
    progress: Callable[..., None] | None,
) -> list[tuple[int, int, Fraction]]:
    """The qualifying edges between groups ``(i, j, jaccard)``; ``(i, i, 1)``
    for a group of identical sets from different documents."""
    edges: list[tuple[int, int, Fraction]] = []
    for gi, g in enumerate(members):
        if _inner_pairs(g):
            edges.append((gi, gi, Fraction(1)))
    if progress is not None:
        progress("comparing", 0, len(members), "sets")
    for i, j, inter, union in join(flat, offsets, t, labels, stats, progress):
        if _cross_pairs(members[i], members[j]):
            edges.append((i, j, Fraction(inter, union)))
    return edges


def _linked(
    members: list[list[tuple[str, str]]], edges: list[tuple[int, int, Fraction]]
) -> tuple[_UnionFind, list[str]]:
    """The passages joined by the edges, and each edge's witness: a passage
    that has a qualifying partner in the edge (its cluster's)."""
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
        witness.append(first)  # type: ignore[arg-type]  # (an edge always has a partner)
    return uf, witness


def _cluster(
    members: list[list[tuple[str, str]]],
    passages: list[str],
    es: list[tuple[int, int, Fraction]],
) -> dict[str, Any]:
    """One cluster of ``passages`` from its edges ``es``: its lowest
    Jaccard, its pairs of passages from different documents (up to
    :data:`MAX_LISTED_PAIRS` listed) and their count."""
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
    return {
        "members": sorted(passages),
        "jaccard": float(min(e[2] for e in es)),
        "pairs": sorted(pairs),
        "pair_count": count,
    }


def prefix_piece(blob: bytes) -> tuple[int, bytes]:
    """A passage's size and the bytes of its indexed prefix under the fixed
    order (token value: content-word 3-grams first): one token longer than
    the prefix filter's, so that a pair's first *two* common tokens both
    fall inside it (see the probe of
    :mod:`memors_kinds.duplicate.sqlite_index`). The blob is sorted by
    token value, so the prefix is its head."""
    size = len(blob) // 8
    return size, blob[: 8 * min(size, _prefix_length(size, THRESHOLD) + 1)]


def verified_partners(
    mine: bytes, document: str, candidates: Iterable[tuple[str, str, array[int]]]
) -> tuple[list[str], int]:
    """The ids of ``candidates`` ``(id, document, tokens)`` of another
    document than ``document`` whose Jaccard with the set ``mine`` is at
    least :data:`THRESHOLD`, verified in integers; and how many were verified."""
    num, den = THRESHOLD.numerator, THRESHOLD.denominator
    tokens = array("Q")
    tokens.frombytes(mine)
    mine_set = frozenset(tokens)
    found: list[str] = []
    verified = 0
    for ident, doc, theirs in candidates:
        if doc == document:
            continue
        verified += 1
        inter = len(mine_set.intersection(theirs))
        if inter * den >= num * (len(mine_set) + len(theirs) - inter):
            found.append(ident)
    return found, verified


class NearDuplicates:
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
        for kg in kept_in:
            for g in range(len(self.blobs)):
                jac = self._jaccard(g, kg)
                if jac is not None:
                    near[g][kg] = jac
        out: dict[str, tuple[Fraction, str]] = {}
        for ident in members:
            group = self.group.get(ident)
            if ident in kept or group is None:
                continue
            best: tuple[Fraction, str] | None = None
            for h, jac in near[group].items():
                other = self._partner(ident, kept_in[h])
                if other is not None and (best is None or jac > best[0]):
                    best = (jac, other)
            if best is not None:
                out[ident] = best
        return out
