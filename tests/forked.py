"""``python ARGS`` run the way the tests run a user's script or command (an example, ``manage.py``, a
benchmark), in a process of its own forked from a server that imported Conveyor, its drivers and
Django once: the process starts in a few milliseconds of CPU instead of a new interpreter's 0.2-0.4 s
importing them again. The server is multiprocessing's forkserver, the one
``tests.helpers.racing_processes`` uses too (one per pytest process; it runs no test code and holds
no connection).

What the script sees is what ``python ARGS`` gives it: exactly the environment given, the working
directory, ``sys.argv``, ``sys.path`` (the script's folder, the working directory for ``-m``, or ``""``
for ``-c``; then ``$PYTHONPATH``; then the interpreter's own), a ``__main__`` of its own, empty standard
input, standard output and error that the caller reads back, the exit status (``SystemExit``'s code;
1, with the traceback on standard error, for an uncaught exception) and the interpreter's exit:
non-daemon threads joined, ``atexit`` handlers run, streams flushed. What differs: the modules the
server imported are there already (none of them reads the environment when imported), and
``multiprocessing.parent_process()`` is the server, not None.

Not for a test of how a process starts (what it imports, how long that takes) nor for a nested pytest
run (the server imported this suite's ``tests`` package): those run ``sys.executable`` itself.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import multiprocessing
import multiprocessing.context
import multiprocessing.process
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import types
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

#: What the server imports once: Conveyor, its engines and drivers, its command line, Django's
#: command machinery (none of it needs settings), and the modules whose functions the racing tests run
#: in other processes (``tests.helpers.racing_processes``).
PRELOAD = [
    "conveyor",
    "conveyor.engine.postgres",
    "conveyor.engine.sqlite",
    "conveyor.engine.mysql",
    "conveyor.cli.main",
    "conveyor.cli.start",
    "conveyor.testing",
    "django.core.management",
    "django.db.models",
    "tests.conformance.unique_procs",
    "tests.conformance.workflow_procs",
    "tests.sqlite_procs",
]


def server() -> multiprocessing.context.ForkServerContext:
    """The context whose processes are forked from the server that imported ``PRELOAD``."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # taken when the server starts, the first time
    return context


@cache
def _interpreter_path() -> list[str]:
    """``sys.path`` of a new interpreter without ``$PYTHONPATH``, less its first entry (the script's)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    path: list[str] = json.loads(done.stdout)
    return path


def run_python(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
    timeout=timeout)``, the process forked from the server (see the module's doc). ``args`` start
    with a script's path, ``-m MODULE`` or ``-c CODE``."""
    with tempfile.TemporaryDirectory(prefix="forked-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        started = start_python(args, cwd=cwd, env=env, output=out, errors=err)
        try:
            code = started.wait(timeout)
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait()
            raise subprocess.TimeoutExpired(
                [sys.executable, *args], timeout, _read(out), _read(err)
            ) from None
        return subprocess.CompletedProcess([sys.executable, *args], code, _read(out), _read(err))


def start_python(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str], output: Path, errors: Path | None = None
) -> Started:
    """``python ARGS`` started as ``run_python`` runs it, its standard output appended to ``output``
    and its standard error to ``errors`` (the same file when None); the process, to wait for or
    signal as a ``subprocess.Popen``."""
    process = server().Process(
        target=_main,
        args=(list(args), str(cwd), dict(env), str(output), str(errors or output), _interpreter_path()),
        name=f"python {' '.join(args)[:60]}",
    )
    process.start()
    return Started(process)


class Started:
    """A process ``start_python`` started: what a test does with a ``subprocess.Popen`` (``pid``,
    ``returncode``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``), and ``exited`` to
    wait for it on an event loop. A process killed by a signal has its negative number as status."""

    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self._process = process
        pid = process.pid
        assert pid is not None
        self.pid: int = pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self._process.name, timeout or 0.0)
        return code

    async def exited(self) -> int:
        """Wait on the event loop until the process has exited (its sentinel is readable); its status."""
        if self._process.exitcode is None:
            loop = asyncio.get_running_loop()
            ended: asyncio.Future[None] = loop.create_future()
            sentinel = self._process.sentinel

            def readable() -> None:
                if not ended.done():
                    ended.set_result(None)

            loop.add_reader(sentinel, readable)
            try:
                await ended
            finally:
                loop.remove_reader(sentinel)
        return self.wait()

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:  # as Popen: never a signal to a reaped pid
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _main(
    args: list[str], cwd: str, env: dict[str, str], out: str, err: str, interpreter_path: list[str]
) -> None:
    """In the forked process: become ``python ARGS`` and exit as it would."""
    code = 1
    try:
        _become(cwd, env, out, err)
        code = _run(args, cwd, env, interpreter_path)
        # The interpreter's exit, in its order: wait for the threads that are not daemons (and run
        # what concurrent.futures registered there), then the atexit handlers.
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _become(cwd: str, env: dict[str, str], out: str, err: str) -> None:
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    written = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    targets = [(0, os.devnull, os.O_RDONLY), (1, out, written)] + ([(2, err, written)] if err != out else [])
    for fd, path, flags in targets:
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    if err == out:
        os.dup2(1, 2)
    # New text streams on those descriptors, as an interpreter whose streams are not a terminal
    # has: standard output block-buffered, standard error line-buffered. (sys.__stdout__ and the
    # like, the server's, write to the same descriptors.)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, buffering=1, errors="backslashreplace")  # noqa: SIM115


def _run(args: list[str], cwd: str, env: dict[str, str], interpreter_path: list[str]) -> int:
    """Run ``python ARGS``'s main module; its exit status."""
    python_path = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    option, rest = args[0], args[1:]
    if option == "-m":
        first, sys.argv = cwd, ["-m", *rest[1:]]  # run_module puts the module's file first
    elif option == "-c":
        first, sys.argv = "", ["-c", *rest[1:]]
    else:
        first, sys.argv = str(Path(option).resolve().parent), list(args)
    sys.path[:] = [first, *python_path, *interpreter_path]
    try:
        if option == "-m":
            runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
        elif option == "-c":
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(rest[0], "<string>", "exec"), main.__dict__)
        else:
            runpy.run_path(option, run_name="__main__")
    except SystemExit as exc:
        return _exit_status(exc)
    except BaseException as exc:
        _print_traceback(exc)
        return 1
    return 0


def _print_traceback(exc: BaseException) -> None:
    """What the interpreter prints for an uncaught ``exc``: the traceback from the script's code on,
    without this module's and runpy's frames above it."""
    tb = exc.__traceback__
    while tb is not None and (
        tb.tb_frame.f_code.co_filename == __file__ or "runpy" in tb.tb_frame.f_code.co_filename
    ):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _exit_status(exc: SystemExit) -> int:
    """The status the interpreter exits with for ``exc`` (a message is printed, and gives 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1
