"""The runtime's key memory by itself: bounded, oldest first out, forgotten only for the
actor it names."""

from __future__ import annotations

from perdure.runtime.host.known_ids import KnownIds


def test_past_its_limit_the_oldest_key_goes_first() -> None:
    known = KnownIds(limit=2)
    known.remember("a", ("1",), "id1")
    known.remember("a", ("2",), "id2")
    known.remember("a", ("1",), "id1")  # an update of a kept key evicts nothing
    assert known.get("a", ("2",)) == "id2"
    known.remember("a", ("3",), "id3")
    assert known.get("a", ("1",)) is None
    assert ("a", ("2",)) in known
    assert known.get("a", ("3",)) == "id3"


def test_a_gone_actor_is_forgotten_only_if_its_key_still_names_it() -> None:
    known = KnownIds()
    known.remember("a", ("k",), "new-id")
    known.forget("a", ("k",), "old-id")  # an older actor of the key, destroyed
    assert known.get("a", ("k",)) == "new-id"
    known.forget("a", ("k",), "new-id")
    assert known.get("a", ("k",)) is None
    known.remember("a", ("k",), "x")
    known.drop("a", ("k",))
    assert ("a", ("k",)) not in known
