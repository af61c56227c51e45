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

The package: :mod:`.join` is the pure join (no store); :mod:`.index` the
protocol of what the kind keeps between scans (a prefix index of the
passages, so that an incremental scan probes instead of rejoining), with
one module per engine (:mod:`.sqlite_index`, :mod:`.postgres_index`) over
what both share (:mod:`.sql_index`: the statements written once, run
through ``tx.native("sql")``), created by the kind's migrations. Core passages
are read through the typed store only.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import attrs

from memors_core.plugins import (
    BadInput,
    Candidate,
    Item,
    Kind,
    KindContext,
    KindRegistry,
    PluginError,
    Scan,
    address,
    fingerprint,
    get_logger,
    hookimpl,
    parse_address,
    passage_ref,
)
from memors_kinds.duplicate import postgres_index, sqlite_index
from memors_kinds.duplicate.index import Prefix, PrefixIndex
from memors_kinds.duplicate.join import (
    THRESHOLD,
    NearDuplicates,
    clusters,
    join,
    prefix_piece,
    similar_pairs,
    verified_partners,
)
from memors_kinds.duplicate.sql_index import FOLD_RATIO

if TYPE_CHECKING:
    from memors_core.plugins import Passage, PluginStore

__all__ = ["FOLD_RATIO", "THRESHOLD", "DuplicateKind", "clusters", "join", "similar_pairs"]

log = get_logger("memors.duplicate")


@attrs.frozen
class DuplicateResolution:
    keep: list[str]


def _head(ctx: KindContext) -> int:
    """The passage clock the scan covers, and so how far it indexes: the
    engine's settled clocks (``ctx.heads``), never the clock as it reads
    now, which may be past a passage a write begun since the scan's clocks
    numbered and has not committed yet (that passage would never be
    indexed, nor found a near duplicate of anything remembered later)."""
    if ctx.heads is not None:
        return ctx.heads.passages
    return ctx.store.passages.head()  # (scanned outside the engine's compaction)


def _index(tx: PluginStore) -> PrefixIndex:
    """The prefix index of the store's engine (one module per engine)."""
    if tx.engine == "sqlite":
        return sqlite_index.SqlitePrefixIndex(tx.native("sql"))
    if tx.engine == "postgres":
        return postgres_index.PostgresPrefixIndex(tx.native("sql"))
    raise PluginError(f"the duplicate kind has no prefix index for the {tx.engine} engine")


def _partners(
    tx: PluginStore,
    wanted: dict[int, list[int]],
    namespace: str,
    new: Sequence[tuple[str, str, bytes]],
    prefixes: Sequence[Prefix],
    stats: dict[str, int],
) -> dict[str, list[str]]:
    """For each new passage ``(id, document, blob)`` (with its prefix, in
    the same order), the live passages of other documents with Jaccard >=
    0.75 to it.

    Candidates come from the prefix index (``wanted``: the new passages
    were indexed first, so they find each other); each one of another
    document is verified exactly (``stats["candidates"]`` counts them). The
    candidates' shingles are read together, once each.
    """
    needed = sorted(set().union(*wanted.values())) if wanted else []
    shingles: dict[int, tuple[str, str, array[int]]] = {}
    for start in range(0, len(needed), 20_000):
        for row in tx.passages.live_shingles(namespace, seqs=needed[start : start + 20_000]):
            theirs = array("Q")
            theirs.frombytes(row.shingles)
            shingles[row.seq] = (row.id, row.document, theirs)
    out: dict[str, list[str]] = {}
    verified = 0
    for (ident, doc, blob), (seq, _size, _piece) in zip(new, prefixes, strict=True):
        if seq not in wanted:
            continue
        found, n = verified_partners(blob, doc, (shingles[s] for s in wanted[seq] if s in shingles))
        verified += n
        if found:
            out[ident] = found
    stats["candidates"] = stats.get("candidates", 0) + verified
    return out


#: Jaccard values in a payload: four decimals, never below the threshold.
JACCARD_DECIMALS = 4


def _rounded(value: Fraction | float) -> float:
    """A Jaccard for people: ``7/9`` is ``0.7777`` (cut, not rounded up, so
    that only identical sets show 1.0)."""
    # A float Jaccard (the join's) is a ratio of set sizes below a few
    # thousand: limit_denominator finds that ratio again exactly, so 0.95
    # stored as 0.94999... still reads 0.95.
    exact: Fraction = (
        value if isinstance(value, Fraction) else Fraction(value).limit_denominator(10**6)
    )
    scale: int = 10**JACCARD_DECIMALS
    return int(exact * scale) / scale


def _snippet(text: str, most: int = 60) -> str:
    """The start of a member's text, on one line, for a queue line."""
    flat = " ".join(text.split())
    return f"“{flat}”" if len(flat) <= most else f"“{flat[: most - 1].rstrip()}…”"


def _unsettled(
    ctx: KindContext, index: PrefixIndex, found: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The clusters not settled already: a cluster all of whose members one
    finished item kept or released (and that is still finished) was decided
    on; it is asked again only once a passage it did not see joins it."""
    if not found:
        return found  # (nothing to ask the index about)
    settled = index.settled(ctx.namespace, {m for c in found for m in c["members"]})
    if not settled:
        return found
    finished: dict[int, bool] = {}

    def done(ident: int) -> bool:
        if ident not in finished:
            item = ctx.store.items.get(ident, ctx.namespace)
            finished[ident] = item is not None and item.status == "done"
        return finished[ident]

    out = []
    for cluster in found:
        common = set.intersection(*(settled.get(m, set()) for m in cluster["members"]))
        if not any(done(i) for i in sorted(common)):
            out.append(cluster)
    return out


def _resettle(tx: PluginStore, index: PrefixIndex, namespace: str) -> None:
    """Rebuild what finished items settled (a full scan: after an import,
    or a store whose settlements were never recorded)."""
    index.forget_settled(namespace)
    after = 0
    while batch := tx.items.list(namespace, "duplicate", "done", after=after, limit=50):
        for item in batch:
            passages = (item.payload or {}).get("passages") or []
            index.settle(namespace, item.id, (parse_address(p["address"])[1] for p in passages))
        after = batch[-1].id


class _Members:
    """The member passages of a run of clusters, read for all of them at the
    first payload asked for: two statements a run where there were two a
    cluster (a candidate whose item stands reads nothing)."""

    def __init__(self, ctx: KindContext, clusters: Sequence[dict[str, Any]]) -> None:
        self.ctx = ctx
        self.wanted = sorted({m for c in clusters for m in c["members"]})
        self.rows: dict[str, Passage] | None = None
        self.shingles: dict[str, tuple[str, str, bytes]] | None = None

    def passages(self, members: Sequence[str]) -> list[Passage]:
        """``passages.by_ids(members)``: those stored, in ``members``' order."""
        if self.rows is None:
            self.rows = {p.id: p for p in self.ctx.store.passages.by_ids(self.wanted)}
        return [self.rows[m] for m in members if m in self.rows]

    def near(self, members: Sequence[str]) -> NearDuplicates:
        """The live members' best matches among each other."""
        if self.shingles is None:
            rows = self.ctx.store.passages.live_shingles(self.ctx.namespace, ids=self.wanted)
            self.shingles = {r.id: (r.id, r.document, r.shingles or b"") for r in rows}
        return NearDuplicates(sorted(self.shingles[m] for m in members if m in self.shingles))


#: Clusters whose member passages are read together (:class:`_Members`).
MEMBERS_BATCH = 256


class DuplicateKind(Kind):
    name = "duplicate"
    description = "drop near-duplicate passages (word 3-gram Jaccard >= 0.75) across documents"
    resolution = DuplicateResolution
    hint = (
        "keep = one or more passage addresses; only members that are near duplicates of a "
        "kept one are forgotten"
    )
    usage = "submit {id} --keep PASSAGE-ADDR..."
    instructions = (
        "`payload.passages` are near-identical passages from different documents: `keep` "
        "the address(es) of the passages to keep; a member that is a near duplicate of a "
        "kept one is forgotten, the others stay"
    )
    incremental = True

    def summary(self, payload: dict[str, Any]) -> str:
        if not isinstance(payload.get("passages"), list) or "jaccard" not in payload:
            return super().summary(payload)
        pairs = payload.get("pair_count", len(payload.get("pairs") or []))
        members = payload.get("passage_count", len(payload["passages"]))
        line = f"{members} passages, {pairs} pair(s), jaccard >= {payload['jaccard']:.2f}"
        first = next((p.get("text") for p in payload["passages"] if p.get("text")), None)
        return f"{line}: {_snippet(first)}" if isinstance(first, str) else line

    def migrations(self, engine: str) -> list[str]:
        if engine == "sqlite":
            return sqlite_index.MIGRATIONS
        if engine == "postgres":
            return postgres_index.MIGRATIONS
        return []

    def scan(self, ctx: KindContext) -> Scan:
        index = _index(ctx.store)
        indexed = index.indexed(ctx.namespace)
        scope = None
        if ctx.changes is None or indexed is None:
            found = self._full_scan(ctx, index, indexed or 0)
        else:
            found, scope = self._incremental_scan(ctx, index, indexed)
        found = _unsettled(ctx, index, found)
        ctx.progress("items", 0, len(found), "items")
        return Scan(self._candidates(ctx, found), scope)

    def _candidates(self, ctx: KindContext, found: list[dict[str, Any]]) -> Iterator[Candidate]:
        for start in range(0, len(found), MEMBERS_BATCH):
            run = found[start : start + MEMBERS_BATCH]
            members = _Members(ctx, run)
            for cluster in run:
                yield self._candidate(cluster, members)

    # -- full: the exact join over every live passage ------------------------------

    def _full_scan(
        self, ctx: KindContext, index: PrefixIndex, indexed: int
    ) -> list[dict[str, Any]]:
        tx, ns = ctx.store, ctx.namespace
        head = _head(ctx)
        index.fold(head, force=True)  # the scan reads every passage anyway: one index after it
        fresh: list[Prefix] = []
        total = tx.passages.live_count(ns)  # for the progress line
        ctx.progress("reading passages", 0, total, "passages")

        def records() -> Iterator[tuple[str, str, bytes]]:
            for n, row in enumerate(tx.passages.live_shingles(ns)):
                if not n & 1023:
                    ctx.progress("reading passages", n, total, "passages")
                blob = row.shingles
                if not blob:
                    continue  # too short to have a 3-gram
                if indexed < row.seq <= head:  # (one past the scan's clocks: the next scan's)
                    fresh.append((row.seq, *prefix_piece(blob)))
                    if len(fresh) >= 100_000:  # index as we go: bounded memory
                        index.add(fresh, recent=False)
                        fresh.clear()
                yield row.id, row.document, blob

        stats: dict[str, int] = {}
        found = clusters(records(), stats=stats, progress=ctx.progress)
        log.debug("duplicates_scanned", namespace=ns, scan="full", clusters=len(found), **stats)
        ctx.progress("indexing", 0, len(fresh), "passages")
        index.add(fresh, recent=False)
        index.forget_clusters(ns)
        index.remember_clusters(ns, (c["members"] for c in found))
        _resettle(tx, index, ns)
        index.set_indexed(ns, head)
        return found

    # -- incremental: new passages probe the prefix index ------------------------------

    def _incremental_scan(
        self, ctx: KindContext, index: PrefixIndex, indexed: int
    ) -> tuple[list[dict[str, Any]], set[str]]:
        """The clusters recomputed, and the keys of the clusters re-examined."""
        tx, ns, changes = ctx.store, ctx.namespace, ctx.changes
        assert changes is not None
        head = _head(ctx)
        rows = [  # (one past the clocks: the next scan's)
            r for r in tx.passages.live_shingles(ns, after=indexed) if r.shingles and r.seq <= head
        ]
        new = [(r.id, r.document, r.shingles) for r in rows]
        prefixes = [(r.seq, *prefix_piece(r.shingles)) for r in rows]
        # Forgotten passages stay indexed; every look-up reads only live ones.
        gone = [
            t.target for t in tx.tombstones.since(ns, changes.tombstone_seq) if t.type == "passage"
        ]
        wanted = index.add_and_find(prefixes)
        touched: set[str] = set()
        stats: dict[str, int] = {"passages": len(new)}
        for ident, partners in _partners(tx, wanted, ns, new, prefixes, stats).items():
            touched.add(ident)
            touched.update(partners)
        touched.update(gone)
        index.advance(ns, head)
        log.debug("duplicates_scanned", namespace=ns, scan="incremental", **stats)
        if not touched:
            return [], set()
        # Every cluster that holds a touched passage is recomputed whole:
        # components are closed under qualifying pairs, so no pair crosses
        # out of this set except through the new passages, whose partners
        # were all found above.
        old_keys, held = index.clusters_holding(ns, touched)
        members = touched | held
        found = clusters(
            (r.id, r.document, r.shingles)
            for r in tx.passages.live_shingles(ns, ids=members)
            if r.shingles
        )
        index.forget_clusters(ns, old_keys)
        index.remember_clusters(ns, (c["members"] for c in found))
        return found, old_keys | {c["members"][0] for c in found}

    def erase(self, ctx: KindContext, passages: list[Passage]) -> None:
        """A purged passage's prefix tokens are hashes of its words: they go."""
        _index(ctx.store).erase([(p.seq, p.id) for p in passages])

    def _candidate(self, cluster: dict[str, Any], rows: _Members) -> Candidate:
        members = cluster["members"]

        def payload() -> dict[str, Any]:
            refs = [passage_ref(p) for p in rows.passages(members)]
            near = rows.near(members)
            passages = []
            first_with: dict[str, str] = {}  # text -> the first member showing it
            for r in refs:
                ident = parse_address(r.address)[1]
                best = near.best(ident)
                shown = attrs.asdict(r)
                same = first_with.setdefault(r.text, r.address)
                if same != r.address:  # an exact copy: its text is shown once, by the first
                    del shown["text"]
                    shown["same_text_as"] = same
                passages.append(
                    {
                        **shown,
                        "best_jaccard": _rounded(best[0]) if best else None,
                        "best_match": address("passage", best[1]) if best else None,
                    }
                )
            return {
                "passages": passages,
                "jaccard": _rounded(cluster["jaccard"]),
                "pairs": [
                    {"a": address("passage", a), "b": address("passage", b), "jaccard": _rounded(j)}
                    for a, b, j in cluster["pairs"]
                ],
                "pair_count": cluster["pair_count"],
            }

        return Candidate(members[0], fingerprint(members), payload)

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        # Members all still live: the item stands as handed out.
        members = [parse_address(p["address"])[1] for p in item.payload.get("passages", [])]
        if not members or not all(ctx.store.tombstones.is_live(m) for m in members):
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
        near = _Members(ctx, [{"members": ids}]).near(ids)
        matched = near.matches(ids, {parse_address(a)[1] for a in kept})
        forgotten = [a for a, i in zip(offered, ids, strict=True) if i in matched]
        done = {*kept, *forgotten}
        left = [a for a in offered if a not in done]
        return {"kept": kept, "forgotten": forgotten, "left": left}, matched

    def apply(self, ctx: KindContext, item: Item, resolution: DuplicateResolution) -> str:
        report, matched = self._plan(ctx, item, resolution)
        for ident, (jac, other) in sorted(matched.items()):
            ctx.store.tombstones.add(
                ctx.namespace,
                "passage",
                ident,
                "forgotten",
                f"near duplicate (jaccard {float(jac):.2f}) of {address('passage', other)}, "
                f"kept (item {item.id})",
                item.id,
            )
        # One decision settles the cluster: the members neither kept nor
        # forgotten are released, not asked about again (see _unsettled).
        settled = [*report["kept"], *report["left"]]
        _index(ctx.store).settle(ctx.namespace, item.id, (parse_address(a)[1] for a in settled))
        ctx.report = report
        return resolution.keep[0]


@hookimpl
def memors_register_kinds(registry: KindRegistry) -> None:
    registry.add(DuplicateKind())
