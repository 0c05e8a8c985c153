"""What a listener's security protocol asks of its connections, built from Kafka's keys.

PLAINTEXT: nothing, every client is ``User:ANONYMOUS``. SSL: a TLS server context from
``ssl.keystore.*``/``ssl.truststore.*`` (PEM files or strings, or PKCS12), with
``ssl.client.auth`` deciding whether clients present certificates; a client's principal
is its certificate's distinguished name through ``ssl.principal.mapping.rules``.
SASL_PLAINTEXT and SASL_SSL: a ``SaslAuthenticator`` per connection over the listener's
``sasl.enabled.mechanisms`` (PLAIN against the JAAS users, SCRAM against the credentials
in the metadata log, and against its delegation tokens with ``tokenauth=true``). Every
key may be given for one listener as ``listener.name.<listener>.<key>`` (and SASL's JAAS
configuration per mechanism as ``listener.name.<listener>.<mechanism>.sasl.jaas.config``),
as in Kafka.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509

from ottla.client.security import client_security
from ottla.common.config import ConfigError
from ottla.common.server_config import KafkaConfig, Listener
from ottla.metadata.image import MetadataImage
from ottla.protocol.requests import ANONYMOUS, Principal
from ottla.security.authorizer import (
    STANDARD_AUTHORIZER,
    StandardAuthorizer,
    authorizer_configured,
)
from ottla.security.delegation_token import TokenCredentials
from ottla.security.jaas import JaasError, parse_jaas_config, plain_users
from ottla.security.oauthbearer import (
    OAuthBearerServer,
    TokenValidator,
    jwt_validator,
    unsecured_validator,
)
from ottla.security.plain import PlainServer
from ottla.security.sasl import Mechanism, SaslAuthenticator, SaslServer
from ottla.security.scram import (
    ScramCredential,
    ScramMechanism,
    ScramServer,
    TokenOwner,
)
from ottla.security.ssl_factory import SslFactory, listener_values
from ottla.security.ssl_principal import SslPrincipalMapper
from ottla.server.jwks import JwksKeys

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
VALIDATOR_HANDLER = ("org.apache.kafka.common.security.oauthbearer."
                     "OAuthBearerValidatorCallbackHandler")
"""Kafka's secured OAUTHBEARER validator (signed JWTs against a JWKS); without it (or a
JWKS URL) a listener takes Kafka's default, the unsecured validator."""
"""What a SASL listener may enable."""


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """How one listener's connections are secured and who their clients are."""

    protocol: str
    ssl_context: ssl.SSLContext | None = None
    new_authenticator: Callable[[], SaslAuthenticator] | None = None
    principal_mapper: SslPrincipalMapper | None = None
    ssl_factory: SslFactory | None = None
    """What a dynamic keystore or truststore update replaces (TLS listeners)."""

    def tls_principal(self, ssl_object: ssl.SSLObject | None) -> Principal:
        """The principal of a TLS client: its certificate's DN through the mapping rules,
        ANONYMOUS without a certificate (as Kafka's DefaultKafkaPrincipalBuilder)."""
        if ssl_object is None or self.principal_mapper is None:
            return ANONYMOUS
        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            return ANONYMOUS
        subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
        return Principal("User", self.principal_mapper.name(subject))


PLAINTEXT = ListenerSecurity("PLAINTEXT")


def listener_security(config: KafkaConfig, listener: Listener,
                      image: Callable[[], MetadataImage]) -> ListenerSecurity:
    protocol = listener.security_protocol
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    context = mapper = factory = None
    if protocol in ("SSL", "SASL_SSL"):
        inter_broker = config["inter.broker.listener.name"] or \
            config["security.inter.broker.protocol"]
        factory = SslFactory(listener_values(config, listener.name), listener.name,
                             verifiable_using_truststore="broker" in config.roles
                             and listener.name == inter_broker)
        context = factory.listener_context
        if protocol == "SSL":
            mapper = SslPrincipalMapper(
                config.listener_value(listener.name, "ssl.principal.mapping.rules"))
    authenticator = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        authenticator = _authenticators(config, listener.name, image)
    return ListenerSecurity(protocol, context, authenticator, mapper, factory)


def _authenticators(config: KafkaConfig, listener: str, image: Callable[[], MetadataImage]
                    ) -> Callable[[], SaslAuthenticator]:
    enabled = list(config.listener_value(listener, "sasl.enabled.mechanisms") or [])
    unsupported = [m for m in enabled if m not in SASL_MECHANISMS]
    if unsupported:
        raise ConfigError(f"SASL mechanisms {', '.join(unsupported)} of listener {listener} "
                          f"are not supported (sasl.enabled.mechanisms may name "
                          f"{', '.join(SASL_MECHANISMS)})")
    if not enabled:
        raise ConfigError(f"Listener {listener} is SASL but sasl.enabled.mechanisms is empty")
    mechanisms: dict[str, Mechanism] = {}
    token_credentials = TokenCredentials(config["delegation.token.secret.key"])

    def token_owner(token_id: str) -> TokenOwner | None:
        """A delegation token's owner (KIP-48), while the token exists and tokens are
        enabled on this node."""
        token = image().delegation_tokens.get(token_id)
        if token is None or token_credentials.secret_key is None:
            return None
        return TokenOwner(token.owner, token.expiry_timestamp)

    for name in enabled:
        if name == "PLAIN":
            jaas = config.sasl_jaas_config(listener, name)
            if not jaas:
                raise ConfigError(f"SASL/PLAIN on listener {listener} needs the users in "
                                  f"listener.name.{listener.lower()}.plain.sasl.jaas.config")
            try:
                users = plain_users(parse_jaas_config(jaas))
            except JaasError as e:
                raise ConfigError(f"listener.name.{listener.lower()}.plain.sasl.jaas.config: "
                                  f"{e}") from e
            mechanisms[name] = Mechanism(lambda users=users: PlainServer(users))
        elif name == "OAUTHBEARER":
            validate = _oauthbearer_validator(config, listener)
            mechanisms[name] = Mechanism(lambda validate=validate: OAuthBearerServer(validate))
        else:
            scram = ScramMechanism.from_name(name)

            def lookup(user: str, token: bool, scram: ScramMechanism = scram
                       ) -> ScramCredential | None:
                if not token:
                    return image().scram_credential(scram, user)
                tokens = image().delegation_tokens
                found = tokens.get(user)
                return None if found is None else \
                    token_credentials.credential(scram, found, lambda: list(tokens))
            mechanisms[name] = Mechanism(
                lambda scram=scram, lookup=lookup: ScramServer(scram, lookup,
                                                               token_owner=token_owner),
                principal_of=_scram_principal)
    reauth_ms = config["connections.max.reauth.ms"] or 0
    return lambda: SaslAuthenticator(mechanisms, reauth_ms)


def _scram_principal(server: SaslServer) -> Principal:
    """A SCRAM user, or the owner of the delegation token it authenticated with."""
    assert isinstance(server, ScramServer) and server.principal is not None
    return server.principal


def _oauthbearer_validator(config: KafkaConfig, listener: str) -> TokenValidator:
    def value(key: str) -> object:
        prefixed = f"listener.name.{listener.lower()}.oauthbearer.{key}"
        if prefixed in config.originals:
            return config.originals[prefixed]
        return config.listener_value(listener, key)

    def now_ms() -> int:
        return int(time.time() * 1000)

    url = value("sasl.oauthbearer.jwks.endpoint.url")
    handler = str(value("sasl.server.callback.handler.class") or "")
    if url or handler == VALIDATOR_HANDLER:
        if not url:
            raise ConfigError(f"OAUTHBEARER on listener {listener} with {VALIDATOR_HANDLER} "
                              "needs sasl.oauthbearer.jwks.endpoint.url")
        audience = value("sasl.oauthbearer.expected.audience") or []
        if isinstance(audience, str):
            audience = [a.strip() for a in audience.split(",") if a.strip()]
        return jwt_validator(
            JwksKeys(str(url), int(str(value("sasl.oauthbearer.jwks.endpoint.refresh.ms")
                                       or 3_600_000))), now_ms,
            audience=list(audience), issuer=str(value("sasl.oauthbearer.expected.issuer"))
            if value("sasl.oauthbearer.expected.issuer") else None,
            sub_claim=str(value("sasl.oauthbearer.sub.claim.name") or "sub"),
            scope_claim=str(value("sasl.oauthbearer.scope.claim.name") or "scope"),
            skew_ms=1000 * int(str(value("sasl.oauthbearer.clock.skew.seconds") or 30)))
    options: dict[str, str] = {}
    jaas = config.sasl_jaas_config(listener, "OAUTHBEARER")
    if jaas:
        try:
            for module in parse_jaas_config(jaas):
                options.update(module.options)
        except JaasError as e:
            raise ConfigError(f"The JAAS configuration of OAUTHBEARER on {listener}: {e}") \
                from e
    return unsecured_validator(
        now_ms, principal_claim=options.get("unsecuredValidatorPrincipalClaimName", "sub"),
        scope_claim=options.get("unsecuredValidatorScopeClaimName", "scope"),
        required_scope=options.get("unsecuredValidatorRequiredScope", "").split(),
        skew_ms=int(options.get("unsecuredValidatorAllowableClockSkewMs", "0")))


def check_security(config: KafkaConfig) -> None:
    """Build every listener's security and the node's own client side once, before the
    node starts, so that a configuration that cannot work stops it with its reason
    (``ConfigError``) rather than halfway through binding its listeners."""
    for listener in config.listeners:
        listener_security(config, listener, MetadataImage)
    inter_broker = config["inter.broker.listener.name"] or \
        config["security.inter.broker.protocol"]
    if "broker" in config.roles:
        client_security(config, inter_broker, "sasl.mechanism.inter.broker.protocol")
    controllers = config.controller_listener_names
    client_security(config, controllers[0] if controllers else None,
                    "sasl.mechanism.controller.protocol")
    if authorizer_configured(config):
        check_authorizer(config)


def check_authorizer(config: KafkaConfig) -> None:
    """``authorizer.class.name`` must name Kafka's StandardAuthorizer (the one Ottla
    has), and ``super.users`` must be principals (Kafka's node fails to start else)."""
    name = str(config["authorizer.class.name"]).strip()
    if name != STANDARD_AUTHORIZER:
        raise ConfigError(f"authorizer.class.name={name}: Ottla has only "
                          f"{STANDARD_AUTHORIZER}")
    try:
        StandardAuthorizer.from_config(config.originals)
    except ValueError as e:
        raise ConfigError(f"super.users: {e}") from e
