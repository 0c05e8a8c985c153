"""TLS contexts from Kafka's ``ssl.*`` keys, for a listener's server side and for the
client side of a node's own connections (inter-broker, controller): keystores and
truststores as PEM files or strings, or PKCS12 files; JKS (Java's own format) is refused
with a clear error. Every key may be given per listener (``listener.name.<l>.<key>``)."""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from ottla.common.config import ConfigError

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

PEM_ALIAS = "kafka"
"""The alias Kafka gives the one entry of a PEM keystore (what its messages name)."""


class StoreLoadError(ConfigError):
    """A keystore or truststore file that cannot be read or opened: which file and of
    which type, for Kafka's "Failed to load ..." messages on a dynamic update."""

    def __init__(self, message: str, path: str, kind: str) -> None:
        super().__init__(message)
        self.path = path
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Keystore:
    """A listener's key and certificate chain (PEM, the key unencrypted), and the entry
    Kafka would see in it: its alias and its leaf certificate."""

    chain: bytes
    key: bytes
    alias: str
    certificate: x509.Certificate


@dataclass(frozen=True, slots=True)
class ServerTls:
    """A listener's TLS server side: its context, the keystore it serves and whether it
    trusts a truststore (what a dynamic update compares against)."""

    context: ssl.SSLContext
    keystore: Keystore
    has_truststore: bool


def server_tls(value: Callable[[str], object], listener: str) -> ServerTls:
    """The TLS server side of a listener from ``ssl.*`` keys as ``value`` gives them."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(context, list(value("ssl.enabled.protocols") or []), listener)
    keystore = _keystore(value, listener)
    _load_cert_chain(context, keystore.chain, keystore.key)
    trusted = _truststore(value, listener)
    if trusted:
        context.load_verify_locations(cadata=trusted)
    auth = str(value("ssl.client.auth") or "none").lower()
    modes = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
             "required": ssl.CERT_REQUIRED}
    if auth not in modes:
        raise ConfigError(f"Invalid value {auth} for configuration ssl.client.auth: "
                          "String must be one of: required, requested, none")
    if auth != "none" and not trusted:
        raise ConfigError(f"ssl.client.auth={auth} on listener {listener} needs a truststore "
                          "(ssl.truststore.location or ssl.truststore.certificates)")
    context.verify_mode = modes[auth]
    ciphers = [c for c in (value("ssl.cipher.suites") or []) if c]
    if ciphers:
        try:
            context.set_ciphers(":".join(ciphers))
        except ssl.SSLError as e:
            raise ConfigError(f"ssl.cipher.suites of listener {listener}: no cipher "
                              f"can be selected from {ciphers} (OpenSSL names)") from e
    return ServerTls(context, keystore, trusted is not None)


@dataclass(frozen=True, slots=True)
class ClientTls:
    """The TLS client side of a node's own connections: its context, the keystore it
    presents (None without mutual TLS) and whether it names a truststore."""

    context: ssl.SSLContext
    keystore: Keystore | None
    has_truststore: bool


def ssl_client_context(value: Callable[[str], object], where: str) -> ssl.SSLContext:
    """A TLS client context from ``ssl.*`` keys as ``value`` gives them (a node's config,
    or a tool's client properties; ``where`` names them in errors)."""
    return client_tls(value, where).context


def client_tls(value: Callable[[str], object], where: str) -> ClientTls:
    """The TLS client side from ``ssl.*`` keys as ``value`` gives them."""
    listener = where
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(context, list(value("ssl.enabled.protocols") or []), listener)
    trusted = _truststore(value, listener)
    if trusted:
        context.load_verify_locations(cadata=trusted)
    else:
        context.load_default_certs()
    context.check_hostname = str(value("ssl.endpoint.identification.algorithm") or "") \
        .lower() == "https"
    keystore = None
    if value("ssl.keystore.location") or value("ssl.keystore.certificate.chain"):
        # A client certificate only where one is configured (mutual TLS).
        keystore = _keystore(value, listener)
        _load_cert_chain(context, keystore.chain, keystore.key)
    return ClientTls(context, keystore, trusted is not None)


def _set_protocols(context: ssl.SSLContext, protocols: list[str], listener: str) -> None:
    unknown = [p for p in protocols if p not in _TLS_VERSIONS]
    if unknown or not protocols:
        raise ConfigError(f"ssl.enabled.protocols of listener {listener} must name TLSv1.2 "
                          f"and/or TLSv1.3, not {protocols}")
    versions = sorted(_TLS_VERSIONS[p] for p in protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _read(path: str, key: str, kind: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise StoreLoadError(f"{key}: cannot read {path}: {e.strerror}", path, kind) from e


def _password(value: Callable[[str], object], key: str) -> bytes | None:
    found = value(key)
    return str(found).encode() if found not in (None, "") else None


def _keystore(value: Callable[[str], object], listener: str) -> Keystore:
    """The listener's key and certificate chain."""
    kind = str(value("ssl.keystore.type") or "JKS").upper()
    location = value("ssl.keystore.location")
    chain, inline_key = value("ssl.keystore.certificate.chain"), value("ssl.keystore.key")
    key_password = _password(value, "ssl.key.password")
    if chain or inline_key:
        if not (chain and inline_key):
            raise ConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go "
                              "together")
        certificates = _certificates(str(chain).encode(), "ssl.keystore.certificate.chain")
        return Keystore(str(chain).encode(),
                        _unencrypted_key(str(inline_key).encode(), key_password),
                        PEM_ALIAS, certificates[0])
    if not location:
        raise ConfigError(f"Listener {listener} uses TLS but has no keystore "
                          "(ssl.keystore.location, or ssl.keystore.certificate.chain and "
                          "ssl.keystore.key)")
    path = str(location)
    data = _read(path, "ssl.keystore.location", kind)
    if kind == "PKCS12":
        try:
            store = pkcs12.load_pkcs12(data, _password(value, "ssl.keystore.password"))
        except ValueError as e:
            raise StoreLoadError(f"ssl.keystore.location {location}: not a PKCS12 keystore "
                                 f"this password opens ({e})", path, kind) from e
        if store.key is None or store.cert is None:
            raise StoreLoadError(f"ssl.keystore.location {location} holds no key and "
                                 "certificate", path, kind)
        leaf = store.cert.certificate
        pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in
                       [leaf, *(extra.certificate for extra in store.additional_certs)])
        alias = (store.cert.friendly_name or b"").decode(errors="replace")
        return Keystore(pem, store.key.private_bytes(serialization.Encoding.PEM,
                                                     serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()),
                        alias, leaf)
    if kind != "PEM":
        raise ConfigError(f"ssl.keystore.type {kind} is not supported: use PEM or PKCS12")
    try:
        certificates = _certificates(data, "ssl.keystore.location")
        key = _unencrypted_key(data, key_password)
    except ConfigError as e:
        raise StoreLoadError(str(e), path, kind) from e
    return Keystore(b"".join(c.public_bytes(serialization.Encoding.PEM)
                             for c in certificates), key, PEM_ALIAS, certificates[0])


def _unencrypted_key(pem: bytes, password: bytes | None) -> bytes:
    try:
        key = serialization.load_pem_private_key(pem, password)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"Cannot read the TLS private key ({e}); ssl.key.password "
                          "opens an encrypted one") from e
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _certificates(pem: bytes, key: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError as e:
        raise ConfigError(f"{key}: no PEM certificate found ({e})") from e


def _truststore(value: Callable[[str], object], listener: str) -> str | None:
    """The trusted certificates as PEM, or None if the listener names none."""
    inline = value("ssl.truststore.certificates")
    if inline:
        return "".join(c.public_bytes(serialization.Encoding.PEM).decode()
                       for c in _certificates(str(inline).encode(),
                                              "ssl.truststore.certificates"))
    location = value("ssl.truststore.location")
    if not location:
        return None
    kind = str(value("ssl.truststore.type") or "JKS").upper()
    path = str(location)
    data = _read(path, "ssl.truststore.location", kind)
    if kind == "PKCS12":
        try:
            store = pkcs12.load_pkcs12(data, _password(value, "ssl.truststore.password"))
        except ValueError as e:
            raise StoreLoadError(f"ssl.truststore.location {location}: not a PKCS12 store "
                                 f"this password opens ({e})", path, kind) from e
        certs = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certs.append(store.cert.certificate)
    elif kind == "PEM":
        try:
            certs = _certificates(data, "ssl.truststore.location")
        except ConfigError as e:
            raise StoreLoadError(str(e), path, kind) from e
    else:
        raise ConfigError(f"ssl.truststore.type {kind} is not supported: use PEM or PKCS12")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _load_cert_chain(context: ssl.SSLContext, certificate: bytes, key: bytes) -> None:
    """``load_cert_chain`` reads files only: the PEM goes through a private temporary
    file, removed at once."""
    fd, path = tempfile.mkstemp(prefix="ottla-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(key + b"\n" + certificate)
        try:
            context.load_cert_chain(path)
        except ssl.SSLError as e:
            raise ConfigError(f"The TLS key does not match its certificate ({e})") from e
    finally:
        os.unlink(path)
