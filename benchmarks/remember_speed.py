"""Remember's speed with the ``semantic`` extra on, beside ``MEMORS_VECTORS=off`` (issue 30).

    python -m benchmarks.remember_speed                  # real prose and short turns
    python -m benchmarks.remember_speed --busy           # the same beside a process that spins
    python -m benchmarks.remember_speed --passages 3000 --runs 3

Corpora, written as JSONL for ``memors-mcp remember --jsonl``:

- *prose*: paragraphs of 30-400 words of the Debian documentation on this
  machine (``/usr/share/doc``: READMEs, NEWS, TODO, the licence texts of
  ``/usr/share/common-licenses``; changelogs and ``copyright`` files left
  out), one document per file, up to ``--passages`` paragraphs;
- *turns*: every turn of the LoCoMo conversations in
  ``../shared/data/locomo-dev.json`` (when it is there), one document each,
  with its speaker as entity.

For each corpus, after one warm-up load, ``--runs`` times and in turns
(off then on, then on then off): a fresh store, then
``memors-mcp remember --jsonl`` with ``MEMORS_VECTORS=off`` and with it on,
timed as a user feels it (wall time until the command returns; its CPU
time too). With vectors on, the command leaves the vectors to the detached
run it starts; ``reindex --vectors`` then waits for that run and makes what
it left, and the time from remember's return until every passage has a
vector is printed as the vectors' throughput. Target: remember with
vectors on at most 1.2x off, on an idle and on a busy machine.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.2
#: The LoCoMo conversations: ``shared/data/locomo-dev.json`` beside the checkout (or a worktree's parent).
LOCOMO = next(
    (
        p / "shared" / "data" / "locomo-dev.json"
        for p in Path(__file__).resolve().parents[1:4]
        if (p / "shared" / "data" / "locomo-dev.json").exists()
    ),
    Path("shared/data/locomo-dev.json"),
)
SKIP = ("copyright", "changelog", "changes")


def paragraphs(text: str) -> list[str]:
    """The paragraphs of 30-400 words (blank-line separated, lines joined)."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        words = block.split()
        if 30 <= len(words) <= 400:
            out.append(" ".join(words))
    return out


def _read(path: Path) -> str | None:
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
        return None


def prose(limit: int) -> list[dict]:
    """Documents of Debian documentation paragraphs, ``limit`` paragraphs in all."""
    files = sorted(Path("/usr/share/common-licenses").glob("*"))
    for root, _dirs, names in os.walk("/usr/share/doc"):
        for name in sorted(names):
            lower = name.lower()
            if lower.startswith(SKIP) or lower.endswith((".html", ".pdf", ".png", ".conf")):
                continue
            files.append(Path(root) / name)
    docs, total = [], 0
    for path in files:
        if total >= limit or not path.is_file() or path.is_symlink():
            continue
        text = _read(path)
        kept = paragraphs(text)[: limit - total] if text else []
        if kept:
            docs.append({"text": "\n\n".join(kept), "uri": str(path)})
            total += len(kept)
    return docs


def turns() -> list[dict]:
    if not LOCOMO.exists():
        return []
    out = []
    for conversation in json.loads(LOCOMO.read_text(encoding="utf-8")):
        talk = conversation["conversation"]
        for key, session in talk.items():
            if not key.startswith("session_") or not isinstance(session, list):
                continue
            for turn in session:
                out.append(
                    {
                        "text": turn["text"],
                        "uri": f"{conversation['sample_id']}/{turn['dia_id']}",
                        "entities": [turn["speaker"]],
                    }
                )
    return out


def run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of a child process (it must succeed)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.stderr.close()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed: {err}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(name: str, docs: list[dict], runs: int, work: Path) -> None:
    source = work / f"{name}.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    cli = [sys.executable, "-m", "memors_cli"]
    base = {k: v for k, v in os.environ.items() if k not in ("MEMORS_DB", "MEMORS_VECTORS")}
    walls: dict[str, list[float]] = {"off": [], "on": []}
    cpus: dict[str, list[float]] = {"off": [], "on": []}
    later: list[float] = []
    passages = 0
    # A warm-up (the source file and bytecode in the page cache), then each
    # pair in turn order, so that neither setting always goes first.
    run([*cli, "--db", str(work / f"{name}-warm.db"), "remember", "--jsonl", str(source)],
        {**base, "MEMORS_VECTORS": "off"})  # fmt: skip
    for n in range(runs):
        for setting in ("off", "on") if n % 2 == 0 else ("on", "off"):
            db = work / f"{name}-{setting}-{n}.db"
            env = {**base, "MEMORS_VECTORS": setting}
            wall, cpu = run([*cli, "--db", str(db), "remember", "--jsonl", str(source)], env)
            walls[setting].append(wall)
            cpus[setting].append(cpu)
            if setting == "on":  # every vector made before the next run (so none overlaps it)
                start = time.perf_counter()
                out = subprocess.run(
                    [*cli, "--db", str(db), "--json", "reindex", "--vectors"],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                later.append(time.perf_counter() - start)
                passages = json.loads(out.stdout)["vectors"]
    off, on = statistics.median(walls["off"]), statistics.median(walls["on"])
    ratio = on / off
    verdict = "ok" if ratio <= TARGET else "MISSED"
    label = f"{name}: {len(docs):,} documents, {passages:,} passages"
    print(f"\n{label}")
    print(f"  remember --jsonl, MEMORS_VECTORS=off   {off:8.2f} s wall  "
          f"{statistics.median(cpus['off']):7.2f} s CPU")  # fmt: skip
    print(f"  remember --jsonl, vectors on           {on:8.2f} s wall  "
          f"{statistics.median(cpus['on']):7.2f} s CPU   {ratio:.2f}x  <= {TARGET}x {verdict}")  # fmt: skip
    rate = passages / statistics.median(later) if later else 0
    print(f"  then every vector made (background run + reindex) "
          f"{statistics.median(later):8.1f} s  {rate:,.1f} passages/s")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each (default 3; median)")
    parser.add_argument("--passages", type=int, default=3000, help="prose paragraphs (3000)")
    parser.add_argument("--busy", action="store_true", help="beside a process that spins")
    parser.add_argument("--only", choices=["prose", "turns"], help="one corpus only")
    args = parser.parse_args()
    from memors_core import semantic

    os.environ.pop("MEMORS_VECTORS", None)  # (the package turned it off for the others)
    if semantic.unavailable():
        sys.exit(f"remember_speed: {semantic.unavailable()}")
    spinner = None
    if args.busy:
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        print(f"remember's speed, vectors off and on; median of {args.runs} runs; "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
              f"{', beside a spinning process' if args.busy else ''}")  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="memors-remember-") as tmp:
            if args.only in (None, "prose"):
                measure("prose", prose(args.passages), args.runs, Path(tmp))
            chat = turns() if args.only in (None, "turns") else []
            if chat:
                measure("turns", chat, args.runs, Path(tmp))
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


if __name__ == "__main__":
    main()
