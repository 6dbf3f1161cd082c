"""sluice.sql on a SQLite file made here: rows and column types, NULL defaults, partitions
split across shards. (PostgreSQL is checked by core/tests/sql.rs against a real server.)"""

import sqlite3

import numpy as np
import pytest

import sluice


@pytest.fixture()
def shop(tmp_path):
    path = tmp_path / "shop.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE items (id INTEGER, price REAL, name TEXT)")
    conn.executemany(
        "INSERT INTO items VALUES (?, ?, ?)",
        [(i, None if i % 5 == 2 else i / 4, f"item {i}") for i in range(40)],
    )
    conn.commit()
    conn.close()
    return path


def test_rows_types_and_defaults(shop):
    rows = list(
        sluice.sql("SELECT * FROM items ORDER BY id", path=shop, null_defaults={"price": -1.0})
    )
    assert len(rows) == 40
    assert rows[3]["id"].dtype == np.int64 and int(rows[3]["id"]) == 3
    assert rows[3]["price"].dtype == np.float64 and float(rows[3]["price"]) == 0.75
    assert float(rows[2]["price"]) == -1.0
    assert rows[3]["name"].item() == b"item 3"
    with pytest.raises(sluice.SluiceError, match='row 2, column "price"'):
        list(sluice.sql("SELECT * FROM items ORDER BY id", path=shop))


def test_partitions_split_across_shards(shop):
    p = sluice.sql(
        "SELECT id FROM items", path=shop, partition_column="id", num_partitions=4
    )
    ids = sorted(int(e["id"]) for e in p)
    assert ids == list(range(40))
    halves = [sorted(int(e["id"]) for e in p.with_shard(2, i)) for i in range(2)]
    assert sorted(halves[0] + halves[1]) == list(range(40))
    assert halves[0] and halves[1]
