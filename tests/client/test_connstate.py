"""The connection state machine and the reconnect backoff, without any socket."""

from __future__ import annotations

import random
from typing import Any

import pytest

from perdure.client import ActorError, CloseEvent, ConnectionDisposed, TransportError
from perdure.client._connstate import (
    Backoff,
    Call,
    ConnectionCore,
    Effect,
    Reject,
    Resolve,
    Send,
)
from perdure.protocol.messages import (
    ActionRequest,
    ActionResponse,
    ErrorMessage,
    Event,
    Init,
    SubscriptionRequest,
)

Core = ConnectionCore[str]  # futures are opaque to the core; names make tests readable


def sends(effects: list[Effect]) -> list[Any]:
    return [effect.message for effect in effects if isinstance(effect, Send)]


def calls(effects: list[Effect]) -> list[Call]:
    return [effect for effect in effects if isinstance(effect, Call)]


def opened(core: Core) -> list[Effect]:
    core.connecting()
    return core.receive(Init("actor-1", "conn-1"))


def noop(*args: Any) -> None:
    pass


def other(*args: Any) -> None:
    pass


# -- status ---------------------------------------------------------------------------------


def test_status_goes_idle_connecting_connected_disconnected() -> None:
    core = Core()
    seen: list[str] = []
    core.add_lifecycle("status", seen.append)
    assert core.status == "idle"
    for effect in core.connecting():
        assert isinstance(effect, Call)
        effect.callbacks[0](*effect.args)
    for effect in calls(core.receive(Init("a", "c"))):
        if effect.args and isinstance(effect.args[0], str):
            effect.callbacks[0](*effect.args)
    status: str = core.status  # a fresh read (mypy keeps the narrowing above)
    assert status == "connected"
    assert (core.actor_id, core.connection_id) == ("a", "c")
    for effect in calls(core.socket_closed(1006, "", opened=True)):
        if effect.args and isinstance(effect.args[0], str):
            effect.callbacks[0](*effect.args)
    assert seen == ["connecting", "connected", "disconnected"]


def test_open_and_close_callbacks() -> None:
    core = Core()
    core.add_lifecycle("open", noop)
    core.add_lifecycle("close", other)
    effects = opened(core)
    assert [c.callbacks for c in calls(effects)] == [(noop,)]
    closed = calls(core.socket_closed(1011, "boom", opened=True))
    assert closed[-1].callbacks == (other,)
    assert closed[-1].args == (CloseEvent(1011, "boom"),)


def test_on_open_registered_while_open_runs_once_now() -> None:
    core = Core()
    assert core.open_now(noop) == []
    opened(core)
    assert core.open_now(noop) == [Call((noop,), ())]


def test_no_close_callback_for_a_socket_that_never_opened() -> None:
    core = Core()
    core.add_lifecycle("close", noop)
    core.connecting()
    assert calls(core.socket_closed(1006, "", opened=False)) == []


def test_removed_lifecycle_callback_is_not_called() -> None:
    core = Core()
    token = core.add_lifecycle("open", noop)
    core.remove_lifecycle("open", token)
    core.remove_lifecycle("open", token)  # idempotent
    assert calls(opened(core)) == []


# -- subscriptions ------------------------------------------------------------------------------


def test_first_listener_subscribes_last_removal_unsubscribes() -> None:
    core = Core()
    opened(core)
    first, effects = core.add_listener("progress", noop)
    assert sends(effects) == [SubscriptionRequest("progress", True)]
    second, effects = core.add_listener("progress", other)
    assert sends(effects) == []
    assert sends(core.remove_listener("progress", first)) == []
    assert sends(core.remove_listener("progress", second)) == [
        SubscriptionRequest("progress", False)
    ]
    assert sends(core.remove_listener("progress", second)) == []  # idempotent


def test_subscriptions_wait_for_init_and_are_resent_after_reconnect() -> None:
    core = Core()
    core.connecting()
    _, effects = core.add_listener("a", noop)
    core.add_listener("b", noop)
    assert sends(effects) == []  # the server accepts them only after Init
    init = core.receive(Init("x", "c1"))
    assert sends(init) == [SubscriptionRequest("a", True), SubscriptionRequest("b", True)]
    core.socket_closed(1006, "", opened=True)
    core.connecting()
    again = core.receive(Init("x", "c2"))
    assert sends(again) == [SubscriptionRequest("a", True), SubscriptionRequest("b", True)]
    assert core.connection_id == "c2"


def test_unsubscribed_while_disconnected_is_not_resent() -> None:
    core = Core()
    opened(core)
    token, _ = core.add_listener("a", noop)
    core.socket_closed(1006, "", opened=True)
    assert sends(core.remove_listener("a", token)) == []  # nothing to tell a dead socket
    core.connecting()
    assert sends(core.receive(Init("x", "c2"))) == []


def test_off_removes_every_registration_of_a_callback() -> None:
    core = Core()
    opened(core)
    core.add_listener("a", noop)
    core.add_listener("a", noop)
    core.add_listener("a", other)
    assert sends(core.off("a", noop)) == []
    assert calls(core.receive(Event("a", [1])))[0].callbacks == (other,)
    assert sends(core.off("a", other)) == [SubscriptionRequest("a", False)]
    assert sends(core.off("a", other)) == []


def test_off_without_callback_removes_all() -> None:
    core = Core()
    opened(core)
    core.add_listener("a", noop)
    core.add_listener("a", other)
    assert sends(core.off("a")) == [SubscriptionRequest("a", False)]
    assert core.subscribed_events() == []


def test_events_reach_their_listeners_with_spread_args() -> None:
    core = Core()
    opened(core)
    core.add_listener("a", noop)
    core.add_listener("b", other)
    effects = core.receive(Event("a", [1, {"x": 2}]))
    assert effects == [Call((noop,), (1, {"x": 2}))]
    assert core.receive(Event("unknown", [])) == []


def test_once_listener_fires_once_and_unsubscribes_when_last() -> None:
    core = Core()
    opened(core)
    core.add_listener("a", noop, once=True)
    core.add_listener("b", noop, once=True)
    core.add_listener("b", other)
    first = core.receive(Event("a", [1]))
    assert calls(first) == [Call((noop,), (1,))]
    assert sends(first) == [SubscriptionRequest("a", False)]
    assert core.receive(Event("a", [2])) == []
    mixed = core.receive(Event("b", [3]))
    assert calls(mixed) == [Call((noop, other), (3,))]
    assert sends(mixed) == []  # `other` still listens
    assert calls(core.receive(Event("b", [4]))) == [Call((other,), (4,))]


# -- actions ------------------------------------------------------------------------------------


def test_actions_get_increasing_ids_and_resolve_by_id() -> None:
    core = Core()
    opened(core)
    first, effects = core.request_action("inc", [1], "f0")
    assert sends(effects) == [ActionRequest(0, "inc", [1])]
    second, effects = core.request_action("get", [], "f1")
    assert (first, second) == (0, 1)
    assert core.receive(ActionResponse(1, 42)) == [Resolve("f1", 42)]
    assert core.receive(ActionResponse(1, 42)) == []  # already answered
    assert core.pending_count() == 1


def test_action_error_rejects_that_action_only() -> None:
    core = Core()
    opened(core)
    core.add_lifecycle("error", noop)
    core.request_action("boom", [], "f0")
    effects = core.receive(ErrorMessage("user", "nope", "No.", {"m": 1}, action_id=0))
    assert len(effects) == 1
    assert isinstance(effects[0], Reject)
    error = effects[0].error
    assert isinstance(error, ActorError)
    assert (error.group, error.code, error.message, error.metadata) == (
        "user",
        "nope",
        "No.",
        {"m": 1},
    )


def test_actions_made_while_disconnected_are_sent_after_init_in_order() -> None:
    core = Core()
    core.connecting()
    core.add_listener("ev", noop)
    _, a = core.request_action("a", [], "fa")
    _, b = core.request_action("b", [], "fb")
    assert sends(a) == sends(b) == []
    assert sends(core.receive(Init("x", "c"))) == [
        SubscriptionRequest("ev", True),
        ActionRequest(0, "a", []),
        ActionRequest(1, "b", []),
    ]


def test_in_flight_actions_fail_on_close_queued_ones_wait() -> None:
    core = Core()
    opened(core)
    core.request_action("sent", [], "f0")
    effects = core.socket_closed(1006, "", opened=True)
    rejects = [e for e in effects if isinstance(e, Reject)]
    assert [r.future for r in rejects] == ["f0"]
    assert isinstance(rejects[0].error, TransportError)
    _, waiting = core.request_action("later", [], "f1")
    assert sends(waiting) == []
    core.connecting()
    assert sends(core.receive(Init("x", "c2"))) == [ActionRequest(1, "later", [])]


def test_abandoned_action_is_forgotten() -> None:
    core = Core()
    core.connecting()
    action_id, _ = core.request_action("a", [], "f0")
    core.abandon_action(action_id)
    assert sends(core.receive(Init("x", "c"))) == []
    assert core.pending_count() == 0


# -- errors ---------------------------------------------------------------------------------------


def test_connection_error_frame_goes_to_on_error_and_fails_waiters() -> None:
    core = Core()
    core.add_lifecycle("error", noop)
    core.connecting()
    core.request_action("a", [], "queued")
    core.add_open_waiter("waiter")
    effects = core.receive(ErrorMessage("auth", "forbidden", "Go away."))
    rejects = [e for e in effects if isinstance(e, Reject)]
    assert [r.future for r in rejects] == ["queued", "waiter"]
    error = rejects[0].error
    assert isinstance(error, ActorError)
    assert error.code == "forbidden"
    assert calls(effects) == [Call((noop,), (error,))]
    # The close that follows repeats the error in its reason: reported once only.
    after = core.socket_closed(1011, "auth.forbidden", opened=False)
    assert [c for c in calls(after) if c.callbacks == (noop,)] == []


def test_close_reason_error_is_reported() -> None:
    core = Core()
    core.add_lifecycle("error", noop)
    opened(core)
    core.request_action("a", [], "f0")
    effects = core.socket_closed(1011, "actor.internal_error", opened=True)
    rejects = [e for e in effects if isinstance(e, Reject)]
    assert isinstance(rejects[0].error, ActorError)
    reported = [c for c in calls(effects) if c.callbacks == (noop,)]
    assert len(reported) == 1
    error = reported[0].args[0]
    assert isinstance(error, ActorError)
    assert (error.group, error.code) == ("actor", "internal_error")


@pytest.mark.parametrize(
    ("code", "reason"), [(1000, "actor.x"), (1006, ""), (1011, "Something broke")]
)
def test_plain_closes_carry_no_error(code: int, reason: str) -> None:
    core = Core()
    core.add_lifecycle("error", noop)
    opened(core)
    effects = core.socket_closed(code, reason, opened=True)
    assert [c for c in calls(effects) if c.callbacks == (noop,)] == []


def test_transport_errors_only_inform() -> None:
    core = Core()
    core.add_lifecycle("error", noop)
    core.connecting()
    core.request_action("a", [], "f0")
    core.add_open_waiter("w")
    effects = core.transport_error(TransportError("refused"))
    assert [type(e) for e in effects] == [Call]
    assert core.pending_count() == 1


# -- open waiters and dispose ------------------------------------------------------------------


def test_open_waiters() -> None:
    core = Core()
    core.connecting()
    assert core.add_open_waiter("w1") == []
    core.add_open_waiter("w2")
    core.remove_open_waiter("w2")
    effects = core.receive(Init("x", "c"))
    assert [e for e in effects if isinstance(e, Resolve)] == [Resolve("w1", None)]
    assert core.add_open_waiter("w3") == [Resolve("w3", None)]


def test_dispose_fails_everything_and_closes_once() -> None:
    core = Core()
    core.add_lifecycle("close", noop)
    opened(core)
    core.request_action("sent", [], "f0")
    core.socket_closed(1006, "", opened=True)
    core.request_action("queued", [], "f1")
    core.connecting()
    core.receive(Init("x", "c"))
    core.request_action("sent2", [], "f2")
    core.add_listener("ev", noop)
    effects = core.dispose()
    rejected = {e.future: e.error for e in effects if isinstance(e, Reject)}
    assert set(rejected) == {"f1", "f2"}  # both in flight on the second socket
    assert all(isinstance(err, ConnectionDisposed) for err in rejected.values())
    assert core.status == "disconnected"
    assert calls(effects)[-1].args == (CloseEvent(1000, "Disposed"),)
    assert core.dispose() == []
    assert core.receive(Event("ev", [])) == []
    _, late = core.request_action("late", [], "f3")
    assert isinstance(late[0], Reject)
    assert isinstance(late[0].error, ConnectionDisposed)
    assert isinstance(core.add_open_waiter("w")[0], Reject)


def test_dispose_while_disconnected_fails_queued_actions_and_waiters() -> None:
    core = Core()
    core.connecting()
    core.request_action("queued", [], "f0")
    core.add_open_waiter("w")
    effects = core.dispose()
    assert {e.future for e in effects if isinstance(e, Reject)} == {"f0", "w"}
    assert core.connecting() == []
    assert core.socket_closed(1000, "Disposed", opened=False) == []


# -- backoff ---------------------------------------------------------------------------------------


def test_backoff_doubles_from_250ms_to_30s_with_jitter() -> None:
    backoff = Backoff(rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(12)]
    bases = [min(30.0, 0.25 * 2**n) for n in range(12)]
    for delay, base in zip(delays, bases, strict=True):
        assert base * 0.75 <= delay <= base
    assert delays[-1] > 20  # capped near 30 s, not growing further
    assert len(set(delays)) == len(delays)  # jittered


def test_backoff_without_jitter_and_reset() -> None:
    backoff = Backoff(jitter=0.0)
    assert [backoff.next_delay() for _ in range(9)] == [
        0.25,
        0.5,
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        30.0,
        30.0,
    ]
    backoff.reset()
    assert backoff.next_delay() == 0.25


def test_init_resets_the_backoff() -> None:
    core = Core(Backoff(jitter=0.0))
    core.connecting()
    assert [core.next_reconnect_delay() for _ in range(3)] == [0.25, 0.5, 1.0]
    core.receive(Init("x", "c"))
    assert core.next_reconnect_delay() == 0.25
