"""The memors tour: the whole job, end to end, through the real CLI.

Run by `make demo`. It uses a fresh store in .demo/memors.db and plays the
part of the agent: it remembers a small corpus, searches it, compacts it and
completes every work item from its payload alone — writing pages, settling a
conflict, confirming a merge, dropping a duplicate — while the server checks
each result. One page is deliberately embellished to show a refusal.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STORE = HERE.parent / ".demo"
CLI = [sys.executable, "-m", "memors_cli"]
ENV = {**os.environ, "MEMORS_DB": str(STORE / "memors.db")}


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}")


def run(*args: str, expect: int = 0, show: bool = True, stdin: str | None = None) -> str:
    """Run `memors-mcp ARGS…`, echo the command and its output, check the exit status."""
    shown = " ".join(a if re.fullmatch(r"[\w@%+=:,./-]+", a) else repr(a) for a in args)
    print(f"$ memors-mcp {shown}")
    proc = subprocess.run(
        [*CLI, *args], env=ENV, capture_output=True, text=True, input=stdin, check=False
    )
    if show and proc.stdout.strip():
        print(proc.stdout.rstrip())
    if proc.stderr.strip():
        print(proc.stderr.rstrip(), file=sys.stderr)
    if proc.returncode != expect:
        sys.exit(f"demo: expected exit {expect}, got {proc.returncode}")
    return proc.stdout


def run_json(*args: str, expect: int = 0) -> dict:
    return json.loads(run(*args, "--json", expect=expect, show=False))


def write_page(payload: dict) -> tuple[str, str]:
    """What an honest agent writes: only what the payload says.

    Each passage becomes a paragraph (headings and link brackets removed)
    and each recorded fact becomes a sentence, so nothing is invented and
    nothing recorded is left out.
    """
    entity = payload["entity"]["name"]
    paragraphs = []
    for passage in payload["passages"]:
        lines = [ln for ln in passage["text"].splitlines() if not ln.startswith("#")]
        paragraphs.append(" ".join(lines).replace("[[", "").replace("]]", ""))
    facts = [f"{f['subject']} {f['predicate']}: {f['value']}." for f in payload["facts"]]
    if facts:
        paragraphs.append("## Facts\n\n" + "\n".join(f"- {f}" for f in facts))
    return entity, "\n\n".join(paragraphs) + "\n"


def main() -> None:
    shutil.rmtree(STORE, ignore_errors=True)
    STORE.mkdir(parents=True)
    os.chdir(HERE)

    say("Remember a small corpus (Markdown notes; [[Wiki Links]] name entities)")
    run("remember", "corpus")
    run("fact", "add", "Raft", "published in", "2014")
    run("fact", "add", "Paxos", "invented by", "Leslie Lamport")
    run("fact", "add", "Paxos", "first published", "1998")
    run("fact", "add", "Paxos", "first published", "1989", "--from", "1989-01-01")

    say("Search: any natural-language question works (words are OR-ed, BM25-ranked)")
    run("search", "how does a candidate become the leader?", "--limit", "3")
    run("search", "paxos", "--granularity", "fact")
    say(
        "Search by meaning (the semantic extra, which make setup installs): remember "
        "returned at once and a background run embeds the passages (reindex --vectors "
        "waits for it); a question in other words still finds the passage, by words "
        "alone (a one-shot search's default) it finds nothing"
    )
    run("reindex", "--vectors")
    run("search", "how do machines pick a chief?", "--mode", "hybrid", "--limit", "1")
    run("search", "how do machines pick a chief?")

    say("Compact: the store hands out work items; the server never writes prose")
    run("compact")
    items = run_json("compact")["items"]

    by_kind: dict[str, list[dict]] = {}
    for item in items:
        by_kind.setdefault(item["kind"], []).append(item)

    say("Settle the conflict: keep the right fact, the other is superseded")
    conflict = by_kind["conflict"][0]
    keep = next(f for f in conflict["payload"]["facts"] if f["value"] == "1998")
    run("submit", str(conflict["id"]), "--keep", keep["address"])

    say("Confirm the merge: 'Quorum Replication' becomes an alias of 'quorum-replication'")
    merge = by_kind["merge"][0]
    run("submit", str(merge["id"]), "--accept")

    say("Drop the duplicate paragraph (the same text is in raft.md and notes.md)")
    dup = by_kind["duplicate"][0]
    keep_passage = dup["payload"]["passages"][0]  # the older copy
    run("submit", str(dup["id"]), "--keep", keep_passage["address"])

    say("Write pages from the payloads; first an embellished one, to see the checks refuse it")
    page_items = run_json("compact", "--kinds", "page")["items"]
    first = page_items[0]
    title, content = write_page(first["payload"])
    (STORE / "page.md").write_text(content + "\nIt was invented on the moon by three cats.\n")
    run(
        "submit",
        str(first["id"]),
        "--content-file",
        str(STORE / "page.md"),
        "--title",
        title,
        "--dry-run",
        expect=1,
    )
    for item in page_items:
        title, content = write_page(item["payload"])
        (STORE / "page.md").write_text(content)
        run(
            "submit",
            str(item["id"]),
            "--content-file",
            str(STORE / "page.md"),
            "--title",
            title,
            "--dry-run",
            show=False,
        )
        run("submit", str(item["id"]), "--content-file", str(STORE / "page.md"), "--title", title)

    say("Pages are searchable; forgetting a cited passage makes a page stale")
    run("search", "majority heartbeats", "--granularity", "page", "--limit", "2")
    raft = next(i for i in page_items if i["payload"]["entity"]["name"] == "Raft")
    run("forget", raft["payload"]["passages"][-1]["address"], "--reason", "outdated note")
    stale = run_json("compact", "--kinds", "stale")["items"][0]
    print(f"stale item {stale['id']}: changes {stale['payload']['changes']}")
    title, content = write_page(stale["payload"])
    (STORE / "page.md").write_text(content)
    run("submit", str(stale["id"]), "--content-file", str(STORE / "page.md"), "--title", title)

    say("Nothing left to do; lint is clean and the metrics tell the story")
    run("compact")
    run("lint")
    metrics = run("metrics", show=False)
    for line in metrics.splitlines():
        if line.startswith("memors_") and not line.endswith(" 0.0"):
            print(line)
    print(
        f"\nThe store is at {STORE / 'memors.db'}; try: "
        f"MEMORS_DB={STORE / 'memors.db'} .venv/bin/memors-mcp entity list\n"
        f"or browse it: MEMORS_DB={STORE / 'memors.db'} .venv/bin/memors-mcp serve --http, "
        "then open http://127.0.0.1:8765/"
    )


if __name__ == "__main__":
    main()
