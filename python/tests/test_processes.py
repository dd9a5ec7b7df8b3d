"""One store, two languages, real processes: a session written from Node is read from Python and
the other way round while both run; SESSION_LOCKED holds across them; a Python writer killed
with SIGKILL right after acknowledged appends loses none of them (checked from a new process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, List

import pytest

from threadline import Store, ThreadlineError

HERE = Path(__file__).parent


def node(*args: str) -> "subprocess.Popen[str]":
    return subprocess.Popen(
        ["node", str(HERE / "node_peer.js"), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def line(out: "IO[str] | None", prefix: str) -> str:
    assert out is not None
    text = out.readline()
    assert text.startswith(prefix + " ") or text.strip() == prefix, f"expected {prefix}, got {text!r}"
    return text[len(prefix) :].strip()


def node_try(location: str, session_id: str) -> "tuple[list, str]":
    p = node("try", location, session_id)
    messages = json.loads(line(p.stdout, "MESSAGES"))
    result = line(p.stdout, "RESULT")
    assert p.wait(timeout=60) == 0
    return messages, result


def test_node_and_python_share_a_session_and_its_lock(location: str) -> None:
    holder = node("hold", location)
    try:
        ready = json.loads(line(holder.stdout, "READY"))
        with Store.open(location) as store:
            session = store.open_session(ready["id"])
            # written from Node, read from Python while Node runs and holds it
            assert session.messages == ready["messages"]
            assert session.messages[0]["n"] == 1.5
            with pytest.raises(ThreadlineError) as info:
                session.append("from Python, too early")
            assert info.value.code == "SESSION_LOCKED"
            assert str(os.getpid()) not in str(info.value)  # names the holder, not us
            assert len(session.messages) == 2  # the refused call wrote nothing

            # Node lets go; Python takes over and now holds it
            assert holder.stdin is not None
            holder.stdin.write("close\n")
            holder.stdin.flush()
            line(holder.stdout, "CLOSED")
            filled = session.append({"role": "user", "content": [{"type": "text", "text": "from Python"}], "n": 7})
            assert filled["seq"] == 2

            # a Node process reads what Python wrote, and cannot write while Python holds it
            messages, result = node_try(location, ready["id"])
            assert result == "SESSION_LOCKED"
            assert messages == ready["messages"] + [
                {"role": "user", "content": [{"type": "text", "text": "from Python"}], "n": 7}
            ]

            session.close()
            messages, result = node_try(location, ready["id"])
            assert result == "ok"
            assert len(messages) == 3
            # and Python reads what that Node process wrote
            assert store.open_session(ready["id"]).messages[-1] == {"role": "user", "content": [{"type": "text", "text": "from Node again"}]}
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=60)


def test_a_sigkilled_python_writer_loses_nothing_it_acknowledged(location: str) -> None:
    writer = subprocess.Popen(
        [sys.executable, str(HERE / "py_writer.py"), location], stdout=subprocess.PIPE, text=True
    )
    try:
        session_id = line(writer.stdout, "SESSION")
        acked: List[str] = []
        while len(acked) < 60:
            seq, uuid = line(writer.stdout, "ACK").split()
            assert int(seq) == len(acked)
            acked.append(uuid)
        writer.send_signal(signal.SIGKILL)  # right after the 60th acknowledgement
    finally:
        writer.kill()
        writer.wait(timeout=60)
    assert writer.returncode == -signal.SIGKILL

    # checked from a new process
    check = (
        "import json, sys\n"
        "from threadline import Store\n"
        "s = Store.open(sys.argv[1]).open_session(sys.argv[2])\n"
        "print(json.dumps({'n': s.info['messageCount'], 'msgs': [[m['i'], str(m['big'])] for m in s.messages]}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", check, location, session_id], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    # every acknowledged append is there, in order, exact; one in flight at the kill may be too
    assert seen["n"] >= len(acked)
    for i, (n, big) in enumerate(seen["msgs"][: len(acked)]):
        assert n == i and big == str(10**30 + i)
    with Store.open(location) as store:
        session = store.open_session(session_id)
        uuids = [e["uuid"] for e in session.envelopes()][: len(acked)]
        assert uuids == acked
        # the killed writer's session can be taken over and continued
        session.recover()
        session.append("continuing after the kill")
