"""The commands on what is stored: ``get``, ``forget``, ``fact`` and
``entity`` (``search`` has a module of its own, kept light)."""

from __future__ import annotations

import argparse
from typing import Any

from memors_core.wire import to_json, with_web_url

from ..output import render
from ._common import open_memory, print_result


def cmd_get(args: argparse.Namespace) -> int:
    with open_memory(args, reading=True) as memory:
        data = with_web_url(to_json(memory.get(args.address, namespace=args.ns)), args.ns)
    print_result(args, data, page_text(data) if data.get("type") == "page" else None)
    return 0


def page_text(data: dict[str, Any]) -> str:
    """A page for people: its fields as ``get`` prints any row, with its
    checked sentences numbered, each followed by the addresses it cites
    (an unverified one, stored over its checks' flags, first by what
    flagged it)."""
    keys = list(data)
    if "sentences" not in keys:
        return render(data)
    at = keys.index("sentences")
    sentences = data["sentences"] or []
    lines = [f"sentences ({len(sentences)}):" if sentences else "sentences: none recorded"]
    for n, sentence in enumerate(sentences, 1):
        lines.append(f"  {n}. {' '.join(str(sentence.get('text', '')).split())}")
        cited = sentence.get("sources") or []
        flags = sentence.get("flags") or []
        for flag in flags:
            lines.append(f"     UNVERIFIED, {flag.get('check')}: {flag.get('message')}")
        nothing = "nothing" if flags else "nothing (no marker)"
        lines.append("     cites " + (", ".join(cited) if cited else nothing))
    parts = [
        render({k: data[k] for k in keys[:at]}),
        "\n".join(lines),
        render({k: data[k] for k in keys[at + 1 :]}),
    ]
    return "\n".join(part for part in parts if part)


def cmd_forget(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        data = to_json(memory.forget(args.address, reason=args.reason, namespace=args.ns))
    if data["forgotten"]:
        text = f"forgot {len(data['forgotten'])} row(s): " + ", ".join(data["forgotten"])
    else:
        text = f"{data['address']} was already {data['status']}; nothing changed"
    print_result(args, data, text)
    return 0


# --- facts and entities -------------------------------------------------------------


def cmd_fact(args: argparse.Namespace) -> int:
    with open_memory(args, reading=args.fact_command == "list") as memory:
        if args.fact_command == "add":
            data = to_json(
                memory.record_fact(
                    args.subject,
                    args.predicate,
                    args.value,
                    valid_from=args.valid_from,
                    valid_to=args.valid_to,
                    source=args.source,
                    namespace=args.ns,
                )
            )
            print_result(args, data, f"recorded {data['fact']}")
            return 0
        data = to_json(memory.facts(args.subject, namespace=args.ns))
    lines = []
    for f in data["facts"]:
        span = ""
        if f["valid_from"] or f["valid_to"]:
            span = f"  [{f['valid_from'] or '…'}, {f['valid_to'] or '…'})"
        lines.append(f"{f['address']}  {f['subject']} | {f['predicate']} | {f['value']}{span}")
    print_result(args, data, "\n".join(lines) if lines else "no facts")
    return 0


def cmd_entity(args: argparse.Namespace) -> int:
    with open_memory(args, reading=args.entity_command in ("list", "show")) as memory:
        if args.entity_command == "list":
            data = to_json(memory.entities(namespace=args.ns))
            lines = [
                f"{e['address']}  {e['name']}"
                + (f" (also {', '.join(e['aliases'])})" if e["aliases"] else "")
                + f"  passages={e['passages']} facts={e['facts']}"
                + (f" page={e['page']}" if e["page"] else "")
                for e in data["entities"]
            ]
            print_result(args, data, "\n".join(lines) if lines else "no entities")
        elif args.entity_command == "show":
            print_result(args, to_json(memory.entity(args.name, namespace=args.ns)))
        elif args.entity_command == "rename":
            data = to_json(memory.rename_entity(args.name, args.new_name, namespace=args.ns))
            print_result(args, data, corrected_text(data))
        elif args.entity_command == "unmerge":
            data = to_json(memory.undo_merge(args.name, namespace=args.ns))
            print_result(args, data, corrected_text(data))
        else:
            data = to_json(
                memory.propose_merge(list(args.names), namespace=args.ns, again=args.again)
            )
            print_result(
                args,
                data,
                f"merge candidate {data['candidate']} is {data['status']}: "
                f"{data['entities'][1]} into {data['entities'][0]} "
                "(run compact to get its merge item)",
            )
    return 0


def corrected_text(data: dict) -> str:
    """A correction's report: what it did, and the pages now stale."""
    lines = [data["message"]]
    if data.get("stale"):
        lines.append("stale now (run compact for a refresh item): " + " ".join(data["stale"]))
    return "\n".join(lines)
