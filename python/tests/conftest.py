"""Fixtures: a store location on each engine. SQLite always; PostgreSQL when the test server's URL
is in THREADLINE_TEST_POSTGRES (`node scripts/postgres.js run -- ...` sets it), each test in a
schema of its own, as the core suite does (crates/threadline/tests/common/mod.rs)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import List

import pytest


def engines() -> List[str]:
    if os.environ.get("THREADLINE_TEST_POSTGRES"):
        return ["sqlite", "postgres"]
    if os.environ.get("THREADLINE_REQUIRE_POSTGRES") == "1":
        # CI must run the PostgreSQL half, not pass for want of a server
        raise RuntimeError("THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not")
    return ["sqlite"]


@pytest.fixture(params=engines())
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's store lives: a file in its temp dir, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "t.db")
    base = os.environ["THREADLINE_TEST_POSTGRES"]
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}schema=py_{uuid.uuid4().hex[:16]}"


@pytest.fixture
def sqlite_path(tmp_path: Path) -> str:
    return str(tmp_path / "t.db")
