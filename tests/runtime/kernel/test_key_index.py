"""A live actor's index of its idempotency keys (runtime/kernel/key_index.py): a key it
does not hold is surely absent while every key of the window is held, a held key past
the window is absent too, a full index sheds its oldest keys and from then on sends the
keys it does not hold (of that age) to the store, and expiring the window's old keys
makes it sure again."""

from __future__ import annotations

from perdure.runtime.kernel.key_index import KeyIndex

BOUND = 1_000  # the retention bound of the lookups: keys created before it do not count


def test_a_complete_index_answers_alone() -> None:
    index = KeyIndex([("b", 1_200), ("a", 1_100)], since=BOUND, limit=10)
    assert len(index) == 2
    assert index.complete(BOUND)
    assert index.may_hold("a", BOUND)
    assert index.may_hold("b", BOUND)
    assert not index.may_hold("fresh", BOUND)  # sure: every key of the window is held
    index.add("fresh", 1_300)
    assert index.may_hold("fresh", BOUND)
    # Past the window, a held key no longer counts: no read either.
    assert not index.may_hold("a", 1_150)
    assert index.may_hold("b", 1_150)


def test_an_index_loaded_full_sends_misses_to_the_store() -> None:
    # The store gave limit + 1 keys: there are more than fit, the oldest is left out.
    newest = [("d", 1_400), ("c", 1_300), ("b", 1_200), ("a", 1_100)]
    index = KeyIndex(newest, since=BOUND, limit=3)
    assert len(index) == 3
    assert not index.complete(BOUND)
    assert index.complete(1_101)  # every key created after "a" is held
    assert index.may_hold("a", BOUND)  # not held, maybe stored: read it
    assert index.may_hold("unknown", BOUND)
    assert not index.may_hold("unknown", 1_101)  # once "a"'s time is past the window


def test_a_full_index_sheds_its_oldest_keys() -> None:
    index = KeyIndex([], since=BOUND, limit=4)
    for at in range(1_100, 1_105):
        index.add(f"k{at}", at)
    # Over the limit, a quarter-plus leaves at once: down to three quarters.
    assert len(index) == 3
    assert not index.complete(BOUND)
    assert index.complete(1_102)
    assert index.may_hold("k1100", BOUND)  # shed: read from the store
    assert index.may_hold("k1104", BOUND)
    assert not index.may_hold("never", 1_102)


def test_a_key_added_again_moves_to_the_newest() -> None:
    index = KeyIndex([("b", 1_250), ("a", 1_200), ("old", 1_100)], since=BOUND, limit=4)
    index.add("old", 1_300)  # used again after its window: now the newest
    index.add("c", 1_400)
    index.add("d", 1_500)  # over the limit: the two oldest leave, "a" and "b"
    assert len(index) == 3
    assert index.complete(1_251)  # had "old" left, the floor would be past 1_300
    assert not index.complete(1_250)


def test_expire_forgets_the_window_s_old_keys() -> None:
    index = KeyIndex([("b", 1_200), ("a", 1_100)], since=BOUND, limit=10)
    index.add("c", 1_300)
    index.expire(1_250)
    assert len(index) == 1
    assert index.complete(1_250)
    assert not index.may_hold("a", 1_250)
    assert index.may_hold("c", 1_250)
    index.expire(1_250)  # nothing more to forget
    assert len(index) == 1


def test_a_withdrawn_key_is_forgotten() -> None:
    index = KeyIndex([], since=BOUND, limit=10)
    index.add("k", 1_100)
    index.discard("k")
    index.discard("never")
    assert not index.may_hold("k", BOUND)
    assert index.complete(BOUND)


def test_an_empty_store_gives_a_complete_index() -> None:
    index = KeyIndex([], since=BOUND, limit=0)
    assert index.complete(BOUND)
    assert not index.may_hold("k", BOUND)
