"""The packaging tests: `maturin build --release` makes an abi3 wheel that installs into a fresh
venv and works there with no Rust toolchain on PATH; `maturin sdist` makes a source distribution
that holds the core crate and builds such a wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PYTHON_DIR = Path(__file__).parent.parent

# the smoke test the release workflow runs on each platform
SMOKE = Path(__file__).parent / "smoke.py"


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
    assert_works_in_a_fresh_venv(wheel, tmp_path)


def assert_works_in_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    """Installs `wheel` into a new venv whose PATH has no cargo or rustc, and uses it there."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    path = f"{venv / 'bin'}:/usr/bin:/bin"
    env = {"PATH": path, "HOME": str(tmp_path)}
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None
    subprocess.run(
        ["pip", "install", "--no-index", "--quiet", str(wheel)], env=env, check=True, timeout=300
    )
    ran = subprocess.run(
        ["python", str(SMOKE), str(tmp_path / "w.db")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "INVALID_INPUT"


def test_the_sdist_is_self_contained_and_builds_a_working_wheel(tmp_path: Path) -> None:
    """`maturin sdist` holds everything the build needs (the core crate lives outside python/:
    maturin copies it in and cuts the workspace down to the two crates), and pip builds a wheel
    from it (the PEP 517 build `pip install <sdist>` runs) that works in a fresh venv. Built with
    the workspace's target dir (CARGO_TARGET_DIR): the registry crates are reused, the two crates
    of the sdist compile again, in release as pip builds them: 3 min 57 s here (2 shared cores),
    the most this suite's CI time grew by."""
    out = tmp_path / "sdist"
    subprocess.run([maturin(), "sdist", "-o", str(out)], cwd=PYTHON_DIR, check=True, timeout=300)
    [sdist] = list(out.glob("threadline-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        tar.extractall(tmp_path / "unpacked", filter="data")
    for name in [
        "pyproject.toml",
        "Cargo.toml",
        "Cargo.lock",
        "python/Cargo.toml",
        "python/src/lib.rs",
        "python/src/convert.rs",
        "crates/threadline/Cargo.toml",
        "crates/threadline/src/lib.rs",
        # a file the core includes with include_str!
        "crates/threadline/src/interop/export/html.css",
        "threadline/__init__.py",
        "threadline/openai_agents.py",
        "threadline/claude_agent_sdk.py",
        "threadline/py.typed",
        "threadline/_native.pyi",
    ]:
        assert name in names, sorted(names)
    # the core's own sources, every one the workspace has
    core = PYTHON_DIR.parent / "crates" / "threadline" / "src"
    for src in core.rglob("*.rs"):
        assert f"crates/threadline/src/{src.relative_to(core)}" in names, src
    # the workspace the sdist builds is the two crates, not the Node binding left behind
    manifest = (tmp_path / "unpacked" / sdist.name[: -len(".tar.gz")] / "Cargo.toml").read_text()
    assert '"crates/threadline"' in manifest and '"python"' in manifest and '"."' not in manifest

    wheels = tmp_path / "wheels"
    env = dict(
        os.environ,
        CARGO_TARGET_DIR=str(PYTHON_DIR.parent / "target"),
        # the build backend runs the `maturin` executable beside the interpreter
        PATH=f"{Path(maturin()).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-index", "--no-deps",
         "--no-build-isolation", "-w", str(wheels), str(sdist)],
        env=env, check=True, timeout=1800,
    )
    [wheel] = list(wheels.glob("*.whl"))
    assert "threadline/py.typed" in zipfile.ZipFile(wheel).namelist()
    assert_works_in_a_fresh_venv(wheel, tmp_path)
