"""Kind ``duplicate``: live passages from different documents whose word
3-gram Jaccard is at least 0.75, one item per cluster.

The scan is exact and never compares all pairs: identical shingle sets are
grouped first (real corpora are dominated by exact copies), then the
distinct sets are joined with a prefix filter over a global token order
(rarest first), a length filter, and exact verification in integers.
Qualifying pairs are grouped into connected components; each component is
one item whose payload lists its ``passages``, the lowest qualifying
``jaccard``, up to 1,000 ``pairs`` and the ``pair_count``.

Submit ``keep`` = one or more member addresses; every other member is
forgotten.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any

import attrs

from memors_core import hookimpl
from memors_core.errors import BadInput
from memors_core.ids import address, parse_address
from memors_core.kinds import Candidate, Item, Kind, KindContext, fingerprint
from memors_core.ops import live
from memors_core.text import unpack_shingles

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
    """All pairs ``(i, j, intersection, union)`` with Jaccard >= t.

    ``sets`` are distinct, non-empty sets of integer tokens. Exact: the
    prefix filter (global order, rarest token first) only skips pairs that
    cannot reach ``t``, and every candidate is verified in integers.
    """
    freq: Counter[int] = Counter()
    for s in sets:
        freq.update(s)
    # Rank tokens rarest first; tokens seen in one set only can never match,
    # so they sort first and are never indexed.
    order = sorted(range(len(sets)), key=lambda i: len(sets[i]))
    index: dict[int, list[int]] = defaultdict(list)
    ranked: dict[int, list[int]] = {}
    frozen: dict[int, frozenset[int]] = {}
    num, den = t.numerator, t.denominator
    out: list[tuple[int, int, int, int]] = []
    for i in order:
        toks = sorted(sets[i], key=lambda tok: (freq[tok], tok))
        size = len(toks)
        ranked[i] = toks
        prefix = toks[: _prefix_length(size, t)]
        min_size = -((-num * size) // den)  # ceil(t * size): smaller sets cannot match
        candidates: set[int] = set()
        for tok in prefix:
            if freq[tok] < 2:
                continue
            bucket = index.get(tok)
            if bucket:
                for j in bucket:
                    if len(ranked[j]) >= min_size:
                        candidates.add(j)
                bucket.append(i)
            else:
                index[tok].append(i)
        if candidates:
            mine = frozen.get(i) or frozenset(toks)
            frozen[i] = mine
            for j in candidates:
                other = frozen.get(j)
                if other is None:
                    other = frozen[j] = frozenset(ranked[j])
                inter = len(mine & other)
                union = size + len(other) - inter
                if inter * den >= num * union:
                    out.append((j, i, inter, union) if j < i else (i, j, inter, union))
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
    return n * (n - 1) // 2 - sum(k * (k - 1) // 2 for k in Counter(d for _p, d in g).values())


def clusters(
    records: Sequence[tuple[str, str, bytes]], t: Fraction = THRESHOLD
) -> list[dict[str, Any]]:
    """Group passages ``(id, document, shingle blob)`` into duplicate clusters.

    Each cluster: ``members`` (ids, sorted), ``jaccard`` (lowest qualifying),
    ``pairs`` (up to 1,000 ``(a, b, jaccard)``) and ``pair_count``.
    """
    groups: dict[bytes, list[tuple[str, str]]] = defaultdict(list)
    for ident, doc, blob in records:
        if blob:
            groups[blob].append((ident, doc))
    blobs = list(groups)
    members = [groups[b] for b in blobs]
    sets = [unpack_shingles(b) for b in blobs]

    uf = _UnionFind()
    edges: list[tuple[int, int, Fraction]] = []  # group-level qualifying edges
    for gi, g in enumerate(members):
        if _inner_pairs(g):
            edges.append((gi, gi, Fraction(1)))
    for i, j, inter, union in similar_pairs(sets, t):
        if _cross_pairs(members[i], members[j]):
            edges.append((i, j, Fraction(inter, union)))

    for i, j, _jac in edges:
        g, h = members[i], members[j]
        if i == j:
            for p, _d in g[1:]:
                uf.union(g[0][0], p)
            continue
        for side, other in ((g, h), (h, g)):
            for p, doc in side:
                partner = next((q for q, d in other if d != doc), None)
                if partner is not None:
                    uf.union(p, partner)

    comp_edges: dict[str, list[tuple[int, int, Fraction]]] = defaultdict(list)
    for edge in edges:
        rep = members[edge[0]][0][0]
        comp_edges[uf.find(rep)].append(edge)
    by_root: dict[str, list[str]] = defaultdict(list)
    for p in list(uf.parent):
        by_root[uf.find(p)].append(p)
    out = []
    for root, es in comp_edges.items():
        member_ids = sorted(by_root[root])
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
                "members": member_ids,
                "jaccard": float(min(e[2] for e in es)),
                "pairs": sorted(pairs),
                "pair_count": count,
            }
        )
    out.sort(key=lambda c: c["members"][0])
    return out


class DuplicateKind(Kind):
    name = "duplicate"
    description = "drop near-duplicate passages (word 3-gram Jaccard >= 0.75) across documents"
    resolution = DuplicateResolution
    hint = "keep = one or more passage addresses (--keep memo://passage/…)"

    def scan(self, ctx: KindContext) -> Iterator[Candidate]:
        records = ctx.store.all(
            f"""SELECT p.id, p.document, p.shingles FROM passages p
                WHERE p.namespace = ? AND length(p.shingles) > 0 AND {live("p")}""",
            (ctx.namespace,),
        )
        for cluster in clusters(records):
            yield self._candidate(ctx, cluster)

    def _candidate(self, ctx: KindContext, cluster: dict[str, Any]) -> Candidate:
        members = cluster["members"]

        def payload() -> dict[str, Any]:
            refs = ctx.ops.passage_refs(members)
            return {
                "passages": [attrs.asdict(r) for r in refs],
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

    def apply(self, ctx: KindContext, item: Item, resolution: DuplicateResolution) -> str:
        kept = set(resolution.keep)
        for ref in item.payload["passages"]:
            if ref["address"] not in kept:
                ctx.ops.tombstone(
                    ctx.namespace,
                    "passage",
                    parse_address(ref["address"])[1],
                    "forgotten",
                    f"duplicate; kept {', '.join(resolution.keep)} (item {item.id})",
                    item.id,
                )
        return resolution.keep[0]


@hookimpl
def memors_register_kinds(registry) -> None:
    registry.add(DuplicateKind())
