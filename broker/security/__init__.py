"""Security (issue 30): TLS listeners, SASL authentication and ACLs, one module per concern."""
