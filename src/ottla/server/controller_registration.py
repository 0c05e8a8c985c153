"""When a controller (re-)sends its ControllerRegistration (KIP-919, Kafka's
ControllerRegistrationManager), as a sans-I/O state machine.

A controller registers once the metadata it has applied is at a metadata.version with
controller registrations (3.7-IV0), and again whenever the log no longer holds its
registration (none, or another incarnation's: a new active controller that lost it, an
older process's record). It stops once the log shows its own incarnation's record; after the
active controller acknowledged a request it waits for the metadata to change (its record
arriving, or another) before it sends again, as Kafka's does. One request at a time;
after a failure the next waits an exponential backoff (Kafka's
100 ms doubling to 120 s, with 2% jitter) that a success resets.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from ottla.common.backoff import ExponentialBackoff
from ottla.common.features import controller_registration_supported
from ottla.metadata.image import ControllerRegistration

BACKOFF_INITIAL_MS = 100
BACKOFF_MAX_MS = 120_000
BACKOFF_JITTER = 0.02


@dataclass(slots=True)
class ControllerRegistrationState:
    """What a controller knows of its registration; ``should_send`` says when to send."""

    node_id: int
    incarnation_id: uuid.UUID
    rng: random.Random
    """Spreads the backoff (seeded in tests)."""
    metadata_version: int = 0
    """The metadata.version of the applied metadata (0 until it is known)."""
    registered_in_log: bool = False
    pending: bool = False
    """A request is in flight."""
    acknowledged: bool = False
    """The active controller accepted a request, and the metadata has not changed since."""
    failed: int = 0
    """Failures in a row since the last success."""
    retry_at_ms: int = 0
    """No request before this (after a failure)."""
    _seen: tuple[int, uuid.UUID | None] | None = field(default=None, init=False)
    """The (metadata.version, registered incarnation) last observed."""
    _backoff: ExponentialBackoff = field(init=False)

    def __post_init__(self) -> None:
        self._backoff = ExponentialBackoff(BACKOFF_INITIAL_MS, BACKOFF_MAX_MS,
                                           jitter=BACKOFF_JITTER, rng=self.rng)

    def on_metadata(self, metadata_version: int,
                    registration: ControllerRegistration | None) -> None:
        """The applied metadata changed: its metadata.version and this node's
        registration in it (None: not registered). The same again changes nothing."""
        seen = (metadata_version, None if registration is None else registration.incarnation_id)
        if seen == self._seen:
            return
        self._seen = seen
        self.acknowledged = False
        self.metadata_version = metadata_version
        self.registered_in_log = registration is not None and \
            registration.incarnation_id == self.incarnation_id

    def should_send(self, now_ms: int) -> bool:
        """Whether to send a ControllerRegistration now (then call ``sent``)."""
        return (not self.registered_in_log and not self.pending and not self.acknowledged
                and controller_registration_supported(self.metadata_version)
                and now_ms >= self.retry_at_ms)

    def sent(self) -> None:
        self.pending = True

    def on_response(self, ok: bool, now_ms: int) -> None:
        """The request was answered without error (``ok``), or failed: refused,
        unanswered, or the controller could not be reached."""
        self.pending = False
        self.acknowledged = ok
        if ok:
            self.failed = 0
            self.retry_at_ms = 0
        else:
            self.retry_at_ms = now_ms + int(self._backoff.backoff(self.failed))
            self.failed += 1

    def wait_ms(self, now_ms: int) -> int | None:
        """How long until ``should_send`` may turn true by time alone (None: only new
        metadata or an answer can change it)."""
        if self.registered_in_log or self.pending or self.acknowledged or \
                not controller_registration_supported(self.metadata_version):
            return None
        return max(0, self.retry_at_ms - now_ms)
