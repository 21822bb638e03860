"""Release hygiene, as a user gets the package: build the sdist and wheel with `python -m build`, install the
wheel into a fresh virtual environment, and run what it installed."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time
import venv
import zipfile
from pathlib import Path

import pytest

import broker
from tests.conftest import ROOT, free_port


def run(*argv: str | Path, cwd: Path = ROOT, timeout: float = 600) -> str:
    result = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    tail = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"{argv} exited {result.returncode}:\n{tail}"
    return result.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", out, ROOT)
    return out


def test_sdist_and_wheel_carry_the_one_version_and_what_users_need(dist: Path) -> None:
    version = broker.__version__
    wheel = dist / f"kafka_group_broker-{version}-py3-none-any.whl"
    sdist = dist / f"kafka_group_broker-{version}.tar.gz"
    assert wheel.exists() and sdist.exists(), sorted(p.name for p in dist.iterdir())
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"kafka_group_broker-{version}.dist-info"
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        metadata = archive.read(f"{info}/METADATA").decode()
    expected = {"broker/cli/main.py", "broker/testing/pytest_plugin.py", "broker/testing/embedded.py"}
    assert expected | {"protocol/heartbeat.py"} <= names
    assert not any(name.startswith(("tests/", "benchmarks/")) for name in names)
    assert "group-broker = broker.cli.main:main" in entry_points
    assert "[pytest11]" in entry_points and "group_broker = broker.testing.pytest_plugin" in entry_points
    assert f"Version: {version}" in metadata
    with tarfile.open(sdist) as archive:
        members = {Path(m).relative_to(f"kafka_group_broker-{version}").as_posix() for m in archive.getnames()[1:]}
    assert {"pyproject.toml", "README.md", "broker/__init__.py"} <= members


def test_the_wheel_installs_in_a_fresh_venv_and_serves(dist: Path, tmp_path: Path) -> None:
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    bin_dir = environment / "bin"
    wheel = next(dist.glob("*.whl"))
    run(bin_dir / "python", "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path)
    assert run(bin_dir / "group-broker", "--version", cwd=tmp_path).strip() == f"group-broker {broker.__version__}"

    port, admin = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing from this checkout
    env |= {"GROUP_BROKER_PORT": str(port), "GROUP_BROKER_ADMIN_PORT": str(admin), "GROUP_BROKER_HOST": "127.0.0.1"}
    server = subprocess.Popen(
        [bin_dir / "group-broker", "serve"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            health = subprocess.run(
                [bin_dir / "group-broker", "health"], cwd=tmp_path, env=env, capture_output=True, text=True
            )
            if health.returncode == 0 or time.monotonic() > deadline or server.poll() is not None:
                break
            time.sleep(0.2)
        assert health.returncode == 0, health.stderr
        groups = run(bin_dir / "group-broker", "groups", "--admin", f"http://127.0.0.1:{admin}", "--json", cwd=tmp_path)
        assert groups.strip().startswith("[") or groups.strip().startswith("{")
    finally:
        server.terminate()
        output = server.communicate(timeout=15)[0].decode()
    assert server.returncode == 0, output
    assert "broker listening" in output
