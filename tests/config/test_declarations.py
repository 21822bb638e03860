"""Settings declared by their owner (issue 25 item 6): each setting is one ``Setting`` on the field it fills, in the
owner's module, and config/ only collects them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import broker.events.hub
import broker.server.settings
import broker.storage.topics
from broker.config import settings
from broker.config.settings import Settings, SettingsError
from broker.coordinator.config import GroupConfig
from broker.server.settings import AclConfig, ClusterConfig, SaslConfig, TlsConfig
from broker.setting import DECLARED, Setting
from broker.storage.topics import LogDefaults
from broker.transactions.config import TxnConfig

SECTIONS = {
    "group": GroupConfig, "log": LogDefaults, "txn": TxnConfig, "cluster": ClusterConfig, "tls": TlsConfig,
    "acls": AclConfig, "sasl": SaslConfig,
}
# Each owner and the settings it declares (by Kafka's group of configs): a setting moving owner is a choice to
# make here, not an accident.
OWNED_BY_MODULE = {
    broker.server.settings: {
        "host", "port", "listeners", "advertised_listeners", "advertised_host", "advertised_port", "node_id",
        "cluster_id", "socket_request_max_bytes", "socket_send_buffer_high_bytes", "socket_send_buffer_low_bytes",
        "max_connections", "max_connections_per_ip", "max_connections_per_ip_overrides", "admin_host", "admin_port",
        "listener_security_protocol_map",  # issue 30; the TLS settings are the tls section's
    },
    broker.storage.topics: {
        "max_partitions_per_request", "max_partitions_per_topic", "topic", "auto_create_topics_enable",
        "num_partitions", "log_retention_check_interval_ms", "storage_max_bytes", "data_dir", "fsync",
        "fsync_interval_ms",
    },
    broker.events.hub: {"event_log", "event_log_max_bytes", "event_log_backups", "event_buffer_size",
                        "event_buffer_total"},
    settings: {"config", "log_level", "log_format"},
}


def test_every_option_is_the_declaration_on_the_field_it_fills() -> None:
    for option in settings.OPTIONS:
        if not option.setting:
            continue
        section, _, name = option.path.rpartition(".")
        holder = SECTIONS[section] if section else Settings
        (found,) = [f for f in dataclasses.fields(holder) if f.name == name]
        declared = found.metadata[DECLARED]
        assert dataclasses.replace(declared, fills=option.path) == option
        assert found.default == declared.default == option.default, option.name


def test_options_follow_the_fields_of_settings_a_sections_in_its_place() -> None:
    paths = [option.path for option in settings.OPTIONS if option.setting]
    top = [f.name for f in dataclasses.fields(Settings) if f.name != "given"]
    order = [p.partition(".")[0] if "." in p else p for p in paths]
    assert list(dict.fromkeys(order)) == top
    assert settings.OPTIONS[0].name == "config" and not settings.OPTIONS[0].setting


def test_each_owner_declares_its_own_in_its_own_module() -> None:
    for module, names in OWNED_BY_MODULE.items():
        declared = {value.name for value in vars(module).values() if isinstance(value, Setting)}
        assert declared == names, module.__name__
    for section, holder in SECTIONS.items():
        assert {o.name for o in settings.OPTIONS if o.path.startswith(section + ".")} == {
            f.metadata[DECLARED].name for f in dataclasses.fields(holder) if DECLARED in f.metadata
        }
    collected = set().union(*OWNED_BY_MODULE.values()) | {o.name for o in settings.OPTIONS if "." in o.path}
    assert collected == {o.name for o in settings.OPTIONS}


def test_a_bare_owner_config_keeps_kafkas_defaults_without_config() -> None:
    """The owners' classes need nothing of config/: a bare one is Kafka's (unit tests build them so)."""
    assert GroupConfig().max_session_timeout_ms == 1_800_000
    assert TxnConfig().transaction_max_timeout_ms == 900_000
    assert LogDefaults().max_message_bytes == 1_048_588


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('max_connections_per_ip_overrides = ["a:1"]\n', "expected a TOML str, got list"),  # a table, not a list
        ("listeners = {a = 1}\n", "expected a TOML str, got dict"),  # a list, not a table
        ("group_consumer_assignors = [1]\n", "expected a TOML list of strings"),
    ],
)
def test_a_toml_shape_a_setting_does_not_take_is_a_type_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "broker.toml"
    path.write_text(text)
    with pytest.raises(SettingsError, match=message):
        settings.parse(["--config", str(path)], environ={})
    path.write_text('max_connections_per_ip_overrides = {"10.0.0.5" = 3}\n')
    assert settings.parse(["--config", str(path)], environ={}).max_connections_per_ip_overrides == (("10.0.0.5", 3),)
