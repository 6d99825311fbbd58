"""Real ``conveyor start`` processes for the tests where dying matters (SIGKILL leaves no chance to
clean up): started on a test's database, every one killed on the way out. Each is the installed
script run in a process of its own forked from a server that imported Conveyor once
(``tests.forked``), not a new interpreter importing it again."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tests import forked

ROOT = Path(__file__).resolve().parent.parent
CONVEYOR = Path(sys.executable).with_name("conveyor")


@dataclass
class NodeProcess:
    process: forked.Started
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def owns(self, node: str | None) -> bool:
        """Whether ``node`` is this process's default node name (``host-pid-random``)."""
        return node is not None and node.rsplit("-", 2)[-2] == str(self.pid)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def describe(nodes: Sequence[NodeProcess]) -> str:
    return "\n".join(f"--- node pid {n.pid} (exit {n.process.returncode}):\n{n.output()}" for n in nodes)


def node_env(heartbeat: float, producer_timeout: float) -> dict[str, str]:
    """Settings for nodes a test's own node watches: fast heartbeats, and no leadership (the test's
    node leads: it rescues, sweeps and prunes)."""
    return {
        "CONVEYOR_LEADERSHIP": "false",
        "CONVEYOR_HEARTBEAT_INTERVAL": str(heartbeat),
        "CONVEYOR_PRODUCER_TIMEOUT": str(producer_timeout),
    }


@asynccontextmanager
async def node_processes(
    dsn: str, directory: Path, count: int, env: dict[str, str], *options: str
) -> AsyncIterator[list[NodeProcess]]:
    """``count`` ``conveyor start --dsn DSN OPTIONS`` processes importing ``tests.cluster_jobs``,
    polling every 0.2 s, with this process's environment less its ``CONVEYOR_`` settings, plus
    ``env``; every one is killed on the way out."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")} | env
    nodes: list[NodeProcess] = []
    try:
        for i in range(count):
            log = directory / f"node-{i}-{uuid.uuid4().hex[:6]}.log"
            command = [str(CONVEYOR), "start", "--dsn", dsn, *options, "--import", "tests.cluster_jobs"]
            command += ["--poll-interval", "0.2", "--shutdown-grace", "1"]
            process = forked.start_python(command, cwd=ROOT, env=environ, output=log)
            nodes.append(NodeProcess(process, log))
        yield nodes
    finally:
        for node in nodes:
            if node.process.returncode is None:
                with suppress(ProcessLookupError):
                    node.process.kill()
        for node in nodes:
            with suppress(Exception):
                await asyncio.wait_for(node.process.exited(), 10)
