"""TLS to the gateway: a CA made here with openssl, the server's certificate
for 127.0.0.1, and the client trusting that CA (or not)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import CATALOG, Served
from toolgate import TLS, Gateway, GatewayUnavailable


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_gateway(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("tls")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=folder)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=toolgate",
            "-keyout", "server.key", "-out", "server.csr", cwd=folder)
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "1", "-extfile", "san.ext", "-out", "server.pem", cwd=folder)
    (folder / "toolgate.yaml").write_text("tls: {cert: server.pem, key: server.key}\n")
    served = Served(["--config", "toolgate.yaml", "--catalog", str(CATALOG)], folder)
    yield served, folder
    served.stop()


def test_tls_with_the_servers_ca(tls_gateway) -> None:
    served, folder = tls_gateway
    with Gateway(served.addr, tls=TLS(ca=folder / "ca.pem")) as gw:
        assert gw.execute("echo", {"over": "tls"}).result == {"over": "tls"}
    with Gateway(f"https://{served.addr}", tls=TLS(ca=(folder / "ca.pem").read_bytes())) as gw:
        assert gw.execute("echo", "{}").ok


def test_an_untrusted_certificate_or_plaintext_is_refused(tls_gateway) -> None:
    served, _ = tls_gateway
    with Gateway(f"https://{served.addr}", timeout=3) as untrusted:  # the system's roots
        with pytest.raises(GatewayUnavailable, match=f"cannot reach the gateway at https://{served.addr}"):
            untrusted.execute("echo", "{}")
    with Gateway(served.addr, timeout=3) as plaintext:
        with pytest.raises(GatewayUnavailable, match="this port speaks TLS"):
            plaintext.execute("echo", "{}")
