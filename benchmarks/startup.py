"""Start-up cost of small commands, beside ``python -c pass`` (issue 19, point 1).

    python -m benchmarks.startup             # make bench / make bench-quick
    python -m benchmarks.startup --runs 21   # more runs, a steadier median

Each figure is the CPU time (user + system) of a child process, from
``os.wait4``, the median of ``--runs`` runs after one warm-up run (which
also writes the bytecode caches, as an installed package has them): CPU
time, not wall time, so that other work on the machine moves it little.
The reference is the same interpreter running ``python -c pass``.

Targets: ``--version`` at most 1.5x, ``search`` on a small store at most 3x,
also on a store whose passages have vectors (the ``semantic`` extra on:
a one-shot search ranks by words unless ``--mode`` asks for meaning);
``search --mode hybrid`` there, which loads the model, is measured beside
them (no target).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TARGETS = {"version": 1.5, "search": 3.0, "vectors": 3.0, "hybrid": None}


def cpu_ms(args: list[str], env: dict[str, str], runs: int) -> float:
    """Median CPU time of ``args`` as a child process, in milliseconds."""
    samples = []
    for i in range(runs + 1):
        proc = subprocess.Popen(
            args,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert proc.stderr is not None
        err = proc.stderr.read().decode()  # (read before waiting: a full pipe would block)
        proc.stderr.close()
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {err}")
        if i:  # the first run is the warm-up
            samples.append((usage.ru_utime + usage.ru_stime) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11, help="runs per figure (default 11)")
    args = parser.parse_args()
    script = Path(sys.executable).parent / "memors-mcp"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "memors_cli"]
    with tempfile.TemporaryDirectory(prefix="memors-startup-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(MEMORS_DB=str(Path(tmp) / "small.db"), MEMORS_LOG_LEVEL="warning")
        from memors_core import Memory

        with Memory.open(env["MEMORS_DB"]) as memory:
            for i in range(20):
                memory.remember(f"Raft elects a leader; node n{i} follows the leader of term {i}.")
        python = cpu_ms([sys.executable, "-c", "pass"], env, args.runs)
        figures = {
            "version": cpu_ms([*command, "--version"], env, args.runs),
            "search": cpu_ms([*command, "search", "leader"], env, args.runs),
        }
        from memors_core import semantic

        if not semantic.missing_packages():  # the same store with vectors, the extra on
            on = {**env, "MEMORS_VECTORS": "on"}
            os.environ["MEMORS_VECTORS"] = "on"
            with Memory.open(env["MEMORS_DB"], background_vectors=False) as memory:
                memory.reindex_vectors()
            figures["vectors"] = cpu_ms([*command, "search", "leader"], on, args.runs)
            figures["hybrid"] = cpu_ms(
                [*command, "search", "leader", "--mode", "hybrid"], on, args.runs
            )
    print(f"start-up CPU time (user + system), median of {args.runs} runs\n")
    print(f"{'figure':<34} {'value':>9}  {'reference':<22} {'ratio':>6}  target")
    print(f"{'python -c pass':<34} {python:>6.1f} ms  {'':<22} {'':>6}")
    labels = {
        "version": "memors-mcp --version",
        "search": "memors-mcp search (20 passages)",
        "vectors": "... with vectors, default",
        "hybrid": "... with vectors, --mode hybrid",
    }
    for name, value in figures.items():
        ratio = value / python
        target = TARGETS[name]
        verdict = (
            "" if target is None else f"<= {target}x " + ("ok" if ratio <= target else "MISSED")
        )
        print(
            f"{labels[name]:<34} {value:>6.1f} ms  {'python -c pass':<22} {ratio:>5.2f}x  {verdict}"
        )


if __name__ == "__main__":
    main()
