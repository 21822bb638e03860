"""The control API tests' fixtures, shared by every module here: they live in ``test_control_api.py``, where the
OpenAPI-checking client and the broker they serve are defined."""

from tests.control.test_control_api import api, broker, connect, openapi, spec

__all__ = ["api", "broker", "connect", "openapi", "spec"]
