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


ISSUER = "https://idp.test"


@pytest.fixture(scope="session")
def signing_key():
    """The identity provider's key: end users' tokens are signed with it."""
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def user_token(key, subject: str) -> str:
    import time

    import jwt

    claims = {"sub": subject, "iss": ISSUER, "aud": "toolgate", "exp": int(time.time()) + 300}
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": "test-key"})


@pytest.fixture(scope="session")
def keyed(tmp_path_factory: pytest.TempPathFactory, signing_key) -> Iterator[Served]:
    """A gateway that needs an API key (principal `agent`, every tool), and
    verifies end users' tokens against the test identity provider's key."""
    import json

    from jwt.algorithms import ECAlgorithm

    folder = tmp_path_factory.mktemp("keyed")
    digest = hashlib.sha256(API_KEY.encode()).hexdigest()
    jwk = json.loads(ECAlgorithm.to_jwk(signing_key.public_key()))
    (folder / "jwks.json").write_text(json.dumps({"keys": [{**jwk, "kid": "test-key", "alg": "ES256", "use": "sig"}]}))
    (folder / "toolgate.yaml").write_text(
        f"principals:\n  - name: agent\n    api_key_sha256: {digest}\n    tools: ['*']\n"
        f"users:\n  jwt: {{issuer: '{ISSUER}', audience: toolgate, jwks_file: jwks.json}}\n"
    )
    gateway = Served(["--config", "toolgate.yaml", "--catalog", str(CATALOG)], folder)
    yield gateway
    gateway.stop()
