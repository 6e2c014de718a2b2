"""A scriptable OpenAI-compatible HTTP server on 127.0.0.1, for driving the real litellm client code path.

litellm's ``openai/<name>`` provider with ``api_base`` speaks plain HTTP to any OpenAI-compatible server, so a
small ``http.server`` is enough to exercise every failure a real provider can produce, through the same
client, retry and exception-mapping code that runs in production:

- :class:`Reply` — a normal chat-completion JSON body (content, usage, optional HTTP status);
- :class:`Delay` — sleep, then answer (longer than the client timeout -> a timeout);
- :class:`ServerError` — an HTTP 5xx with an error body;
- :class:`Malformed` — HTTP 200 with a body that is not a chat completion (not JSON, or JSON of the wrong shape);
- :class:`Truncated` — HTTP 200 that promises more bytes than it sends, then closes (garbage mid-body);
- :class:`CloseConnection` — read the request, then close the socket without any response.

Behaviours are consumed one per request, in order; when the script runs out the ``default`` behaviour
answers (a plain reply unless configured). One stub can also serve several models, each its own way (the
``model`` field of the request picks): :meth:`OpenAIStub.script_model` queues behaviours for one model, and
:meth:`OpenAIStub.respond` answers a model's requests with a function of the request (a scripted model that
reads the prompt); a model's own script comes first, then its responder, then the shared script and default. Every request is recorded (path, headers, parsed JSON body) so a
test can count retries and assert on the exact prompt that went over the wire.

Usage, as a context manager or through the ``openai_stub`` fixture (import it into a test module)::

    with OpenAIStub() as stub:
        stub.script(Delay(2.0), ServerError(500), Reply("hello"))
        litellm.completion(model="openai/stub", api_base=stub.api_base, api_key="x", ...)
        assert len(stub.requests) == 3
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# -- behaviours ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    content: str = "stub reply"
    status: int = 200
    prompt_tokens: int = 7
    completion_tokens: int = 3
    model: str = "stub-model"


@dataclass(frozen=True)
class Delay:
    seconds: float
    then: Reply = field(default_factory=Reply)


@dataclass(frozen=True)
class ServerError:
    status: int = 500
    message: str = "internal error (scripted by the stub)"


@dataclass(frozen=True)
class Malformed:
    body: str = "<html>this is not a chat completion</html>"
    content_type: str = "application/json"


@dataclass(frozen=True)
class Truncated:
    body_prefix: str = '{"id": "chatcmpl-stub", "choices": [{"message": {"role": "assis'
    promised_length: int = 4096


@dataclass(frozen=True)
class CloseConnection:
    """Read the request, then drop the connection without sending a status line."""


Behaviour = Reply | Delay | ServerError | Malformed | Truncated | CloseConnection


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]    # names lower-cased (HTTP header names are case-insensitive)
    body: Any                  # the parsed JSON body, or the raw text when it is not JSON

    @property
    def model(self) -> str:
        return str(self.body.get("model", "")) if isinstance(self.body, dict) else ""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


def completion_body(reply: Reply) -> dict[str, Any]:
    """A minimal chat.completion object, as OpenAI-compatible servers return it."""
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": reply.content}}],
        "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }


# -- the server --------------------------------------------------------------------------------------------


class OpenAIStub:
    """Start with :meth:`start` (or ``with``); ``api_base`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(self, default: Behaviour | None = None) -> None:
        self.default: Behaviour = default or Reply()
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Behaviour] = deque()
        self._model_queues: dict[str, deque[Behaviour]] = {}
        self._responders: dict[str, Callable[[RecordedRequest], Behaviour]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # scripting
    def script(self, *behaviours: Behaviour) -> OpenAIStub:
        with self._lock:
            self._queue.extend(behaviours)
        return self

    def script_model(self, model: str, *behaviours: Behaviour) -> OpenAIStub:
        """Queue behaviours for requests naming ``model`` (the name as it goes over the wire: litellm's
        ``openai/gpt-4o`` arrives as ``gpt-4o``)."""
        with self._lock:
            self._model_queues.setdefault(model, deque()).extend(behaviours)
        return self

    def respond(self, model: str, responder: Callable[[RecordedRequest], Behaviour]) -> OpenAIStub:
        """Answer every request naming ``model`` (once its own script is used up) with ``responder(request)``."""
        with self._lock:
            self._responders[model] = responder
        return self

    def requests_for(self, model: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.model == model]

    def upcoming(self) -> tuple[Behaviour, ...]:
        """What the next requests will get: the scripted behaviours, then the default."""
        with self._lock:
            return (*self._queue, self.default)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._model_queues.clear()
            self._responders.clear()
            self.requests.clear()

    def _next(self, request: RecordedRequest) -> Behaviour:
        with self._lock:
            self.requests.append(request)
            own = self._model_queues.get(request.model)
            if own:
                return own.popleft()
            responder = self._responders.get(request.model)
            if responder is None:
                return self._queue.popleft() if self._queue else self.default
        return responder(request)  # outside the lock: a responder may be slow or read the stub

    # lifecycle
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the stub is not running; call start() or use it as a context manager")
        return self._server.server_address[1]

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _handler_base(self) -> type:
        """The request handler class; a subclass of the stub may answer more behaviours."""
        return _Handler

    def start(self) -> OpenAIStub:
        stub = self

        class Handler(self._handler_base()):
            owner = stub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a handler still sleeping in a Delay must not hold up stop()
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="openai-stub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIStub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - some clients probe /v1/models
        self._send_json(200, {"object": "list", "data": [{"id": "stub-model", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", errors="replace") if length else ""
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw
        headers = {k.lower(): v for k, v in self.headers.items()}
        recorded = RecordedRequest(method="POST", path=self.path, headers=headers, body=body)
        self._perform(self.owner._next(recorded))

    def _perform(self, behaviour: Behaviour) -> None:
        if isinstance(behaviour, Delay):
            time.sleep(behaviour.seconds)
            behaviour = behaviour.then
        if isinstance(behaviour, Reply):
            self._send_json(behaviour.status, completion_body(behaviour))
        elif isinstance(behaviour, ServerError):
            self._send_json(behaviour.status, {"error": {"message": behaviour.message, "type": "server_error"}})
        elif isinstance(behaviour, Malformed):
            self._send_bytes(200, behaviour.body.encode("utf-8"), behaviour.content_type)
        elif isinstance(behaviour, Truncated):
            self._send_truncated(behaviour)
        elif isinstance(behaviour, CloseConnection):
            self._drop()
        else:  # pragma: no cover - a test scripted something unknown
            raise TypeError(f"unknown stub behaviour {behaviour!r}")

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        self._send_bytes(status, json.dumps(payload).encode("utf-8"), "application/json")

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout fired while we slept)

    def _send_truncated(self, behaviour: Truncated) -> None:
        data = behaviour.body_prefix.encode("utf-8")
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(max(behaviour.promised_length, len(data) + 1)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self._drop()

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()


def free_port() -> int:
    """A port nothing listens on (bound then released), for connection-refused tests."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def openai_stub():
    """A running :class:`OpenAIStub`, stopped after the test."""
    with OpenAIStub() as stub:
        yield stub
