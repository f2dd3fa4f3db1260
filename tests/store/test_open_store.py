"""open_store(url): which backend a URL names."""

from __future__ import annotations

from pathlib import Path

import pytest

from perdure.store import MemoryStore, SQLiteStore, open_store
from perdure.store.postgres.store import PostgresStore


def test_memory_url() -> None:
    assert isinstance(open_store("memory://"), MemoryStore)


def test_sqlite_url_relative_and_absolute(tmp_path: Path) -> None:
    relative = open_store("sqlite:///data/perdure.db")
    assert isinstance(relative, SQLiteStore)
    assert relative.path == Path("data/perdure.db")
    absolute = open_store(f"sqlite:///{tmp_path}/x.db")  # tmp_path starts with "/"
    assert isinstance(absolute, SQLiteStore)
    assert absolute.path == tmp_path / "x.db"
    assert absolute.durability == "process"


def test_sqlite_url_options() -> None:
    store = open_store("sqlite:///a%20b.db?durability=power")
    assert isinstance(store, SQLiteStore)
    assert store.path == Path("a b.db")
    assert store.durability == "power"
    with pytest.raises(ValueError, match="durability"):
        open_store("sqlite:///a.db?durability=never")
    with pytest.raises(ValueError, match="Unknown SQLite URL option"):
        open_store("sqlite:///a.db?fast=1")
    with pytest.raises(ValueError, match="names no file"):
        open_store("sqlite:///")


def test_plain_path_is_sqlite(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "plain.db"))
    assert isinstance(store, SQLiteStore)
    assert store.path == tmp_path / "plain.db"
    assert isinstance(open_store("relative.db"), SQLiteStore)


@pytest.mark.parametrize("url", ["mysql://host/db", "redis://localhost/0", "memory:/x://", ""])
def test_unknown_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="store URL"):
        open_store(url)


async def test_a_url_store_opens(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/opened.db")
    await store.open()
    await store.close()
    assert (tmp_path / "opened.db").exists()


def test_postgres_urls() -> None:
    store = open_store("postgresql://me:secret@db.example:5433/app")
    assert isinstance(store, PostgresStore)
    assert store.url == "postgresql://me:secret@db.example:5433/app"
    assert (store.schema, store.pool_min, store.pool_max) == (None, 1, 10)
    assert store.durability == "process"
    other = open_store(
        "postgres://db/app?sslmode=require&schema=tenant_1&pool_max=20&pool_min=2"
        "&durability=power&connect_timeout=5"
    )
    assert isinstance(other, PostgresStore)
    # perdure's options are taken out; libpq's stay in the URL it gets.
    assert other.url == "postgres://db/app?sslmode=require&connect_timeout=5"
    assert (other.schema, other.pool_min, other.pool_max) == ("tenant_1", 2, 20)
    assert other.durability == "power"


def test_postgres_url_errors_do_not_show_the_password() -> None:
    with pytest.raises(ValueError, match="durability") as caught:
        open_store("postgresql://me:secret@db/app?durability=sometimes")
    assert "secret" not in str(caught.value)
    with pytest.raises(ValueError, match="integers") as caught:
        open_store("postgresql://me:secret@db/app?pool_max=many")
    assert "secret" not in str(caught.value)
