"""The pure history logic: locations, replay visits, divergence, pruning."""

from __future__ import annotations

import pytest

from perdure.workflows.history import (
    Divergence,
    Entry,
    History,
    backoff_delay,
    child_location,
    iteration_scope,
    parent_scope,
    validate_name,
)


def test_locations() -> None:
    loop = child_location("", "progress-loop")
    body = iteration_scope(loop, 3)
    assert child_location(body, "apply-job") == "progress-loop/~3/apply-job"
    assert parent_scope("progress-loop/~3/apply-job") == "progress-loop/~3"
    assert parent_scope("root-step") == ""


@pytest.mark.parametrize("name", ["", "a/b", "~1", 5])
def test_invalid_names(name: object) -> None:
    with pytest.raises(ValueError, match="Invalid workflow entry name"):
        validate_name(name)  # type: ignore[arg-type]


def recorded(*locations: str) -> History:
    history = History()
    for location in locations:
        history.record(location, Entry("step", "completed"))
    history.take_changes()
    return History(dict(history.entries))


def test_replay_in_order_is_accepted() -> None:
    history = recorded("a", "b")
    assert history.expect("a", "step") is not None
    assert history.expect("b", "step") is not None
    assert history.expect("c", "step") is None  # new work after the recorded part
    history.check_complete("")


def test_duplicate_name_in_one_execution() -> None:
    history = History()
    history.expect("a", "step")
    with pytest.raises(Divergence, match="Duplicate"):
        history.expect("a", "step")


def test_kind_mismatch_names_location_and_fix() -> None:
    history = recorded("a")
    with pytest.raises(Divergence) as info:
        history.expect("a", "loop")
    assert info.value.location == "a"
    assert "removed" in str(info.value)


def test_renamed_step_is_caught_before_it_runs() -> None:
    history = recorded("a", "b")
    history.expect("a", "step")
    with pytest.raises(Divergence) as info:
        history.expect("renamed", "step")
    assert info.value.location == "b"


def test_removed_step_is_caught_at_scope_end() -> None:
    history = recorded("a", "b")
    history.expect("a", "step")
    with pytest.raises(Divergence) as info:
        history.check_complete("")
    assert info.value.location == "b"


def test_prune_iterations_keeps_recent_ones() -> None:
    history = History()
    for i in range(10):
        history.record(f"loop/~{i}/s", Entry("step", "completed"))
    history.take_changes()
    doomed = history.prune_iterations("loop", 7)
    assert sorted(doomed) == sorted(f"loop/~{i}/s" for i in range(7))
    assert sorted(history.entries) == ["loop/~7/s", "loop/~8/s", "loop/~9/s"]
    _, deleted = history.take_changes()
    assert len(deleted) == 7


def test_delete_subtree_and_changes() -> None:
    history = History()
    history.record("race", Entry("race", "running"))
    history.record("race/slow/s", Entry("step", "completed"))
    history.record("race/fast/s", Entry("step", "completed"))
    history.delete_subtree("race/slow")
    changed, deleted = history.take_changes()
    assert set(changed) == {"race", "race/fast/s"}
    assert deleted == ["race/slow/s"]  # a delete of a never-stored row is a harmless no-op
    assert history.take_changes() == ({}, [])


def test_entry_round_trip() -> None:
    entry = Entry("step", "completed", 7, {"o": [1, 2]})
    assert Entry.from_record(entry.to_record()) == entry


def test_backoff() -> None:
    assert [backoff_delay(a, 0.1, 30) for a in (1, 2, 3)] == [0.2, 0.4, 0.8]
    assert backoff_delay(20, 0.1, 30) == 30
