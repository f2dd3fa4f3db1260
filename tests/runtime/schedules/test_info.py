"""The info types read by attribute in Python and travel as plain camelCase objects."""

from __future__ import annotations

import json

import cbor2
import pytest

from perdure import CronFire, CronJobInfo, ScheduledEventInfo, ScheduledFireInfo
from perdure.protocol.values import encode_cbor_value, to_json_value
from perdure.store.encoding import decode_value, encode_value

FIRE = ScheduledFireInfo("every", "tick", "tick", 1_000, 1_250)
WIRE = {"kind": "every", "id": "tick", "name": "tick", "scheduledAt": 1_000, "firedAt": 1_250}


def test_fire_info_is_an_attribute_object_and_a_mapping() -> None:
    assert (FIRE.kind, FIRE.id, FIRE.name, FIRE.scheduled_at, FIRE.fired_at) == (
        "every",
        "tick",
        "tick",
        1_000,
        1_250,
    )
    assert FIRE["scheduledAt"] == FIRE.scheduled_at
    assert dict(FIRE) == WIRE
    assert FIRE == WIRE
    assert FIRE.to_dict() == WIRE
    assert len(FIRE) == 5
    with pytest.raises(KeyError):
        FIRE["scheduled_at"]
    with pytest.raises(AttributeError):
        FIRE.kind = "at"  # type: ignore[misc]


def test_a_one_shot_fire_has_no_name_key() -> None:
    fire = ScheduledFireInfo("at", "4f1c…", None, 1, 2)
    assert "name" not in fire
    assert fire.get("name") is None
    assert list(fire) == ["kind", "id", "scheduledAt", "firedAt"]


def test_fire_info_travels_as_a_plain_object() -> None:
    assert json.loads(json.dumps(to_json_value([FIRE]))) == [WIRE]
    assert cbor2.loads(encode_cbor_value(FIRE)) == WIRE
    # Stored in state or a queue body, it comes back as the plain mapping.
    assert decode_value(encode_value({"fire": FIRE})) == {"fire": WIRE}


def test_the_other_info_types_use_wire_keys() -> None:
    event = ScheduledEventInfo("id-1", "ping", [1], 5)
    assert dict(event) == {"id": "id-1", "action": "ping", "args": [1], "runAt": 5}
    job = CronJobInfo("tick", "every", "ping", [], 10, None, 100, interval_ms=60_000)
    assert job.interval == 60.0
    assert dict(job) == {
        "name": "tick",
        "kind": "every",
        "action": "ping",
        "args": [],
        "nextRunAt": 10,
        "maxHistory": 100,
        "interval": 60_000,
    }
    fire = CronFire("ping", 1, 2, None, "running")
    assert dict(fire) == {"action": "ping", "scheduledAt": 1, "firedAt": 2, "result": "running"}
