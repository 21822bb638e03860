"""The SASL settings (issue 30, docs/spec/security.md 14.1): flags, variables, TOML (ours and Kafka's names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import settings
from broker.config.settings import SettingsError
from broker.server.settings import PASSWORD_MECHANISMS, UserEntry, parse_users


def test_sasl_users_get_every_password_mechanism_unless_listed() -> None:
    assert parse_users("alice:secret,bob:b:c:SCRAM-SHA-512+plain") == (
        UserEntry("alice", "secret", PASSWORD_MECHANISMS),
        UserEntry("bob", "b:c", ("SCRAM-SHA-512", "PLAIN")),
    )
    assert parse_users("carol:pw:with:colons")[0].password == "pw:with:colons"
    for bad, message in (("alice", "USER:PASSWORD"), ("alice:", "empty password"), ("a:x,a:y", "appears twice")):
        with pytest.raises(ValueError, match=message):
            parse_users(bad)


def test_a_password_never_shows_in_a_settings_dump() -> None:
    parsed = settings.parse(["--sasl-users", "alice:hunter2"], environ={})
    assert "hunter2" not in repr(parsed) and "hunter2" not in str(parsed.sasl.users)
    assert parsed.sasl.users[0].password == "hunter2"


def test_sasl_settings_from_flags_variables_and_toml(tmp_path: Path) -> None:
    parsed = settings.parse(
        ["--sasl-enabled-mechanisms", "plain,OAUTHBEARER", "--connections-max-reauth-ms", "3000"],
        environ={"GROUP_BROKER_OAUTHBEARER_REQUIRED_SCOPE": "orders,billing"},
    )
    assert parsed.sasl.enabled_mechanisms == ("PLAIN", "OAUTHBEARER")
    assert parsed.sasl.connections_max_reauth_ms == 3000
    assert parsed.sasl.oauthbearer_required_scope == ("orders", "billing")
    config = tmp_path / "broker.toml"
    config.write_text(
        '"sasl.enabled.mechanisms" = ["SCRAM-SHA-512"]\n"connection.failed.authentication.delay.ms" = 0\n'
        '[sasl_users]\nalice = "secret"\nbob = { password = "b", mechanisms = ["SCRAM-SHA-256"] }\n'
    )
    parsed = settings.parse(["--config", str(config)], environ={})
    assert parsed.sasl.enabled_mechanisms == ("SCRAM-SHA-512",)
    assert parsed.sasl.failed_authentication_delay_ms == 0
    assert [(u.name, u.mechanisms) for u in parsed.sasl.users] == [
        ("alice", PASSWORD_MECHANISMS), ("bob", ("SCRAM-SHA-256",)),
    ]


def test_a_mechanism_this_broker_cannot_serve_refuses_the_start(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        settings.parse(["--sasl-enabled-mechanisms", "GSSAPI"], environ={})
    assert "SASL mechanism GSSAPI is not served" in capsys.readouterr().err
    with pytest.raises(SettingsError, match="SASL mechanism GSSAPI is not served"):
        settings.parse([], environ={"GROUP_BROKER_SASL_ENABLED_MECHANISMS": "GSSAPI"})
