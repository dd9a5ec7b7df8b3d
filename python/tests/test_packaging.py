"""The packaging test: `maturin build --release` makes an abi3 wheel that installs into a fresh
venv and works there with no Rust toolchain on PATH."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

PYTHON_DIR = Path(__file__).parent.parent

USE = r"""
import json, sys
import threadline
from threadline import Store, ThreadlineError, aio
assert threadline.__file__.startswith(sys.prefix), threadline.__file__
with Store.open(sys.argv[1]) as store:
    s = store.create_session(project="wheel")
    m = {"role": "user", "content": [{"type": "text", "text": "from the wheel"}], "big": 10**30}
    s.append(m)
    assert s.messages == [m]
    try:
        s.append({"role": "user", "content": b"x"})
    except ThreadlineError as e:
        print(e.code)
"""


def maturin() -> str:
    beside = Path(sys.executable).parent / "maturin"
    found = str(beside) if beside.exists() else shutil.which("maturin")
    assert found, "maturin is not installed (pip install maturin)"
    return found


def test_the_wheel_installs_and_works_in_a_fresh_venv_without_rust(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    subprocess.run(
        [maturin(), "build", "--release", "--quiet", "-o", str(out)],
        cwd=PYTHON_DIR,
        check=True,
        timeout=1800,
    )
    [wheel] = list(out.glob("*.whl"))
    assert "-cp39-abi3-" in wheel.name  # one wheel for every CPython >= 3.9
    names = zipfile.ZipFile(wheel).namelist()
    for name in [
        "threadline/__init__.py",
        "threadline/aio.py",
        "threadline/checkpoint.py",
        "threadline/claude_agent_sdk.py",
        "threadline/openai_agents.py",
        "threadline/py.typed",
        "threadline/_native.pyi",
    ]:
        assert name in names, names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    path = f"{venv / 'bin'}:/usr/bin:/bin"
    env = {"PATH": path, "HOME": str(tmp_path)}
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None
    subprocess.run(
        ["pip", "install", "--no-index", "--quiet", str(wheel)], env=env, check=True, timeout=300
    )
    ran = subprocess.run(
        ["python", "-c", USE, str(tmp_path / "w.db")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "INVALID_INPUT"
