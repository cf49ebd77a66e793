"""RDB files in tests: the module that writes the golden RDB files of tests/data, and the
DEBUG DIGEST and aux fields of an RDB's bytes."""

from __future__ import annotations

import os

from tests.support.paths import DATA_DIR


def golden_module():  # -> the make_golden_rdb module
    """tests/data/make_golden_rdb.py, loaded as a module (its datasets and file names)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_golden_rdb", os.path.join(DATA_DIR, "make_golden_rdb.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rdb_digest(tmp_path, rdb: bytes) -> tuple[str, dict]:  # noqa: ANN001
    """The DEBUG DIGEST of the dataset in ``rdb`` bytes, and the RDB's aux fields."""
    from pyrepl.keyspace.digest import dataset_digest
    from pyrepl.rdb.decoder import load_rdb_file

    path = os.path.join(str(tmp_path), f"got-{os.urandom(3).hex()}.rdb")
    with open(path, "wb") as f:
        f.write(rdb)
    loaded = load_rdb_file(path, 16)

    class Db:
        def __init__(self, data, expires) -> None:  # noqa: ANN001
            self.data = data
            self.expires = expires

    dbs = [Db(d, e) for d, e in zip(loaded.data, loaded.expires, strict=True)]
    return dataset_digest(dbs, None), loaded.aux
