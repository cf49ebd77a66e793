"""Test certificates made with the ``openssl`` command line, as Redis's utils/gen-test-certs.sh
makes them: a CA (``ca.crt``), a certificate it signed (``redis.crt``/``redis.key``, for the
servers and as the replicas' and clients' certificate), and ``stranger.crt``/``.key`` signed by
another CA (``other-ca.crt``), which must be refused."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(d: Path) -> Path:
    """Write the certificates into ``d``; returns ``d``."""
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2",
                 "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-subj", f"/O=pyrepl/CN={ca}",
                 cwd=d)
    for name, ca in (("redis", "ca"), ("stranger", "other-ca")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", "-subj", f"/O=pyrepl/CN={name}", cwd=d)
        _openssl("x509", "-req", "-sha256", "-days", "2", "-in", f"{name}.csr",
                 "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
                 "-out", f"{name}.crt", cwd=d)
    return d


def server_args(d: Path, port: int | None = None, **more: str) -> list[str]:
    """The command-line directives of a TLS-enabled server (tls-port when ``port``)."""
    args = ["--tls-cert-file", str(d / "redis.crt"), "--tls-key-file", str(d / "redis.key"),
            "--tls-ca-cert-file", str(d / "ca.crt")]
    if port is not None:
        args += ["--tls-port", str(port)]
    for k, v in more.items():
        args += [f"--{k.replace('_', '-')}", v]
    return args
