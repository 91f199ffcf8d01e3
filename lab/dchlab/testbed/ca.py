"""The testbed certificate authority and the NSS database Chromium trusts it through.

One CA (ECDSA P-256, key as PKCS#8 PEM) is created once and cached in
`.cache/ca/`; webreplay (and the object proxy) issue a leaf certificate per origin
from it. Inside the testbed `$DCH_CA` (and SSL_CERT_FILE / CURL_CA_BUNDLE) point at
the certificate.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import inspect
import os
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from dchlab.paths import cache_dir
from dchlab.testbed.errors import TestbedError

CERT_NAME = "ca.pem"
KEY_NAME = "ca.key"
# What the CA's key is for: signing leaf certificates and CRLs, and digital
# signatures; every other key usage stays off.
CA_KEY_USAGES = frozenset({"digital_signature", "key_cert_sign", "crl_sign"})


def key_usage(granted: frozenset[str]) -> x509.KeyUsage:
    """An `x509.KeyUsage` with the `granted` usages on and all others off (its
    constructor wants every one of its nine flags by keyword)."""
    flags = inspect.signature(x509.KeyUsage).parameters
    if unknown := granted - flags.keys():
        raise ValueError(f"not key usages: {', '.join(sorted(unknown))}")
    return x509.KeyUsage(**{flag: flag in granted for flag in flags})


def ensure_ca(directory: Path | str | None = None) -> tuple[Path, Path]:
    """Return (cert_path, key_path) of the testbed CA in `directory` (default
    `.cache/ca/`), creating it on first use. Safe against concurrent callers."""
    d = Path(directory) if directory is not None else cache_dir() / "ca"
    d.mkdir(parents=True, exist_ok=True)
    cert, key = d / CERT_NAME, d / KEY_NAME
    with open(d / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cert.exists() and key.exists():
            return cert, key
        pkey = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dchannel lab"),
                x509.NameAttribute(NameOID.COMMON_NAME, "dchannel testbed CA"),
            ]
        )
        now = dt.datetime.now(dt.UTC)
        ski = x509.SubjectKeyIdentifier.from_public_key(pkey.public_key())
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(pkey.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(key_usage(CA_KEY_USAGES), critical=True)
            .add_extension(ski, critical=False)
            .sign(pkey, hashes.SHA256())
        )
        key_tmp, cert_tmp = key.with_suffix(".tmp-key"), cert.with_suffix(".tmp-cert")
        fd = os.open(key_tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(
                pkey.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
        cert_tmp.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_tmp.replace(key)
        cert_tmp.replace(cert)
        return cert, key


def make_nss_db(directory: Path | str, ca_cert: Path | str, nickname: str = "dch") -> Path:
    """Create an NSS database in `directory` that trusts `ca_cert` for TLS servers.

    Chromium on Linux reads `$HOME/.pki/nssdb`: pass `<home>/.pki/nssdb` here and run
    Chromium with HOME=<home>. Returns the directory.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for cmd, step in (
        (["certutil", "-N", "-d", f"sql:{d}", "--empty-password"], "create NSS db"),
        (
            ["certutil", "-d", f"sql:{d}", "-A", "-t", "C,,", "-n", nickname, "-i", str(ca_cert)],
            "add CA to NSS db",
        ),
    ):
        if cmd[1] == "-N" and (d / "cert9.db").exists():
            continue
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        except FileNotFoundError as exc:
            raise TestbedError("certutil not found: apt-get install libnss3-tools") from exc
        if proc.returncode != 0:
            raise TestbedError(f"{step} failed: {' '.join(cmd)}: {proc.stderr.strip()}")
    return d


def copy_nss_db(directory: Path | str, ca_cert: Path | str) -> Path:
    """Like make_nss_db, from a template built once per CA certificate (in the temp dir,
    shared by processes): a file copy instead of two certutil runs per page load."""
    import hashlib
    import shutil
    import tempfile

    cert = Path(ca_cert).read_bytes()
    tag = hashlib.sha256(cert).hexdigest()[:16]
    template = Path(tempfile.gettempdir()) / f"dch-nssdb-{tag}"
    if not (template / "cert9.db").exists():
        tmp = Path(tempfile.mkdtemp(prefix=f"dch-nssdb-{tag}.", dir=template.parent))
        make_nss_db(tmp, ca_cert)
        try:
            tmp.rename(template)
        except OSError:  # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
    d = Path(directory)
    d.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template, d, dirs_exist_ok=True)
    return d
