"""Kafka's ssl.principal.mapping.rules (SslPrincipalMapper) and the DN as Java's X500Principal.getName() writes it
(docs/spec/security.md 8.2)."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from broker.security.principal_mapping import NoMatchingRule, PrincipalMapper
from broker.security.tls import java_dn


@pytest.mark.parametrize(
    ("rules", "dn", "name"),
    [
        ("DEFAULT", "CN=alice,OU=eng,O=Acme", "CN=alice,OU=eng,O=Acme"),
        ("RULE:^CN=([^,]+),.*$/$1/,DEFAULT", "CN=alice,OU=eng,O=Acme", "alice"),
        ("RULE:^CN=([^,]+),.*$/$1/,DEFAULT", "OU=eng", "OU=eng"),  # no match: the next rule
        ("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L", "CN=Alice,OU=Eng", "alice@eng"),
        ("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/U", "CN=Alice,OU=Eng", "ALICE@ENG"),
        (" RULE:^CN=(.*)$/user-$1/ , DEFAULT ", "CN=bob", "user-bob"),
        ("RULE:^CN=(.*)$/$1\\/x/", "CN=bob", "bob/x"),  # an escaped slash in the replacement
        ("RULE:^CN=(.*)$/$3/", "CN=bob", "$3"),  # no group 3: taken literally, as Kafka escapes it
        ("RULE:^CN=(.*)$/$12/", "CN=bob", "bob2"),  # $12 with one group: $1 then "2"
    ],
)
def test_rules_map_a_dn_as_kafka_does(rules: str, dn: str, name: str) -> None:
    assert PrincipalMapper(rules).name(dn) == name


def test_no_matching_rule_is_an_error_naming_the_dn() -> None:
    with pytest.raises(NoMatchingRule, match=r"^No rules apply to CN=x, rules RULE:\^O=.*\$/\$1/$"):
        PrincipalMapper("RULE:^O=.*$/$1/").name("CN=x")


@pytest.mark.parametrize("rules", ["nonsense", "RULE:a/b/X", "RULE:a/b", "RULE:(a/b/"])
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        PrincipalMapper(rules)


def test_the_dn_is_most_specific_first_with_rfc2253_escapes_and_oid_hex_for_other_attributes() -> None:
    name = x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc"),
        x509.NameAttribute(NameOID.EMAIL_ADDRESS, "carol@acme.test"),
        x509.NameAttribute(NameOID.COMMON_NAME, "carol"),
    ])
    email_hex = (bytes((0x16, len("carol@acme.test"))) + b"carol@acme.test").hex()
    assert java_dn(name) == f"CN=carol,1.2.840.113549.1.9.1=#{email_hex},O=Acme\\, Inc,C=US"
