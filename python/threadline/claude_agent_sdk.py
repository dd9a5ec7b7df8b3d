"""A Threadline store as the Claude Agent SDK's ``SessionStore`` (``pip install claude-agent-sdk``).

Claude Code mirrors every transcript line into it (``append``) and, on ``resume``, loads them
back (``load``). The entries are stored as ``threadline import claude-code`` stores a file's
lines, so a mirrored session is an ordinary Threadline session (messages, turns, tokens, search,
export, recover), and a subagent's transcript (a key with ``subpath``) is a subagent session
linked to its parent. The same semantics as the JavaScript adapter ``threadline/claude-agent-sdk``
(the work is the core's: ``threadline::interop::mirror``), so both languages share one store.

    from claude_agent_sdk import ClaudeAgentOptions, query
    from threadline import Store
    from threadline.claude_agent_sdk import ThreadlineSessionStore

    store = Store.open("agent.db")
    options = ClaudeAgentOptions(session_store=ThreadlineSessionStore(store))
    async for message in query(prompt="...", options=options): ...

An append leaves its session claimed by this process (the next append neither claims nor
releases it): it is released ``HOLD_SECONDS`` after the session's last append, by ``delete``, or
by the store's ``close()``; a process killed meanwhile holds nothing (the next writer takes it
over).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar, Union

try:
    from claude_agent_sdk import (
        SessionKey,
        SessionListSubkeysKey,
        SessionStoreEntry,
        SessionStoreListEntry,
        SessionSummaryEntry,
        fold_session_summary,
    )
except ImportError as e:  # an optional dependency: say what to install, at once
    raise ImportError(
        "threadline.claude_agent_sdk needs the Claude Agent SDK: pip install claude-agent-sdk"
    ) from e

from . import Store, ThreadlineError, _invalid, _native
from . import aio

__all__ = ["ThreadlineSessionStore", "HOLD_SECONDS"]

#: How long a session stays claimed after its last append (another process may take it then).
HOLD_SECONDS = 5.0

T = TypeVar("T")


def _check_key(what: str, key: Any, with_subpath: bool = True) -> Dict[str, str]:
    """The SDK's key ``{project_key, session_id, subpath?}`` as the core's (camelCase) key."""
    if not isinstance(key, Mapping):
        raise _invalid(f"{what}: key: expected a dict {{project_key, session_id, subpath?}}")
    for name in ("project_key", "session_id"):
        v = key.get(name)
        if not isinstance(v, str) or v == "":
            raise _invalid(f"{what}: key.{name}: expected a non-empty str")
    out = {"projectKey": key["project_key"], "sessionId": key["session_id"]}
    if with_subpath and key.get("subpath") is not None:
        sub = key["subpath"]
        if not isinstance(sub, str) or sub == "":
            raise _invalid(
                f"{what}: key.subpath: expected a non-empty str or no subpath (the main transcript)"
            )
        out["subpath"] = sub
    return out


def _check_entries(entries: Any) -> List[Any]:
    if not isinstance(entries, list):
        raise _invalid(f"append: entries: expected a list, got {type(entries).__name__}")
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise _invalid(f"append: entries[{i}]: expected a dict, got {type(e).__name__}")
        if not isinstance(e.get("type"), str):
            raise _invalid(f"append: entries[{i}].type: expected a str")
    return entries


def _check_project_key(what: str, project_key: Any) -> str:
    if not isinstance(project_key, str) or project_key == "":
        raise _invalid(f"{what}: project_key: expected a non-empty str")
    return project_key


def _foreign(summary: Any) -> bool:
    """Whether a stored summary was folded by another language's SDK: the TypeScript SDK's
    fold writes camelCase keys (``firstPrompt``), this one snake_case (``first_prompt``). Such a
    summary is not this SDK's to read; it is folded again from the session's entries."""
    return not isinstance(summary, dict) or any(k != k.lower() for k in summary)


def _main_id(k: Mapping[str, str]) -> Tuple[str, str]:
    return (k["projectKey"], k["sessionId"])


def _main_key(k: Mapping[str, str]) -> Dict[str, str]:
    return {"projectKey": k["projectKey"], "sessionId": k["sessionId"]}


def _held_id(k: Mapping[str, str]) -> Tuple[str, str, str]:
    return (k["projectKey"], k["sessionId"], k.get("subpath", ""))


class ThreadlineSessionStore:
    """The Claude Agent SDK's ``SessionStore`` over a Threadline store (``threadline.Store`` or
    ``threadline.aio.Store``, either engine). Every method is a coroutine whose store work runs
    on a worker thread (the binding releases the GIL), so the event loop never waits on it."""

    def __init__(self, store: Union[Store, aio.Store], *, project: Optional[str] = None) -> None:
        if isinstance(store, aio.Store):
            store = store.sync
        if not isinstance(store, Store):
            raise _invalid(
                "ThreadlineSessionStore: store: expected a threadline.Store or threadline.aio.Store"
            )
        if project is not None and not isinstance(project, str):
            raise _invalid("ThreadlineSessionStore: project: expected a str")
        self._store = store
        self._project = project
        # Each main session's folded summary, as last stored by this process.
        self._summaries: Dict[Tuple[str, str], Optional[SessionSummaryEntry]] = {}
        # One lock per main session: its appends (and their summary folds) one at a time, from
        # any thread or event loop.
        self._locks: Dict[Tuple[str, str], threading.Lock] = {}
        self._locks_lock = threading.Lock()
        # The sessions an append left claimed, each with the timer that releases it.
        self._held: Dict[Tuple[str, str, str], Tuple[Dict[str, str], threading.Timer]] = {}
        self._held_lock = threading.Lock()

    @property
    def store(self) -> Store:
        return self._store

    def _lock(self, k: Mapping[str, str]) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(_main_id(k), threading.Lock())

    async def _off_loop(self, fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(fn)

    # ----- the SessionStore protocol -----

    async def append(self, key: SessionKey, entries: List[SessionStoreEntry]) -> None:
        """Mirrors a batch in one transaction; an entry whose ``uuid`` is stored already is left
        out (the SDK retries). Durable when it returns."""
        k = _check_key("append", key)
        batch = _check_entries(entries)
        try:
            await self._off_loop(lambda: self._serial(k, lambda: self._append_now(k, key, batch)))
        finally:
            # a failed append released it already: the release finds nothing
            self._hold(k)

    async def load(self, key: SessionKey) -> Optional[List[SessionStoreEntry]]:
        """The entries appended, equal and in order (key order and numbers kept); None for a key
        never written."""
        k = _check_key("load", key)
        out: Optional[List[SessionStoreEntry]] = await self._off_loop(
            lambda: _native.claude_code_load(self._store._native, k)
        )
        return out

    async def list_sessions(self, project_key: str) -> List[SessionStoreListEntry]:
        p = _check_project_key("list_sessions", project_key)
        rows = await self._off_loop(lambda: _native.claude_code_sessions(self._store._native, p))
        return [{"session_id": r["sessionId"], "mtime": int(r["mtime"])} for r in rows]

    async def list_session_summaries(self, project_key: str) -> List[SessionSummaryEntry]:
        """The SDK's summaries of every main session of ``project_key``. A session that has none
        stored (imported with ``threadline import claude-code``) is folded from its entries."""
        p = _check_project_key("list_session_summaries", project_key)
        native = self._store._native

        def work() -> List[SessionSummaryEntry]:
            out: List[SessionSummaryEntry] = []
            for r in _native.claude_code_sessions(native, p):
                mtime = int(r["mtime"])
                if r.get("summary") is not None and not _foreign(r["summary"]):
                    out.append({"session_id": r["sessionId"], "mtime": mtime, "data": r["summary"]})
                    continue
                key: SessionKey = {"project_key": p, "session_id": r["sessionId"]}
                entries = _native.claude_code_load(native, {"projectKey": p, "sessionId": r["sessionId"]})
                if not entries:
                    continue
                summary = fold_session_summary(None, key, entries)
                summary["mtime"] = mtime
                out.append(summary)
            return out

        return await self._off_loop(work)

    async def delete(self, key: SessionKey) -> None:
        """Deletes a session with its subagents' transcripts, or (with ``subpath``) one
        subagent's."""
        k = _check_key("delete", key)
        with self._held_lock:
            # the core's delete releases what it deletes
            for hid, (hk, timer) in list(self._held.items()):
                if hid == _held_id(k) or ("subpath" not in k and _main_id(hk) == _main_id(k)):
                    timer.cancel()
                    del self._held[hid]
        native = self._store._native
        await self._off_loop(lambda: self._serial(k, lambda: _native.claude_code_delete(native, k)))
        if "subpath" not in k:
            self._summaries.pop(_main_id(k), None)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> List[str]:
        """The subpaths of a session's subagent transcripts."""
        k = _check_key("list_subkeys", key, with_subpath=False)
        out: List[str] = await self._off_loop(
            lambda: _native.claude_code_subkeys(self._store._native, k["sessionId"])
        )
        return out

    # ----- inside -----

    def _serial(self, k: Mapping[str, str], fn: Callable[[], T]) -> T:
        with self._lock(k):
            return fn()

    def _append_now(self, k: Dict[str, str], key: SessionKey, entries: List[Any]) -> None:
        native = self._store._native
        core_key: Dict[str, str] = dict(k)
        if self._project is not None:
            core_key["project"] = self._project
        if "subpath" in k:
            # subagent transcripts do not fold into the main session's summary
            _native.claude_code_append(native, core_key, entries, None)
            return
        # The summary is folded here and stored in the append's own transaction.
        mtime = int(time.time() * 1000)
        prev = self._summary(k)
        summary = fold_session_summary(prev, key, entries)
        summary["mtime"] = mtime
        _native.claude_code_append(native, core_key, entries, {"mtime": mtime, "summary": summary["data"]})
        self._summaries[_main_id(k)] = summary

    def _summary(self, k: Mapping[str, str]) -> Optional[SessionSummaryEntry]:
        """The session's summary as stored, the first time this process appends to it."""
        mid = _main_id(k)
        if mid in self._summaries:
            return self._summaries[mid]
        summary: Optional[SessionSummaryEntry] = None
        try:
            session = self._store.open_session(k["sessionId"])
        except ThreadlineError as e:
            if e.code != "NOT_FOUND":
                raise
            session = None
        if session is not None:
            try:
                sidecar = (session.info.get("metadata") or {}).get("claudeAgentSdk") or {}
            finally:
                session.close()
            mtime = int(sidecar.get("mtime") or 0)
            if sidecar.get("summary") is not None and not _foreign(sidecar["summary"]):
                summary = {"session_id": k["sessionId"], "mtime": mtime, "data": sidecar["summary"]}
            else:
                # stored by the other language's adapter, or by `threadline import claude-code`
                # (none): folded from the entries, so the next fold starts from this SDK's own
                key: SessionKey = {"project_key": k["projectKey"], "session_id": k["sessionId"]}
                entries = _native.claude_code_load(self._store._native, _main_key(k))
                if entries:
                    summary = fold_session_summary(None, key, entries)
                    summary["mtime"] = mtime
        self._summaries[mid] = summary
        return summary

    def _hold(self, k: Dict[str, str]) -> None:
        """(Re)starts the timer that releases ``k``'s session HOLD_SECONDS from now (a daemon
        thread: a process with nothing else to do exits, and its end releases the session)."""
        hid = _held_id(k)
        timer = threading.Timer(HOLD_SECONDS, self._release, (hid,))
        timer.daemon = True
        with self._held_lock:
            held = self._held.get(hid)
            if held is not None:
                held[1].cancel()
            self._held[hid] = (k, timer)
        timer.start()

    def _release(self, hid: Tuple[str, str, str]) -> None:
        with self._held_lock:
            held = self._held.get(hid)
            if held is None or held[1] is not threading.current_thread():
                return  # a later append restarted it, or a delete took it
            del self._held[hid]
        k = held[0]
        try:
            self._serial(k, lambda: _native.claude_code_release(self._store._native, k))
        except ThreadlineError:
            pass  # CLOSED: the store went first, which released it
