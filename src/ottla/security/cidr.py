"""CIDR host patterns of ACLs (Kafka 4.4's ``CidrUtils``, from metadata.version 4.4-IV1):
an ACL whose host is ``10.0.0.0/8`` or ``fd00::/8`` applies to every client address in
the block. Validation follows the commons-net ``SubnetUtils`` Kafka uses (its messages);
IPv4 blocks include their network and broadcast addresses (``setInclusiveHostCount``)."""

from __future__ import annotations

import functools
import ipaddress
import re

_IPV4_CIDR = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2})")
IPV6_BITS = 128


def is_cidr(host: str) -> bool:
    """Whether an ACL host is a CIDR block rather than an address or ``*``."""
    return "/" in host


def _range_check(value: int, begin: int, end: int) -> int:
    if begin <= value <= end:
        return value
    raise ValueError(f"Value [{value}] not in range [{begin},{end}]")


@functools.lru_cache(maxsize=1024)
def network(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """The block ``cidr`` names (host bits may be set); ValueError with commons-net's
    message when it is not one."""
    if ":" not in cidr:
        match = _IPV4_CIDR.fullmatch(cidr)
        if match is None:
            raise ValueError(f"Could not parse [{cidr}]")
        octets = [_range_check(int(match.group(i)), 0, 255) for i in range(1, 5)]
        bits = _range_check(int(match.group(5)), 0, 32)
        return ipaddress.IPv4Network((".".join(map(str, octets)), bits), strict=False)
    address, _, prefix = cidr.partition("/")
    if not prefix.isdigit():
        raise ValueError(f"Could not parse [{cidr}] - invalid prefix length")
    if int(prefix) > IPV6_BITS:
        raise ValueError(f"Could not parse [{cidr}] - prefix length must be between 0 "
                         f"and {IPV6_BITS}")
    try:
        return ipaddress.IPv6Network((address, int(prefix)), strict=False)
    except ValueError:
        raise ValueError(f"Could not parse [{cidr}] - not an IPv6 address") from None


def validate(cidr: str) -> str | None:
    """Why ``cidr`` is not a CIDR block (commons-net's message), None when it is."""
    try:
        network(cidr)
    except ValueError as e:
        return str(e)
    return None


def in_range(host: str, cidr: str) -> bool:
    """Kafka's ``CidrUtils.isInRange``: whether the client address ``host`` is in the
    block (never for an address of the other IP version, nor for a block or address that
    does not parse)."""
    try:
        return ipaddress.ip_address(host) in network(cidr)
    except ValueError:
        return False
