"""The SASL users: PLAIN passwords and SCRAM credentials, shared by the logins and the SCRAM credential APIs.

``--sasl-users`` fills it at start (PLAIN keeps the password, as Kafka's JAAS ``user_<name>`` entries do; SCRAM
keeps only salt, iterations, StoredKey and ServerKey, as Kafka's ``ScramCredential``); AlterUserScramCredentials
(broker/api/scram_admin.py) changes the SCRAM credentials at run time, and the next login uses them (open sessions
are not touched, as with Kafka's ScramControlManager).

With a data directory, the SCRAM changes made over the wire are kept in ``scram-credentials.json`` there (written
whole and renamed into place on each change: they are rare) and replayed over the ``--sasl-users`` ones at the next
start, so a credential added or deleted over the wire survives a restart as it does in Kafka's metadata log.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable
from pathlib import Path

from broker.security.sasl.scram import ScramCredential, new_credential
from broker.server.settings import PLAIN, SCRAM_MECHANISMS, UserEntry

STORE_FILE = "scram-credentials.json"


def _encode(credential: ScramCredential | None) -> dict[str, object] | None:
    if credential is None:
        return None
    return {
        "salt": base64.b64encode(credential.salt).decode(),
        "iterations": credential.iterations,
        "stored_key": base64.b64encode(credential.stored_key).decode(),
        "server_key": base64.b64encode(credential.server_key).decode(),
    }


def _decode(value: dict[str, object] | None) -> ScramCredential | None:
    if value is None:
        return None
    return ScramCredential(
        base64.b64decode(str(value["salt"])),
        int(str(value["iterations"])),
        base64.b64decode(str(value["stored_key"])),
        base64.b64decode(str(value["server_key"])),
    )


class UserStore:
    def __init__(self, entries: Iterable[UserEntry] = (), data_dir: str | None = None) -> None:
        self._passwords: dict[str, str] = {}
        self._scram: dict[tuple[str, str], ScramCredential] = {}
        # What the wire changed, (user, mechanism) -> credential or None (deleted): what the data directory keeps.
        self._changed: dict[tuple[str, str], ScramCredential | None] = {}
        self._file = Path(data_dir) / STORE_FILE if data_dir else None
        for entry in entries:
            if PLAIN in entry.mechanisms:
                self._passwords[entry.name] = entry.password
            for mechanism in SCRAM_MECHANISMS:
                if mechanism in entry.mechanisms:
                    # 4096 iterations of SHA-512 take milliseconds: once per user at start, never per login.
                    self._scram[entry.name, mechanism] = new_credential(mechanism, entry.password)
        if self._file is not None and self._file.exists():
            stored = json.loads(self._file.read_text())
            for item in stored["changes"]:
                self._apply(item["user"], item["mechanism"], _decode(item["credential"]))

    def password_of(self, user: str) -> str | None:
        return self._passwords.get(user)

    def credential_of(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._scram.get((user, mechanism))

    def scram_users(self) -> dict[str, dict[str, ScramCredential]]:
        """Every user with a SCRAM credential, its credentials by mechanism, users in name order."""
        found: dict[str, dict[str, ScramCredential]] = {}
        for (user, mechanism), credential in sorted(self._scram.items()):
            found.setdefault(user, {})[mechanism] = credential
        return found

    def users(self) -> list[str]:
        """Every user with any credential (names only)."""
        return sorted({*self._passwords, *(user for user, _ in self._scram)})

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._apply(user, mechanism, credential)
        self._changed[user, mechanism] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        """Remove a SCRAM credential; False when there was none."""
        if (user, mechanism) not in self._scram:
            return False
        self._apply(user, mechanism, None)
        self._changed[user, mechanism] = None
        return True

    def save(self) -> None:
        """Keep the wire's changes in the data directory (once per AlterUserScramCredentials request)."""
        if self._file is None:
            return
        changes = [
            {"user": user, "mechanism": mechanism, "credential": _encode(credential)}
            for (user, mechanism), credential in self._changed.items()
        ]
        temporary = self._file.with_suffix(".tmp")
        with open(temporary, "w") as out:
            json.dump({"version": 1, "changes": changes}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self._file)

    def _apply(self, user: str, mechanism: str, credential: ScramCredential | None) -> None:
        self._changed[user, mechanism] = credential
        if credential is None:
            self._scram.pop((user, mechanism), None)
        else:
            self._scram[user, mechanism] = credential
