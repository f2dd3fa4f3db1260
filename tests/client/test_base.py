"""The no-I/O core: configuration, URLs, headers, bodies and error replies.

The expected strings are the official client's, from the captured traffic in
``reference/rivetkit-wire-json.jsonl``.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import cbor2
import pytest

from perdure.client import ActorError, TransportError
from perdure.client._base import (
    ClientConfig,
    HttpReply,
    IdTarget,
    action_call,
    create_call,
    error_from_reply,
    gateway_path,
    query_target,
    queue_call,
    resolve_call,
    websocket_protocols,
    websocket_url,
)
from perdure.errors import InvalidRequest
from perdure.protocol import codec
from perdure.protocol.messages import ActorInfo, HttpActionResponse, HttpResponseError

CONFIG = ClientConfig.build("http://127.0.0.1:6499")


def _reply(status: int, body: bytes, content_type: str = "application/json") -> HttpReply:
    return HttpReply(status, {"content-type": content_type}, body)


# -- configuration ------------------------------------------------------------------------


def test_endpoint_is_normalised() -> None:
    config = ClientConfig.build("http://localhost:6420/")
    assert config.endpoint == "http://localhost:6420"
    assert config.websocket_endpoint == "ws://localhost:6420"
    assert config.encoding == "json"
    assert config.namespace == "default"
    assert config.token is None


def test_endpoint_url_auth_form_sets_namespace_and_token() -> None:
    config = ClientConfig.build("https://team:s3cret@example.com:8443/api/")
    assert config.endpoint == "https://example.com:8443/api"
    assert config.websocket_endpoint == "wss://example.com:8443/api"
    assert (config.namespace, config.token) == ("team", "s3cret")


@pytest.mark.parametrize("endpoint", ["localhost:6420", "ftp://host", "http://"])
def test_bad_endpoint_is_refused(endpoint: str) -> None:
    with pytest.raises(ValueError, match="endpoint"):
        ClientConfig.build(endpoint)


@pytest.mark.parametrize("delay", [0, -1.0])
def test_reconnect_delay_cap_must_be_positive(delay: float) -> None:
    with pytest.raises(ValueError, match="max_reconnect_delay"):
        ClientConfig.build(max_reconnect_delay=delay)


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueError, match="encoding"):
        ClientConfig.build(encoding="msgpack")


# -- query gateway --------------------------------------------------------------------------


def test_get_or_create_url_matches_the_official_client() -> None:
    target = query_target("progressActor", "proto-json", "getOrCreate")
    assert gateway_path(CONFIG, target, "/action/getState") == (
        "/gateway/progressActor/action/getState?rvt-namespace=default&rvt-method=getOrCreate"
        "&rvt-runner=default&rvt-key=proto-json&rvt-crash-policy=sleep"
    )


def test_get_url_matches_the_official_client() -> None:
    target = query_target("progressActor", ["does-not-exist"], "get")
    assert gateway_path(CONFIG, target, "/action/getState") == (
        "/gateway/progressActor/action/getState?rvt-namespace=default&rvt-method=get"
        "&rvt-key=does-not-exist"
    )


def test_multi_part_key_is_comma_joined_and_percent_encoded() -> None:
    target = query_target("progressActor", ["tenant-1", "a/b"], "getOrCreate")
    path = gateway_path(CONFIG, target, "/connect")
    assert "&rvt-key=tenant-1%2Ca%2Fb&" in path


def test_empty_key_sends_no_rvt_key() -> None:
    keys: list[list[str] | None] = [None, []]
    for key in keys:
        target = query_target("counter", key, "getOrCreate")
        assert "rvt-key" not in gateway_path(CONFIG, target, "/connect")


def test_key_part_with_a_comma_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="comma") as info:
        query_target("progressActor", ["tenant-1", "a/b,c"], "getOrCreate")
    assert info.value.code == "invalid_key"


def test_bad_keys_are_refused() -> None:
    with pytest.raises(InvalidRequest):
        query_target("counter", ["x" * 200], "get")
    with pytest.raises(InvalidRequest):
        query_target("counter", [1], "get")  # type: ignore[list-item]
    with pytest.raises(InvalidRequest):
        query_target("", "k", "get")


def test_input_travels_as_base64url_cbor_before_the_crash_policy() -> None:
    target = query_target("counter", "k", "getOrCreate", {"start": 5, "blob": b"\xff\xfe"})
    path = gateway_path(CONFIG, target, "/connect")
    names = [name for name, _ in parse_qsl(urlsplit(path).query)]
    assert names == [
        "rvt-namespace",
        "rvt-method",
        "rvt-runner",
        "rvt-key",
        "rvt-input",
        "rvt-crash-policy",
    ]
    raw = dict(parse_qsl(urlsplit(path).query))["rvt-input"]
    assert "=" not in raw
    assert "+" not in raw
    assert "/" not in raw
    padded = raw + "=" * (-len(raw) % 4)
    assert cbor2.loads(base64.urlsafe_b64decode(padded)) == {"start": 5, "blob": b"\xff\xfe"}


def test_get_handles_carry_no_input_runner_or_crash_policy() -> None:
    target = query_target("counter", "k", "get")
    path = gateway_path(CONFIG, target, "/connect")
    assert "rvt-runner" not in path
    assert "rvt-crash-policy" not in path


def test_oversized_input_is_refused() -> None:
    target = query_target("counter", "k", "getOrCreate", "x" * 5000)
    with pytest.raises(InvalidRequest, match="create") as info:
        gateway_path(CONFIG, target, "/connect")
    assert info.value.code == "input_too_large"


def test_unencodable_input_is_a_type_error() -> None:
    target = query_target("counter", "k", "getOrCreate", object())
    with pytest.raises(TypeError):
        gateway_path(CONFIG, target, "/connect")


def test_token_goes_in_the_query_or_the_id_segment() -> None:
    config = ClientConfig.build("http://h:1", token="tok/en")
    query = gateway_path(config, query_target("c", "k", "get"), "/connect")
    assert query.endswith("&rvt-token=tok%2Fen")
    direct = gateway_path(config, IdTarget("c", "abc"), "/connect")
    assert direct == "/gateway/abc@tok%2Fen/connect"


def test_names_are_encoded_like_encode_uri_component() -> None:
    target = query_target("my actor", "k", "get")
    assert gateway_path(CONFIG, target, "").startswith("/gateway/my%20actor?")
    call = action_call(CONFIG, target, "users.add/x", [], None)
    assert "/action/users.add%2Fx?" in call.url


# -- direct gateway ---------------------------------------------------------------------------


def test_direct_gateway_url_matches_the_official_client() -> None:
    target = IdTarget("progressActor", "ttp5mx9jvwndrfwkbj8kv4me5ncl00")
    call = action_call(CONFIG, target, "getState", [], None)
    assert (
        call.url == "http://127.0.0.1:6499/gateway/ttp5mx9jvwndrfwkbj8kv4me5ncl00/action/getState"
    )


def test_websocket_url() -> None:
    target = query_target("progressActor", "proto-json", "getOrCreate")
    assert websocket_url(CONFIG, target) == (
        "ws://127.0.0.1:6499/gateway/progressActor/connect?rvt-namespace=default"
        "&rvt-method=getOrCreate&rvt-runner=default&rvt-key=proto-json&rvt-crash-policy=sleep"
    )


# -- bodies and headers ------------------------------------------------------------------------


def test_action_call_json() -> None:
    call = action_call(CONFIG, query_target("a", "k", "get"), "getState", [], None)
    assert call.method == "POST"
    assert json.loads(call.content or b"") == {"args": []}
    assert call.headers["content-type"] == "application/json"
    assert call.headers["x-rivet-encoding"] == "json"
    assert "x-rivet-conn-params" not in call.headers


@pytest.mark.parametrize("encoding", ["json", "cbor", "bare"])
def test_action_call_round_trips_in_every_encoding(encoding: str) -> None:
    config = ClientConfig.build(encoding=encoding)
    call = action_call(config, query_target("a", "k", "get"), "x", [1, "two", b"3"], None)
    assert call.headers["x-rivet-encoding"] == encoding
    assert call.headers["content-type"] == codec.content_type(config.encoding)
    body = codec.encode_http(HttpActionResponse({"n": 2**70}), config.encoding)
    assert call.parse(_reply(200, body, call.headers["content-type"])) == {"n": 2**70}


def test_conn_params_go_in_a_header_as_json() -> None:
    call = action_call(CONFIG, query_target("a", "k", "get"), "x", [], {"token": "abc"})
    assert json.loads(call.headers["x-rivet-conn-params"]) == {"token": "abc"}


def test_user_headers_are_kept() -> None:
    config = ClientConfig.build(headers={"x-tenant": "t1"})
    call = action_call(config, query_target("a", "k", "get"), "x", [], None)
    assert call.headers["x-tenant"] == "t1"


def test_queue_send_body_matches_the_official_client() -> None:
    target = query_target("progressActor", "proto-json", "getOrCreate")
    call = queue_call(CONFIG, target, "jobs", {"value": 7}, None, wait=False, timeout=None)
    assert call.content == b'{"body":{"value":7},"name":"jobs","wait":false}'
    assert "/queue/jobs?" in call.url
    assert call.parse(_reply(200, b'{"status":"completed"}')) is None


def test_queue_send_with_wait_carries_a_timeout_in_ms() -> None:
    target = query_target("progressActor", "k", "getOrCreate")
    call = queue_call(CONFIG, target, "jobs", {"value": 2}, None, wait=True, timeout=2)
    assert json.loads(call.content or b"") == {
        "body": {"value": 2},
        "name": "jobs",
        "wait": True,
        "timeout": 2000,
    }
    assert call.timeout is not None
    assert call.timeout > 2
    assert call.parse(_reply(200, b'{"status":"timedOut"}')) == {
        "status": "timedOut",
        "response": None,
    }
    done = call.parse(_reply(200, b'{"status":"completed","response":{"ok":1}}'))
    assert done == {"status": "completed", "response": {"ok": 1}}


def test_websocket_protocols() -> None:
    assert websocket_protocols("json", None) == ["rivet", "rivet_encoding.json"]
    protocols = websocket_protocols("cbor", {"user": "ada lovelace", "n": 1})
    assert protocols[:2] == ["rivet", "rivet_encoding.cbor"]
    prefix = "rivet_conn_params."
    assert protocols[2].startswith(prefix)
    assert " " not in protocols[2]
    assert "," not in protocols[2]
    assert json.loads(unquote(protocols[2][len(prefix) :])) == {"user": "ada lovelace", "n": 1}


def test_oversized_or_unserialisable_params_are_refused() -> None:
    with pytest.raises(InvalidRequest):
        websocket_protocols("json", {"x": "y" * 5000})
    with pytest.raises(TypeError):
        websocket_protocols("json", {"x": object()})


# -- errors --------------------------------------------------------------------------------------


def test_error_body_becomes_actor_error() -> None:
    body = (
        b'{"actor":{"actorId":"1g0v","generation":1,"key":"tenant-1"},"code":"action_not_found",'
        b'"group":"actor","message":"Action `nope` was not found."}'
    )
    call = action_call(CONFIG, query_target("a", "k", "get"), "nope", [], None)
    with pytest.raises(ActorError) as info:
        call.parse(_reply(404, body))
    error = info.value
    assert (error.group, error.code) == ("actor", "action_not_found")
    assert error.message == "Action `nope` was not found."
    assert error.actor == ActorInfo("1g0v", 1, "tenant-1")
    assert error.http_status == 404
    assert str(error) == "actor.action_not_found: Action `nope` was not found."


@pytest.mark.parametrize("encoding", ["cbor", "bare"])
def test_binary_error_bodies_decode(encoding: str) -> None:
    config = ClientConfig.build(encoding=encoding)
    error = HttpResponseError("user", "insufficient_funds", "No.", {"need": 5})
    reply = _reply(500, codec.encode_http(error, config.encoding), "application/octet-stream")
    result = error_from_reply(reply, config.encoding)
    assert isinstance(result, ActorError)
    assert (result.group, result.code, result.metadata) == (
        "user",
        "insufficient_funds",
        {"need": 5},
    )


def test_json_error_body_is_read_whatever_the_encoding() -> None:
    # A server may fail before it knows the encoding and answer in JSON.
    reply = _reply(400, b'{"group":"actor","code":"invalid_request","message":"bad"}')
    result = error_from_reply(reply, "bare")
    assert isinstance(result, ActorError)
    assert result.code == "invalid_request"


def test_non_protocol_error_body_is_a_transport_error() -> None:
    result = error_from_reply(_reply(502, b"<html>Bad gateway</html>", "text/html"), "json")
    assert isinstance(result, TransportError)
    assert "502" in str(result)


def test_malformed_success_body_is_a_transport_error() -> None:
    call = action_call(CONFIG, query_target("a", "k", "get"), "x", [], None)
    with pytest.raises(TransportError, match="malformed"):
        call.parse(_reply(200, b"not json"))


# -- management API --------------------------------------------------------------------------


def _json(call_content: bytes | None) -> Any:
    return json.loads(call_content or b"")


def test_create_posts_to_actors() -> None:
    call = create_call(CONFIG, "counter", ["a", "b/c"], {"start": 1})
    assert (call.method, call.url) == ("POST", "http://127.0.0.1:6499/actors?namespace=default")
    body = _json(call.content)
    assert body["name"] == "counter"
    assert body["key"] == "a/b\\/c"
    assert body["runner_name_selector"] == "default"
    assert body["crash_policy"] == "sleep"
    assert cbor2.loads(base64.b64decode(body["input"])) == {"start": 1}
    assert call.parse(_reply(200, b'{"actor":{"actor_id":"xyz","name":"counter"}}')) == "xyz"


def test_create_of_a_taken_key_raises_the_server_error() -> None:
    call = create_call(CONFIG, "counter", "a", None)
    assert "input" not in _json(call.content)
    body = b'{"group":"actor","code":"duplicate_key","message":"exists","metadata":{"k":1}}'
    with pytest.raises(ActorError) as info:
        call.parse(_reply(400, body))
    assert (info.value.code, info.value.metadata) == ("duplicate_key", {"k": 1})


def test_resolve_for_id_needs_no_request() -> None:
    assert resolve_call(CONFIG, IdTarget("c", "abc")) == "abc"


def test_resolve_get_or_create_puts_actors() -> None:
    call = resolve_call(CONFIG, query_target("progressActor", ["tenant-1", "a/b"], "getOrCreate"))
    assert not isinstance(call, str)
    assert call.method == "PUT"
    assert _json(call.content) == {
        "name": "progressActor",
        "key": "tenant-1/a\\/b",
        "runner_name_selector": "default",
        "crash_policy": "sleep",
    }
    reply = _reply(200, b'{"actor":{"actor_id":"ttp5"},"created":true}')
    assert call.parse(reply) == "ttp5"


def test_resolve_get_lists_actors_and_fails_fast_when_absent() -> None:
    call = resolve_call(CONFIG, query_target("counter", "k", "get"))
    assert not isinstance(call, str)
    assert call.method == "GET"
    assert dict(parse_qsl(urlsplit(call.url).query)) == {
        "namespace": "default",
        "name": "counter",
        "key": "k",
    }
    assert call.parse(_reply(200, b'{"actors":[{"actor_id":"a1"}]}')) == "a1"
    with pytest.raises(ActorError) as info:
        call.parse(_reply(200, b'{"actors":[]}'))
    assert (info.value.group, info.value.code) == ("actor", "not_found")
