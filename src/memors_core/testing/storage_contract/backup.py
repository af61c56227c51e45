"""The storage contract: backup."""

from __future__ import annotations

from pathlib import Path

import pytest

from memors_core.errors import BadInput
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import Opener, StorageFixtures
from memors_core.testing.storage_contract.helpers import add_document, remember


class BackupContract(StorageFixtures):
    """Online backup, where the engine declares ``online_backup``."""

    def test_a_backup_taken_while_others_write_holds_what_was_committed(
        self, storage: Storage, open_storage: Opener, tmp_path: Path
    ) -> None:
        if not storage.capabilities.online_backup:
            pytest.skip("the engine does not declare online_backup")
        committed = remember(storage, "Committed before the backup.")
        writer = open_storage()
        target = tmp_path / "backup-of-store"
        with writer.write() as tx:
            _, [pending] = add_document(tx, ["Not committed when the backup ran."])
            result = storage.backup(str(target))
        assert result["path"] == str(target)
        copy = self.open_backup(target)
        try:
            with copy.read() as tx:
                assert tx.passages.get(committed) is not None
                assert tx.passages.get(pending) is None
        finally:
            copy.close()
        with pytest.raises(BadInput):
            storage.backup(str(target))
