"""Producer id blocks (ProducerIdControlManager)."""

from __future__ import annotations

import pytest

from ottla.controller.results import ControllerError
from ottla.protocol.errors import ErrorCode
from tests.controllers import apply, controller


def test_producer_id_blocks_do_not_overlap() -> None:
    c = controller()
    epoch = c.image.brokers[1].epoch
    first = c.producer_ids.allocate_producer_ids(1, epoch)
    apply(c, first.records)
    second = c.producer_ids.allocate_producer_ids(1, epoch)
    assert first.response == (0, 1000) and second.response == (1000, 1000)
    with pytest.raises(ControllerError) as stale:
        c.producer_ids.allocate_producer_ids(1, epoch + 1)
    assert stale.value.code == ErrorCode.stale_broker_epoch
