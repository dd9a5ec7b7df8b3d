"""threadline.openai_agents.ThreadlineSession: the OpenAI Agents SDK's Session protocol, driven
directly and by the real SDK (Runner.run) against the loopback model server
(__test__/helpers/model-server, started by model_server_openai.js), on both engines; a run killed with
SIGKILL is resumed by a new process."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import Runner, SessionSettings  # noqa: E402
from agents.memory import Session as SessionProtocol  # noqa: E402

import threadline.aio  # noqa: E402
from threadline import Store, ThreadlineError  # noqa: E402
from threadline.openai_agents import ThreadlineSession  # noqa: E402

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import oai_run  # noqa: E402

USER = {"role": "user", "content": "What is in main.rs?"}
REASONING = {
    "id": "rs_1",
    "summary": [{"text": "look first", "type": "summary_text"}],
    "type": "reasoning",
    "encrypted_content": "enc==",
}
CALL = {
    "arguments": '{"q":"x"}',
    "call_id": "call_1",
    "name": "lookup",
    "type": "function_call",
    "id": "fc_1",
    "status": "completed",
}
OUTPUT = {"call_id": "call_1", "output": "found x", "type": "function_call_output"}
ANSWER = {
    "id": "msg_1",
    "content": [{"annotations": [], "text": "done", "type": "output_text", "logprobs": []}],
    "role": "assistant",
    "status": "completed",
    "type": "message",
    # numbers as the SDK may hold them: kept exactly
    "x_meta": {"z": 1, "a": 10**30, "f": 0.1, "neg": -0.0},
}
TURN = [USER, REASONING, CALL, OUTPUT, ANSWER]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def dumped(items: List[Dict[str, Any]]) -> str:
    """Items as text: equal text means equal values in the same key order."""
    return json.dumps(items)


def expect_invalid(fn: Any, *parts: str) -> ThreadlineError:
    with pytest.raises(ThreadlineError) as info:
        fn()
    assert info.value.code == "INVALID_INPUT", info.value
    for part in parts:
        assert part in str(info.value), (part, str(info.value))
    return info.value


# ----- the model server -----


class ModelServer:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            ["node", str(HERE / "model_server_openai.js")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("READY "), line
        self.url = line.split(" ", 1)[1].strip()

    def state(self) -> Dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("state\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.startswith("STATE "), line
        state: Dict[str, Any] = json.loads(line[6:])
        return state

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    s = ModelServer()
    # the SDK's default provider keeps the client it is given first: one server for the module
    oai_run.use_server(s.url)
    yield s
    s.close()


def assert_reasoning_as_issued(state: Dict[str, Any]) -> int:
    """Every reasoning item the server received carries exactly what it issued for that id."""
    issued = {i["id"]: i for i in state["issued"] if i["type"] == "reasoning"}
    seen = 0
    for body in state["requests"]:
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "reasoning":
                seen += 1
                assert item["id"] in issued
                assert item.get("encrypted_content") == issued[item["id"]].get("encrypted_content")
    return seen


# ----- the protocol -----


def test_satisfies_the_session_protocol(sqlite_path: str) -> None:
    with Store.open(sqlite_path) as store:
        session = ThreadlineSession("s", store)
        assert isinstance(session, SessionProtocol)
        assert session.session_id == "s"
        assert session.session_settings is None
        assert isinstance(ThreadlineSession(None, store).session_id, str)


def test_add_get_pop_clear_round_trip_in_order_and_durable(location: str) -> None:
    with Store.open(location) as store:
        session = ThreadlineSession("conv", store)
        assert run(session.get_items()) == []
        assert run(session.pop_item()) is None
        run(session.add_items(TURN[:2]))
        run(session.add_items(TURN[2:]))
        items = run(session.get_items())
        assert dumped(items) == dumped(TURN)  # equal, in order, keys in their order
        assert items[4]["x_meta"]["a"] == 10**30
        assert math.copysign(1.0, items[4]["x_meta"]["neg"]) == -1.0
        assert dumped(run(session.get_items(limit=4))) == dumped(TURN[1:])
        assert dumped(run(session.get_items(limit=1))) == dumped(TURN[4:])
        assert run(session.get_items(limit=0)) == []
        # the conversation is a Threadline session too: neutral messages beside the items
        messages = store.open_session("conv").messages
        assert [m["role"] for m in messages] == ["user", "assistant", "assistant", "user", "assistant"]

    # a new store object (as a new process would) reads the same items
    with Store.open(location) as store:
        session = ThreadlineSession("conv", store)
        assert dumped(run(session.get_items())) == dumped(TURN)
        # pop: the latest item (the answer, produced without reasoning here)
        assert dumped(run(session.pop_item())) == dumped(ANSWER)
    with Store.open(location) as store:
        session = ThreadlineSession("conv", store)
        assert dumped(run(session.get_items())) == dumped(TURN[:4])
        run(session.clear_session())
    with Store.open(location) as store:
        session = ThreadlineSession("conv", store)
        assert run(session.get_items()) == []
        run(session.add_items([USER]))  # the same id, started again
        assert run(session.get_items()) == [USER]


def test_pop_takes_the_reasoning_that_produced_the_item(location: str) -> None:
    with Store.open(location) as store:
        session = ThreadlineSession("pop", store)
        run(session.add_items([USER, REASONING, dict(ANSWER, id="msg_2")]))
        assert run(session.pop_item())["id"] == "msg_2"
        assert run(session.get_items()) == [USER]
        assert run(session.pop_item()) == USER
        assert run(session.pop_item()) is None
    with Store.open(location) as store:
        assert run(ThreadlineSession("pop", store).get_items()) == []


def test_get_items_limit_never_starts_with_an_orphan_or_lone_reasoning(location: str) -> None:
    with Store.open(location) as store:
        session = ThreadlineSession("limit", store)
        run(session.add_items(TURN))
        # the last 2 would start with the output of a call cut off: it is left out
        assert run(session.get_items(limit=2)) == [ANSWER]
        # the last 3 would part the call from its reasoning
        assert run(session.get_items(limit=3)) == [ANSWER]
        assert dumped(run(session.get_items(limit=4))) == dumped(TURN[1:])
        settings = ThreadlineSession("limit", store, session_settings=SessionSettings(limit=4))
        assert dumped(run(settings.get_items())) == dumped(TURN[1:])


def test_a_call_without_its_output_is_answered_as_recover_does_and_recorded(location: str) -> None:
    with Store.open(location) as store:
        session = ThreadlineSession("cut", store)
        run(session.add_items(TURN[:3]))  # what a run killed while its tool ran leaves
        items = run(session.get_items())
        assert dumped(items[:3]) == dumped(TURN[:3])
        assert len(items) == 4
        assert items[3]["type"] == "function_call_output"
        assert items[3]["call_id"] == "call_1"
        assert items[3]["output"].startswith("Not run")
        stored = store.open_session("cut")
        envelopes = stored.envelopes()
        assert any("repair" in e for e in envelopes), "the repair is a record"
        assert stored._native.pending_repairs() == []
        stored.close()
        # reading again writes nothing
        assert run(session.get_items()) == items
        assert len(store.open_session("cut").envelopes()) == len(envelopes)


def test_an_output_without_its_call_is_left_out_and_recorded_once(location: str) -> None:
    stray = {"call_id": "call_gone", "output": "x", "type": "function_call_output"}
    with Store.open(location) as store:
        session = ThreadlineSession("stray", store)
        run(session.add_items([USER, stray]))
        assert run(session.get_items()) == [USER]
        assert run(session.get_items()) == [USER]
        events = [e for e in store.open_session("stray").envelopes() if e.get("name") == "openai-agents.dropped"]
        assert len(events) == 1
        assert events[0]["data"]["callId"] == "call_gone"


def test_bad_input_is_invalid_input_with_a_path_and_stores_nothing(location: str) -> None:
    with Store.open(location) as store:
        session = ThreadlineSession("bad", store)
        run(session.add_items([USER]))
        before = store.open_session("bad").envelopes()
        expect_invalid(lambda: run(session.add_items("hi")), "add_items: items: expected a list")
        expect_invalid(lambda: run(session.add_items([USER, 7])), "add_items: items[1]: expected a dict")
        expect_invalid(lambda: run(session.add_items([{"type": 3}])), "add_items: items[0].type")
        expect_invalid(
            lambda: run(session.add_items([USER, {"role": "user", "content": math.nan}])),
            "add_items: items[1]",
            "content",
        )
        expect_invalid(
            lambda: run(session.add_items([USER, {"call_id": "c", "output": b"x", "type": "function_call_output"}])),
            "add_items: items[1]",
            "output",
        )
        expect_invalid(lambda: run(session.add_items([{1: "x"}])), "add_items: items[0]")
        expect_invalid(lambda: run(session.get_items(limit=-1)), "get_items: limit")
        expect_invalid(lambda: run(session.get_items(limit="3")), "get_items: limit")  # type: ignore[arg-type]
        expect_invalid(lambda: ThreadlineSession("", store), "session_id")
        expect_invalid(lambda: ThreadlineSession("x", location), "ThreadlineSession: store")
        after = store.open_session("bad").envelopes()
        assert after == before
        assert run(session.get_items()) == [USER]


def test_another_process_continues_the_conversation_while_this_one_is_alive(location: str) -> None:
    other = (
        "import asyncio, sys\n"
        "from threadline import Store\n"
        "from threadline.openai_agents import ThreadlineSession\n"
        "with Store.open(sys.argv[1]) as store:\n"
        "    s = ThreadlineSession('shared', store)\n"
        "    asyncio.run(s.add_items([{'role': 'user', 'content': 'from the other process'}]))\n"
    )
    with Store.open(location) as store:
        session = ThreadlineSession("shared", store)
        run(session.add_items(TURN))
        assert len(run(session.get_items())) == 5
        # this process is alive, its store open: each call released the session
        subprocess.run([sys.executable, "-c", other, location], check=True, capture_output=True)
        items = run(session.get_items())
        assert dumped(items) == dumped(TURN + [{"role": "user", "content": "from the other process"}])
        run(session.add_items([USER]))
        assert len(run(session.get_items())) == 7


def test_a_clear_and_restart_by_another_object_is_seen(location: str) -> None:
    with Store.open(location) as store:
        one = ThreadlineSession("again", store)
        two = ThreadlineSession("again", store)
        run(one.add_items(TURN))
        assert len(run(one.get_items())) == 5
        run(two.clear_session())
        run(two.add_items([USER, ANSWER]))
        assert dumped(run(one.get_items())) == dumped([USER, ANSWER])


def test_what_an_object_remembers_of_its_writes_and_walks_is_what_a_fresh_object_reads(
    location: str,
) -> None:
    """get_items keeps the records this object wrote and the branch it walked between calls:
    after each step (its own adds, another writer's, a pop, a clear elsewhere) it answers what a
    new object reading the store answers."""
    with Store.open(location) as store:
        one = ThreadlineSession("kept", store)
        two = ThreadlineSession("kept", store)

        def same() -> List[Dict[str, Any]]:
            got = run(one.get_items())
            assert dumped(got) == dumped(run(ThreadlineSession("kept", store).get_items()))
            return got

        run(one.add_items(TURN))
        assert dumped(same()) == dumped(TURN)
        # a tuple (kept as a list by the store) reads back as the list, from memory too
        run(one.add_items([{"role": "user", "content": [{"type": "input_text", "text": "t"}], "t": (1, 2)}]))
        assert same()[-1]["t"] == [1, 2]
        run(two.add_items([{"role": "user", "content": "from two"}]))  # between one's writes
        run(one.add_items([ANSWER]))
        assert [i.get("content") for i in same()[-2:-1]] == ["from two"]
        assert run(one.pop_item()) == ANSWER
        assert dumped(same()[-1]) == dumped({"role": "user", "content": "from two"})
        run(one.add_items([USER, CALL, OUTPUT]))  # after the rewind, on the new branch
        assert len(same()) == 10
        run(two.clear_session())
        run(two.add_items([USER]))
        run(one.add_items([ANSWER]))  # the session was started again under it
        assert dumped(same()) == dumped([USER, ANSWER])
        # the items returned are copies: changing them changes nothing remembered
        run(one.get_items())[0]["content"] = "changed"
        assert dumped(same()) == dumped([USER, ANSWER])


def test_works_over_threadline_aio(location: str) -> None:
    async def go() -> List[Any]:
        async with threadline.aio.Store.open(location) as store:
            session = ThreadlineSession("aio", store)
            await session.add_items(TURN)
            return await session.get_items()

    assert dumped(run(go())) == dumped(TURN)


def test_without_openai_agents_the_import_error_names_pip_install() -> None:
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'agents' or name.startswith('agents.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "try:\n"
        "    import threadline.openai_agents\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, check=True)
    assert "pip install openai-agents" in out.stdout


# ----- the real SDK -----


def test_runner_run_with_a_tool_items_kept_and_every_request_valid(
    location: str, server: ModelServer
) -> None:
    async def go(store: Store) -> List[Any]:
        # a client of this event loop's (the SDK's is bound to the loop it first ran on)
        oai_run.use_server(server.url)
        session = ThreadlineSession("run", store)
        agent = oai_run.make_agent(marker="unused")
        result = await Runner.run(agent, "first question", session=session)
        assert result.final_output == "done"
        first = await session.get_items()
        again = await Runner.run(agent, "second question", session=session)
        assert again.final_output == "done"
        usage = [r.usage for r in result.raw_responses + again.raw_responses]
        return [first, await session.get_items(), usage]

    with Store.open(location) as store:
        first, items, usage = run(go(store))
        kinds = [i.get("type", "message") for i in first]
        assert kinds == ["message", "reasoning", "function_call", "function_call_output", "reasoning", "message"]
        assert first[0]["content"] == "first question"
        assert dumped(items[:6]) == dumped(first)
        assert len(items) == 12
        state = server.state()
        assert state["invalid"] == []
        assert assert_reasoning_as_issued(state) >= 4
        # the last request held the whole conversation, both questions
        last = state["requests"][-1]["input"]
        assert [i["content"] for i in last if i.get("role") == "user"] == ["first question", "second question"]
        # an ordinary Threadline session, the usage of each model request on the response it
        # produced (the SDK passes its run context to a session whose methods take `wrapper`)
        stored = store.open_session("run")
        assert len(usage) == 4
        assert [t["usage"]["output_tokens"] for t in stored.turns] == [
            usage[0].output_tokens + usage[1].output_tokens,
            usage[2].output_tokens + usage[3].output_tokens,
        ]
        tracker = stored.token_tracker
        assert tracker["cumulativeOutputTokens"] == sum(u.output_tokens for u in usage)
        assert tracker["cumulativeInputTokens"] == sum(u.input_tokens for u in usage)
        assert stored.messages[0]["content"][0]["text"] == "first question"
        assert store.search("first", session_id="run")["hits"]


def child(location: str, session_id: str, url: str, prompt: str, marker: Path, kill_at_marker: bool = False) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "oai_run.py"), location, session_id, url, prompt, str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, OPENAI_AGENTS_DISABLE_TRACING="1"),
    )
    if kill_at_marker:
        while not marker.exists() and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_sigkill_mid_run_then_a_new_process_resumes_and_every_request_is_valid(
    location: str, server: ModelServer, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    sid = f"kill-{os.urandom(4).hex()}"
    first = child(location, sid, server.url, "first question", marker)
    assert first.returncode == 0, first.stderr
    with Store.open(location) as store:
        acknowledged = run(ThreadlineSession(sid, store).get_items())
    assert len(acknowledged) == 6

    killed = child(location, sid, server.url, "please block", marker, kill_at_marker=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with Store.open(location) as store:
        items = run(ThreadlineSession(sid, store).get_items())
    # what was acknowledged is there: the first run, and the killed run's input and its first
    # tool call with its output (stored before the second call's tool ran)
    assert dumped(items[: len(acknowledged)]) == dumped(acknowledged)
    killed_items = items[len(acknowledged) :]
    assert killed_items[0]["content"] == "please block"
    assert [i.get("type") for i in killed_items[1:4]] == ["reasoning", "function_call", "function_call_output"]
    assert json.loads(killed_items[2]["arguments"]) == {"q": "first"}
    assert killed_items[3]["output"] == "found first"

    requests_before = len(server.state()["requests"])
    third = child(location, sid, server.url, "third question", marker)
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout) == "done"
    state = server.state()
    assert state["invalid"] == []
    assert len(state["requests"]) > requests_before
    assert_reasoning_as_issued(state)
    last = state["requests"][-1]["input"]
    users = [i["content"] for i in last if i.get("role") == "user"]
    assert users[0] == "first question" and users[-1] == "third question"
