"""The OpenAI-compatible stub (``tests/support/openai_stub.py``) with two more ways for a body to break.

- :class:`GarbageMidBody` — HTTP 200 with an honest Content-Length: a chat completion that turns into
  random bytes (not UTF-8, not JSON) half-way through.
- :class:`ChunkedGarbage` — HTTP 200, ``Transfer-Encoding: chunked``: a first chunk of valid JSON, then a
  chunk-size line that is garbage, then the connection closes (a proxy or server dying mid-stream).

Both are answered by :class:`FaultStub`, a drop-in :class:`~tests.support.openai_stub.OpenAIStub`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tests.support.openai_stub import OpenAIStub, _Handler


@dataclass(frozen=True)
class GarbageMidBody:
    prefix: str = '{"id": "chatcmpl-stub", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": '
    garbage_bytes: int = 512


@dataclass(frozen=True)
class ChunkedGarbage:
    first_chunk: str = '{"id": "chatcmpl-stub", "object": "chat.completion", "choices": [{"index": 0, '


class _FaultHandler(_Handler):
    def _perform(self, behaviour) -> None:
        if isinstance(behaviour, GarbageMidBody):
            data = behaviour.prefix.encode("utf-8") + b"\xff\xfe\x00" + os.urandom(behaviour.garbage_bytes)
            self._send_bytes(200, data, "application/json")
        elif isinstance(behaviour, ChunkedGarbage):
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = behaviour.first_chunk.encode("utf-8")
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.write(b"zz-not-a-size\r\n\x00\x01garbage\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self._drop()
        else:
            super()._perform(behaviour)


class FaultStub(OpenAIStub):
    def _handler_base(self) -> type:
        return _FaultHandler
