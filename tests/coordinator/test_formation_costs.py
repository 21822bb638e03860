"""Formation costs (issue 17): member ids, and what `group-broker serve`'s garbage-collection setting rests on
(broker/cli/main.py, _collect_old_objects_rarely): the coordinator's long-lived objects hold no reference cycles,
so a group formed, left and deleted is freed by reference counting alone and full collections can be rare."""

from __future__ import annotations

import gc
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from broker.coordinator.coordinator import random_uuid
from broker.coordinator.messages import LeavingMember
from tests.coordinator.test_memory_per_member import Formation


@pytest.fixture
def no_automatic_collection() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_automatic_collection")
def test_forming_leaving_and_deleting_groups_leaves_no_cyclic_garbage() -> None:
    formation = Formation(buffer_total=1_000)
    for g in range(20):
        formation.group(f"cycles-{g}")
    assert gc.collect() == 0
    coordinator = formation.coordinator
    for group_id, group in list(coordinator.groups.items()):
        result = coordinator.leave(group_id, [LeavingMember(member_id) for member_id in list(group.members)])
        assert result.error == 0
    formation.clock.advance(10)
    assert gc.collect() == 0
    assert all(error == 0 for _, error in coordinator.delete_groups(list(coordinator.groups)))
    formation.clock.advance(10)
    assert not coordinator.groups
    assert gc.collect() == 0


def test_serve_collects_the_old_generation_rarely() -> None:
    probe = "import gc, broker.cli.main as m; m._collect_old_objects_rarely(); print(gc.get_threshold())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == f"({gc.get_threshold()[0]}, {gc.get_threshold()[1]}, 100)"


def test_random_member_uuids_are_version_4_uuid_strings() -> None:
    seen = {random_uuid() for _ in range(1_000)}
    assert len(seen) == 1_000
    for text in list(seen)[:50]:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)
