"""The package's types hold: `mypy --strict` over python/threadline (the stubs of the native
module included) and the typed example in python/examples passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PYTHON = Path(__file__).parent.parent


def test_mypy_strict_passes_over_the_package_and_the_examples(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), "threadline", "examples"],
        cwd=PYTHON, capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
