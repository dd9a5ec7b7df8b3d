"""A Threadline session as the OpenAI Agents SDK's ``Session`` (``agents.memory.Session``).

    from agents import Agent, Runner
    from threadline import Store
    from threadline.openai_agents import ThreadlineSession

    store = Store.open("agent.db")
    result = await Runner.run(agent, "hi", session=ThreadlineSession("user-42", store))

The port of the JavaScript adapter (adapters/openai-agents). Each item the SDK adds is one record,
in one transaction per ``add_items``: the item exactly as given (key order, numbers) under the
envelope field ``openaiAgentsItem``, beside a neutral message converted from it, so Threadline's
messages, turns, search and export work on the session. Order is the log's seq, never a timestamp.
``pop_item`` rewinds the session (one durable record); ``clear_session`` deletes it, and it starts
again under the same id. ``get_items`` answers or leaves out the orphans a killed run left.

Every call runs on a worker thread (``asyncio.to_thread``; the binding releases the GIL), one at a
time per object, and opens the Threadline session only for its own duration: another process (a
worker serving the same conversation) can write it between runs.
"""

from __future__ import annotations

import asyncio
import json
import marshal
import re
import threading
import uuid as _uuid
import weakref
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, TypeVar

try:
    from agents.memory.session import Session as _SessionProtocol  # noqa: F401
    from agents.memory.session_settings import SessionSettings
except ImportError as err:  # the SDK is an optional dependency: without it there is nothing to serve
    raise ImportError(
        "threadline.openai_agents needs the OpenAI Agents SDK: pip install openai-agents"
    ) from err

from . import Store, ThreadlineError, _invalid, _native

__all__ = ["ThreadlineSession"]

#: The envelope field holding the SDK item as given (the same as the JavaScript adapter's).
ITEM = "openaiAgentsItem"
#: The event recording items left out of ``get_items`` (an orphan no repair can answer).
DROPPED = "openai-agents.dropped"
#: The first record of a session this adapter creates: what a pop of the first item rewinds to.
ROOT = "openai-agents.session"

#: Tool calls and the type of the output answering each: a call without its output, or an output
#: without its call, is refused by the model API.
CALLS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
OUTPUTS = {v: k for k, v in CALLS.items()}

Item = Dict[str, Any]
Entry = Tuple[Item, Dict[str, Any]]  # an item and the record holding it
# a branch walk: the records list walked, how many of them, the leaf, the items, call kinds
Walked = Tuple[List[Dict[str, Any]], int, Optional[str], List[Entry], Dict[str, str]]
T = TypeVar("T")


def _clone(value: Any) -> Any:
    """A copy of a JSON-shaped value (dicts, lists, scalars), as ``copy.deepcopy`` gives for one
    at a fraction of its cost: ``marshal`` copies exactly these types (key order, ints of any
    size, floats bit for bit) in C, about 8x faster than deepcopy on 10k items. A value it does
    not take (a dict subclass, another object) is copied by walking it."""
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:
        return _walk_clone(value)


def _walk_clone(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _walk_clone(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk_clone(v) for v in value]
    return value


def _output_text(output: Any) -> str:
    """A tool output as text for the neutral tool_result (the exact output stays in the item)."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and isinstance(output.get("text"), str):
        return str(output["text"])
    if isinstance(output, list) and all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in output
    ):
        return "".join(p["text"] for p in output)
    return json.dumps(output, ensure_ascii=False, default=str)


def _convert(item: Item, what: str) -> Optional[Dict[str, Any]]:
    converted: Dict[str, Any] = _native.from_openai_responses(item, what)
    messages = converted["messages"]
    if messages:
        return dict(messages[0])
    if "system" in converted:  # a lone system / developer message comes back as `system`
        return {"role": "system", "content": converted["system"]}
    return None


def _to_message(item: Item, what: str) -> Optional[Dict[str, Any]]:
    """The neutral message for one SDK item, or None when it has none (then the record is stored
    without a message, out of ``messages``)."""
    kind = item.get("type")
    call_id = item.get("call_id")
    if kind in CALLS and isinstance(call_id, str) and isinstance(item.get("name"), str):
        wire: Dict[str, Any] = {"type": "function_call", "call_id": call_id, "name": item["name"]}
        wire["arguments"] = item.get("arguments", item.get("input", "{}"))
        if isinstance(item.get("id"), str):
            wire["id"] = item["id"]
        try:
            return _convert(wire, what)
        except ThreadlineError as err:
            if err.code != "INVALID_INPUT":
                raise
            # arguments that are not a JSON object: keep the call, its input as given in the item
            block = {"type": "tool_use", "id": call_id, "name": item["name"], "input": {}}
            return {"role": "assistant", "content": [block]}
    if kind in OUTPUTS and isinstance(call_id, str):
        result: Dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": call_id,
            "content": _output_text(item.get("output")),
        }
        if item.get("status") == "incomplete":
            result["is_error"] = True
        return {"role": "user", "content": [result]}
    if kind == "reasoning":
        summary: List[Any] = item["summary"] if isinstance(item.get("summary"), list) else []
        wire = {
            "type": "reasoning",
            "id": item["id"] if isinstance(item.get("id"), str) else "",
            "summary": [
                {"type": "summary_text", "text": p["text"]}
                for p in summary
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            ],
        }
        if isinstance(item.get("encrypted_content"), str):
            wire["encrypted_content"] = item["encrypted_content"]
        return _convert(wire, what)
    return _convert(item, what)


def _is_output(item: Item) -> bool:
    """Whether an item is model output (a response's reasoning, message, call) rather than
    input."""
    kind = item.get("type")
    if kind in (None, "message"):
        return item.get("role") == "assistant"
    return kind == "reasoning" or (isinstance(kind, str) and kind.endswith("_call"))


def _responses(items: List[Item]) -> int:
    """How many model responses some items hold (each a run of output items)."""
    return sum(
        1 for i, item in enumerate(items) if _is_output(item) and not (i > 0 and _is_output(items[i - 1]))
    )


def _records(items: List[Item], usage: Optional[List[Any]] = None) -> List[Dict[str, Any]]:
    """The records for some items: each item as given, beside its neutral message. ``usage``
    (the SDK's ``RequestUsage`` of each model response among the items, in order) goes on the
    last message of each response, so Threadline's turns and token counts see it; given only when
    the counts match."""
    out: List[Dict[str, Any]] = []
    lasts: Dict[int, Dict[str, Any]] = {}  # response -> its last record with a message
    response = -1
    for i, item in enumerate(items):
        message = _to_message(item, f"add_items: items[{i}]")
        record: Dict[str, Any]
        if message is not None:
            record = {"message": message, ITEM: item}
        else:
            record = {"type": "openai-agents-item", "includeInContext": False, ITEM: item}
        out.append(record)
        if not _is_output(item):
            continue
        if i == 0 or not _is_output(items[i - 1]):
            response += 1
        if message is not None and message.get("role") == "assistant":
            lasts[response] = record
    if usage is not None and len(usage) == response + 1:
        for n, u in enumerate(usage):
            if n not in lasts:
                continue
            given = int(getattr(u, "input_tokens", 0) or 0)
            cached = int(getattr(getattr(u, "input_tokens_details", None), "cached_tokens", 0) or 0)
            # Anthropic's counting, which Threadline's is: input_tokens leaves the cached part out
            counted = {
                "input_tokens": max(0, given - cached),
                "output_tokens": int(getattr(u, "output_tokens", 0) or 0),
            }
            if cached > 0:
                counted["cache_read_input_tokens"] = cached
            lasts[n]["message"] = dict(lasts[n]["message"], usage=counted)
    return out


def _check_items(items: Any) -> List[Item]:
    if not isinstance(items, list):
        raise _invalid(f"add_items: items: expected a list of items, got {type(items).__name__}")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _invalid(
                f"add_items: items[{i}]: expected a dict (a TResponseInputItem), "
                f"got {type(item).__name__}"
            )
        if "type" in item and not isinstance(item["type"], str):
            raise _invalid(f"add_items: items[{i}].type: expected a str")
    return items


def _on_branch(envelopes: List[Dict[str, Any]], leaf: Optional[str]) -> Set[str]:
    """The uuids of the records on the branch ending at ``leaf``."""
    by_uuid = {e["uuid"]: e for e in envelopes}
    on_branch: Set[str] = set()
    e = by_uuid.get(leaf) if leaf is not None else None
    while e is not None and e["uuid"] not in on_branch:
        on_branch.add(e["uuid"])
        parent = e.get("parentUuid")
        e = by_uuid.get(parent) if parent is not None else None
    return on_branch


def _extend_entries(out: List[Entry], kinds: Dict[str, str], envelopes: List[Dict[str, Any]]) -> None:
    """Appends the items of some records of the current branch (in seq order) to ``out``, each
    with the record holding it. Records written by ``recover()`` (answers to calls a killed run
    left) have no SDK item: their tool_results become output items of the call's kind (``kinds``:
    call id -> the call's type, kept across calls)."""
    for env in envelopes:
        item = env.get(ITEM)
        if isinstance(item, dict):
            if item.get("type") in CALLS and isinstance(item.get("call_id"), str):
                kinds[item["call_id"]] = item["type"]
            out.append((item, env))
            continue
        message = env.get("message")
        if not isinstance(message, dict) or env.get("includeInContext") is False:
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                continue
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                continue
            text = block.get("content")
            if isinstance(text, list):
                text = "".join(b.get("text", "") for b in text if isinstance(b, dict))
            kind = CALLS[kinds.get(call_id, "function_call")]
            out.append(({"type": kind, "call_id": call_id, "output": _output_text(text)}, env))


def _is_plain(value: Any) -> bool:
    """Whether a value reads back from the store as itself (JSON's types only: a tuple, which a
    copy made by ``marshal`` keeps, comes back as a list)."""
    t = type(value)
    if t is dict:
        return all(_is_plain(v) for v in value.values())
    if t is list:
        return all(_is_plain(v) for v in value)
    return t in _SCALARS


_SCALARS = (str, int, float, bool, type(None))


def _without_orphans(entries: List[Entry]) -> Tuple[List[Entry], List[Entry]]:
    """Leaves out what the model API refuses: a call without its output, an output without its
    call (both only left by a crash or a pop), a reasoning item with no item after it that it
    produced."""
    types = [item.get("type") for item, _ in entries]
    calls = {entries[i][0].get("call_id") for i, kind in enumerate(types) if kind in CALLS}
    results = {entries[i][0].get("call_id") for i, kind in enumerate(types) if kind in OUTPUTS}
    kept: List[Entry] = []
    kinds: List[Any] = []  # the type of each kept item
    dropped: List[Entry] = []
    for entry, kind in zip(entries, types):
        if kind in CALLS:
            orphan = entry[0].get("call_id") not in results
        elif kind in OUTPUTS:
            orphan = entry[0].get("call_id") not in calls
        else:
            orphan = False
        if orphan:
            dropped.append(entry)
        else:
            kept.append(entry)
            kinds.append(kind)
    if "reasoning" not in kinds:
        return kept, dropped
    # a reasoning item is produced-for when the kept item right after it is model output other
    # than reasoning (a later reasoning item dropped too would leave it with none either way)
    paired: List[Entry] = []
    lone: List[Entry] = []
    last = len(kept) - 1
    for n, entry in enumerate(kept):
        if kinds[n] == "reasoning":
            after = kept[n + 1][0] if n < last else None
            if (
                after is None
                or kinds[n + 1] == "reasoning"
                or kinds[n + 1] in OUTPUTS
                or after.get("role") in ("user", "system", "developer")
            ):
                lone.append(entry)
                continue
        paired.append(entry)
    lone.reverse()  # in the order the backward pass found them
    dropped.extend(lone)
    return paired, dropped


def _read_envelopes(session: Any, from_seq: int) -> List[Dict[str, Any]]:
    """``session.envelopes(from_seq)``, read as the stored JSON pages and parsed by ``json``: the
    same values (stored text is plain JSON; ints exact, floats as float of their text, key order
    kept), at a third of the cost of building them in the binding, which was most of a restore."""
    out: List[Dict[str, Any]] = []
    # the records holding an item come without their neutral message: only the item is read here
    for page in session.envelope_pages(from_seq, ITEM):
        out.extend(json.loads(page))
    return out


class ThreadlineSession:
    """The OpenAI Agents SDK's ``Session`` over a Threadline store (``isinstance(s,
    agents.memory.Session)`` holds).

    ``store``: a ``threadline.Store`` or a ``threadline.aio.Store``. ``session_id``: the
    conversation's id (the Threadline session's id; a new uuid when None).
    ``session_settings``: the SDK's ``SessionSettings`` (its ``limit`` applies to ``get_items``
    called without one).
    """

    session_settings: Optional[SessionSettings]

    def __init__(
        self,
        session_id: Optional[str],
        store: Any,
        *,
        session_settings: Optional[SessionSettings] = None,
    ) -> None:
        sync = getattr(store, "sync", store)  # a threadline.aio.Store wraps a threadline.Store
        if not isinstance(sync, Store):
            raise _invalid(
                "ThreadlineSession: store: expected a threadline.Store or threadline.aio.Store, "
                f"got {type(store).__name__}"
            )
        if session_id is None:
            session_id = str(_uuid.uuid4())
        if not isinstance(session_id, str) or session_id == "":
            raise _invalid("ThreadlineSession: session_id: expected a non-empty str")
        if session_settings is not None and not isinstance(session_settings, SessionSettings):
            raise _invalid("ThreadlineSession: session_settings: expected a SessionSettings")
        self.session_id: str = session_id
        self.session_settings = session_settings
        self._store = sync
        # one operation at a time per object, on whichever thread runs it
        self._lock = threading.Lock()
        self._read: List[Dict[str, Any]] = []  # the session's records as last read, in seq order
        # the current branch's items as last walked, extended while the log only grew along it
        self._walked: Optional[Walked] = None
        # per run (its Usage object): how many of its model requests' usage entries are stored
        self._usage_stored: Dict[int, Tuple["weakref.ref[Any]", int]] = {}

    # ----- running off the event loop -----

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(self._locked, fn)

    def _locked(self, fn: Callable[[], T]) -> T:
        with self._lock:
            return fn()

    def _use(self, fn: Callable[[Any], T]) -> T:
        """Runs ``fn`` with the native session (created on first use), and closes it after: a
        session is owned by the process writing it until it is closed."""
        session = self._open()
        try:
            return fn(session)
        finally:
            try:
                session.close()
            except ThreadlineError:
                pass  # closing a session deleted meanwhile has nothing to release

    def _open(self) -> Any:
        try:
            return self._store._native.open_session(self.session_id, None)
        except ThreadlineError as err:
            if err.code != "NOT_FOUND":
                raise
        try:
            created = self._store._native.create_session({"id": self.session_id, "provider": "openai"})
        except ThreadlineError as err:
            if err.code != "INVALID_INPUT":  # another process created it in between
                raise
            return self._store._native.open_session(self.session_id, None)
        # the root a pop of the first item rewinds to
        created.append_event(ROOT, None, None)
        return created

    def _envelopes(self, session: Any) -> List[Dict[str, Any]]:
        """The session's records: those read before and the ones after them. The log only grows;
        a session deleted and started again (a clear, here or elsewhere) has another record at
        the last seq read, and is read whole."""
        if self._read:
            last = self._read[-1]
            tail = _read_envelopes(session, last["seq"])
            if tail and tail[0]["uuid"] == last["uuid"]:
                self._read.extend(tail[1:])
                return self._read
        self._read = _read_envelopes(session, 0)
        return self._read

    def _history(self, session: Any) -> Tuple[List[Dict[str, Any]], List[Entry]]:
        envelopes = self._envelopes(session)
        current = [b for b in session.branches() if b.get("current")]
        leaf = current[0]["leafUuid"] if current else (envelopes[-1]["uuid"] if envelopes else None)
        walked = self._walked
        if walked is not None and walked[0] is envelopes and walked[1] <= len(envelopes):
            # the records since the last walk, each the child of the one before from the old leaf
            # to the new one: the branch is the old one and them (else it is walked again: a
            # rewind, a clear, another writer's branch)
            new = envelopes[walked[1] :]
            prev = walked[2]
            for env in new:
                if env.get("parentUuid") != prev:
                    break
                prev = env["uuid"]
            else:
                if prev == leaf:
                    _extend_entries(walked[3], walked[4], new)
                    self._walked = (envelopes, len(envelopes), leaf, walked[3], walked[4])
                    return envelopes, walked[3]
        entries: List[Entry] = []
        kinds: Dict[str, str] = {}
        on_branch = _on_branch(envelopes, leaf)
        _extend_entries(entries, kinds, [env for env in envelopes if env["uuid"] in on_branch])
        self._walked = (envelopes, len(envelopes), leaf, entries, kinds)
        return envelopes, entries

    def _remember(self, records: List[Dict[str, Any]], written: List[Dict[str, Any]]) -> None:
        """Adds the records this object just wrote to those it has read, without reading them
        back, when nothing else was written in between: the first one's seq follows the last read
        and its parent is a record read (a session cleared and started again elsewhere has
        neither); its items read back as themselves. Else the next read fetches them."""
        if not self._read or not written or len(written) != len(records):
            return
        last = self._read[-1]
        walked = self._walked
        known = (last["uuid"], walked[2] if walked is not None else None)
        if written[0].get("seq") != last["seq"] + 1 or written[0].get("parentUuid") not in known:
            return
        if not all(_is_plain(r[ITEM]) for r in records):
            return
        before = len(self._read)
        for record, meta in zip(records, written):
            env = {k: v for k, v in record.items() if k != "message"}  # as the adapter reads them
            env.update(meta)
            self._read.append(env)
        # and the branch walked, when they continue it (as _history would find on the next read)
        if walked is not None and walked[0] is self._read and walked[1] == before:
            new = self._read[before:]
            prev = walked[2]
            for env in new:
                if env.get("parentUuid") != prev:
                    return
                prev = env["uuid"]
            _extend_entries(walked[3], walked[4], new)
            self._walked = (self._read, len(self._read), prev, walked[3], walked[4])

    # ----- the Session protocol -----

    async def get_items(self, limit: Optional[int] = None, wrapper: Any = None) -> List[Item]:
        """The most recent ``limit`` items (all without it, or the session settings' limit),
        oldest first, as they were added. A run killed mid-way may have left a tool call
        unanswered: it is answered as ``recover()`` answers it (an error output saying it never
        ran, or that its outcome is unknown), and that repair is a record of the session. Any
        other orphan (a call or output whose partner is gone) is left out, and recorded once as an
        ``openai-agents.dropped`` event."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise _invalid("get_items: limit: expected an int >= 0 or None")
        return await self._run(lambda: self._use(lambda s: self._get(s, limit)))

    def _get(self, session: Any, limit: Optional[int]) -> List[Item]:
        if any(r.get("recordUuid") is not None for r in session.pending_repairs()):
            session.recover(None, None)
        envelopes, items = self._history(session)
        kept, dropped = _without_orphans(items)
        recorded = (
            {
                (e.get("data") or {}).get("uuid")
                for e in envelopes
                if e.get("type") == "event" and e.get("name") == DROPPED
            }
            if dropped
            else set()
        )
        for item, env in dropped:
            if env["uuid"] in recorded:
                continue
            data = {"uuid": env["uuid"], "seq": env["seq"], "type": item.get("type", "message")}
            if "call_id" in item:
                data["callId"] = item["call_id"]
            session.append_event(DROPPED, data, None)
            recorded.add(env["uuid"])
        chosen = kept if limit is None else kept[len(kept) - min(limit, len(kept)) :]
        # a cut must not part an item from the reasoning before it, nor an output from its call
        start = len(kept) - len(chosen)
        if start > 0:  # (kept itself has no orphans: a second pass would change nothing)
            if chosen and kept[start - 1][0].get("type") == "reasoning":
                chosen = chosen[1:]
            chosen, _ = _without_orphans(chosen)
        return list(_clone([item for item, _ in chosen]))

    async def add_items(self, items: List[Item], wrapper: Any = None) -> None:
        """Adds the items in one transaction, each as given; returns after the commit.
        ``wrapper``: the SDK's RunContextWrapper (it passes it to a session whose four methods
        take it): the usage of the responses among the items goes on their messages."""
        checked = _check_items(items)
        if not checked:
            return
        snapshot = list(_clone(checked))  # the caller may change its lists while this runs

        def add(session: Any) -> None:
            usage = self._usage_for(wrapper, snapshot)
            records = _records(snapshot, usage[0] if usage else None)
            try:
                written = session.append_many(records)
            except ThreadlineError as err:
                # one record per item: name the item as the caller knows it
                text = re.sub(
                    r"^append_many: messages\[(\d+)\]\.openaiAgentsItem",
                    r"add_items: items[\1]",
                    str(err),
                )
                if text == str(err):
                    raise
                renamed = ThreadlineError(text)
                renamed.code = err.code
                raise renamed from None
            if not self._read and written and written[0].get("seq", 64) < 64:
                self._history(session)  # a new session: reading and walking it costs nothing yet
            else:
                self._remember(records, written)
            if usage:
                usage[1]()

        await self._run(lambda: self._use(add))

    def _usage_for(self, wrapper: Any, items: List[Item]) -> Optional[Tuple[List[Any], Callable[[], None]]]:
        """The usage entries of the responses among ``items``: the run's next ones, when the run
        has exactly as many not stored yet (else none: a guess could count a response twice)."""
        usage = getattr(wrapper, "usage", None)
        entries = getattr(usage, "request_usage_entries", None)
        if usage is None or not isinstance(entries, list):
            return None
        key = id(usage)
        ref, stored = self._usage_stored.get(key, (None, 0))
        if ref is None or ref() is not usage:
            stored = 0
        count = _responses(items)
        if count == 0 or len(entries) - stored != count:
            return None

        def done() -> None:
            self._usage_stored = {k: v for k, v in self._usage_stored.items() if v[0]() is not None}
            self._usage_stored[key] = (weakref.ref(usage), stored + count)

        return entries[stored:], done

    async def pop_item(self, wrapper: Any = None) -> Optional[Item]:
        """Removes the latest item and returns it (durable: a rewind of the session). A reasoning
        item right before it goes with it: alone it could never be sent again."""
        return await self._run(lambda: self._use(self._pop))

    def _pop(self, session: Any) -> Optional[Item]:
        _, items = self._history(session)
        if not items:
            return None
        last = items[-1]
        start = last
        if last[0].get("type") != "reasoning":
            for entry in reversed(items[:-1]):
                if entry[0].get("type") != "reasoning":
                    break
                start = entry
        back = start[1].get("parentUuid")
        if back is None:
            self._clear()
        else:
            session.rewind(back)
        popped: Item = _clone(last[0])
        return popped

    async def clear_session(self, wrapper: Any = None) -> None:
        """Deletes every record of the session; the session id stays valid (an empty session)."""
        await self._run(self._clear)

    def _clear(self) -> None:
        self._read, self._walked = [], None
        try:
            self._store._native.delete_session(self.session_id)
        except ThreadlineError as err:
            if err.code != "NOT_FOUND":
                raise

    def __repr__(self) -> str:
        return f"<threadline.openai_agents.ThreadlineSession {self.session_id}>"

