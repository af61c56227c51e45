"""``memors-mcp serve --http`` as a real process on an ephemeral loopback
port, for tests, benchmarks and scripts that talk to the server as a client
would (the MCP endpoint, ``/metrics``, the web view)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

_SERVING = re.compile(r"serving MCP at http://127\.0\.0\.1:(\d+)/mcp")


class ServerProcess:
    """The server on ``db`` (``args`` go after ``serve --http --port 0``), up
    and answering once constructed; ``stop()`` (or the ``with`` block's end)
    ends it. ``env`` is the whole environment (default: this process's,
    with ``MEMORS_DB`` set to ``db`` and no ``MEMORS_HTTP_TOKEN``)."""

    def __init__(
        self, db: str | os.PathLike[str], *args: str, env: dict[str, str] | None = None
    ) -> None:
        if env is None:
            env = {**os.environ, "MEMORS_DB": str(db)}
            env.pop("MEMORS_HTTP_TOKEN", None)
        self.db = db if isinstance(db, str) else Path(db)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memors_cli", "serve", "--http", "--port", "0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.stderr_lines: list[str] = []
        self.stdout_text = ""
        found = threading.Event()
        self.port = 0

        def drain_stderr() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr_lines.append(line)
                m = _SERVING.search(line)
                if m:
                    self.port = int(m.group(1))
                    found.set()
            found.set()

        def drain_stdout() -> None:
            assert self.proc.stdout is not None
            self.stdout_text = self.proc.stdout.read()

        threading.Thread(target=drain_stderr, daemon=True).start()
        threading.Thread(target=drain_stdout, daemon=True).start()
        if not found.wait(60) or not self.port:
            self.stop()
            raise RuntimeError(f"server did not start: {''.join(self.stderr_lines)}")
        self._wait_ready()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 120  # (a wait for start-up, generous for a loaded machine)
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.base}/metrics", timeout=2).close()
                return
            except urllib.error.HTTPError:
                return  # answering (401 when a token is required): ready
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("server never answered")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        time.sleep(0.05)  # let the drain threads take the last lines
        return self.proc.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["ServerProcess"]
