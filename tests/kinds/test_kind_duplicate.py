"""Kind ``duplicate``: live passages from different documents whose word
3-gram Jaccard is at least 0.75, one item per cluster; ``keep`` forgets the
members that are near duplicates of a kept one, and only those. (The scan's
exactness is proven in test_duplicates.py.)"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mcp import Client

from mcp_clients.harness import Calls, stdio_params
from memors_core.errors import BadInput, Refused
from memors_core.testing import temporary_memory
from memors_core.wire import to_json

LICENCE = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy "
    "of this software to deal in the software without restriction."
)
NEAR = LICENCE.replace("without restriction.", "without any restriction.")


def duplicates(memory) -> list[dict]:
    return to_json(memory.compact(kinds=["duplicate"]))["items"]


@pytest.fixture
def trio(memory):
    a = memory.remember(f"{LICENCE}\n\nThe alpha tool sorts files.", uri="alpha").passages
    b = memory.remember(f"{LICENCE}\n\nThe beta tool counts lines.", uri="beta").passages
    c = memory.remember(f"{NEAR}\n\nThe gamma tool prints dates.", uri="gamma").passages
    return memory, [a[0], b[0], c[0]]


def test_a_cluster_is_one_item_with_passages_jaccard_pairs_and_count(trio):
    memory, members = trio
    (item,) = duplicates(memory)
    payload = item["payload"]
    assert set(payload) == {"passages", "jaccard", "pairs", "pair_count"}
    assert sorted(p["address"] for p in payload["passages"]) == sorted(members)
    by_address = {p["address"]: p for p in payload["passages"]}
    # alpha's and beta's passages are the same text: shown once, the copy points at it
    first, copy = sorted([members[0], members[1]], key=[*by_address].index)
    assert by_address[first]["text"] == LICENCE and by_address[members[2]]["text"] == NEAR
    assert "text" not in by_address[copy] and by_address[copy]["same_text_as"] == first
    for p in payload["passages"]:
        shown = {"text"} if p["address"] != copy else {"same_text_as"}
        assert set(p) == {"address", "document", "best_jaccard", "best_match", *shown}
        assert 0.75 <= p["best_jaccard"] <= 1.0
        assert p["best_jaccard"] == round(p["best_jaccard"], 4)  # four decimals at most
        assert p["best_match"] in members and p["best_match"] != p["address"]
    assert payload["pair_count"] == 3 == len(payload["pairs"])
    for pair in payload["pairs"]:
        assert set(pair) == {"a", "b", "jaccard"} and pair["a"] < pair["b"]
    assert 0.75 <= payload["jaccard"] < 1.0
    assert payload["jaccard"] == min(p["jaccard"] for p in payload["pairs"])
    assert duplicates(memory) == [item]


def test_keep_forgets_every_other_member(trio):
    memory, members = trio
    (item,) = duplicates(memory)
    report = to_json(memory.submit(item["id"], keep=members[1]))
    assert report["stored"] is True and report["address"] == members[1]
    assert report["kept"] == [members[1]] and report["left"] == []
    assert sorted(report["forgotten"]) == sorted([members[0], members[2]])
    states = [to_json(memory.get(p))["status"] for p in members]
    assert states == ["forgotten", "live", "forgotten"]
    assert duplicates(memory) == []
    hits = to_json(memory.search("hereby granted free of charge"))["results"]
    assert [h["address"] for h in hits] == [members[1]]


def test_keep_may_name_several_members(trio):
    memory, members = trio
    (item,) = duplicates(memory)
    memory.submit(item["id"], keep=[members[0], members[2]])
    states = [to_json(memory.get(p))["status"] for p in members]
    assert states == ["live", "forgotten", "live"]
    # The two kept passages are still near duplicates, but keeping both was
    # the decision: not asked again while nothing changes.
    assert duplicates(memory) == []


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        ([], "at least one"),
        (["memo://passage/01990000-0000-7000-8000-000000000000"], "not a member"),
        (["memo://fact/01990000-0000-7000-8000-000000000000"], "passage"),
    ],
)
def test_keep_must_name_members(trio, keep, message):
    memory, members = trio
    (item,) = duplicates(memory)
    with pytest.raises(BadInput, match=message):
        memory.submit(item["id"], keep=keep)
    assert all(to_json(memory.get(p))["status"] == "live" for p in members)


def test_a_member_forgotten_meanwhile_refuses_the_submission(trio):
    memory, members = trio
    (item,) = duplicates(memory)
    memory.forget(members[2])
    with pytest.raises(Refused, match="run compact again"):
        memory.submit(item["id"], keep=members[0])
    assert to_json(memory.get(members[1]))["status"] == "live"
    (fresh,) = duplicates(memory)  # the cluster shrank: a fresh item
    assert len(fresh["payload"]["passages"]) == 2


def test_forgetting_a_duplicate_cited_by_a_page_marks_the_page_stale(memory):
    cited = []
    for i, tool in enumerate(["alpha", "beta", "gamma"]):
        r = memory.remember(f"[[Licensing]] {LICENCE}" if i == 0 else f"[[Licensing]] {tool}.")
        cited.append(r.passages[0])
    copy = memory.remember(f"Licensing {LICENCE}", uri="copy").passages[0]
    page_item = to_json(memory.compact(kinds=["page"]))["items"][0]
    body = "\n".join(p["text"] for p in page_item["payload"]["passages"])
    page = memory.submit(page_item["id"], content=body, title="Licensing").address
    (item,) = duplicates(memory)
    memory.submit(item["id"], keep=copy)
    assert to_json(memory.get(cited[0]))["status"] == "forgotten"
    assert to_json(memory.get(page))["stale"] is True


def test_same_document_copies_are_not_duplicates(memory):
    memory.remember(f"{LICENCE}\n\nIntro.\n\n{LICENCE}", uri="one")
    assert duplicates(memory) == []


# --- chains: only near duplicates of a kept member are forgotten -------------------------

BASE = [f"w{i}" for i in range(40)]


def variant(changed: dict[int, str]) -> str:
    return " ".join(changed.get(i, w) for i, w in enumerate(BASE)) + "."


def trigrams(text: str) -> set[tuple[str, ...]]:
    ws = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(ws[i : i + 3]) for i in range(len(ws) - 2)}


def jaccard(a: str, b: str) -> Fraction:
    x, y = trigrams(a), trigrams(b)
    return Fraction(len(x & y), len(x | y))


# A~B~C~D: A and B differ in the first 3 words, C in the last 3, D in 6.
CHAIN = {
    "A": variant({0: "a0", 1: "a1", 2: "a2"}),
    "B": variant({}),
    "C": variant({37: "c37", 38: "c38", 39: "c39"}),
    "D": variant({34: "d34", 35: "d35", 36: "d36", 37: "c37", 38: "c38", 39: "c39"}),
}


def test_the_chain_is_what_it_says():
    t = Fraction(3, 4)
    assert jaccard(CHAIN["A"], CHAIN["B"]) >= t and jaccard(CHAIN["B"], CHAIN["C"]) >= t
    assert jaccard(CHAIN["C"], CHAIN["D"]) >= t
    for x, y in (("A", "C"), ("A", "D"), ("B", "D")):
        assert jaccard(CHAIN[x], CHAIN[y]) < t


def test_keeping_one_end_of_a_chain_forgets_only_its_near_duplicates(cli):
    addr = {}
    for name, text in CHAIN.items():
        done = cli("remember", "-", "--uri", f"doc-{name}", "--json", input=text)
        assert done.code == 0, done
        (addr[name],) = done.json["passages"]
    (item,) = cli("compact", "--kinds", "duplicate", "--json").json["items"]
    members = {p["address"]: p for p in item["payload"]["passages"]}
    assert set(members) == set(addr.values())
    best = {name: members[a] for name, a in addr.items()}
    assert best["A"]["best_match"] == addr["B"]
    assert best["A"]["best_jaccard"] == pytest.approx(
        float(jaccard(CHAIN["A"], CHAIN["B"])), abs=1e-4
    )
    assert best["D"]["best_match"] == addr["C"]

    dry = cli("submit", str(item["id"]), "--keep", addr["A"], "--dry-run", "--json")
    assert dry.code == 0 and dry.json["stored"] is False, dry
    assert dry.json["forgotten"] == [addr["B"]]
    report = cli("submit", str(item["id"]), "--keep", addr["A"], "--json")
    assert report.code == 0, report
    assert report.json["kept"] == [addr["A"]] and report.json["forgotten"] == [addr["B"]]
    assert sorted(report.json["left"]) == sorted([addr["C"], addr["D"]])
    status = {n: cli("get", a, "--json").json["status"] for n, a in addr.items()}
    assert status == {"A": "live", "B": "forgotten", "C": "live", "D": "live"}

    # C and D are still near duplicates of each other, but the decision
    # settled the whole cluster: they were released, not queued again.
    assert cli("compact", "--kinds", "duplicate", "--json").json["items"] == []
    assert cli("compact", "--kinds", "duplicate", "--full", "--json").json["items"] == []
    # A copy of D in a new document is something the decision never saw: asked again.
    done = cli("remember", "-", "--uri", "doc-E", "--json", input=CHAIN["D"])
    (addr["E"],) = done.json["passages"]
    (again,) = cli("compact", "--kinds", "duplicate", "--json").json["items"]
    assert again["id"] != item["id"]
    assert sorted(p["address"] for p in again["payload"]["passages"]) == sorted(
        [addr["C"], addr["D"], addr["E"]]
    )
    text = cli("submit", str(again["id"]), "--keep", addr["D"])
    assert text.code == 0, text
    assert "forgotten (2):" in text.out and "left live (0):" in text.out
    assert cli("compact", "--kinds", "duplicate", "--json").json["items"] == []
    assert cli("get", addr["A"], "--json").json["status"] == "live"


def test_queue_lines_show_a_snippet_and_numbers_print_rounded(cli):
    for name in "AB":
        assert cli("remember", "-", "--uri", f"doc-{name}", input=CHAIN[name]).code == 0
    listed = cli("compact", "--kinds", "duplicate")
    assert listed.code == 0, listed
    # 35/41 of their 3-grams are shared: the line says so briefly, with the text's start
    line = next(x for x in listed.out.splitlines() if "duplicate" in x and "#" in x)
    assert "2 passages, 1 pair(s), jaccard >= 0.85" in line
    assert re.search(r": “(a0 a1 a2|w0 w1 w2) w3 w4 .*…”$", line), line
    assert cli("items").out.splitlines()[-1].strip() == line.strip()
    (item,) = cli("compact", "--kinds", "duplicate", "--json").json["items"]
    shown = cli("items", "show", str(item["id"]))
    assert shown.code == 0, shown
    assert "jaccard 0.85" in shown.out and "jaccard: 0.85" in shown.out
    assert not re.search(r"\b0\.\d{3,}", shown.out), shown.out  # no 0.8536585365853658


def test_one_decision_settles_a_large_cluster_in_one_round(cli):
    """Forty members in four variants chained A~B~C~D, ten documents each:
    keeping one A forgets every A and B copy and releases the C and D
    copies; nothing is left for a second round, even after a full rescan."""
    lines = [
        json.dumps({"text": CHAIN[name], "uri": f"{name}-{n}"})
        for n in range(10)
        for name in "ABCD"
    ]
    done = cli("remember", "--jsonl", "-", input="\n".join(lines) + "\n")
    assert done.code == 0, done
    (item,) = cli("compact", "--kinds", "duplicate", "--json").json["items"]
    members = item["payload"]["passages"]
    assert len(members) == 40
    keep = next(p["address"] for p in members if p["text"].startswith("a0 a1 a2"))
    report = cli("submit", str(item["id"]), "--keep", keep, "--json")
    assert report.code == 0, report
    assert len(report.json["forgotten"]) == 19 and len(report.json["left"]) == 20
    for args in ((), ("--full",)):
        after = cli("compact", "--kinds", "duplicate", *args, "--json").json
        assert after["items"] == [] and after["open"] == 0
    assert cli("get", report.json["left"][0], "--json").json["status"] == "live"


def test_mcp_submit_reports_kept_forgotten_and_left(fresh_store, tmp_path: Path):
    async def main() -> None:
        async with Client(stdio_params(fresh_store("mcp.db"))) as client:
            c = Calls(client)
            addr = {}
            for name in ("A", "B", "C", "D"):
                done = await c.ok("remember", {"text": CHAIN[name], "uri": f"doc-{name}"})
                (addr[name],) = done["passages"]
            listed = await client.call_tool("compact", {"kinds": ["duplicate"]})
            (item,) = listed.structured_content["items"]
            # the queue line names the cluster and quotes the start of its text
            line = f"- item {item['id']} (duplicate): 4 passages, "
            assert line in listed.content[0].text and ": “a0 a1 a2 w3" in listed.content[0].text
            best = {p["address"]: p["best_match"] for p in item["payload"]["passages"]}
            assert best[addr["A"]] == addr["B"] and best[addr["D"]] == addr["C"]
            report = await c.ok(
                "submit",
                {"item": item["id"], "keep": addr["A"], "fingerprint": item["fingerprint"]},
            )
            assert report["stored"] is True
            assert report["kept"] == [addr["A"]] and report["forgotten"] == [addr["B"]]
            assert sorted(report["left"]) == sorted([addr["C"], addr["D"]])
            assert (await c.ok("get", {"address": addr["C"]}))["status"] == "live"
            # C~D remain near duplicates, released by the one decision: no second round
            again = await c.ok("compact", {"kinds": ["duplicate"]})
            assert again["items"] == [] and again["open"] == 0

    anyio.run(main)


@st.composite
def clusters_and_keeps(draw):
    """3–6 variants of BASE (0–3 changed words each, from a small pool so
    that variants share changes), each in one of up to 4 documents, and
    which to keep (a cluster none of whose members is marked keeps its
    first)."""
    n = draw(st.integers(3, 6))
    texts = []
    for _ in range(n):
        changed = draw(
            st.dictionaries(st.integers(0, 39), st.sampled_from(["x", "y", "z"]), max_size=3)
        )
        texts.append(variant({i: f"{w}{i}" for i, w in changed.items()}))
    docs = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return texts, docs, draw(st.lists(st.booleans(), min_size=n, max_size=n))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters_and_keeps())
@example(case=(list(CHAIN.values()), [0, 1, 2, 3], [True, False, False, False]))
@example(case=([CHAIN["B"], CHAIN["B"], CHAIN["C"]], [0, 0, 1], [True, False, False]))
def test_keep_forgets_exactly_the_near_duplicates_of_the_kept(case):
    texts, docs, marks = case
    t = Fraction(3, 4)
    with temporary_memory() as memory:
        bodies: dict[int, list[str]] = {}
        for text, doc in zip(texts, docs, strict=True):
            bodies.setdefault(doc, []).append(text)
        text_of: dict[str, str] = {}
        doc_of: dict[str, int] = {}
        marked: set[str] = set()
        for doc, paragraphs in bodies.items():
            done = memory.remember("\n\n".join(paragraphs), uri=f"doc-{doc}")
            for addr, text in zip(done.passages, paragraphs, strict=True):
                text_of[addr], doc_of[addr] = text, doc
                mark = next(i for i, d in enumerate(docs) if d == doc and texts[i] == text)
                if marks[mark]:
                    marked.add(addr)

        def near(p: str, q: str) -> bool:
            return doc_of[p] != doc_of[q] and jaccard(text_of[p], text_of[q]) >= t

        items = duplicates(memory)
        for item in items:
            members = [p["address"] for p in item["payload"]["passages"]]
            keep = [m for m in members if m in marked] or members[:1]
            report = to_json(memory.submit(item["id"], keep=keep))
            status = {m: to_json(memory.get(m))["status"] for m in members}
            forgotten = {m for m in members if status[m] == "forgotten"}
            assert all(status[k] == "live" for k in keep)
            for m in members:
                if m in keep:
                    continue
                # forgotten exactly when a near duplicate of some kept member
                assert (m in forgotten) == any(near(m, k) for k in keep), (m, keep)
            assert set(report["forgotten"]) == forgotten
            assert set(report["kept"]) == set(keep)
            assert set(report["left"]) == set(members) - set(keep) - forgotten
        # One decision per cluster: what was neither kept nor forgotten was
        # released, so no second round, even on a full rescan.
        assert duplicates(memory) == []
        assert to_json(memory.compact(kinds=["duplicate"], full=True))["items"] == []
