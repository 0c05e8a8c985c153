"""Errors of the security layer that its sans-I/O parts share."""


class SaslAuthenticationFailed(Exception):
    """The client's credentials were refused: SASL_AUTHENTICATION_FAILED."""
