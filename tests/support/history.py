"""A history checker for a tagged counter: every write applied once, every read consistent.

The object under test is a counter whose every increment carries a unique token: the
actor keeps the tokens in the order it applied them (its *log*) and a digest chained
over them (:func:`chain`). A write appends one token and answers the count after it
(the token's position + 1); a read answers the count and the digest. So a counter's
value is the log's length and a register's is its last token; the log says, besides,
*which* writes were applied and in what order.

The test records each operation with the times (one monotonic clock, the test
process's) it was sent and answered, and the answer, or no answer (an error: the outcome
is unknown, the write may or may not have been applied). :func:`check` then takes the
final log and looks for a linearization, an order of the operations that respects real
time (one answered before another was sent comes first) and the answers:

- every token in the log was sent once and appears once (no doubled or invented write);
- every acknowledged write is in the log, at the position its answer named (no lost
  write, no two writers told the same position);
- writes are in the log in real-time order (no out-of-order write);
- a read's count and digest are those of a prefix of the log, which holds every write
  acknowledged before the read was sent and none sent after it was answered; and reads
  answered in sequence never go back.

Those pairwise conditions are also sufficient: an order of intervals that contradicts
no real-time precedence between any two can be realised by a point in each interval
(taken greedily, each at the latest of its start and the previous point). Writes whose
outcome is unknown take part if they were applied (answered at +infinity), and are
ignored otherwise.

:func:`owners` says which process answered what, in log order: the test asserts that no
request was answered by an owner after a later owner had answered one sent before it.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

__all__ = ["GENESIS", "History", "Op", "chain", "check", "owners"]

GENESIS = ""
"""The digest of the empty log."""


def chain(digest: str, token: int) -> str:
    """The digest of a log ending in ``token`` whose prefix has digest ``digest``."""
    return hashlib.blake2b(f"{digest}:{token}".encode(), digest_size=8).hexdigest()


@dataclass(slots=True)
class Op:
    """One operation as a client saw it. ``completed`` is ``None`` while unanswered
    (or when the answer was an error: the outcome is unknown)."""

    kind: str  # "write" or "read"
    invoked: float
    token: int | None = None  # writes: the token sent
    completed: float | None = None
    count: int | None = None  # the answer: the count after the write, or the count read
    digest: str | None = None  # reads: the digest read
    answered_by: Any = None  # who answered (a pid, a node id)
    via: str = ""  # how the request went (for the report)

    @property
    def ok(self) -> bool:
        return self.completed is not None

    @property
    def end(self) -> float:
        """When the operation ended for sure: +infinity for an unknown outcome."""
        return math.inf if self.completed is None else self.completed


@dataclass
class History:
    """The operations of one run; use :meth:`write` / :meth:`read` around each request."""

    ops: list[Op] = field(default_factory=list)
    _next_token: int = 0

    def token(self) -> int:
        """A token never sent before in this history."""
        self._next_token += 1
        return self._next_token

    def begin(self, kind: str, token: int | None = None, via: str = "") -> Op:
        """Record an operation sent now."""
        op = Op(kind, time.monotonic(), token, via=via)
        self.ops.append(op)
        return op

    @staticmethod
    def answered(op: Op, answer: dict[str, Any]) -> None:
        """Record the answer ``{"count", "digest"?, "pid"}`` of ``op``, received now."""
        op.completed = time.monotonic()
        op.count = int(answer["count"])
        op.digest = answer.get("digest")
        op.answered_by = answer.get("pid")

    @property
    def writes(self) -> list[Op]:
        return [op for op in self.ops if op.kind == "write"]

    @property
    def reads(self) -> list[Op]:
        return [op for op in self.ops if op.kind == "read"]

    def summary(self) -> dict[str, int]:
        """How many writes and reads were answered, and how many were not."""
        return {
            "writes_ok": sum(op.ok for op in self.writes),
            "writes_unknown": sum(not op.ok for op in self.writes),
            "reads_ok": sum(op.ok for op in self.reads),
            "reads_failed": sum(not op.ok for op in self.reads),
        }


def check(history: History, log: list[int]) -> list[str]:
    """Every way ``history`` cannot be linearized against the final ``log`` (the
    actor's tokens in applied order); empty when it can. See the module docstring."""
    problems: list[str] = []
    writes = {op.token: op for op in history.writes}
    doubled = [token for token, n in Counter(log).items() if n > 1]
    if doubled:
        problems.append(f"writes applied more than once: {doubled[:10]}")
    invented = [token for token in log if token not in writes]
    if invented:
        problems.append(f"tokens in the log that no client sent: {invented[:10]}")
    if doubled or invented:
        return problems
    position = {token: index for index, token in enumerate(log)}
    for op in history.writes:
        if not op.ok:
            continue
        if op.token not in position:
            problems.append(f"acknowledged write {op.token} ({op.via}) is not in the log")
        elif op.count != position[op.token] + 1:
            problems.append(
                f"write {op.token} ({op.via}) was answered count {op.count} but is applied at "
                f"{position[op.token] + 1}"
            )
    applied = [writes[token] for token in log]
    problems += _writes_in_real_time_order(applied)
    problems += _reads_consistent(history.reads, applied, log)
    return problems


def _writes_in_real_time_order(applied: list[Op]) -> list[str]:
    """No write applied after one that was sent after it had been acknowledged."""
    problems = []
    earliest_end_after = math.inf  # the earliest end among writes later in the log
    for index in range(len(applied) - 1, -1, -1):
        op = applied[index]
        if earliest_end_after < op.invoked:
            problems.append(
                f"write {op.token} (at {index + 1}) was applied after a write that was "
                "acknowledged before it was sent"
            )
        earliest_end_after = min(earliest_end_after, op.end)
    return problems[:10]


def _reads_consistent(reads: list[Op], applied: list[Op], log: list[int]) -> list[str]:
    problems: list[str] = []
    digests = [GENESIS]
    for token in log:
        digests.append(chain(digests[-1], token))
    latest_start = [-math.inf]  # latest_start[c]: the latest send among the first c writes
    for op in applied:
        latest_start.append(max(latest_start[-1], op.invoked))
    earliest_end = [math.inf] * (len(applied) + 1)  # earliest end among writes c, c+1, ...
    for index in range(len(applied) - 1, -1, -1):
        earliest_end[index] = min(earliest_end[index + 1], applied[index].end)
    answered = [op for op in reads if op.ok]
    for op in answered:
        count = op.count
        assert count is not None
        assert op.completed is not None
        if count > len(log) or digests[count] != op.digest:
            problems.append(f"read ({op.via}) saw count {count}, which is no prefix of the log")
        elif latest_start[count] > op.completed:
            problems.append(f"read ({op.via}) saw count {count}: a write sent after it answered")
        elif earliest_end[count] < op.invoked:
            problems.append(
                f"read ({op.via}) saw count {count}: stale, a later write was acknowledged "
                "before it was sent"
            )
    # Reads answered in sequence never go back: scanning by count, highest first, no
    # read with a higher count was answered before a read with a lower one was sent.
    answered.sort(key=lambda op: -(op.count or 0))
    earliest_higher = math.inf
    for _, group in groupby(answered, key=lambda op: op.count):
        same = list(group)
        for op in same:
            if earliest_higher < op.invoked:
                problems.append(
                    f"read ({op.via}) saw count {op.count} after another read had been "
                    "answered a higher count"
                )
        earliest_higher = min([earliest_higher, *(op.end for op in same)])
    return problems[:10]


def owners(history: History, log: list[int]) -> list[str]:
    """Every request answered by an owner after a *later* owner (in log order) had
    answered a request, where the first request was sent after that answer: what a
    client would see as two owners answering. Empty when each owner's answers end
    before the next owner's begin (for requests sent after them). It assumes each owner
    (``answered_by``) held the actor once: a run in which the actor moves back to a node
    it left is reported as interleaved owners (use :func:`check` alone there)."""
    position = {token: index for index, token in enumerate(log)}
    order: list[Any] = []  # who answered writes, in log order
    for op in sorted(
        (op for op in history.writes if op.ok and op.token in position),
        key=lambda op: position[op.token],  # type: ignore[index]
    ):
        if not order or order[-1] != op.answered_by:
            order.append(op.answered_by)
    if len(set(order)) != len(order):
        return [f"the writes' owners interleave in the log: {order}"]
    first_answer = {
        owner: min(op.end for op in history.ops if op.ok and op.answered_by == owner)
        for owner in order
    }
    problems = []
    for op in history.ops:
        if not op.ok or op.answered_by not in order:
            continue
        later = order[order.index(op.answered_by) + 1 :]
        for owner in later:
            if first_answer[owner] < op.invoked:
                problems.append(
                    f"{op.kind} ({op.via}) answered by {op.answered_by} though sent after "
                    f"{owner} had answered"
                )
    return problems[:10]
