"""The real `toolgate` binary on a free port, for every test of the client."""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CATALOG = REPO / "clients" / "testdata" / "catalog.yaml"
API_KEY = "test-key-for-the-python-client"


def binary() -> str:
    path = Path(os.environ.get("TOOLGATE_BIN", REPO / "target" / "debug" / "toolgate"))
    if not path.exists():
        pytest.fail(f"no toolgate binary at {path}: build it (cargo build) or set TOOLGATE_BIN")
    return str(path)


class Served:
    """A running gateway and what it logged."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [binary(), "serve", "--listen", "127.0.0.1:0", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: list[str] = []
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            if "toolgate listening on " in line:
                self.addr = line.split("toolgate listening on ")[1].split(" ")[0]
                break
        else:
            raise RuntimeError("toolgate did not start:\n" + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)


@pytest.fixture(scope="session")
def served() -> Iterator[Served]:
    gateway = Served(["--catalog", str(CATALOG)], HERE)
    yield gateway
    gateway.stop()


@pytest.fixture(scope="session")
def addr(served: Served) -> str:
    return served.addr


@pytest.fixture(scope="session")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A gateway that needs an API key (principal `agent`, every tool)."""
    folder = tmp_path_factory.mktemp("keyed")
    digest = hashlib.sha256(API_KEY.encode()).hexdigest()
    (folder / "toolgate.yaml").write_text(
        f"principals:\n  - name: agent\n    api_key_sha256: {digest}\n    tools: ['*']\n"
    )
    gateway = Served(["--config", "toolgate.yaml", "--catalog", str(CATALOG)], folder)
    yield gateway
    gateway.stop()
