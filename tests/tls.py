"""TLS material made at test time (never committed keys): a CA, server certificates for
127.0.0.1 and client certificates with a chosen distinguished name, as PEM files and as
PKCS12 keystores."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

_KEY_CURVE = ec.SECP256R1()


def _name(**parts: str) -> x509.Name:
    oids = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME,
            "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "CN": NameOID.COMMON_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in parts.items()])


@dataclass(frozen=True)
class Issued:
    """A key and its certificate, written as PEM files."""

    key_path: Path
    cert_path: Path
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def pem(self) -> bytes:
        """Key and certificate in one PEM file (Kafka's PEM keystore)."""
        return self.key_path.read_bytes() + self.cert_path.read_bytes()

    def pkcs12(self, path: Path, password: str, ca: x509.Certificate) -> Path:
        path.write_bytes(pkcs12.serialize_key_and_certificates(
            b"ottla", self.key, self.cert, [ca],
            serialization.BestAvailableEncryption(password.encode())))
        return path


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "Ottla Test CA") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(_KEY_CURVE)
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(O="Ottla tests", CN=name)
        self.cert = (x509.CertificateBuilder()
                     .subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key())
                     .serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .sign(self.key, hashes.SHA256()))
        self.cert_path = directory / "ca.pem"
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, file_name: str, subject: x509.Name, server: bool) -> Issued:
        key = ec.generate_private_key(_KEY_CURVE)
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder()
                   .subject_name(subject).issuer_name(self.cert.subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1)))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.DNSName("localhost")]), False)
        cert = builder.sign(self.key, hashes.SHA256())
        key_path = self.directory / f"{file_name}.key"
        cert_path = self.directory / f"{file_name}.pem"
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return Issued(key_path, cert_path, key, cert)

    def server(self, file_name: str = "server") -> Issued:
        return self.issue(file_name, _name(O="Ottla tests", CN="localhost"), server=True)

    def client(self, file_name: str, **dn: str) -> Issued:
        return self.issue(file_name, _name(**dn), server=False)
