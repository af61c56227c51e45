"""A finished queue, measured: a scripted agent works the whole compaction
queue of a real corpus through MCP until nothing is open (issue 31, point 8).

The corpus is real prose: the licence texts of ``/usr/share/common-licenses``
and then the ``copyright`` files of ``/usr/share/doc`` (or the files of
``--paths``), loaded until the paragraphs reach ``--passages``. Entity
mentions are ``[[Wiki Links]]`` put around the first mention in each
paragraph of a fixed list of names (the foundations, licences and companies
those files name), spelled as the text spells them, so ``Public Domain`` and
``public-domain`` are two entities until a merge says otherwise. Each GNU
licence file also gives its family a ``latest version`` fact (``2`` from
``GPL-2`` from June 1991, as its heading says), so the family's facts
disagree until the agent ends each version where the next begins.

The agent is a script behind the MCP SDK's own client, talking to
``python -m memors_cli serve`` over stdio. It follows the server's prompt:
``compact`` a few items (pages first, then every kind), read each whole
(following ``paged.next`` with ``get``), submit with ``dry_run`` and the
fingerprint, drop what a check flags, submit for real; ``compact`` again
until ``open`` is 0; then ``lint``. Its pages are extractive: one sentence
copied verbatim from each of the first passages, each ending with that
passage's ``[ref]`` marker, and each live fact written out with its
predicate. Conflicts are settled with ``bound`` (the older version ends
where the newer begins); merges are accepted; a duplicate cluster keeps its
first member, in one submission. It never forces and never skips::

    python -m benchmarks.queue [--passages 4600] [--quick] [--paths GLOB…]
        [--db FILE|postgresql://…]

It prints calls, bytes sent (arguments) and received (structured JSON plus
text), the largest answer, rounds per kind, wall time and the final lint,
each beside its target, and exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

os.environ.setdefault("MEMORS_VECTORS", "off")

DEFAULT_PATHS = ["/usr/share/common-licenses/*", "/usr/share/doc/*/copyright"]
#: ``--quick``: two GPL versions and the LGPL-3 (near duplicates and facts that
#: disagree), then copyright files (``debian`` beside ``Debian``: a merge).
QUICK_PATHS = [
    "/usr/share/common-licenses/GPL-1",
    "/usr/share/common-licenses/GPL-2",
    "/usr/share/common-licenses/LGPL-3",
    "/usr/share/doc/*/copyright",
]
QUICK_PASSAGES = 400
#: ``--quick`` reads copyright files of at most this many paragraphs, so
#: that many files (and their shared boilerplate: large clusters) fit.
QUICK_LONGEST = 60
#: The names whose mentions become entities, longest first where one holds another.
NAMES = [
    "GNU Lesser General Public License",
    "GNU General Public License",
    "Free Software Foundation",
    "Python Software Foundation",
    "Regents of the University of California",
    "Mozilla Public License",
    "Artistic License",
    "Apache License",
    "Creative Commons",
    "Public Domain",
    "X Consortium",
    "Sun Microsystems",
    "Red Hat",
    "OpenSSL",
    "Unicode",
    "Expat",
    "Debian",
    "Perl",
]
#: A name's words joined by spaces or hyphens (DEP-5's ``public-domain`` is
#: ``Public Domain`` folded alike: a merge candidate).
MENTION = re.compile(
    r"\b(" + "|".join(r"[-\s]+".join(map(re.escape, n.split())) for n in NAMES) + r")\b",
    re.IGNORECASE,
)
#: A GNU licence's title line, and its ``Version 3, 29 June 2007`` line.
TITLES = {
    "GNU GENERAL PUBLIC LICENSE": "GNU General Public License",
    "GNU LESSER GENERAL PUBLIC LICENSE": "GNU Lesser General Public License",
}
MONTHS = "January February March April May June July August September October November December"
DATED = re.compile(r"Version ([\d.]+), (?:(\d{1,2}) )?(" + MONTHS.replace(" ", "|") + r") (\d{4})")
SENTENCES_PER_PAGE = 8
DRY_RUNS = 4


def mark(paragraph: str) -> str:
    """``paragraph`` with the first mention of each name in ``[[…]]``."""
    seen: set[str] = set()

    def wrap(m: re.Match[str]) -> str:
        name = " ".join(m.group(1).split())
        if name.casefold() in seen:
            return m.group(1)
        seen.add(name.casefold())
        return f"[[{name}]]"

    return MENTION.sub(wrap, paragraph)


def corpus(
    patterns: list[str], passages: int, longest: int | None = None
) -> tuple[list[dict[str, Any]], list[tuple]]:
    """Documents of the files ``patterns`` match (each of at most ``longest``
    paragraphs) until their paragraphs reach ``passages``, and the facts
    their headings give."""
    docs: list[dict[str, Any]] = []
    facts: list[tuple[str, str, str]] = []
    count = 0
    files = [p for pattern in patterns for p in sorted(glob.glob(pattern))]
    for path in files:
        if count >= passages:
            break
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
        if not paragraphs or (longest and len(paragraphs) > longest):
            continue
        docs.append({"text": "\n\n".join(mark(p) for p in paragraphs), "uri": f"file://{path}"})
        count += len(paragraphs)
        fact = version_fact(paragraphs)
        if fact and fact not in facts:
            facts.append(fact)
    return docs, facts


def version_fact(paragraphs: list[str]) -> tuple[str, str, str, str] | None:
    """A GNU licence's own heading, ``Version 2, June 1991``, as the fact
    that its version is the latest from that date on."""
    head = " ".join(" ".join(paragraphs[:2]).split())
    title = next((t for t in TITLES if head.startswith(t)), None)
    dated = DATED.search(head)
    if title is None or dated is None:
        return None
    version, day, month, year = dated.groups()
    since = f"{year}-{MONTHS.split().index(month) + 1:02d}-{int(day or 1):02d}"
    return TITLES[title], "latest version", version, since


# --- the agent's writing ------------------------------------------------------------------

UNLINK = re.compile(r"\[\[([^\]|]+)(?:\|([^\]]+))?\]\]")
SPLIT = re.compile(r"(?<=[.!?])\s+")


def plain(text: str) -> str:
    """A passage's text as one line, its ``[[…]]`` markup read as the words it shows."""
    return " ".join(UNLINK.sub(lambda m: m.group(2) or m.group(1), text).split())


def first_sentence(text: str, refused: set[str]) -> str | None:
    """The passage's first sentence a page can copy as it stands: prose of
    6 to 50 words, nothing Markdown would read as structure or a marker."""
    for sentence in SPLIT.split(plain(text)):
        words = sentence.split()
        if not 6 <= len(words) <= 50 or sentence in refused:
            continue
        if re.search(r"[\[\]`*_|<>#]|^\s*([-+]|\d+[.)])\s", sentence):
            continue
        return sentence
    return None


def write_page(payload: dict[str, Any], refused: set[str]) -> tuple[str, str] | None:
    """An extractive page: a copied sentence of each of the first passages,
    with its marker, then each live fact with its predicate."""
    name = payload["entity"]["name"]
    lines = []
    for passage in payload.get("passages", []):
        sentence = first_sentence(passage["text"], refused)
        if sentence and "ref" in passage:
            lines.append(f"{sentence} [{passage['ref']}]")
        if len(lines) == SENTENCES_PER_PAGE:
            break
    for fact in payload.get("facts", []):
        since, until = (fact.get("valid_from") or "")[:10], (fact.get("valid_to") or "")[:10]
        line = f"The {fact['predicate']} of {fact['subject']} is {fact['value']}"
        line += (f" from {since}" if since else "") + (f" until {until}" if until else "") + "."
        if line not in refused:
            lines.append(line)
    if not lines:
        return None
    return name, "\n\n".join(lines)


def flagged_sentences(report: dict[str, Any]) -> set[str]:
    """The sentences a submission's checks flagged (markers left off)."""
    out = set()
    for check in (report.get("checks") or {}).values():
        for flag in check.get("flagged", []) if isinstance(check, dict) else []:
            sentence = flag.get("sentence")
            if isinstance(sentence, str):
                out.add(re.sub(r"\s*(\[[^\]]*\])+\s*$", "", sentence).strip())
    return out


# --- the agent ----------------------------------------------------------------------------


@dataclass
class Tally:
    calls: Counter = field(default_factory=Counter)
    sent: int = 0
    received: int = 0
    largest: int = 0
    largest_call: str = ""
    rounds: Counter = field(default_factory=Counter)  # real submissions per kind
    dry_runs: int = 0
    refused: dict[int, str] = field(default_factory=dict)  # item id -> why it was refused
    ended: Counter = field(default_factory=Counter)  # how the refused items ended
    errors: list[str] = field(default_factory=list)
    seen: dict[int, str] = field(default_factory=dict)  # item id -> kind
    clusters: int = 0  # open duplicate items when the decisions began
    largest_cluster: int = 0  # members of the largest duplicate item
    pages_read: int = 0  # further pages of payloads fetched with get
    done: set[int] = field(default_factory=set)
    failed: dict[int, str] = field(default_factory=dict)  # item id -> why it was given up


class Agent:
    def __init__(self, client: Any, tally: Tally) -> None:
        self.client = client
        self.tally = tally

    async def call(self, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """One tool call: its structured answer and whether it is an error."""
        t = self.tally
        t.calls[name] += 1
        t.sent += len(json.dumps(args, ensure_ascii=False).encode())
        result = await self.client.call_tool(name, args)
        structured = json.dumps(result.structured_content, ensure_ascii=False)
        size = len(structured.encode()) + sum(
            len(c.text.encode()) for c in result.content if hasattr(c, "text")
        )
        t.received += size
        if size > t.largest:
            t.largest, t.largest_call = size, name
        if result.is_error:
            text = " ".join(c.text for c in result.content if hasattr(c, "text"))
            return {"error": text}, True
        return result.structured_content or {}, False

    async def whole(self, item: dict[str, Any]) -> dict[str, Any]:
        """The item with its whole payload: ``get`` each further page."""
        payload = dict(item["payload"])
        paged = item.get("paged") or {}
        while isinstance(paged.get("next"), dict):
            data, error = await self.call("get", dict(paged["next"]))
            self.tally.pages_read += 1
            if error:
                raise RuntimeError(f"get {paged['next']}: {data['error']}")
            for key in paged.get("lists") or {}:
                payload[key] = list(payload.get(key) or []) + list(data["payload"].get(key) or [])
            paged = data.get("paged") or {}
        return {**item, "payload": payload}

    async def submit(self, item: dict[str, Any], resolution: dict[str, Any]) -> dict[str, Any]:
        args = {"item": item["id"], "fingerprint": item["fingerprint"], **resolution}
        data, error = await self.call("submit", args)
        if error:
            return {"stored": False, "error": data["error"]}
        return data

    async def page(self, item: dict[str, Any]) -> str | None:
        """Write, dry-run, drop what is flagged, submit. None when stored."""
        refused: set[str] = set()
        for _ in range(DRY_RUNS):
            written = write_page(item["payload"], refused)
            if written is None:
                return "nothing in its payload can be copied"
            title, content = written
            report = await self.submit(item, {"title": title, "content": content, "dry_run": True})
            self.tally.dry_runs += 1
            if "error" in report:
                return report["error"]
            flags = flagged_sentences(report)
            if not flags:
                return await self.final(item, {"title": title, "content": content})
            refused |= flags
        return f"still flagged after {DRY_RUNS} dry runs: {sorted(refused)[:2]}"

    async def final(self, item: dict[str, Any], resolution: dict[str, Any]) -> str | None:
        report = await self.submit(item, resolution)
        self.tally.rounds[item["kind"]] += 1
        if report.get("stored") or report.get("status") == "done":
            self.tally.done.add(item["id"])
            return None
        why = report.get("error") or report.get("message") or json.dumps(report)[:200]
        self.tally.refused[item["id"]] = why
        return why

    async def work(self, item: dict[str, Any]) -> str | None:
        """Do one item according to its kind; None when it is done."""
        item = await self.whole(item)
        kind, payload = item["kind"], item["payload"]
        if kind in ("page", "stale"):
            return await self.page(item)
        if kind == "conflict":
            return await self.final(item, settle(payload["facts"]))
        if kind == "merge":
            return await self.final(item, {"accept": True})
        if kind == "duplicate":
            members = len(payload["passages"])
            self.tally.largest_cluster = max(self.tally.largest_cluster, members)
            return await self.final(item, {"keep": [payload["passages"][0]["address"]]})
        return f"no rule for kind {kind}"


def version(value: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", value))


def settle(facts: list[dict[str, Any]]) -> dict[str, Any]:
    """Two versions each said to be the latest: the older was, until the
    newer came out (``bound``); undated, the newer is kept."""
    older, newer = sorted(facts, key=lambda f: (version(f["value"]), f["address"]))
    if older.get("valid_from") and newer.get("valid_from"):
        return {"bound": {"fact": older["address"], "valid_to": newer["valid_from"]}}
    return {"keep": newer["address"]}


async def run_queue(db: str, budget: int, tally: Tally, batch: int = 5) -> dict[str, Any]:
    """Work the queue to its end over stdio; the final lint's answer."""
    from mcp import Client, StdioServerParameters

    env = {**os.environ, "MEMORS_DB": str(db), "MEMORS_MCP_COMPACT_BYTES": str(budget)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memors_cli", "serve"], env=env
    )
    async with Client(params) as client:
        agent = Agent(client, tally)
        attempts: Counter = Counter()
        # Pages first, then everything: the decisions after them make pages
        # stale (a merge, a superseded fact, a forgotten duplicate it cited),
        # so the run shows the queue converging, not just emptying once.
        for kinds in (["page"], None):
            if kinds is None:  # the clusters there are, before any is settled
                data, _ = await agent.call("compact", {"kinds": ["duplicate"], "limit": 0})
                tally.clusters = data.get("open", 0)
            while True:
                args: dict[str, Any] = {"limit": batch, **({"kinds": kinds} if kinds else {})}
                data, error = await agent.call("compact", args)
                if error:
                    raise RuntimeError(f"compact: {data['error']}")
                todo = [i for i in data.get("items", []) if i["id"] not in tally.failed]
                if not todo:
                    break
                for item in todo:
                    tally.seen[item["id"]] = item["kind"]
                    attempts[item["id"]] += 1
                    why = await agent.work(item)
                    if why is not None and attempts[item["id"]] >= 3:
                        tally.failed[item["id"]] = why
        open_left = data.get("open", 0)
        for item_id in sorted(set(tally.refused) - tally.done):
            data, error = await agent.call("get", {"address": f"memo://item/{item_id}"})
            tally.ended[data.get("status", "unknown") if not error else "unknown"] += 1
        lint, _ = await agent.call("lint", {})
        findings = list(lint.get("findings") or [])
        paged = lint.get("paged") or {}
        while isinstance(paged.get("next"), dict):
            more, _ = await agent.call("lint", dict(paged["next"]))
            findings += more.get("findings") or []
            paged = more.get("paged") or {}
    return {"open": open_left, "findings": findings}


def report(tally: Tally, result: dict[str, Any], cap: int, wall: float) -> bool:
    """Print every figure beside its target; whether every target is met."""
    kinds = Counter(tally.seen.values())
    clusters = tally.clusters
    # Settled: done, or obsolete (its condition went away before its turn:
    # the fact it named was superseded by another conflict's decision, …).
    obsolete = tally.ended["obsolete"]
    settled = len(tally.done) + obsolete
    rows = [
        ("items seen", f"{len(tally.seen):,} ({dict(sorted(kinds.items()))})", "", None),
        (
            "items settled",
            f"{len(tally.done):,} done, {obsolete} obsolete, {result['open']} open, "
            f"{len(tally.failed)} given up",
            "every item",
            settled == len(tally.seen) and result["open"] == 0 and not tally.failed,
        ),
        (
            "final lint",
            f"{len(result['findings'])} finding(s)",
            "clean (0)",
            not result["findings"],
        ),
        (
            "largest answer",
            f"{tally.largest:,} B ({tally.largest_call})",
            f"<= {cap:,} B",
            tally.largest <= cap,
        ),
        (
            "duplicate rounds",
            f"{tally.rounds['duplicate']} for {clusters} cluster(s) ({kinds['duplicate']} items)",
            "= clusters",
            tally.rounds["duplicate"] == clusters,
        ),
        ("rounds per kind", json.dumps(dict(sorted(tally.rounds.items()))), "", None),
        ("largest cluster", f"{tally.largest_cluster} members", "", None),
        ("payload pages read", f"{tally.pages_read} (get, following paged.next)", "", None),
        ("dry runs", f"{tally.dry_runs:,}", "", None),
        ("refused submissions", f"{len(tally.refused)} {dict(tally.ended)}", "", None),
        ("calls", f"{sum(tally.calls.values()):,} {dict(sorted(tally.calls.items()))}", "", None),
        ("bytes sent", f"{tally.sent:,} B", "", None),
        ("bytes received", f"{tally.received:,} B", "", None),
        ("wall time", f"{wall:.1f} s", "", None),
    ]
    print(f"{'figure':<20} {'measured':<50} {'target':<14} verdict")
    ok = True
    for name, measured, target, met in rows:
        verdict = "" if met is None else ("met" if met else "MISSED")
        ok = ok and met is not False
        print(f"{name:<20} {measured:<50} {target:<14} {verdict}".rstrip())
    for item_id, why in sorted(tally.failed.items()):
        print(f"  given up: item {item_id} ({tally.seen[item_id]}): {why}")
    for finding in result["findings"][:10]:
        print(f"  lint: {json.dumps(finding, ensure_ascii=False)[:200]}")
    print(f"targets: {'all met' if ok else 'MISSED'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=4600)
    parser.add_argument(
        "--quick", action="store_true", help=f"a smoke test: {QUICK_PASSAGES} passages"
    )
    parser.add_argument("--paths", nargs="+", default=None, help="file globs (in order)")
    parser.add_argument(
        "--db", default=None, help="the store (a file or postgresql://…; default a temporary file)"
    )
    args = parser.parse_args()
    from memors_core import Memory
    from memors_mcp.tools import compact_budget

    budget = compact_budget()
    cap = budget + 4096  # the budget plus the room an answer's small fields take
    paths = args.paths or (QUICK_PATHS if args.quick else DEFAULT_PATHS)
    if args.quick:
        docs, facts = corpus(paths, QUICK_PASSAGES, QUICK_LONGEST)
    else:
        docs, facts = corpus(paths, args.passages)
    if not docs:
        sys.exit(f"no readable file matches {paths}")
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "queue.db")
        with Memory.open(db) as memory:
            counts = memory.remember_many(docs)
            for subject, predicate, value, since in facts:
                memory.record_fact(subject, predicate, value, valid_from=since)
        engine = "postgresql" if db.startswith("postgres") else "sqlite"
        print(
            f"store ({engine}): {counts.documents} documents, {counts.passages} passages, "
            f"{counts.entities} entities, {len(facts)} facts"
        )
        tally = Tally()
        start = time.perf_counter()
        result = anyio.run(run_queue, db, budget, tally)
        wall = time.perf_counter() - start
    sys.exit(0 if report(tally, result, cap, wall) else 1)


if __name__ == "__main__":
    main()
