"""threadline.checkpoint.SnapshotCheckpoints: load / save / clear of whole states, on both
engines; a state saved comes back equal, a Session as its snapshot; a save or clear that returned
survives the process being SIGKILLed (checked in a new process)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from threadline import Store, ThreadlineError
from threadline.checkpoint import SnapshotCheckpoints

from conftest import sigkill_after

HERE = Path(__file__).parent


def test_load_of_an_unknown_key_is_none_and_a_save_comes_back_equal(location: str) -> None:
    with Store.open(location) as store:
        c = SnapshotCheckpoints(store)
        assert c.load("run-1") is None
        state = {"z": 1, "a": [1, 2.5, None, True, "x"], "big": 10**30, "nested": {"b": {"c": []}}}
        c.save("run-1", state)
        back = c.load("run-1")
        assert back == state and json.dumps(back) == json.dumps(state)
        # the next save replaces it; another key is its own
        c.save("run-1", {"step": 2})
        c.save("run-2", ["other"])
        assert c.load("run-1") == {"step": 2}
        assert c.load("run-2") == ["other"]
    with Store.open(location) as store:  # committed: a new store handle reads it
        assert SnapshotCheckpoints(store).load("run-1") == {"step": 2}


def test_many_saves_keep_one_checkpoint_and_clear_forgets_it(location: str) -> None:
    with Store.open(location) as store:
        c = SnapshotCheckpoints(store)
        for i in range(10):
            c.save("k", {"step": i})
        assert c.load("k") == {"step": 9}
        slots = [s for s in store.list_sessions(project="threadline-checkpoints")]
        assert len(slots) == 1, "older generations are deleted"
        c.clear("k")
        assert c.load("k") is None
        c.clear("k")  # nothing to clear: nothing happens
        c.save("k", {"step": 0})  # a cleared key starts again
        assert c.load("k") == {"step": 0}


def test_a_session_is_saved_as_its_snapshot_and_resumes_from_it(location: str) -> None:
    with Store.open(location) as store:
        s = store.create_session(project="p")
        s.append({"role": "user", "content": "hi"})
        s.append({"role": "assistant", "content": [{"type": "text", "text": "hello"}]})
        c = SnapshotCheckpoints(store)
        c.save("conv", s)
        snapshot = c.load("conv")
        assert isinstance(snapshot, str)
        messages = s.messages
        s.close()
        store.delete_session(s.id)
        resumed = store.import_snapshot(snapshot)
        assert resumed.messages == messages
        resumed.close()


def test_a_refused_state_or_key_is_invalid_input_and_keeps_the_checkpoint(location: str) -> None:
    with Store.open(location) as store:
        c = SnapshotCheckpoints(store)
        c.save("k", {"ok": 1})
        for bad in ({"x": float("nan")}, {1: "non-str key"}, {"b": b"bytes"}, {"s": {1, 2}}):
            with pytest.raises(ThreadlineError) as info:
                c.save("k", bad)
            assert info.value.code == "INVALID_INPUT"
            assert c.load("k") == {"ok": 1}
        for key in ("", None, 3):
            with pytest.raises(ThreadlineError, match="key") as info:
                c.save(key, {})  # type: ignore[arg-type]
            assert info.value.code == "INVALID_INPUT"
        assert len(store.list_sessions(project="threadline-checkpoints")) == 1


def test_sigkill_after_saves_returned_loses_none_and_clear_is_durable(location: str) -> None:
    saved = sigkill_after([sys.executable, str(HERE / "checkpoint_writer.py"), location], "SAVED", 30)
    # a new process reads it, saves, clears, and is SIGKILLed right after the clear returned
    code = """
import json, os, signal, sys
from threadline import Store
from threadline.checkpoint import SnapshotCheckpoints
store = Store.open(sys.argv[1])
c = SnapshotCheckpoints(store)
print(json.dumps(c.load("loop")))
c.save("loop", {"step": "after"})
print(json.dumps(c.load("loop")), flush=True)
c.clear("loop")
os.kill(os.getpid(), signal.SIGKILL)
"""
    r = subprocess.run([sys.executable, "-c", code, location], capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr
    before, after = [json.loads(l) for l in r.stdout.splitlines()]
    # the last acknowledged save, or the one in flight when it was killed (whole)
    assert before["step"] in (saved, saved + 1)
    assert before["big"] == 10**40 + before["step"]
    assert before["history"] == list(range(before["step"] % 50))
    assert after == {"step": "after"}
    # the clear returned before that process was killed: a third one finds nothing
    r = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom threadline import Store\nfrom threadline.checkpoint import SnapshotCheckpoints\n"
         "with Store.open(sys.argv[1]) as s: print(SnapshotCheckpoints(s).load('loop'))", location],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "None"
