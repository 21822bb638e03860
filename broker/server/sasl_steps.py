"""A SASL listener's connection steps (issue 30; docs/spec/security.md section 3), as the pipeline takes them:
what the authenticator (broker/security/sasl/authenticator.py) said to do with a login frame, and the delayed
answer and linger of a failed login. Kept beside the pipeline (broker/server/pipeline.py), whose mixin it is."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from broker.api.routes import error_answer
from broker.server.pipeline_state import CLOSED as _CLOSED
from broker.server.pipeline_state import DELAYED as _DELAYED
from broker.server.pipeline_state import PipelineIO, PipelineState

if TYPE_CHECKING:
    import collections

    from broker.security.sasl.authenticator import SaslAuthenticator, Step
    from protocol.codec import Request

# After a failed SASL login's answer, the close waits this long: kafka-python drops an answer read together with the
# FIN and would report only "socket disconnected" (docs/spec/security.md section 3, a deviation from Kafka).
_FAILED_AUTHENTICATION_LINGER_S = 0.1


class SaslSteps:
    """What ``RequestPipeline`` does for its authenticator; the attributes and methods below are the pipeline's."""

    state: PipelineState
    ending: str | None
    requests: collections.deque[bytes]
    peer: str
    _client_id: str
    _io: PipelineIO
    _out: list[bytes]
    _sasl: SaslAuthenticator | None
    set_principal: Callable[[str], None]
    close: Callable[[str], None]
    _send: Callable[[Request, Any], bool]
    _flush: Callable[[], None]

    def _sasl_step(self, step: Step, request: Request | None) -> tuple[int, int] | None:
        """Do what the authenticator said (broker/security/sasl/authenticator.py ``Step``)."""
        if step.principal is not None:
            self.set_principal(step.principal)
        answer: Any = step.answer
        if step.error is not None and request is not None:
            answer = error_answer(request.api_key, request.api_version, request.body, step.error)
        if step.failed:
            # Kafka's Selector holds a failed login for connection.failed.authentication.delay.ms, then answers and
            # closes; here the close lingers too, so that every client reads the answer.
            assert step.close is not None and self._sasl is not None
            self.state, self.ending = _DELAYED, step.close
            self.requests.clear()
            self._io.call_later(
                self._sasl.failed_delay_s, partial(self._answer_failed, request, answer, step.raw, step.close)
            )
            return None
        if step.raw is not None:
            self._out.append(step.raw)
        elif answer is not None and request is not None and not self._send(request, answer):
            return None
        if step.close is not None:
            self.close(step.close)
            return None
        return None if request is None else (request.api_key, request.api_version)

    def _answer_failed(self, request: Request | None, answer: Any, raw: bytes | None, reason: str) -> None:
        if self.state is _CLOSED:
            return
        if raw is not None:
            self._out.append(raw)
        elif answer is not None and request is not None:
            self._send(request, answer)
        self._flush()
        self._io.call_later(_FAILED_AUTHENTICATION_LINGER_S, partial(self.close, reason))

    def _who(self) -> dict[str, str]:
        return {"peer": self.peer, "client_id": self._client_id}
