"""Security: TLS listeners, SASL authentication and ACL authorization (issue 30)."""
