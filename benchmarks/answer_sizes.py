"""The largest MCP answer of each tool, beside the cap (docs/mcp.md, "Answers").

Builds a store of generated passages about 200 services plus one duplicate
cluster (``--members`` variants of one 160-word paragraph about
[[Licensing]]), adds the real conversations of ``--locomo`` (each session a
document, its speakers entities), then drives every tool and a resource
read through the MCP SDK's client over stdio and prints each tool's largest
answer (structured JSON plus text, UTF-8) beside the cap::

    python benchmarks/answer_sizes.py [--passages 10000] [--members 200]
        [--locomo /work/shared/data/locomo-dev.json]

Each paged answer is followed to its last page (``paged.next``), so the
figure is the largest page; a server without paging answers in one piece.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

os.environ.setdefault("MEMORS_VECTORS", "off")


def documents(passages: int, members: int, seed: int = 31) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(5000)
    ]

    def words(n: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(n))

    docs = []
    for d in range((passages - members) // 20):
        paragraphs = [
            f"[[Service{(d * 20 + p) % 200:03d}]] {words(rng.randint(14, 22))}." for p in range(20)
        ]
        docs.append({"text": "\n\n".join(paragraphs), "uri": f"doc-{d}"})
    base = words(160).split()
    for m in range(members):
        variant = list(base)
        variant[5 + m % 150] = f"variant{m}"
        docs.append({"text": "[[Licensing]] " + " ".join(variant) + ".", "uri": f"licence-{m}"})
    return docs


def locomo(path: Path) -> list[dict[str, Any]]:
    """Each session of each conversation: one document, its speakers named."""
    out = []
    for conv in json.loads(path.read_text()):
        c = conv["conversation"]
        speakers = [c["speaker_a"], c["speaker_b"]]
        for key, turns in c.items():
            if key.startswith("session_") and isinstance(turns, list):
                text = "\n\n".join(f"{t['speaker']}: {t['text']}" for t in turns)
                uri = f"locomo/{conv['sample_id']}/{key}"
                out.append({"text": text, "uri": uri, "entities": speakers})
    return out


async def measure(db: Path, cap: int) -> dict[str, int]:
    from mcp import Client, StdioServerParameters

    env = {**os.environ, "MEMORS_DB": str(db)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memors_cli", "serve"], env=env
    )
    largest: dict[str, int] = {}

    async with Client(params) as client:

        async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
            pages = 0
            while True:
                result = await client.call_tool(name, args)
                structured = json.dumps(result.structured_content, ensure_ascii=False)
                size = len(structured.encode()) + sum(len(c.text.encode()) for c in result.content)
                largest[name] = max(largest.get(name, 0), size)
                data = result.structured_content or {}
                following = data.get("paged", {}).get("next")
                pages += 1
                if not isinstance(following, dict) or "page" not in following or pages > 500:
                    return data
                args = {**args, **following}

        async def read(uri: str) -> None:
            result = await client.read_resource(uri)
            size = len("".join(c.text for c in result.contents).encode())
            largest["resource"] = max(largest.get("resource", 0), size)

        await call("compact", {})
        items = (await call("compact", {"kinds": ["duplicate"], "limit": 1000}))["items"]
        await call("compact", {"limit": 1000})
        for item in items[:3]:
            await call("get", {"address": f"memo://item/{item['id']}"})
            await read(f"memo://item/{item['id']}")
            members = [p["address"] for p in item["payload"]["passages"]]
            await call("submit", {"item": item["id"], "keep": members[:1], "dry_run": True})
        hits = (await call("search", {"query": "Licensing", "granularity": "entity"}))["results"]
        for hit in hits[:1]:
            await call("get", {"address": hit["address"]})
            await read(hit["address"])
        await call("search", {"query": "Licensing variant1 Caroline", "limit": 1000})
        await call("search", {"query": "Licensing Caroline", "granularity": "all", "limit": 1000})
        await call("lint", {})
    return largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--members", type=int, default=200)
    parser.add_argument("--locomo", type=Path, default=None)
    args = parser.parse_args()
    from memors_core import Memory
    from memors_mcp.tools import compact_budget

    cap = compact_budget() + 4096
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "answers.db"
        docs = documents(args.passages, args.members)
        if args.locomo:
            docs += locomo(args.locomo)
        with Memory.open(db) as memory:
            counts = memory.remember_many(docs)
        print(f"store: {counts.documents} documents, {counts.passages} passages")
        largest = anyio.run(measure, db, cap)
    print(f"{'tool':<10} {'largest answer':>16} {'cap (target)':>14}")
    for name, size in sorted(largest.items()):
        verdict = "ok" if size <= cap else "OVER"
        print(f"{name:<10} {size:>14,} B {cap:>12,} B  {verdict}")


if __name__ == "__main__":
    main()
