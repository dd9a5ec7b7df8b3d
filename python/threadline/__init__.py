"""Threadline: a lossless, crash-safe session store for LLM agents (Rust core, pyo3 binding).

Messages go in and come back in the Anthropic wire shape, exactly: a dict comes back equal, in
its key order, with integers of any size exact. Options are keyword arguments in snake_case;
returned records keep the wire shape's own (camelCase) keys, as in JavaScript.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Union
from typing import Callable

from . import _native
from ._native import ThreadlineError

__all__ = [
    "Store",
    "Session",
    "RecallTools",
    "ThreadlineError",
    "ERROR_CODES",
    "default_store_path",
]

#: Every stable error code a ``ThreadlineError`` may carry (the same as JavaScript's).
ERROR_CODES: List[str] = list(_native.error_codes())

Message = Union[Mapping[str, Any], str]

# The formats ``Store.import_`` reads (the same as JavaScript's ``store.import``).
_IMPORT_FORMATS = ("claude-code", "codex", "pi", "fspec")


def default_store_path() -> str:
    """``THREADLINE_HOME/threadline.db`` if set, else the per-user data dir's."""
    return _native.default_store_path()


def _invalid(message: str) -> ThreadlineError:
    err = ThreadlineError(message)
    err.code = "INVALID_INPUT"
    return err


def _str(value: Any, what: str) -> str:
    """A str argument, else INVALID_INPUT naming it (not a bare TypeError: every bad input has
    a code)."""
    if not isinstance(value, str):
        raise _invalid(f"{what}: expected a str, got {type(value).__name__}")
    return value


def _plain(message: Any) -> Any:
    """An SDK object (the anthropic SDK's `Message`, any pydantic model) as its dict, field
    names as on the wire; everything else as it is."""
    if isinstance(message, (dict, str, list)):
        return message
    to_dict = getattr(message, "to_dict", None)
    if callable(to_dict):  # anthropic SDK models: the wire's field names, unset fields left out
        return to_dict()
    dump = getattr(message, "model_dump", None)
    if callable(dump):  # pydantic v2
        return dump(by_alias=True, exclude_unset=True)
    return message


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _options(kwargs: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    # None means "not given", as a left-out key does in JavaScript.
    out = {_camel(k): v for k, v in kwargs.items() if v is not None}
    return out or None


class RecallTools:
    """The recall tools (session_list, session_search, session_read) bound to a store."""

    def __init__(self, store: "Store", options: Optional[Dict[str, Any]]) -> None:
        defs = store._native.recall_tools(options)
        self._store = store
        self._options = options
        self.anthropic: List[Dict[str, Any]] = defs["anthropic"]
        self.openai_chat: List[Dict[str, Any]] = defs["openaiChat"]
        self.openai_responses: List[Dict[str, Any]] = defs["openaiResponses"]
        self.names: List[str] = defs["names"]

    def handle(self, call: Mapping[str, Any]) -> Dict[str, Any]:
        """Answers a tool call (an Anthropic ``tool_use`` block); the ``tool_result`` block."""
        result: Dict[str, Any] = self._store._native.recall_handle(call, self._options)
        return result


class Session:
    """One conversation in a store. Use ``Store.create_session`` or ``Store.open_session``."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def id(self) -> str:
        return str(self._native.id)

    @property
    def info(self) -> Dict[str, Any]:
        """The session's metadata (project, model, title, status, counts...)."""
        info: Dict[str, Any] = self._native.info()
        return info

    def append(self, message: Message) -> Dict[str, Any]:
        """Appends a message (a dict in the Anthropic wire shape, an envelope, or a str: a user
        message) durably; returns the fields the session filled in: type, uuid, parentUuid,
        sessionId, seq, timestamp."""
        filled: Dict[str, Any] = self._native.append(_plain(message))
        return filled

    def append_many(self, messages: Sequence[Message]) -> List[Dict[str, Any]]:
        """Appends several in one transaction: all or none."""
        if not isinstance(messages, (list, tuple)):
            raise _invalid(f"append_many: messages: expected a list, got {type(messages).__name__}")
        filled: List[Dict[str, Any]] = self._native.append_many([_plain(m) for m in messages])
        return filled

    @property
    def messages(self) -> List[Dict[str, Any]]:
        """The messages of the current context (after the last compaction), as appended."""
        out: List[Dict[str, Any]] = self._native.messages(False)
        return out

    @property
    def all_messages(self) -> List[Dict[str, Any]]:
        """Every message from the start, compacted ones included."""
        out: List[Dict[str, Any]] = self._native.messages(True)
        return out

    def envelopes(self, from_seq: int = 0, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The stored records themselves (message, seq, uuid, parentUuid, timestamp...)."""
        out: List[Dict[str, Any]] = self._native.envelopes(from_seq, limit)
        return out

    @property
    def turns(self) -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = self._native.turns()
        return out

    @property
    def token_tracker(self) -> Dict[str, Any]:
        out: Dict[str, Any] = self._native.token_tracker()
        return out

    @property
    def context_fill(self) -> Dict[str, Any]:
        out: Dict[str, Any] = self._native.context_fill()
        return out

    def build_context(
        self, target: str = "anthropic", max_tokens: Optional[int] = None, **options: Any
    ) -> Dict[str, Any]:
        """A valid request for ``target`` ("anthropic", "openai-chat", "openai-responses")
        within ``max_tokens``; other options: max_messages, system, tool_result_preview_chars,
        reasoning, model."""
        o = _options(dict(options, target=target, max_tokens=max_tokens)) or {}
        out: Dict[str, Any] = self._native.build_context(o)
        return out

    def snapshot(self) -> str:
        """JSON text with everything needed to resume (``Store.import_snapshot``)."""
        return str(self._native.snapshot())

    def recover(
        self, unknown_outcome: Optional[str] = None, replayed: Optional[Sequence[str]] = None
    ) -> Dict[str, Any]:
        """Repairs what a crash left (tool calls without results...); the report."""
        out: Dict[str, Any] = self._native.recover(
            unknown_outcome, list(replayed) if replayed is not None else None
        )
        return out

    def set_status(self, status: str) -> None:
        self._native.set_status(_str(status, "set_status: status"))

    def export(self, format: str, *, events: Optional[bool] = None) -> str:
        """The session written out: ``"claude-code"`` (JSONL as Claude Code writes it),
        ``"markdown"``, ``"html"`` (one self-contained page) or ``"snapshot"`` (as
        ``snapshot()``). ``events``: markdown also lists events (progress, hooks, ...)."""
        if events is not None and not isinstance(events, bool):
            raise _invalid(f"export: events: expected a bool, got {type(events).__name__}")
        o = _options(dict(events=events))
        return _native.export_session(self._native, _str(format, "export: format"), o)

    def close(self) -> None:
        """Lets go of the session (another process may write it then)."""
        self._native.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<threadline.Session {self.id}>"


class Store:
    """A store: a SQLite file, or a PostgreSQL database (``postgres://...``)."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    def open(cls, path_or_url: Optional[str] = None, **options: Any) -> "Store":
        """Opens (or creates) a store. Options: durability ("process" or "power"),
        blob_threshold_bytes, readonly, busy_timeout_ms. No path: ``default_store_path()``."""
        if path_or_url is not None and not isinstance(path_or_url, str):
            import os

            if not isinstance(path_or_url, os.PathLike):
                raise _invalid(
                    f"open: path: expected a str or os.PathLike, got {type(path_or_url).__name__}"
                )
            path_or_url = _str(os.fspath(path_or_url), "open: path")
        return cls(_native.NativeStore.open(path_or_url, _options(options)))

    @property
    def path(self) -> str:
        return str(self._native.path)

    def create_session(
        self,
        *,
        id: Optional[str] = None,
        project: Optional[str] = None,
        model: Optional[str] = None,
        title: Optional[str] = None,
        provider: Optional[str] = None,
        context_window: Optional[int] = None,
        prompt_key: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> Session:
        o = _options(
            dict(
                id=id,
                project=project,
                model=model,
                title=title,
                provider=provider,
                context_window=context_window,
                prompt_key=prompt_key,
                metadata=metadata,
            )
        )
        return Session(self._native.create_session(o))

    def open_session(self, id: str, *, prompt_key: Optional[str] = None) -> Session:
        """Opens a session to write it: ``SESSION_LOCKED`` while another live process does."""
        return Session(self._native.open_session(_str(id, "open_session: id"), prompt_key))

    def list_sessions(
        self,
        *,
        project: Optional[str] = None,
        status: Optional[str] = None,
        since: Optional[str] = None,
        until: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> List[Dict[str, Any]]:
        o = _options(dict(project=project, status=status, since=since, until=until, limit=limit))
        out: List[Dict[str, Any]] = self._native.list_sessions(o)
        return out

    def delete_session(self, id: str) -> None:
        self._native.delete_session(_str(id, "delete_session: id"))

    def search(self, query: str, **options: Any) -> Dict[str, Any]:
        """Full-text search over every session: ``{"hits": [...], "nextCursor": ...}``. Options:
        project, session_id, exclude_session_id, since, until, roles, fields, limit, cursor."""
        out: Dict[str, Any] = self._native.search(_str(query, "search: query"), _options(options))
        return out

    def recall_tools(
        self,
        *,
        exclude_session_id: Optional[str] = None,
        project: Optional[str] = None,
        max_result_tokens: Optional[int] = None,
    ) -> RecallTools:
        o = _options(
            dict(
                exclude_session_id=exclude_session_id,
                project=project,
                max_result_tokens=max_result_tokens,
            )
        )
        return RecallTools(self, o)

    def import_snapshot(self, snapshot: str) -> Session:
        """A new session from ``Session.snapshot()``'s text (from either engine)."""
        return Session(self._native.import_snapshot(_str(snapshot, "import_snapshot: snapshot")))

    def import_(
        self,
        source: Mapping[str, Any],
        *,
        project: Optional[str] = None,
        include_deleted: Optional[bool] = None,
        on_progress: Optional[Callable[[Dict[str, Any]], object]] = None,
    ) -> Dict[str, Any]:
        """Brings in the sessions another agent wrote: ``source`` is ``{"format": "claude-code" |
        "codex" | "pi" | "fspec", "path": file or folder}``. Records keep their own ids, so
        importing again adds only what is new. ``on_progress`` gets ``{files, totalFiles,
        records, bytes, totalBytes}`` after each file. The report: ``{sessions, newSessions,
        records, newRecords, skipped}``."""
        import os

        if not isinstance(source, Mapping):
            raise _invalid(
                f"import: source: expected a dict {{format, path}}, got {type(source).__name__}"
            )
        for k in source:
            if k not in ("format", "path"):
                raise _invalid(f"import: source.{k}: unknown field (expected format, path)")
        fmt = source.get("format")
        if fmt not in _IMPORT_FORMATS:
            raise _invalid(
                f"import: source.format: expected one of {', '.join(repr(f) for f in _IMPORT_FORMATS)}, got {fmt!r}"
            )
        path = source.get("path")
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, str) or path == "":
            raise _invalid(f"import: source.path: expected a file or folder path, got {path!r}")
        if project is not None and not isinstance(project, str):
            raise _invalid(f"import: project: expected a str, got {type(project).__name__}")
        if include_deleted is not None and not isinstance(include_deleted, bool):
            raise _invalid(
                f"import: include_deleted: expected a bool, got {type(include_deleted).__name__}"
            )
        if on_progress is not None and not callable(on_progress):
            raise _invalid(f"import: on_progress: expected a callable, got {type(on_progress).__name__}")
        o = _options(dict(project=project, include_deleted=include_deleted))
        return _native.import_sessions(
            self._native, str(fmt), os.path.abspath(path), o, on_progress
        )

    def close(self) -> None:
        self._native.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<threadline.Store {self.path!r}>"
