"""Planning a workflow repair: retry resets exhausted steps, replay deletes from a step on."""

from __future__ import annotations

import pytest

from perdure.errors import RepairRefused, UnknownLocation
from perdure.workflows.history import Entry
from perdure.workflows.repair import plan_replay, plan_retry


def _took(message_id: int, body: int) -> dict[str, object]:
    return {"m": [{"id": message_id, "name": "q", "body": body, "at": 9}]}


def _history() -> dict[str, Entry]:
    return {
        "a": Entry("step", "completed", 1, {"o": 1, "a": 1}),
        "loop": Entry("loop", "running", 2, {"i": 2, "st": None}),
        "loop/~1/take": Entry(
            "message", "completed", 3, {"m": [{"id": 4, "name": "q", "body": 1, "at": 9}]}
        ),
        "loop/~1/go": Entry("step", "completed", 4, {"o": 2, "a": 1}),
        "loop/~2/take": Entry(
            "message", "completed", 5, {"m": [{"id": 5, "name": "q", "body": 2, "at": 9}]}
        ),
        "loop/~2/go": Entry(
            "step", "exhausted", 6, {"a": 3, "e": {"message": "boom"}, "fk": "exhausted"}
        ),
    }


def test_retry_gives_exhausted_steps_fresh_attempts_and_keeps_their_errors() -> None:
    plan = plan_retry({"status": "failed", "error": {"message": "x"}}, _history())
    assert list(plan.puts) == ["loop/~2/go"]
    entry = plan.puts["loop/~2/go"]
    assert entry.status == "failed"
    assert entry.seq == 6
    assert entry.data == {"a": 0, "errors": [{"message": "boom", "attempts": 3}]}
    assert plan.meta == {"status": "running", "error": None, "output": None}
    assert plan.deletes == []


@pytest.mark.parametrize("status", ["running", "completed", "pending"])
def test_retry_refuses_a_workflow_that_has_not_failed(status: str) -> None:
    with pytest.raises(RepairRefused) as caught:
        plan_retry({"status": status}, _history())
    assert caught.value.identifier == "workflow.not_failed"
    assert caught.value.status == 409


def test_replay_deletes_the_step_and_everything_after_it_but_not_its_loop() -> None:
    plan = plan_replay({"status": "failed"}, _history(), "loop/~2/take")
    assert plan.deletes == ["loop/~2/take", "loop/~2/go"]
    assert plan.requeue == [{"id": 5, "name": "q", "body": 2, "at": 9}]
    assert plan.meta["status"] == "running"


def test_replaying_a_whole_loop_gives_back_every_message_it_took() -> None:
    plan = plan_replay({"status": "completed"}, _history(), "loop")
    assert plan.deletes == ["loop", "loop/~1/take", "loop/~1/go", "loop/~2/take", "loop/~2/go"]
    assert [m["id"] for m in plan.requeue] == [4, 5]


def test_replay_refuses_an_earlier_iteration_or_a_finished_container() -> None:
    with pytest.raises(RepairRefused) as caught:
        plan_replay({"status": "failed"}, _history(), "loop/~1/go")
    assert caught.value.identifier == "workflow.replay_unsupported"
    finished = _history()
    finished["loop"] = Entry("loop", "completed", 2, {"i": 3, "o": None})
    with pytest.raises(RepairRefused):
        plan_replay({"status": "completed"}, finished, "loop/~2/go")
    joined = {
        "j": Entry("join", "completed", 1, {}),
        "j/left": Entry("step", "completed", 2, {"o": 1}),
    }
    with pytest.raises(RepairRefused, match="Replay from `j`"):
        plan_replay({"status": "completed"}, joined, "j/left")


def test_replay_of_an_unknown_location_is_a_404() -> None:
    with pytest.raises(UnknownLocation) as caught:
        plan_replay({"status": "failed"}, _history(), "nowhere")
    assert caught.value.status == 404
    assert caught.value.identifier == "workflow.unknown_step"


def test_a_rolled_back_workflow_is_replayed_from_its_first_undone_step() -> None:
    history = {
        "cp": Entry("rollback_checkpoint", "completed", 1, {}),
        "book": Entry("step", "completed", 2, {"o": 1, "a": 1, "rb": True}),
        "pay": Entry("step", "completed", 3, {"o": 2, "a": 1, "rb": True}),
        "ship": Entry("step", "exhausted", 4, {"a": 2, "e": {"message": "no truck"}}),
    }
    with pytest.raises(RepairRefused) as caught:
        plan_retry({"status": "failed"}, history)
    assert caught.value.identifier == "workflow.rolled_back"
    assert caught.value.metadata == {"location": "book"}
    with pytest.raises(RepairRefused):
        plan_replay({"status": "failed"}, history, "pay")
    assert plan_replay({"status": "failed"}, history, "book").deletes == ["book", "pay", "ship"]
