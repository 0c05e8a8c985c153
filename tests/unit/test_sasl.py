"""SASL on a connection, sans I/O: SCRAM against RFC 7677's example, PLAIN against JAAS
users, the handshake/authenticate state machine as Kafka's SaslServerAuthenticator, and
the TLS principal mapping rules as Kafka's SslPrincipalMapper."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import Principal
from ottla.security.jaas import (
    JaasError,
    client_credentials,
    parse_jaas_config,
    plain_users,
)
from ottla.security.plain import PlainServer, plain_client_message
from ottla.security.sasl import (
    Mechanism,
    SaslAuthenticationFailed,
    SaslAuthenticator,
    SaslState,
)
from ottla.security.scram import (
    ScramClient,
    ScramError,
    ScramMechanism,
    ScramServer,
    credential_from_password,
)
from ottla.security.ssl_principal import NoMatchingRule, SslPrincipalMapper

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


# --- SCRAM ------------------------------------------------------------------------------

def test_scram_sha_256_answers_as_rfc_7677s_example() -> None:
    """RFC 7677 section 3: user "user", password "pencil"."""
    credential = credential_from_password(
        SHA256, "pencil", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    server = ScramServer(SHA256, lambda user, token: credential if user == "user" else None,
                         nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.respond(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.respond(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                           b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_a_scram_client_and_server_agree_on_the_right_password_only(mechanism) -> None:
    credential = credential_from_password(mechanism, "alice-secret", iterations=4096)

    def exchange(password: str) -> ScramServer:
        server = ScramServer(mechanism, lambda user, token: credential)
        client = ScramClient(mechanism, "alice", password)
        client.verify(server.respond(client.final(server.respond(client.first()))))
        return server

    assert exchange("alice-secret").complete
    with pytest.raises(ScramError):
        exchange("wrong")


def test_scram_refuses_an_unknown_user_at_its_first_message() -> None:
    server = ScramServer(SHA256, lambda user, token: None)
    with pytest.raises(SaslAuthenticationFailed, match="Invalid user credentials"):
        server.respond(ScramClient(SHA256, "nobody", "x").first())


def test_scram_refuses_a_final_message_with_another_nonce_or_a_bad_proof() -> None:
    credential = credential_from_password(SHA256, "pw")
    server = ScramServer(SHA256, lambda user, token: credential)
    client = ScramClient(SHA256, "u", "pw")
    server.respond(client.first())
    with pytest.raises(ScramError, match="nonce"):
        server.respond(b"c=biws,r=someone-elses-nonce,p=AAAA")
    for bad in (b"no attributes at all", b"n,,r=abc", b"\xff\xfe"):
        with pytest.raises(SaslAuthenticationFailed):
            ScramServer(SHA256, lambda user, token: credential).respond(bad)


def test_scram_reads_escaped_names_and_kafkas_tokenauth_extension() -> None:
    seen: list[tuple[str, bool]] = []
    server = ScramServer(SHA256, lambda user, token: seen.append((user, token)) or None)
    with pytest.raises(ScramError):
        server.respond(ScramClient(SHA256, "a,b=c", "pw", token_auth=True).first())
    assert seen == [("a,b=c", True)]


def test_scram_mechanism_names() -> None:
    assert ScramMechanism.from_name("SCRAM-SHA-512") is SHA512
    assert ScramMechanism.from_name("scram_sha_256") is SHA256
    assert ScramMechanism.from_name("SCRAM-SHA-1") is ScramMechanism.UNKNOWN
    assert SHA256.mechanism_name == "SCRAM-SHA-256"


# --- PLAIN and JAAS ---------------------------------------------------------------------

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '    username="admin" password="admin-secret"\n'
        '    user_admin="admin-secret" user_alice="alice \\"quoted\\" secret";')


def test_jaas_config_gives_plain_users_and_the_nodes_own_login() -> None:
    modules = parse_jaas_config(JAAS)
    assert plain_users(modules) == {"admin": "admin-secret", "alice": 'alice "quoted" secret'}
    assert client_credentials(modules) == ("admin", "admin-secret")
    scram = parse_jaas_config("org.apache.kafka.common.security.scram.ScramLoginModule "
                              "required username=bob password=bob-pw tokenauth=true ;")
    assert scram[0].options == {"username": "bob", "password": "bob-pw", "tokenauth": "true"}


@pytest.mark.parametrize("bad", [
    "", "SomeModule", "SomeModule bogusflag;", 'SomeModule required user="x"',
    "SomeModule required username;"])
def test_jaas_config_that_cannot_be_read_is_refused(bad: str) -> None:
    with pytest.raises(JaasError):
        parse_jaas_config(bad)


def test_plain_accepts_the_jaas_users_only() -> None:
    users = plain_users(parse_jaas_config(JAAS))
    server = PlainServer(users)
    assert server.respond(plain_client_message("admin", "admin-secret")) == b""
    assert server.complete and server.authorization_id == "admin"
    for message in (plain_client_message("admin", "wrong"),
                    plain_client_message("mallory", "admin-secret"),
                    b"alice\x00admin\x00admin-secret",  # authzid other than the user
                    b"only-two\x00tokens", plain_client_message("admin", "")):
        with pytest.raises(SaslAuthenticationFailed):
            PlainServer(users).respond(message)


# --- the authenticator ------------------------------------------------------------------

def authenticator(reauth_ms: int = 0) -> SaslAuthenticator:
    users = {"alice": "alice-secret", "bob": "bob-secret"}
    return SaslAuthenticator({"PLAIN": Mechanism(lambda: PlainServer(users))}, reauth_ms)


def test_a_v1_handshake_then_authenticate_gives_the_principal() -> None:
    auth = authenticator()
    assert auth.intercepts(18) and auth.intercepts(3)  # ApiVersions, Metadata: not yet
    answer = auth.handshake("PLAIN", 1)
    assert answer.body == {"error_code": ErrorCode.none, "mechanisms": ["PLAIN"]}
    assert not answer.close and auth.state == SaslState.AUTHENTICATE
    answer = auth.authenticate(plain_client_message("alice", "alice-secret"), 1000)
    assert answer.body["error_code"] == ErrorCode.none and not answer.close
    assert answer.body["session_lifetime_ms"] == 0
    assert auth.authenticated and auth.principal == Principal("User", "alice")
    assert not auth.intercepts(3) and not auth.intercepts(17)  # a handshake again: the table's


def test_an_unsupported_mechanism_lists_the_enabled_ones_and_closes() -> None:
    answer = authenticator().handshake("GSSAPI", 1)
    assert answer.body == {"error_code": ErrorCode.unsupported_sasl_mechanism,
                           "mechanisms": ["PLAIN"]}
    assert answer.close


def test_wrong_credentials_fail_with_kafkas_message_and_close() -> None:
    auth = authenticator()
    auth.handshake("PLAIN", 1)
    answer = auth.authenticate(plain_client_message("alice", "nope"), 0)
    assert answer.body["error_code"] == ErrorCode.sasl_authentication_failed
    assert answer.body["error_message"] == ("Authentication failed during authentication due "
                                            "to invalid credentials with SASL mechanism PLAIN")
    assert answer.close and auth.principal is None


def test_authenticate_before_a_handshake_is_an_illegal_state() -> None:
    answer = authenticator().authenticate(plain_client_message("alice", "alice-secret"), 0)
    assert answer.body["error_code"] == ErrorCode.illegal_sasl_state and answer.close


def test_a_v0_handshake_exchanges_bare_tokens() -> None:
    auth = authenticator()
    auth.handshake("PLAIN", 0)
    assert auth.state == SaslState.RAW_AUTHENTICATE
    assert auth.authenticate_raw(plain_client_message("bob", "bob-secret"), 0) == b""
    assert auth.principal == Principal("User", "bob")
    bad = authenticator()
    bad.handshake("PLAIN", 0)
    assert bad.authenticate_raw(plain_client_message("bob", "x"), 0) is None


def test_with_reauth_a_session_expires_and_is_renewed_as_the_same_principal_only() -> None:
    auth = authenticator(reauth_ms=10_000)
    auth.handshake("PLAIN", 1)
    answer = auth.authenticate(plain_client_message("alice", "alice-secret"), 1000)
    assert answer.body["session_lifetime_ms"] == 10_000
    assert not auth.expired(11_000) and auth.expired(11_001)
    assert auth.intercepts(17)  # a re-authentication's handshake
    assert auth.handshake("PLAIN", 1).body["error_code"] == ErrorCode.none
    assert auth.intercepts(36)
    assert not auth.authenticate(plain_client_message("alice", "alice-secret"),
                                 12_000).close
    assert auth.authenticated and not auth.expired(21_000)
    auth.handshake("PLAIN", 1)
    answer = auth.authenticate(plain_client_message("bob", "bob-secret"), 13_000)
    assert answer.close and "Cannot change principals" in str(answer.body["error_message"])


# --- TLS principals ---------------------------------------------------------------------

def test_ssl_principal_mapping_rules_as_kafkas_mapper() -> None:
    """The rules and names of Kafka's SslPrincipalMapperTest."""
    mapper = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT")
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "Duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=JavaSoft,o=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == \
        "OU=JavaSoft,O=Sun Microsystems,C=US"
    assert SslPrincipalMapper(None).name("CN=x") == "CN=x"
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=no-cn")


@settings(max_examples=200, deadline=None)
@given(mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
       tokens=st.lists(st.binary(max_size=200), min_size=1, max_size=3))
def test_hostile_tokens_are_refused_never_raised(mechanism, tokens) -> None:
    """Whatever bytes a client sends as its SASL messages, the authenticator answers
    (SASL_AUTHENTICATION_FAILED and close, or the next step) and never raises."""
    credential = credential_from_password(SHA256, "pw", iterations=4096)
    credential512 = credential_from_password(SHA512, "pw", iterations=4096)
    mechanisms = {
        "PLAIN": Mechanism(lambda: PlainServer({"u": "pw"})),
        "SCRAM-SHA-256": Mechanism(lambda: ScramServer(SHA256, lambda u, t: credential)),
        "SCRAM-SHA-512": Mechanism(lambda: ScramServer(SHA512, lambda u, t: credential512)),
    }
    auth = SaslAuthenticator(mechanisms)
    assert auth.handshake(mechanism, 1).body["error_code"] == ErrorCode.none
    for token in tokens:
        answer = auth.authenticate(token, 0)
        if answer.close:
            assert answer.body["error_code"] in (ErrorCode.sasl_authentication_failed,
                                                 ErrorCode.illegal_sasl_state)
            break
    assert auth.principal is None or auth.principal.name == "u"
