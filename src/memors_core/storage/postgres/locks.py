"""The PostgreSQL engine's advisory locks: their keys, and which a write of
each role takes (:mod:`memors_core.storage.postgres.connection` takes them,
:mod:`memors_core.storage.postgres.tx` claims uris and new entities)."""

from __future__ import annotations

import zlib

#: Advisory lock keys (two 32-bit halves: "memo", then what for).
LOCK_SPACE = 0x6D656D6F
WRITE_LOCK = 1
MIGRATE_LOCK = 2
#: Advisory lock space of the namespaces' writers ("memn"); the key is the
#: namespace's CRC-32 (two names sharing one only take turns).
NAMESPACE_SPACE = 0x6D656D6E
#: Advisory lock space of the namespaces' compaction scans ("mems"), same keys.
SCAN_SPACE = 0x6D656D73
#: Advisory lock space held shared by the namespace's content writers under
#: way ("memw"), same keys: a scan waits for those alone, where the
#: namespace's lock would have it wait behind every writer queued for it.
WRITING_SPACE = 0x6D656D77
#: Advisory lock space of the uris claimed by a namespace's ``add`` writes
#: ("memu"); the key is the CRC-32 of the namespace and the uri.
URI_SPACE = 0x6D656D75
#: Advisory lock space of the entities an ``add`` write makes ("meme"); the
#: key is the namespace's, as ``NAMESPACE_SPACE``'s.
ENTITY_SPACE = 0x6D656D65
#: What each role of a namespace's write waits for (``Storage.write``): the
#: lock spaces it takes, in the order they are taken, each exclusively or
#: (True) shared, then ``WRITING_SPACE`` shared by a role that writes
#: content. ``add`` writes share the namespace's lock: they wait only for
#: the writes that take it exclusively, and for each other only where they
#: claim one uri or make entities (:data:`URI_SPACE`, :data:`ENTITY_SPACE`)
#: and, at their commits, where the search index's flush updates the
#: namespace's one row of statistics.
ROLE_LOCKS: dict[str, tuple[tuple[int, bool], ...]] = {
    "all": ((SCAN_SPACE, False), (NAMESPACE_SPACE, False)),
    "content": ((NAMESPACE_SPACE, False),),
    "add": ((NAMESPACE_SPACE, True),),
    "scan": ((SCAN_SPACE, False),),
}


def covers(outer: str, inner: str) -> bool:
    """Whether a transaction of role ``outer`` holds every lock a write of
    role ``inner`` would take (an exclusive lock covers a shared one)."""
    held = dict(ROLE_LOCKS[outer])
    return all(space in held and (shared or not held[space]) for space, shared in ROLE_LOCKS[inner])


def namespace_key(namespace: str) -> int:
    """The advisory lock key of ``namespace``'s writers (a signed 32-bit integer)."""
    return zlib.crc32(namespace.encode("utf-8", "surrogatepass")) - 2**31


def uri_key(namespace: str, uri: str) -> int:
    """The advisory lock key of ``uri`` in ``namespace`` (:data:`URI_SPACE`;
    two uris sharing one only take turns)."""
    return namespace_key(f"{namespace}\x00{uri}")
