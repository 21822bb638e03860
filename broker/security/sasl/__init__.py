"""SASL (issue 30, docs/spec/security.md sections 2-7): the mechanisms and the per-connection authenticator.

Sans-I/O throughout: the mechanisms take client tokens and return server tokens or raise ``SaslFailure``; the
authenticator (``authenticator.py``) is Kafka's ``SaslServerAuthenticator`` state machine over decoded requests.
Nothing here is imported by ``serve`` unless a listener speaks SASL (hashlib's SCRAM work, json for OAUTHBEARER).
"""
