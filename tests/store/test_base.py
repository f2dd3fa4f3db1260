"""``ActorCommit`` bookkeeping done before a commit reaches any store."""

from __future__ import annotations

from perdure.store.base import ActorCommit, QueueMessageRecord


def message(message_id: int) -> QueueMessageRecord:
    return QueueMessageRecord(message_id, "jobs", b"body", 0)


def test_deleting_a_message_put_by_the_same_commit_drops_both() -> None:
    commit = ActorCommit("a1", queue_put=[message(1), message(2)])
    commit.delete_message(1)
    assert commit.queue_put == [message(2)]
    assert commit.queue_delete == []


def test_deleting_a_message_written_earlier_records_a_delete() -> None:
    commit = ActorCommit("a1", queue_put=[message(2)])
    commit.delete_message(1)
    assert commit.queue_put == [message(2)]
    assert commit.queue_delete == [1]
