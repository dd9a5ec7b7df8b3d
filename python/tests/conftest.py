"""Fixtures: a store location on each engine. SQLite always; PostgreSQL when the test server's URL
is in THREADLINE_TEST_POSTGRES (`node scripts/postgres.js run -- ...` sets it), each test in a
schema of its own, as the core suite does (crates/threadline/tests/common/mod.rs)."""

from __future__ import annotations

import os
import signal
import subprocess
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


def sigkill_after(args: List[str], word: str, count: int) -> int:
    """Runs `args` (a writer printing `<word> <n>` after each acknowledged write), SIGKILLs it once
    it printed `<word> <count>` or more, and gives the last n it printed, counting the lines it
    wrote before the kill landed (each an acknowledgement a new process must find)."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        last = -1
        while last < count:
            text = p.stdout.readline()
            assert text.startswith(f"{word} "), text
            last = int(text.split()[1])
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    assert p.returncode == -signal.SIGKILL
    assert p.stdout is not None
    for text in p.stdout.read().splitlines():
        if text.startswith(f"{word} "):
            last = int(text.split()[1])
    return last
