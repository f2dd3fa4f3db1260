"""The history checker of the cluster's fencing tests (tests/support/history.py) finds
each kind of anomaly it claims to, and passes a history that has none."""

from __future__ import annotations

from tests.support.history import GENESIS, History, Op, chain, check, owners


def digest_of(log: list[int]) -> str:
    digest = GENESIS
    for token in log:
        digest = chain(digest, token)
    return digest


def write(token: int, start: float, end: float | None, count: int | None, by: str = "a") -> Op:
    return Op("write", start, token, end, count, answered_by=by)


def read(start: float, end: float, log: list[int], by: str = "a") -> Op:
    return Op("read", start, None, end, len(log), digest_of(log), answered_by=by)


def history(*ops: Op) -> History:
    return History(list(ops))


def test_a_linearizable_history_passes() -> None:
    h = history(
        write(1, 0, 2, 1),
        write(2, 1, 3, 2),  # concurrent with 1, applied after it
        read(2.5, 4, [1]),  # concurrent with write 2: may miss it
        write(3, 5, None, None),  # unknown, applied
        write(4, 5, None, None),  # unknown, not applied
        read(6, 7, [1, 2, 3]),
    )
    assert check(h, [1, 2, 3]) == []
    assert owners(h, [1, 2, 3]) == []


def test_a_lost_write_is_found() -> None:
    assert "not in the log" in check(history(write(1, 0, 1, 1), write(2, 2, 3, 2)), [1])[0]


def test_a_doubled_write_is_found() -> None:
    assert "more than once" in check(history(write(1, 0, 1, 1), write(2, 0, None, None)), [1, 1])[0]


def test_a_write_answered_another_position_is_found() -> None:
    problems = check(history(write(1, 0, 1, 1), write(2, 0, 1, 1)), [1, 2])
    assert "answered count 1 but is applied at 2" in problems[0]


def test_writes_out_of_real_time_order_are_found() -> None:
    # 1 acknowledged before 2 was sent, yet applied after it (answers' counts aside).
    problems = check(history(write(1, 0, 1, 2), write(2, 2, 3, 1)), [2, 1])
    assert any("acknowledged before it was sent" in p for p in problems)


def test_a_stale_read_is_found() -> None:
    problems = check(history(write(1, 0, 1, 1), read(2, 3, [])), [1])
    assert "stale" in problems[0]


def test_a_read_of_the_future_is_found() -> None:
    problems = check(history(read(0, 1, [1]), write(1, 2, 3, 1)), [1])
    assert "sent after it answered" in problems[0]


def test_a_read_of_a_log_that_never_was_is_found() -> None:
    problems = check(history(write(1, 0, 1, 1), write(2, 0, None, None), read(2, 3, [2])), [1])
    assert "no prefix" in problems[0]


def test_reads_going_back_are_found() -> None:
    h = history(write(1, 0, 5, 1), read(1, 2, [1]), read(3, 4, []))
    assert any("higher count" in p for p in check(h, [1]))


def test_two_owners_answering_are_found() -> None:
    h = history(
        write(1, 0, 1, 1, by="old"),
        write(2, 2, 3, 2, by="new"),
        read(4, 5, [1], by="old"),  # the old owner answers after the new one did
    )
    problems = check(h, [1, 2]) + owners(h, [1, 2])
    assert any("stale" in p for p in problems)
    assert any("answered by old though sent after new had answered" in p for p in problems)
    interleaved = history(write(1, 0, 1, 1, "a"), write(2, 2, 3, 2, "b"), write(3, 4, 5, 3, "a"))
    assert "interleave" in owners(interleaved, [1, 2, 3])[0]
