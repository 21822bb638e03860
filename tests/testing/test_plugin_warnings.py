"""What the plugin adds to a user's run besides the fixture: no kafka-python import, and none of its warnings.

A user's suite that imported kafka-python showed 218 DeprecationWarnings (issue 18). ``pytest -W default`` on such a
suite names their source: kafka-python 3.0.12's ``kafka/protocol/schemas/load_json.py`` calls
``importlib.resources.read_text`` (deprecated on Python 3.11 and 3.12) for each of its schemas, and read_text calls
the deprecated ``open_text``. The plugin itself never imports kafka-python; it filters those two warnings, from
those two places only.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# pytest-asyncio warns at start-up without this (the repo's own configuration does not apply in pytester's dir).
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"

NO_KAFKA = """
import sys


def test_the_plugin_leaves_kafka_python_alone(group_broker):
    assert group_broker.bootstrap
    assert not [name for name in sys.modules if name == "kafka" or name.startswith("kafka.")]
"""

WITH_KAFKA = """
import warnings

from kafka import KafkaProducer  # kafka-python, as a user's test module imports it


def test_uses_kafka_python(group_broker):
    producer = KafkaProducer(bootstrap_servers=group_broker.bootstrap)
    producer.send("warnings", b"x").get(timeout=10)
    producer.close()


def test_own_deprecation():
    warnings.warn("the user's own API is deprecated", DeprecationWarning)
"""


def test_the_plugin_does_not_import_kafka_python(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_plain=NO_KAFKA)
    result = pytester.runpytest_subprocess("-W", "error::DeprecationWarning", timeout=60)
    result.assert_outcomes(passed=1)


def test_kafka_python_warnings_are_hidden_and_the_users_own_are_not(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_user=WITH_KAFKA)
    result = pytester.runpytest_subprocess(timeout=60)
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(["*DeprecationWarning: the user's own API is deprecated*"])
    result.stdout.no_fnmatch_line("*read_text is deprecated*")
    result.stdout.no_fnmatch_line("*open_text is deprecated*")

    # A suite that turns warnings into errors: kafka-python still imports, the user's own warning still fails.
    pytester.makeini(INI + "filterwarnings =\n    error\n")
    result = pytester.runpytest_subprocess(timeout=60)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_user.py::test_own_deprecation - DeprecationWarning: the user's *"])
