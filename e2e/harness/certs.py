"""The PKI of a throwaway control plane, generated with ``cryptography``.

Why: kube-apiserver only serves TLS and authenticates clients by certificate or token; we
need a CA, a serving certificate for loopback, a service-account key pair and client
certificates whose Organization carries the RBAC group (``system:masters`` for the admin).
Keys are ECDSA P-256 (fast to generate) except the service-account key, which is RSA
because every Kubernetes version accepts RS256 tokens.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=7)
_PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class CertPair:
    """A certificate and its private key, both PEM files on disk."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class ServiceAccountKeys:
    """The key pair the apiserver signs service-account tokens with."""

    private_key: Path
    public_key: Path


@dataclass(frozen=True)
class Pki:
    """Every file a control plane needs; all paths live under one directory."""

    ca: CertPair
    serving: CertPair
    service_account: ServiceAccountKeys
    clients: dict[str, CertPair]


def _write_key(key: _PrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        # Backdated so a clock a little behind still accepts the certificates.
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + _VALIDITY)
    )


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    sans: list[x509.GeneralName] | None = None,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def generate_pki(
    directory: Path,
    clients: dict[str, tuple[str, tuple[str, ...]]],
    service_ip: str = "10.0.0.1",
) -> Pki:
    """Write a fresh PKI into ``directory``.

    ``clients`` maps a file stem to (CommonName, Organizations): the apiserver takes CN as
    the user name and each O as a group.
    """
    directory.mkdir(parents=True, exist_ok=True)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("dirigent-e2e-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    ca = CertPair(directory / "ca.crt", directory / "ca.key")
    _write_cert(ca_cert, ca.cert)
    _write_key(ca_key, ca.key)

    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address(service_ip)),
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"),
        x509.DNSName("kubernetes.default.svc.cluster.local"),
    ]
    s_key, s_cert = _leaf(
        ca_key, ca_cert, _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans
    )
    serving = CertPair(directory / "serving.crt", directory / "serving.key")
    _write_cert(s_cert, serving.cert)
    _write_key(s_key, serving.key)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa = ServiceAccountKeys(directory / "sa.key", directory / "sa.pub")
    _write_key(sa_key, sa.private_key)
    sa.public_key.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )

    client_pairs: dict[str, CertPair] = {}
    for stem, (cn, orgs) in clients.items():
        c_key, c_cert = _leaf(ca_key, ca_cert, _name(cn, orgs), ExtendedKeyUsageOID.CLIENT_AUTH)
        pair = CertPair(directory / f"{stem}.crt", directory / f"{stem}.key")
        _write_cert(c_cert, pair.cert)
        _write_key(c_key, pair.key)
        client_pairs[stem] = pair

    return Pki(ca=ca, serving=serving, service_account=sa, clients=client_pairs)


def _load_ca(ca: CertPair) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{ca.key} is not the EC key generate_pki writes")
    return key, x509.load_pem_x509_certificate(ca.cert.read_bytes())


def issue(
    ca: CertPair,
    directory: Path,
    stem: str,
    subject: tuple[str, tuple[str, ...]],
    *,
    server_names: tuple[str, ...] = (),
) -> CertPair:
    """A leaf certificate signed by an existing CA (a node's client or serving certificate).

    ``subject`` is (CommonName, Organizations). With ``server_names`` (IP addresses or DNS
    names) the certificate is for serving TLS; without, for client authentication.
    """
    ca_key, ca_cert = _load_ca(ca)
    sans: list[x509.GeneralName] = []
    for name in server_names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    usage = ExtendedKeyUsageOID.SERVER_AUTH if sans else ExtendedKeyUsageOID.CLIENT_AUTH
    key, cert = _leaf(ca_key, ca_cert, _name(*subject), usage, sans or None)
    directory.mkdir(parents=True, exist_ok=True)
    pair = CertPair(directory / f"{stem}.crt", directory / f"{stem}.key")
    _write_cert(cert, pair.cert)
    _write_key(key, pair.key)
    return pair
