"""DescribeUserScramCredentials (KIP-554): which users have SCRAM credentials, with the
mechanism and iteration count of each, from the metadata image (Kafka's
``ScramImage.describe``), to principals with DESCRIBE on the cluster. Salts and keys never
leave the node. AlterUserScramCredentials
changes metadata: brokers forward it to the controller (``forwarding``), which runs
``controller.scram_control``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ottla.broker.broker import Broker
from ottla.metadata.image import MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import DESCRIBE, MSG_CLUSTER, authorize_cluster

DESCRIBE_DUPLICATE_USER = ("Cannot describe SCRAM credentials for the same user twice in a "
                           "single request: ")
DESCRIBE_USER_THAT_DOES_NOT_EXIST = "Attempt to describe a user credential that does not exist: "


class HasImage(Protocol):
    """A broker, or the controller side of a node: what describing reads."""

    @property
    def image(self) -> MetadataImage: ...


def describe_user_scram_credentials(image: MetadataImage, users: Sequence[str] | None
                                    ) -> dict[str, Any]:
    """The response of DescribeUserScramCredentials for ``users`` (None or empty: every
    user with a credential). A user named twice is DUPLICATE_RESOURCE, once in the
    results; a named user without a credential RESOURCE_NOT_FOUND; the top-level error is
    NONE (it is for authorization)."""
    known = image.scram_users()
    named: dict[str, bool] = {}
    if not users:
        named = dict.fromkeys(known, False)
    else:
        for user in users:
            named[user] = user in named
    results = []
    for user, duplicate in named.items():
        result: dict[str, Any] = {"user": user, "error_code": ErrorCode.none,
                                  "error_message": None, "credential_infos": []}
        if duplicate:
            result.update(error_code=ErrorCode.duplicate_resource,
                          error_message=DESCRIBE_DUPLICATE_USER + user)
        elif user not in known:
            result.update(error_code=ErrorCode.resource_not_found,
                          error_message=DESCRIBE_USER_THAT_DOES_NOT_EXIST + user)
        else:
            result["credential_infos"] = [{"mechanism": mechanism, "iterations": iterations}
                                          for mechanism, iterations in known[user]]
        results.append(result)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "results": results}


def handle_describe_user_scram_credentials(node: HasImage, ctx: RequestContext, req: Any
                                           ) -> dict[str, Any]:
    if not authorize_cluster(ctx, DESCRIBE):
        # DescribeUserScramCredentialsRequest.getErrorResponse: the error at the top and
        # once per user asked for (without the user's name).
        error = ErrorCode.cluster_authorization_failed
        return {"throttle_time": 0, "error_code": error, "error_message": MSG_CLUSTER,
                "results": [{"user": "", "error_code": error, "error_message": MSG_CLUSTER,
                             "credential_infos": []} for _ in req.users or ()]}
    users = None if req.users is None else [u.name for u in req.users]
    return describe_user_scram_credentials(node.image, users)


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0,
            handle_describe_user_scram_credentials),
]
