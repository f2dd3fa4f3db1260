"""The RivetKit client protocol: messages and their ``json``, ``cbor`` and ``bare`` codecs.

perdure speaks this protocol so that the official ``rivetkit`` TypeScript client works
against it, and its own Python client uses the same one. See
:mod:`perdure.protocol.messages` for the messages, :mod:`perdure.protocol.codec` for the
encodings and :mod:`perdure.protocol.values` for how user values travel.
"""

from perdure.protocol.codec import (
    ENCODINGS,
    PROTOCOL_VERSION,
    Encoding,
    content_type,
    decode_http,
    decode_to_client,
    decode_to_server,
    encode_http,
    encode_to_client,
    encode_to_server,
    is_binary,
    parse_encoding,
)
from perdure.protocol.messages import (
    ActionRequest,
    ActionResponse,
    ActorInfo,
    ErrorMessage,
    Event,
    HttpActionRequest,
    HttpActionResponse,
    HttpMessage,
    HttpQueueSendRequest,
    HttpQueueSendResponse,
    HttpResolveResponse,
    HttpResponseError,
    Init,
    SubscriptionRequest,
    ToClient,
    ToServer,
)

__all__ = [
    "ENCODINGS",
    "PROTOCOL_VERSION",
    "ActionRequest",
    "ActionResponse",
    "ActorInfo",
    "Encoding",
    "ErrorMessage",
    "Event",
    "HttpActionRequest",
    "HttpActionResponse",
    "HttpMessage",
    "HttpQueueSendRequest",
    "HttpQueueSendResponse",
    "HttpResolveResponse",
    "HttpResponseError",
    "Init",
    "SubscriptionRequest",
    "ToClient",
    "ToServer",
    "content_type",
    "decode_http",
    "decode_to_client",
    "decode_to_server",
    "encode_http",
    "encode_to_client",
    "encode_to_server",
    "is_binary",
    "parse_encoding",
]
