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

import attrs

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
    i, j, inter, union = join(flat, offsets, t)
    return list(zip(i.tolist(), j.tolist(), inter.tolist(), union.tolist(), strict=True))


def _no_pairs() -> tuple[Any, Any, Any, Any]:
    import numpy as np

    empty = np.zeros(0, dtype=np.int32)
    return empty, empty, empty, empty


def join(
    flat: Any,
    offsets: Any,
    t: Fraction = THRESHOLD,
    labels: Any = None,
    stats: dict[str, int] | None = None,
    progress: Callable[..., None] | None = None,
) -> tuple[Any, Any, Any, Any]:
    """The exact set-similarity self-join over sets laid end to end, as four
    arrays: the pairs' first sets, second sets, intersections and unions.

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
        return _no_pairs()
    num, den = t.numerator, t.denominator
    sizes = np.diff(offsets)
    prefix = sizes - (-((-num * sizes) // den)) + 1  # size - ceil(t * size) + 1

    ranked = _shared_ranks(flat)
    if ranked is None:
        return _no_pairs()
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
    step = 1_000_000  # pairs generated at a time: ~100 MB of temporaries
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
        # A pair sharing several prefix tokens is found once per token:
        # the distinct ones so far are merged in as soon as what waits
        # outgrows them (look-alikes share ten tokens and more a pair).
        found.append(_distinct(np.minimum(i, j)[ok] * n + np.maximum(i, j)[ok]))
        if sum(map(len, found)) > max(len(found[0]), step) * 2:
            found = [_distinct(np.concatenate(found), runs=True)]
        a = b
    if not found:
        return np.zeros(0, dtype=np.int64)
    return found[0] if len(found) == 1 else _distinct(np.concatenate(found), runs=True)


def _distinct(values: Any, runs: bool = False) -> Any:
    """The distinct values, sorted (numpy 2.4's ``unique`` hashes
    integers, ten times slower than this on 60 million of them); ``runs``:
    the values are sorted runs laid end to end, which a stable sort merges."""
    import numpy as np

    ordered = np.sort(values, kind="stable" if runs else None)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


#: Candidates verified at a time: the verification's arrays stay bounded.
_VERIFY_STEP = 4_000_000


def _verified(
    flat: Any,
    offsets: Any,
    sizes: Any,
    candidates: Any,
    t: Fraction,
    progress: Callable[..., None] | None,
) -> tuple[Any, Any, Any, Any]:
    """The candidates whose Jaccard is at least ``t``, counted in integers:
    four arrays ``i``, ``j``, intersection, union (32-bit: sixteen bytes a
    qualifying pair, where millions of them are the cost of look-alikes)."""
    import numpy as np

    n = len(sizes)
    num, den = t.numerator, t.denominator
    total = len(candidates)
    named = np.zeros(n, dtype=bool)  # the sets some candidate names
    for a in range(0, total, _VERIFY_STEP):
        chunk = candidates[a : a + _VERIFY_STEP]
        named[chunk // n] = True
        named[chunk % n] = True
    tokens = _SharedTokens.of(flat, offsets, sizes, np.flatnonzero(named))
    parts: list[tuple[Any, Any, Any, Any]] = []
    for a in range(0, total, _VERIFY_STEP):
        chunk = candidates[a : a + _VERIFY_STEP]
        ci, cj = chunk // n, chunk % n
        inter = tokens.intersections(sizes, ci, cj, progress, a, total)
        union = sizes[ci] + sizes[cj] - inter
        ok = inter * den >= num * union
        kept = [x[ok].astype(np.int32) for x in (ci, cj, inter, union)]
        parts.append((kept[0], kept[1], kept[2], kept[3]))
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return _no_pairs()
    first, second, inter, union = (np.concatenate([p[k] for p in parts]) for k in range(4))
    return first, second, inter, union


def _ranges(starts: Any, lengths: Any) -> Any:
    """The indices ``starts[k] .. starts[k] + lengths[k] - 1``, laid end to end."""
    import numpy as np

    ends = np.cumsum(lengths)
    every = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64)
    return every - np.repeat(ends - lengths - starts, lengths)


#: A block's tokens of second sets, its first sets, and the cells of its
#: table (first sets × their tokens).
_BLOCK_TOKENS = 4_000_000
_BLOCK_SETS = 256
_BLOCK_CELLS = 32_000_000


@attrs.frozen
class _SharedTokens:
    """The tokens of some sets (``involved``, sorted), laid end to end
    (set ``involved[k]``'s from ``start[k]``), each numbered among those
    two or more of the sets hold (``dense``; ``none`` for a token one set
    alone holds, which meets nothing)."""

    involved: Any
    start: Any
    dense: Any
    none: int

    @classmethod
    def of(cls, flat: Any, offsets: Any, sizes: Any, involved: Any) -> _SharedTokens:
        import numpy as np

        tokens = flat[_ranges(offsets[involved], sizes[involved])]
        start = np.zeros(len(involved) + 1, dtype=np.int64)
        np.cumsum(sizes[involved], out=start[1:])
        ordered = np.sort(tokens)
        shared = _distinct(ordered[1:][ordered[1:] == ordered[:-1]])
        del ordered
        none = len(shared)
        at = np.minimum(np.searchsorted(shared, tokens), max(none - 1, 0))
        dense = np.where(shared[at] == tokens, at, none) if none else np.full(len(tokens), 0)
        return cls(involved, start, dense, none)

    def of_sets(self, sets: Any, sizes: Any) -> Any:
        """The numbered tokens of ``sets`` (some of ``involved``), laid end to end."""
        import numpy as np

        return self.dense[_ranges(self.start[np.searchsorted(self.involved, sets)], sizes[sets])]

    def intersections(
        self,
        sizes: Any,
        ci: Any,
        cj: Any,
        progress: Callable[..., None] | None,
        before: int,
        total: int,
    ) -> Any:
        """``|set ci[k] & set cj[k]|`` for pairs sorted by ``ci``, in numpy
        (``progress`` hears ``before`` + the pairs done, of ``total``).

        A block of pairs with a few hundred first sets lays those sets out
        as a table of booleans (set × token) and looks each token of each
        second set up in it: a few gathers a token, where a Python set
        intersection a pair cost ~4 µs.
        """
        import numpy as np

        out = np.zeros(len(ci), dtype=np.int64)
        if not len(ci) or not self.none:
            return out
        none = self.none
        column = np.full(none + 1, -1, dtype=np.int64)  # a shared token's column in a block's table
        reach = np.cumsum(sizes[cj])
        runs = np.flatnonzero(np.r_[True, ci[1:] != ci[:-1]])  # where each first set's pairs start
        run_tokens = np.r_[0, np.cumsum(sizes[ci[runs]])]
        p = 0
        while p < len(ci):
            q = int(
                np.searchsorted(reach, (int(reach[p - 1]) if p else 0) + _BLOCK_TOKENS, "right")
            )
            r0 = int(np.searchsorted(runs, p, "right")) - 1  # the run p is in
            k = np.arange(1, min(_BLOCK_SETS, len(runs) - r0) + 1)
            fits = k * (run_tokens[r0 + k] - run_tokens[r0]) <= _BLOCK_CELLS
            k_runs = int(k[fits][-1]) if fits.any() else 1
            if r0 + k_runs < len(runs):
                q = min(q, int(runs[r0 + k_runs]))
            q = max(q, p + 1)
            if progress is not None:
                progress("verifying pairs", before + p, total, "pairs")
            new_first = np.r_[True, ci[p + 1 : q] != ci[p : q - 1]]
            firsts, row = ci[p:q][new_first], np.cumsum(new_first) - 1
            mine = self.of_sets(firsts, sizes)
            mine_row = np.repeat(np.arange(len(firsts), dtype=np.int64), sizes[firsts])
            kept = mine < none
            cols = _distinct(mine[kept])
            col_of = np.searchsorted(cols, mine[kept])
            column[cols] = np.arange(len(cols), dtype=np.int64)
            width = len(cols)
            table = np.zeros(len(firsts) * width + 1, dtype=bool)  # the last cell: no token
            table[mine_row[kept] * width + col_of] = True
            seconds = cj[p:q]
            theirs = column[self.of_sets(seconds, sizes)]
            owner = np.repeat(np.arange(q - p, dtype=np.int64), sizes[seconds])
            cell = np.where(theirs >= 0, row[owner] * width + theirs, len(firsts) * width)
            out[p:q] = np.bincount(owner[table[cell]], minlength=q - p)
            column[cols] = -1
            p = q
        return out


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


@attrs.frozen
class _Edges:
    """Qualifying edges between groups of identical sets, as arrays in one
    order (a group's own copies first, then the join's pairs): the groups
    ``a`` and ``b`` (``a == b`` for a group's copies in several documents),
    the Jaccard as ``inter / union`` (1/1 for copies) and ``count``, the
    pairs of passages from different documents the edge stands for."""

    a: Any
    b: Any
    inter: Any
    union: Any
    count: Any


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

    Every member of a group on an edge belongs to the edge's cluster: a
    group of one document pairs with every member of the other side's
    other documents, and a group of several documents is linked by its own
    copies. So clusters are the connected components of the groups, found
    and summed with numpy: memory is a few dozen bytes an edge, where a
    cluster of thousands of look-alike notes holds millions of them.
    """
    members, flat, offsets, labels = _identical_groups(records)
    if stats is not None:
        stats["passages"] = stats.get("passages", 0) + sum(map(len, members))
    edges = _edges(members, flat, offsets, labels, t, stats, progress)
    if progress is not None:
        progress("grouping", 0, len(edges.a), "pairs")
    out = _components_of(members, edges)
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
) -> _Edges:
    """The qualifying edges between groups (see :class:`_Edges`)."""
    import numpy as np

    copies = [(g, n) for g, group in enumerate(members) if (n := _inner_pairs(group))]
    own = np.asarray([g for g, _n in copies], dtype=np.int32)
    own_count = np.asarray([n for _g, n in copies], dtype=np.int64)
    if progress is not None:
        progress("comparing", 0, len(members), "sets")
    i, j, inter, union = join(flat, offsets, t, labels, stats, progress)
    size = np.fromiter(map(len, members), dtype=np.int64, count=len(members))
    # Two groups of one document each (never the same one: the join's
    # labels) pair every member with every member.
    count = size[i] * size[j]
    for k in np.flatnonzero((labels[i] < 0) | (labels[j] < 0)).tolist():
        count[k] = _cross_pairs(members[int(i[k])], members[int(j[k])])
    kept = count > 0
    ones = np.ones(len(own), dtype=np.int32)
    return _Edges(
        a=np.concatenate([own, i[kept]]),
        b=np.concatenate([own, j[kept]]),
        inter=np.concatenate([ones, inter[kept]]),
        union=np.concatenate([ones, union[kept]]),
        count=np.concatenate([own_count, count[kept]]),
    )


def _roots(n: int, a: Any, b: Any) -> Any:
    """Each of ``n`` nodes' component (its smallest node) under the edges
    ``a``–``b``: roots hooked under the smaller root across an edge, then
    every node pointed at its root, until no edge joins two roots."""
    import numpy as np

    parent = np.arange(n, dtype=np.int64)
    while len(a):
        ra, rb = parent[a], parent[b]
        apart = ra != rb
        if not apart.any():
            break
        a, b, ra, rb = a[apart], b[apart], ra[apart], rb[apart]
        np.minimum.at(parent, np.maximum(ra, rb), np.minimum(ra, rb))
        while True:
            up = parent[parent]
            if np.array_equal(up, parent):
                break
            parent = up
    return parent


def _components_of(members: list[list[tuple[str, str]]], edges: _Edges) -> list[dict[str, Any]]:
    """One cluster per connected component of the edges' groups."""
    import numpy as np

    if not len(edges.a):
        return []
    root = _roots(len(members), edges.a, edges.b)
    comp = root[edges.a]
    order = np.argsort(comp, kind="stable")  # by component, each in the edges' order
    comp_sorted = comp[order]
    starts = np.flatnonzero(np.r_[True, comp_sorted[1:] != comp_sorted[:-1]])
    ends = np.r_[starts[1:], len(order)]
    pair_count = np.add.reduceat(edges.count[order], starts)
    # The lowest Jaccard: a ratio of set sizes (far below 2**26) compares
    # exactly as a float, and float(inter / union) is what Fraction gives.
    ratio = edges.inter / edges.union
    lowest = np.minimum.reduceat(ratio[order], starts)
    on_edge = np.zeros(len(members), dtype=bool)
    on_edge[edges.a] = True
    on_edge[edges.b] = True
    groups = np.flatnonzero(on_edge)
    by_comp = groups[np.argsort(root[groups], kind="stable")]
    g_starts = np.searchsorted(root[by_comp], comp_sorted[starts])
    g_ends = np.r_[g_starts[1:], len(by_comp)]
    out = []
    for c in range(len(starts)):
        passages = sorted(
            p for g in by_comp[g_starts[c] : g_ends[c]].tolist() for p, _d in members[g]
        )
        listed = _listed(members, edges, ratio, order[starts[c] : ends[c]])
        out.append(
            {
                "members": passages,
                "jaccard": float(lowest[c]),
                "pairs": sorted(listed),
                "pair_count": int(pair_count[c]),
            }
        )
    return out


def _listed(
    members: list[list[tuple[str, str]]], edges: _Edges, ratio: Any, es: Any
) -> list[tuple[str, str, float]]:
    """The first :data:`MAX_LISTED_PAIRS` pairs of passages from different
    documents that the edges ``es`` stand for (each stands for one at
    least, so no more edges than that are read)."""
    pairs: list[tuple[str, str, float]] = []
    for k in es[:MAX_LISTED_PAIRS].tolist():
        i, j, jac = int(edges.a[k]), int(edges.b[k]), float(ratio[k])
        g, h = members[i], members[j]
        if i == j:
            it = ((g[x], g[y]) for x in range(len(g)) for y in range(x + 1, len(g)))
        else:
            it = ((p, q) for p in g for q in h)
        for (p, dp), (q, dq) in it:
            if dp != dq:
                pairs.append((min(p, q), max(p, q), jac))
                if len(pairs) >= MAX_LISTED_PAIRS:
                    return pairs
    return pairs


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
        self._ranked: tuple[Any, Any, Any, Any] | None = None

    def _set(self, g: int) -> frozenset[int]:
        got = self._sets.get(g)
        if got is None:
            tokens = array("Q")
            tokens.frombytes(self.blobs[g])
            got = self._sets[g] = frozenset(tokens)
        return got

    def _counts(self, g: int, h: int) -> tuple[int, int] | None:
        """Two groups' intersection and union if their Jaccard qualifies."""
        a, b = self._set(g), self._set(h)
        inter = len(a & b)
        union = len(a) + len(b) - inter
        if inter * THRESHOLD.denominator >= THRESHOLD.numerator * union:
            return inter, union
        return None

    def _jaccard(self, g: int, h: int) -> Fraction | None:
        """The Jaccard of two groups' sets if it qualifies, else None."""
        if g == h:
            return Fraction(1)
        got = self._counts(g, h)
        return Fraction(*got) if got is not None else None

    def _neighbours(self) -> tuple[Any, Any, Any, Any]:
        """For each group, the groups it qualifies with (itself at 1: its
        copies in other documents), best first (highest Jaccard, then
        smallest first member), as arrays laid end to end: where each
        group's run starts (one more entry: the end), the neighbour, the
        intersection and the union."""
        if self._ranked is not None:
            return self._ranked
        import numpy as np

        n = len(self.blobs)
        if n <= self.SMALL:
            found = [
                (g, h, *c) for g in range(n) for h in range(g + 1, n) if (c := self._counts(g, h))
            ]
            i, j, inter, union = (
                np.asarray([f[k] for f in found], dtype=np.int64) for k in range(4)
            )
        else:
            flat = np.frombuffer(b"".join(self.blobs), dtype=np.uint64)
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum([len(b) // 8 for b in self.blobs], out=offsets[1:])
            i, j, inter, union = join(flat, offsets, THRESHOLD)
        own = np.arange(n, dtype=np.int64)
        ones = np.ones(n, dtype=np.int64)
        src = np.concatenate([own, i, j])
        dst = np.concatenate([own, j, i])
        inter = np.concatenate([ones, inter, inter])
        union = np.concatenate([ones, union, union])
        first = np.empty(n, dtype=np.int64)  # each group's rank by its first member
        first[sorted(range(n), key=lambda g: self.members[g][0])] = own
        # A ratio of set sizes (far below 2**26) orders exactly as a float.
        order = np.lexsort((first[dst], -(inter / union), src))
        starts = np.searchsorted(src[order], np.arange(n + 1, dtype=np.int64))
        self._ranked = (starts, dst[order], inter[order], union[order])
        return self._ranked

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
        starts, dst, inters, unions = self._neighbours()
        found: tuple[int, int, str] | None = None  # inter, union, member
        for k in range(int(starts[g]), int(starts[g + 1])):
            h, inter, union = int(dst[k]), int(inters[k]), int(unions[k])
            if found is not None and (
                inter * found[1] < found[0] * union or self.members[h][0] >= found[2]
            ):
                break  # a lower Jaccard, or no smaller member at this one from here on
            other = self._partner(ident, self.members[h])
            if other is not None and (found is None or other < found[2]):
                found = (inter, union, other)
        return (Fraction(found[0], found[1]), found[2]) if found is not None else None

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
