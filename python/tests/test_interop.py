"""Store.import_ and Session.export (the JavaScript store.import / session.export), on both
engines: what another agent wrote comes in (again: only what is new), and a session goes out as
Claude Code JSONL, markdown, HTML or a snapshot."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from threadline import Store, ThreadlineError, aio

FIXTURES = Path(__file__).parent.parent.parent / "fixtures"
SHORT = FIXTURES / "claude-code" / "short.jsonl"
PROJECTS = FIXTURES / "claude-code-projects"


def test_import_brings_a_claude_code_file_in_and_again_adds_nothing(location: str) -> None:
    with Store.open(location) as store:
        progress: List[Dict[str, Any]] = []
        report = store.import_({"format": "claude-code", "path": str(SHORT)}, on_progress=progress.append)
        assert report["sessions"] == 1 and report["newSessions"] == 1
        assert report["newRecords"] > 0 and report["skipped"] == []
        assert progress and progress[-1]["files"] == progress[-1]["totalFiles"] == 1
        again = store.import_({"format": "claude-code", "path": SHORT})  # a PathLike too
        assert again["newSessions"] == 0 and again["newRecords"] == 0
        [listed] = store.list_sessions()
        with store.open_session(listed["id"]) as s:
            file_lines = [json.loads(l) for l in SHORT.read_text().splitlines() if l.strip()]
            texts = json.dumps(s.messages)
            first_user = next(l for l in file_lines if l.get("type") == "user")
            content = first_user["message"]["content"]
            wanted = content if isinstance(content, str) else content[0].get("text", "")
            assert wanted[:40] in texts


def test_import_of_a_projects_folder_with_subagents_and_a_project(location: str) -> None:
    with Store.open(location) as store:
        report = store.import_({"format": "claude-code", "path": PROJECTS}, project="mine")
        assert report["newSessions"] == report["sessions"] >= 3  # the main session and its agents
        sessions = store.list_sessions()
        assert {s["project"] for s in sessions} == {"mine"}


def test_export_formats(location: str) -> None:
    with Store.open(location) as store:
        store.import_({"format": "claude-code", "path": SHORT})
        [listed] = store.list_sessions()
        with store.open_session(listed["id"]) as s:
            jsonl = s.export("claude-code")
            out = [json.loads(l) for l in jsonl.splitlines() if l.strip()]
            assert out and all(isinstance(l, dict) and "type" in l for l in out)
            ids = {l.get("uuid") for l in out}
            file_ids = {json.loads(l).get("uuid") for l in SHORT.read_text().splitlines() if l.strip()}
            assert {i for i in file_ids if i} <= ids, "an imported record comes back with its own uuid"
            md = s.export("markdown")
            assert md.startswith("#") or "##" in md
            assert s.export("markdown", events=True).count("\n") >= md.count("\n")
            html = s.export("html")
            assert html.lstrip().lower().startswith("<!doctype html")
            assert s.export("snapshot") == s.snapshot()


def test_bad_import_and_export_arguments_are_coded_and_store_nothing(location: str, tmp_path: Path) -> None:
    with Store.open(location) as store:
        bad: List[Any] = [
            ("claude-code", {}, "source: expected a dict", "INVALID_INPUT"),
            ({"format": "claude", "path": str(SHORT)}, {}, "source.format", "INVALID_INPUT"),
            ({"format": "claude-code", "path": ""}, {}, "source.path", "INVALID_INPUT"),
            ({"format": "claude-code", "path": str(SHORT), "extra": 1}, {}, "source.extra", "INVALID_INPUT"),
            ({"format": "claude-code", "path": str(SHORT)}, {"project": 3}, "project", "INVALID_INPUT"),
            ({"format": "claude-code", "path": str(SHORT)}, {"include_deleted": "yes"}, "include_deleted", "INVALID_INPUT"),
            ({"format": "claude-code", "path": str(SHORT)}, {"on_progress": 5}, "on_progress", "INVALID_INPUT"),
            ({"format": "claude-code", "path": str(tmp_path / "missing")}, {}, "missing", "NOT_FOUND"),
        ]
        for source, options, where, code in bad:
            with pytest.raises(ThreadlineError, match=where) as info:
                store.import_(source, **options)
            assert info.value.code == code, (source, options)
        assert store.list_sessions() == []
        s = store.create_session()
        for fmt, options, where in (("pdf", {}, "format"), (3, {}, "format"), ("markdown", {"events": "yes"}, "events")):
            with pytest.raises(ThreadlineError, match=where) as info:
                s.export(fmt, **options)
            assert info.value.code == "INVALID_INPUT"
        s.close()


def test_an_exception_from_on_progress_stops_the_import_there(location: str) -> None:
    with Store.open(location) as store:
        def stop(_: Dict[str, Any]) -> None:
            raise KeyboardInterrupt("stop")

        with pytest.raises(KeyboardInterrupt):
            store.import_({"format": "claude-code", "path": PROJECTS}, on_progress=stop)
        # the first file is in; importing again brings the rest
        assert len(store.list_sessions()) == 1
        report = store.import_({"format": "claude-code", "path": PROJECTS})
        assert report["newSessions"] == report["sessions"] - 1


def test_aio_import_and_export(location: str) -> None:
    async def go() -> None:
        async with aio.Store.open(location) as store:
            report = await store.import_({"format": "claude-code", "path": str(SHORT)})
            assert report["newSessions"] == 1
            [listed] = await store.list_sessions()
            s = await store.open_session(listed["id"])
            assert await s.export("snapshot") == await s.snapshot()
            await s.close()

    asyncio.run(go())
