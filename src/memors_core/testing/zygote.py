"""The real CLI in a process of its own, without paying for Python's start.

:func:`memors_core.testing.run_cli` runs ``python -m memors_cli`` once per
call. Starting the interpreter and importing the CLI, the store and its
engines is most of a short command's cost (0.2-0.4 s of CPU), and the
suite makes well over a thousand such calls per run. A *zygote* is one
process per test process that has imported those modules and done nothing
else; for each call it forks a child that runs the command:

- the child is a real process: its own environment, working directory,
  standard streams (files here), exit status, signals and process id;
- it runs ``memors_cli`` as ``python -m memors_cli`` would (:mod:`runpy`,
  as ``__main__``, ``sys.argv`` and ``sys.path[0]`` set the same way), then
  the ``atexit`` handlers, then exits with the command's status;
- a call whose environment changes how Python itself starts (a ``PYTHON*``
  or locale variable that differs from the zygote's, such as the
  ``PYTHONPATH`` of :func:`~memors_core.testing.plugin_env`) runs in a fresh
  interpreter instead, and so does every call under ``MEMORS_TEST_CLI=spawn``.

The zygote runs no thread and opens no store, so a fork of it holds no lock
and no connection. It leaves when its test process closes its standard
input (or dies).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: ``MEMORS_TEST_CLI=spawn``: every call starts a fresh interpreter.
SETTING = "MEMORS_TEST_CLI"

#: What a command may import, imported once in the zygote: every module of
#: these packages (but their ``__main__``), and these libraries (a missing
#: extra is skipped). Anything else the child imports itself, as a fresh
#: run would (the semantic extra's model, for one).
PACKAGES = ("memors_cli", "memors_core", "memors_mcp", "memors_kinds")
LIBRARIES = ("numpy", "psycopg", "psycopg_pool")


def _starts_python_differently(key: str) -> bool:
    return key.startswith(("PYTHON", "LC_")) or key in {"LANG", "LANGUAGE"}


def _python_settings(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if _starts_python_differently(k)}


# --- the test process's side -------------------------------------------------------------


class Zygote:
    """A zygote of this process: :meth:`run` is :func:`subprocess.run` of
    ``python -m memors_cli ARGS`` with its output captured as text."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="memors-zygote-")
        self._address = os.path.join(self._dir, "socket")
        self._python = _python_settings(os.environ)  # how the zygote's Python started
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__, self._address],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._proc.stdout is not None
        ready = self._proc.stdout.readline()
        if ready.strip() != b"ready":
            raise RuntimeError(f"the CLI's zygote did not start (it said {ready!r})")
        self._calls = 0
        self._lock = threading.Lock()

    def serves(self, env: Mapping[str, str]) -> bool:
        """Whether a call with this environment can be forked from the zygote."""
        return self._proc.poll() is None and _python_settings(env) == self._python

    def run(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        input: str | None,
        cwd: str | os.PathLike[str] | None,
        timeout: float,
    ) -> subprocess.CompletedProcess[str]:
        encoding = locale.getpreferredencoding(False)
        with self._lock:
            self._calls += 1
            base = os.path.join(self._dir, str(self._calls))
        request: dict[str, Any] = {
            "args": list(args),
            "env": dict(env),
            "cwd": os.path.abspath(cwd if cwd is not None else os.getcwd()),
            "stdin": None,
            "stdout": base + ".out",
            "stderr": base + ".err",
        }
        if input is not None:
            request["stdin"] = base + ".in"
            Path(request["stdin"]).write_bytes(input.encode(encoding))
        cmd = [sys.executable, "-m", "memors_cli", *args]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(self._address)
            conn.sendall(json.dumps(request).encode() + b"\n")
            reply = conn.makefile("rb")
            pid = int(json.loads(reply.readline())["pid"])
            conn.settimeout(timeout)
            try:
                line = reply.readline()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                out, err = (_read(request[k], encoding) for k in ("stdout", "stderr"))
                self._cleanup(request)
                raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
            if not line:
                raise RuntimeError("the CLI's zygote went away during a call")
            code = int(json.loads(line)["code"])
        out, err = (_read(request[k], encoding) for k in ("stdout", "stderr"))
        self._cleanup(request)
        return subprocess.CompletedProcess(cmd, code, out, err)

    @staticmethod
    def _cleanup(request: Mapping[str, Any]) -> None:
        for key in ("stdin", "stdout", "stderr"):
            path = request[key]
            if path is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def close(self) -> None:
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a stuck zygote
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        with contextlib.suppress(OSError):
            os.unlink(self._address)
            os.rmdir(self._dir)


def _read(path: str, encoding: str) -> str:
    # As subprocess.run(text=True) reads a pipe: decoded, newlines universal.
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return ""
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


_zygote: Zygote | None = None
_zygote_pid = 0
_start_lock = threading.Lock()


def zygote_for(env: Mapping[str, str]) -> Zygote | None:
    """This process's zygote when a call with ``env`` (the call's whole
    environment) can use it (started on first use), else None: run that call
    in a fresh interpreter."""
    global _zygote, _zygote_pid
    if env.get(SETTING, "").strip().lower() == "spawn":
        return None
    with _start_lock:
        if _zygote is None or _zygote_pid != os.getpid():
            _zygote = Zygote()
            _zygote_pid = os.getpid()
            atexit.register(_zygote.close)
        zygote = _zygote
    return zygote if zygote.serves(env) else None


# --- the zygote's side ------------------------------------------------------------------


def _preload() -> None:
    import pkgutil

    names = list(LIBRARIES)
    for top in PACKAGES:
        package = importlib.import_module(top)
        names += [
            found.name
            for found in pkgutil.walk_packages(package.__path__, f"{top}.")
            if not found.name.endswith(".__main__")
        ]
    for name in names:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def serve(address: str) -> None:
    """The zygote's loop: a request per connection, a child per request."""
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    # Handlers are reaped by the kernel; each handler waits for its own child.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "call")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
    while True:
        for key, _ in selector.select():
            if key.data == "parent":  # the test process closed our stdin, or died
                if not os.read(sys.stdin.fileno(), 4096):
                    listener.close()
                    return
                continue
            conn, _ = listener.accept()
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                selector.close()
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _handle(conn)  # never returns
            conn.close()


def _handle(conn: socket.socket) -> None:
    code = 1
    try:
        request = json.loads(conn.makefile("rb").readline())
        pid = os.fork()
        if pid == 0:
            conn.close()
            _run(request)  # never returns
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        conn.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        code = 0
    except BaseException:  # pragma: no cover - the test process sees the closed socket
        traceback.print_exc()
    finally:
        os._exit(code)


def _reopen(fd: int, like: object, mode: str) -> io.TextIOWrapper:
    raw = io.FileIO(fd, mode, closefd=False)
    buffered: Any = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(
        buffered,
        encoding=getattr(like, "encoding", None),
        errors=getattr(like, "errors", None),
        line_buffering=False,
        write_through=mode == "w" and fd == 2,
    )


def _run(request: Mapping[str, Any]) -> None:
    """In the child: become ``python -m memors_cli ARGS`` and exit with its status."""
    import runpy

    code = 1
    try:
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(request["env"])
        stdin = request["stdin"] or os.devnull
        for fd, path, flags in (
            (0, stdin, os.O_RDONLY),
            (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
            (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        ):
            opened = os.open(str(path), flags, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = _reopen(0, sys.__stdin__, "r")
        sys.stdout = _reopen(1, sys.__stdout__, "w")
        sys.stderr = _reopen(2, sys.__stderr__, "w")
        sys.path[0] = os.getcwd()
        sys.argv = ["-m", *request["args"]]
        code = 0
        try:
            runpy.run_module("memors_cli", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = _exit_status(exc.code)
        except BaseException:
            traceback.print_exc()
            code = 1
        # As the interpreter ends: wait for the threads that are not daemons,
        # then the atexit handlers.
        with contextlib.suppress(Exception):
            threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    finally:
        os._exit(code)


def _exit_status(value: object) -> int:
    # What the interpreter does with SystemExit's argument.
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    with contextlib.suppress(Exception):
        print(value, file=sys.stderr)
    return 1


if __name__ == "__main__":
    serve(sys.argv[1])
