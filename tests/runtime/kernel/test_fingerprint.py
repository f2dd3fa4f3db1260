"""The fingerprint of a keyed request is stored with its key and compared by whatever
node or version a retry reaches: its format must not change (docs/idempotency.md).
These values were written by the first version (SHA-256 of the CBOR list of parts)."""

from __future__ import annotations

from dataclasses import dataclass

from perdure.runtime.kernel.idempotency import fingerprint


@dataclass
class Job:
    value: int


def test_the_format_is_the_first_version_s() -> None:
    assert fingerprint("send", "jobs", {"value": 5}, False, None, None) == (
        "d32e34fa1c6659333aeaf9e2a83fae4c"
    )
    assert fingerprint("call", "add", [5]) == "8446b2e482d4782fc0e257a7e9fd23ec"


def test_a_model_is_fingerprinted_as_its_plain_form() -> None:
    as_model = fingerprint("send", "jobs", Job(5), False, None, None)
    assert as_model == fingerprint("send", "jobs", {"value": 5}, False, None, None)
    assert fingerprint("call", "add", (5,)) == fingerprint("call", "add", [5])


def test_other_arguments_give_another_fingerprint() -> None:
    first = fingerprint("send", "jobs", {"value": 5}, False, None, None)
    assert fingerprint("send", "jobs", {"value": 6}, False, None, None) != first
    assert fingerprint("send", "jobs", {"value": 5}, True, None, None) != first
    assert fingerprint("send", "jobs", {"value": 5}, False, 1.0, None) != first
    # What only a process can hold (an in-process call) is fingerprinted by its repr.
    unencodable = fingerprint("call", "add", [object])
    assert len(unencodable) == 32
    assert unencodable == fingerprint("call", "add", [object])
