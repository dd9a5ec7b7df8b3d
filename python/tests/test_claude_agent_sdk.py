"""threadline.claude_agent_sdk.ThreadlineSessionStore: the claude-agent-sdk `SessionStore`
protocol with real Claude Code transcript lines (fixtures/), on both engines; the real `claude`
binary the SDK's wheel brings, run through `query()` against the loopback model server and
resumed from the store alone in a new process; a writer SIGKILLed after acknowledged appends."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from claude_agent_sdk import InMemorySessionStore

from threadline import Store, ThreadlineError
from threadline.claude_agent_sdk import ThreadlineSessionStore

from conftest import sigkill_after

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
FIXTURES = ROOT / "fixtures"
PROJECT = "-home-USER-projects-spotter-worktrees-spotter-4te"
SESSION = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
MAIN = FIXTURES / "claude-code-projects" / PROJECT / f"{SESSION}.jsonl"


def sub_file(agent: str) -> Path:
    return FIXTURES / "claude-code-projects" / PROJECT / SESSION / "subagents" / f"agent-{agent}.jsonl"


def lines(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def batches(entries: List[Any], size: int) -> List[List[Any]]:
    return [entries[i : i + size] for i in range(0, len(entries), size)]


def same(a: Any, b: Any) -> None:
    """Equal, and every dict's keys in the same order (json.dumps writes them in order)."""
    assert a == b
    assert json.dumps(a) == json.dumps(b)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_load_gives_back_every_appended_entry_in_order_key_order_kept(location: str) -> None:
    async def go() -> None:
        with Store.open(location) as store:
            sessions = ThreadlineSessionStore(store)
            key: Any = {"project_key": PROJECT, "session_id": SESSION}
            assert await sessions.load(key) is None, "a key never written"
            entries = lines(MAIN)
            for b in batches(entries, 7):
                await sessions.append(key, b)
            same(await sessions.load(key), entries)
            # an ordinary Threadline session: its messages and turns
            with store.open_session(SESSION) as s:
                assert len(s.messages) > 0 and len(s.turns) > 0
                assert s.info["project"]

    run(go())


def test_numbers_and_key_order_of_an_entry_come_back_exactly(location: str) -> None:
    async def go() -> None:
        with Store.open(location) as store:
            sessions = ThreadlineSessionStore(store)
            key: Any = {"project_key": "p", "session_id": "num-1"}
            e = {"z": 1, "type": "user", "uuid": "u-num-1", "big": 10**30, "f": 0.1, "message": {"role": "user", "content": "hi"}, "a": None}
            await sessions.append(key, [e])
            back = await sessions.load(key)
            same(back, [e])
            assert back[0]["big"] == 10**30 and isinstance(back[0]["big"], int)

    run(go())


def test_a_retried_batch_is_stored_once_an_entry_without_uuid_once_per_call(location: str) -> None:
    async def go() -> None:
        with Store.open(location) as store:
            sessions = ThreadlineSessionStore(store)
            sid = "11111111-1111-4111-8111-111111111111"
            key: Any = {"project_key": "p", "session_id": sid}
            user = {"type": "user", "uuid": "aaaaaaaa-0000-4000-8000-000000000001", "parentUuid": None, "sessionId": sid, "timestamp": "2026-11-27T10:00:00.000Z", "message": {"role": "user", "content": "hello"}}
            title = {"type": "custom-title", "customTitle": "Greeting", "sessionId": sid}
            await sessions.append(key, [user, title])
            await sessions.append(key, [user, title])  # the SDK's retry of the same batch
            same(await sessions.load(key), [user, title, title])

    run(go())


def test_subagent_transcripts_are_linked_sessions_listed_and_deleted_with_their_parent(location: str) -> None:
    async def go() -> None:
        with Store.open(location) as store:
            sessions = ThreadlineSessionStore(store)
            key: Any = {"project_key": PROJECT, "session_id": SESSION}
            await sessions.append(key, lines(MAIN))
            agent = "aac57f5"
            sub: Any = dict(key, subpath=f"subagents/agent-{agent}")
            meta = {"type": "agent_metadata", "agentType": "general-purpose", "description": "look around"}
            await sessions.append(sub, lines(sub_file(agent)) + [meta])
            nested: Any = dict(key, subpath=f"subagents/agent-{agent}/subagents/agent-b0b0b0")
            await sessions.append(nested, lines(sub_file(agent))[:2])
            assert sorted(await sessions.list_subkeys(key)) == sorted([sub["subpath"], nested["subpath"]])
            same(await sessions.load(sub), lines(sub_file(agent)) + [meta])

            # linked to its parent, as `threadline import claude-code` links it
            with store.open_session(f"{SESSION}/agent-{agent}") as s:
                assert s.info["metadata"]["parentSessionId"] == SESSION
                assert s.info["metadata"]["agentId"] == agent

            await sessions.delete(nested)
            assert await sessions.load(nested) is None
            assert await sessions.list_subkeys(key) == [sub["subpath"]]
            await sessions.delete(key)
            assert await sessions.load(key) is None
            assert await sessions.load(sub) is None
            assert await sessions.list_subkeys(key) == []
            assert await sessions.list_sessions(PROJECT) == []

    run(go())


def test_list_session_summaries_give_what_the_sdks_own_in_memory_store_gives(location: str) -> None:
    async def go() -> None:
        with Store.open(location) as store:
            ours = ThreadlineSessionStore(store)
            theirs = InMemorySessionStore()
            a: Any = {"project_key": PROJECT, "session_id": SESSION}
            b: Any = {"project_key": PROJECT, "session_id": "22222222-2222-4222-8222-222222222222"}
            other: Any = {"project_key": "elsewhere", "session_id": "33333333-3333-4333-8333-333333333333"}
            short = lines(FIXTURES / "claude-code" / "short.jsonl")
            for key, entries in ((a, lines(MAIN)), (b, short), (other, short)):
                for batch in batches(entries, 5):
                    await ours.append(key, batch)
                    await theirs.append(key, batch)

            def by_session(rows: List[Any]) -> Dict[str, Any]:
                return {r["session_id"]: r["data"] for r in rows}

            assert by_session(await ours.list_session_summaries(PROJECT)) == by_session(
                await theirs.list_session_summaries(PROJECT)
            )
            listed = await ours.list_sessions(PROJECT)
            assert sorted(r["session_id"] for r in listed) == sorted([b["session_id"], SESSION])
            for r in listed:
                assert isinstance(r["mtime"], int) and r["mtime"] > 1767225600000  # 2026-01-01

            # a session imported with `threadline import claude-code` has no stored summary: it
            # is folded from its entries
            fresh = ThreadlineSessionStore(store)
            assert by_session(await fresh.list_session_summaries(PROJECT)) == by_session(
                await theirs.list_session_summaries(PROJECT)
            )

    run(go())


def test_a_mirrored_session_is_the_session_import_claude_code_makes_of_the_file(tmp_path: Path) -> None:
    async def go() -> None:
        with Store.open(str(tmp_path / "m.db")) as mirrored, Store.open(str(tmp_path / "i.db")) as imported:
            sessions = ThreadlineSessionStore(mirrored)
            key: Any = {"project_key": PROJECT, "session_id": SESSION}
            for b in batches(lines(MAIN), 3):
                await sessions.append(key, b)
            imported.import_({"format": "claude-code", "path": str(MAIN)})
            with mirrored.open_session(SESSION) as m, imported.open_session(SESSION) as i:
                same(m.messages, i.messages)
                assert m.turns == i.turns
                assert m.token_tracker == i.token_tracker
                for k in ("project", "title", "model", "provider"):
                    assert m.info.get(k) == i.info.get(k), k

    run(go())


def test_bad_arguments_are_invalid_input_with_the_field_and_store_nothing(sqlite_path: str) -> None:
    async def go() -> None:
        with Store.open(sqlite_path) as store:
            sessions = ThreadlineSessionStore(store)
            key: Any = {"project_key": "p", "session_id": "s1"}
            cases: List[Any] = [
                ({"project_key": "p"}, [], "key.session_id"),
                (dict(key, subpath=""), [], "key.subpath"),
                (key, [{"type": "user", "uuid": "u1"}, 42], r"entries\[1\]"),
                (key, [{"uuid": "u1"}], r"entries\[0\]\.type"),
                (key, {"type": "user"}, "entries: expected a list"),
                (key, [{"type": "user", "uuid": "u2", "x": float("nan")}], "NaN"),
                (key, [{"type": "user", "uuid": "u3", 1: "non-str key"}], r"entries\[0\]"),
                (key, [{"type": "user", "uuid": "u4", "b": b"bytes"}], r"entries\[0\]\.b"),
            ]
            for k, entries, where in cases:
                with pytest.raises(ThreadlineError, match=where) as info:
                    await sessions.append(k, entries)
                assert info.value.code == "INVALID_INPUT"
            assert await sessions.load(key) is None
            with pytest.raises(ThreadlineError, match="store") as info:
                ThreadlineSessionStore({})  # type: ignore[arg-type]
            assert info.value.code == "INVALID_INPUT"
            with pytest.raises(ThreadlineError, match="project_key") as info:
                await sessions.list_sessions("")
            assert info.value.code == "INVALID_INPUT"

    run(go())


def test_the_aio_store_serves_too_and_node_reads_the_same_entries(location: str) -> None:
    """One store, two languages: what Python mirrored, the JavaScript adapter loads equal."""
    from threadline import aio

    async def go() -> List[Any]:
        async with aio.Store.open(location) as store:
            sessions = ThreadlineSessionStore(store)
            key: Any = {"project_key": PROJECT, "session_id": SESSION}
            for b in batches(lines(MAIN), 11):
                await sessions.append(key, b)
            out: List[Any] = await sessions.load(key)
            return out

    entries = run(go())
    code = f"""
      const {{ Store }} = require({json.dumps(str(ROOT))})
      const {{ ThreadlineSessionStore }} = require({json.dumps(str(ROOT / 'adapters' / 'claude-agent-sdk'))})
      const store = Store.open(process.argv[1])
      new ThreadlineSessionStore(store).load({{ projectKey: {json.dumps(PROJECT)}, sessionId: {json.dumps(SESSION)} }})
        .then((e) => {{ process.stdout.write(JSON.stringify(e)); store.close() }})
        .catch((e) => {{ console.error(e); process.exit(1) }})"""
    r = subprocess.run(["node", "-e", code, location], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    same(json.loads(r.stdout), entries)
    same(entries, lines(MAIN))


def test_sigkill_after_acknowledged_appends_loses_nothing(location: str) -> None:
    acked = sigkill_after([sys.executable, str(HERE / "mirror_writer.py"), location, "k1"], "ACK", 24)
    # a new process: every acknowledged entry, in order; and it may append (takes the session over)
    code = """
import asyncio, json, sys
from threadline import Store
from threadline.claude_agent_sdk import ThreadlineSessionStore
async def main():
    with Store.open(sys.argv[1]) as store:
        s = ThreadlineSessionStore(store)
        key = {"project_key": "p", "session_id": "k1"}
        before = await s.load(key)
        await s.append(key, [{"type": "user", "uuid": "k1-after", "message": {"role": "user", "content": "after"}}])
        after = await s.load(key)
        print(json.dumps({"before": before, "after": after}))
asyncio.run(main())
"""
    r = subprocess.run([sys.executable, "-c", code, location], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    want: List[str] = []
    for i in range(acked + 1):
        want += [f"m{i}a", f"m{i}b"] if i % 10 == 9 else [f"m{i}"]
    got = [e["message"]["content"] for e in out["before"]]
    assert got[: len(want)] == want, "every acknowledged entry, in order"
    # the append in flight when it was killed is there whole or not at all
    assert len(got) - len(want) in (0, 1, 2)
    assert [e["message"]["content"] for e in out["after"]] == got + ["after"]


def test_importing_without_the_sdk_says_what_to_install() -> None:
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "claude_agent_sdk" or name.startswith("claude_agent_sdk."):
            raise ImportError("No module named 'claude_agent_sdk'")
sys.meta_path.insert(0, Block())
try:
    import threadline.claude_agent_sdk
except ImportError as e:
    print(str(e))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "pip install claude-agent-sdk" in r.stdout


# ----- the real Claude Code -----

CLAUDE_ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-test",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
}


class ModelServer:
    def __init__(self) -> None:
        self.p = subprocess.Popen(
            ["node", str(HERE / "model_server_claude.js")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.p.stdout is not None
        first = self.p.stdout.readline()
        assert first.startswith("URL "), first
        self.url = first[4:].strip()

    def state(self) -> Dict[str, Any]:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write("state\n")
        self.p.stdin.flush()
        text = self.p.stdout.readline()
        assert text.startswith("STATE "), text
        out: Dict[str, Any] = json.loads(text[6:])
        return out

    def phase(self, name: str, marker: Path = Path("-")) -> None:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(f"phase {name} {marker}\n")
        self.p.stdin.flush()
        assert self.p.stdout.readline().strip() == "OK"

    def close(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()
        self.p.wait(timeout=60)


def claude_env(url: str, config: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_TEST_CONTEXT", "NODE_OPTIONS")}
    env.update(CLAUDE_ENV, ANTHROPIC_BASE_URL=url, CLAUDE_CONFIG_DIR=str(config))
    return env


def claude_run(job: Dict[str, Any], url: str, config: Path) -> List[Dict[str, Any]]:
    env = claude_env(url, config)
    r = subprocess.run(
        [sys.executable, str(HERE / "claude_run.py"), json.dumps(job)],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]


def result_of(out: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    return next((m for m in out if m["kind"] == "ResultMessage"), None)


def test_claude_code_mirrors_into_the_store_and_resumes_from_it_in_a_new_process(location: str, tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    server = ModelServer()
    try:
        first = claude_run({"store": location, "prompt": "Run two echo steps", "cwd": str(cwd)}, server.url, tmp_path / "config-1")
        r = result_of(first)
        assert r is not None and r["subtype"] == "success", first
        session_id = r["session_id"]
        project_key = "".join(c if c.isalnum() else "-" for c in str(cwd))

        # load gives back what Claude Code wrote to its own file (but its api-request lines)
        local_file = tmp_path / "config-1" / "projects" / project_key / f"{session_id}.jsonl"
        local = [l for l in lines(local_file) if not l["type"].startswith("api-request")]

        async def loaded() -> Any:
            with Store.open(location) as store:
                s = ThreadlineSessionStore(store)
                return await s.load({"project_key": project_key, "session_id": session_id}), await s.list_sessions(project_key)

        entries, listed = run(loaded())
        same(entries, local)
        assert [x["session_id"] for x in listed] == [session_id]

        # a new process with a config directory of its own: the transcript comes from the store
        second = claude_run(
            {"store": location, "prompt": "Once more", "cwd": str(cwd), "resume": session_id},
            server.url, tmp_path / "config-2",
        )
        r2 = result_of(second)
        assert r2 is not None and r2["subtype"] == "success", second
        assert r2["session_id"] == session_id
        state = server.state()
        assert state["invalid"] == [], "every request was one the real API accepts"
        last = state["modelRequests"][-1]["messages"]
        text = json.dumps(last)
        assert "echo step-1" in text and "echo step-2" in text and "Once more" in text, "resumed with the whole conversation"

        with Store.open(location) as store, store.open_session(session_id) as s:
            calls = [b for m in s.messages if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
            assert [c["input"]["command"] for c in calls] == ["echo step-1", "echo step-2"]
            assert len(s.turns) == 2
    finally:
        server.close()


def entry(sid: str, i: Any) -> Dict[str, Any]:
    return {"type": "user", "uuid": f"{sid}-{i}", "sessionId": sid, "timestamp": "2026-11-27T18:40:06.000Z", "message": {"role": "user", "content": f"m{i}"}}


def test_a_session_stays_claimed_between_appends_until_delete_close_or_a_while(location: str) -> None:
    h = subprocess.Popen([sys.executable, str(HERE / "mirror_holder.py"), location], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(cmd: Dict[str, Any]) -> str:
        assert h.stdin is not None and h.stdout is not None
        h.stdin.write(json.dumps(cmd) + "\n")
        h.stdin.flush()
        return h.stdout.readline().strip()

    def key(sid: str) -> Any:
        return {"project_key": "p", "session_id": sid}

    async def go() -> None:
        with Store.open(location) as store:
            mine = ThreadlineSessionStore(store)

            async def contents(sid: str) -> List[str]:
                return [e["message"]["content"] for e in (await mine.load(key(sid))) or []]

            async def locked(sid: str, i: Any) -> None:
                with pytest.raises(ThreadlineError) as info:
                    await mine.append(key(sid), [entry(sid, i)])
                assert info.value.code == "SESSION_LOCKED"

            # delete: the holder lets go of what it deletes
            assert send({"op": "append", "key": key("s1"), "entries": [entry("s1", 0)]}) == "OK"
            assert send({"op": "append", "key": key("s1"), "entries": [entry("s1", 1)]}) == "OK"
            await locked("s1", 2)
            assert await contents("s1") == ["m0", "m1"], "a refused append stores nothing"
            assert send({"op": "delete", "key": key("s1")}) == "OK"
            await mine.append(key("s1"), [entry("s1", 3)])
            assert await contents("s1") == ["m3"]

            # a while after its last append, the holder still running
            assert send({"op": "append", "key": key("s2"), "entries": [entry("s2", 0)]}) == "OK"
            await locked("s2", 1)
            for tries in range(300):
                try:
                    await mine.append(key("s2"), [entry("s2", 1)])
                    break
                except ThreadlineError as e:
                    assert e.code == "SESSION_LOCKED"
                    await asyncio.sleep(0.2)
            else:
                raise AssertionError("not released within a minute")
            assert h.poll() is None, "the holder still runs"
            assert await contents("s2") == ["m0", "m1"]

            # the store's close
            assert send({"op": "append", "key": key("s3"), "entries": [entry("s3", 0)]}) == "OK"
            await locked("s3", 1)
            assert send({"op": "close"}) == "OK"
            await mine.append(key("s3"), [entry("s3", 1)])
            assert await contents("s3") == ["m0", "m1"]

    try:
        run(go())
    finally:
        assert h.stdin is not None
        h.stdin.close()
        assert h.wait(timeout=60) == 0


def test_a_session_mirrored_from_node_is_summarised_in_pythons_shape(location: str) -> None:
    """The TypeScript SDK folds its summaries with camelCase keys, the Python SDK with snake_case:
    a summary the Node adapter stored is folded again from the entries, not handed over."""
    short = lines(FIXTURES / "claude-code" / "short.jsonl")
    sid = "44444444-4444-4444-8444-444444444444"
    code = f"""
      const {{ Store }} = require({json.dumps(str(ROOT))})
      const {{ ThreadlineSessionStore }} = require({json.dumps(str(ROOT / 'adapters' / 'claude-agent-sdk'))})
      const store = Store.open(process.argv[1])
      const entries = {json.dumps(short)}
      ;(async () => {{
        const s = new ThreadlineSessionStore(store)
        for (let i = 0; i < entries.length; i += 5) await s.append({{ projectKey: 'p', sessionId: {json.dumps(sid)} }}, entries.slice(i, i + 5))
        store.close()
      }})().catch((e) => {{ console.error(e); process.exit(1) }})"""
    r = subprocess.run(["node", "-e", code, location], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr

    async def go() -> None:
        with Store.open(location) as store:
            ours = ThreadlineSessionStore(store)
            theirs = InMemorySessionStore()
            key: Any = {"project_key": "p", "session_id": sid}
            for batch in batches(short, 5):
                await theirs.append(key, batch)
            want = await theirs.list_session_summaries("p")
            got = await ours.list_session_summaries("p")
            assert [g["data"] for g in got] == [w["data"] for w in want]
            # a later append from Python folds on from Python's own summary
            title = {"type": "custom-title", "customTitle": "Renamed", "sessionId": sid}
            await ours.append(key, [title])
            await theirs.append(key, [title])
            got = await ours.list_session_summaries("p")
            assert [g["data"] for g in got] == [w["data"] for w in await theirs.list_session_summaries("p")]

    run(go())


def test_sigkill_while_a_tool_runs_then_resume_from_the_store_alone(location: str, tmp_path: Path) -> None:
    """A first run ends normally. A second process resumes it (eager flush), Claude Code starts a
    tool that does not end, and that process with its `claude` child is SIGKILLed. A third
    process with a config directory of its own (another host) resumes from the store alone:
    every request valid, the killed call in it and answered."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    marker = tmp_path / "tool-started"
    project_key = "".join(c if c.isalnum() else "-" for c in str(cwd))
    server = ModelServer()

    async def load(sid: str) -> Any:
        with Store.open(location) as store:
            return await ThreadlineSessionStore(store).load({"project_key": project_key, "session_id": sid})

    try:
        job: Dict[str, Any] = {"store": location, "cwd": str(cwd), "flush": "eager"}
        warm = claude_run(dict(job, prompt="Warm up"), server.url, tmp_path / "config-1")
        r = result_of(warm)
        assert r is not None and r["subtype"] == "success", warm
        sid = r["session_id"]
        after_warmup = run(load(sid))

        server.phase("killed", marker)
        p = subprocess.Popen(
            [sys.executable, str(HERE / "claude_run.py"), json.dumps(dict(job, prompt="Start the long task", resume=sid))],
            env=claude_env(server.url, tmp_path / "config-1"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            for _ in range(6000):  # until the tool has started (bounded: ten minutes)
                if marker.exists() or p.poll() is not None:
                    break
                time.sleep(0.1)
            assert marker.exists(), "the long tool started"
        finally:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=60)
            try:
                os.kill(int(marker.read_text().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass  # it never started, or has ended
        assert p.returncode == -signal.SIGKILL
        shutil.rmtree(tmp_path / "config-1")
        at_kill = run(load(sid))
        same(at_kill[: len(after_warmup)], after_warmup)
        assert len(at_kill) > len(after_warmup), "eager: the prompt and the running call were mirrored"

        server.phase("resumed")
        before = len(server.state()["modelRequests"])
        resumed = claude_run(dict(job, prompt="Go on", resume=sid), server.url, tmp_path / "config-2")
        r = result_of(resumed)
        assert r is not None and r["subtype"] == "success", resumed
        state = server.state()
        assert state["invalid"] == [], "every request the model server received was valid"
        request = next(r for r in state["modelRequests"][before:] if r["tools"])["messages"]
        text = json.dumps(request)
        assert "Warm up" in text and "Start the long task" in text
        blocks = [b for m in request if isinstance(m["content"], list) for b in m["content"]]
        call = next(b for b in blocks if b["type"] == "tool_use" and b["input"].get("description") == "a long task")
        assert any(b["type"] == "tool_result" and b["tool_use_id"] == call["id"] for b in blocks), "the killed call is answered"
    finally:
        server.close()


def test_a_session_mirrored_from_python_is_summarised_in_nodes_shape(location: str) -> None:
    """The other way round: the Node adapter folds a summary the Python adapter stored again
    from the entries, so the TypeScript SDK gets its own shape."""
    short = lines(FIXTURES / "claude-code" / "short.jsonl")
    sid = "55555555-5555-4555-8555-555555555555"

    async def mirror() -> None:
        with Store.open(location) as store:
            s = ThreadlineSessionStore(store)
            for batch in batches(short, 5):
                await s.append({"project_key": "p", "session_id": sid}, batch)

    run(mirror())
    code = f"""
      const {{ Store }} = require({json.dumps(str(ROOT))})
      const {{ ThreadlineSessionStore }} = require({json.dumps(str(ROOT / 'adapters' / 'claude-agent-sdk'))})
      const entries = {json.dumps(short)}
      ;(async () => {{
        const {{ InMemorySessionStore }} = await import('@anthropic-ai/claude-agent-sdk')
        const store = Store.open(process.argv[1])
        const ours = new ThreadlineSessionStore(store)
        const theirs = new InMemorySessionStore()
        const key = {{ projectKey: 'p', sessionId: {json.dumps(sid)} }}
        for (let i = 0; i < entries.length; i += 5) await theirs.append(key, entries.slice(i, i + 5))
        const data = async (s) => (await s.listSessionSummaries('p')).map((x) => x.data)
        const first = [await data(ours), await data(theirs)]
        const title = {{ type: 'custom-title', customTitle: 'Renamed', sessionId: key.sessionId }}
        await ours.append(key, [title])
        await theirs.append(key, [title])
        const second = [await data(ours), await data(theirs)]
        store.close()
        process.stdout.write(JSON.stringify({{ first, second }}))
      }})().catch((e) => {{ console.error(e); process.exit(1) }})"""
    r = subprocess.run(["node", "-e", code, location], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["first"][0] == out["first"][1]
    assert out["second"][0] == out["second"][1]
