"""Security for the broker's listeners (issue 30): TLS, SASL and ACLs, one module per concern."""
