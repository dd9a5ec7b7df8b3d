"""Checkpoints of whole states for agent loops (a ``CheckpointHandler``: ``load`` / ``save`` /
``clear``), kept in a Threadline store.

    from threadline import Store
    from threadline.checkpoint import SnapshotCheckpoints

    checkpoints = SnapshotCheckpoints(Store.open("agent.db"))
    state = checkpoints.load("run-42") or {"step": 0}
    ...
    checkpoints.save("run-42", {"step": 1, "snapshot": session.snapshot()})
    checkpoints.clear("run-42")

A state is any JSON value (dicts, lists, str, int of any size, float, bool, None); it comes back
equal, key order and integers kept. A ``threadline.Session`` given as the state is saved as its
``snapshot()`` text (``load`` gives that text; ``store.import_snapshot(text)`` resumes it).

How it is kept: each key has three slot sessions (``checkpoint:<key>:a``, ``:b``, ``:c``, in the
project ``threadline-checkpoints``) whose metadata holds a state and its generation. A save
creates the next generation in a free slot (one transaction), then deletes the older ones, so
the previous checkpoint is intact until the new one is committed: a crash mid-save leaves one of
them whole, and a save that returned survives the process being killed. ``load`` reads the slots
and gives the newest.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from . import Session, Store, ThreadlineError, _invalid

__all__ = ["SnapshotCheckpoints", "CHECKPOINT_PROJECT"]

#: The project the slot sessions are filed under (out of the way of the agent's own sessions).
CHECKPOINT_PROJECT = "threadline-checkpoints"

_META = "threadlineCheckpoint"
_SLOTS = ("a", "b", "c")


class SnapshotCheckpoints:
    """``load(key)`` / ``save(key, state)`` / ``clear(key)`` over a store (either engine)."""

    def __init__(self, store: Store, *, project: str = CHECKPOINT_PROJECT) -> None:
        if not isinstance(store, Store):
            raise _invalid("SnapshotCheckpoints: store: expected a threadline.Store")
        if not isinstance(project, str) or project == "":
            raise _invalid("SnapshotCheckpoints: project: expected a non-empty str")
        self._store = store
        self._project = project

    def load(self, key: str) -> Any:
        """The state last saved under ``key``; None when there is none (never saved, or
        cleared)."""
        best = self._newest(self._slots(_check_key("load", key)))
        return None if best is None else best[1]

    def save(self, key: str, state: Any) -> None:
        """Saves ``state`` under ``key``, replacing the previous one; committed when it returns.
        A state that cannot be stored (NaN, bytes, non-str keys, ...) is refused with
        ``INVALID_INPUT``, and the previous checkpoint stays as it was."""
        k = _check_key("save", key)
        if isinstance(state, Session):
            state = state.snapshot()
        slots = self._slots(k)
        newest = max((s[0] for s in slots if s is not None), default=0)
        # After a save returns one slot is in use, two after a crash between its steps: one of
        # three is always free for the new state, so the checkpoint before it is intact until
        # the new one is committed.
        free = slots.index(None)
        created = self._store.create_session(
            id=_slot_id(k, _SLOTS[free]),
            project=self._project,
            title=f"checkpoint {k}",
            metadata={_META: {"key": k, "generation": newest + 1, "state": state}},
        )
        created.close()
        for i, slot in enumerate(slots):
            if slot is not None:
                self._store.delete_session(_slot_id(k, _SLOTS[i]))

    def clear(self, key: str) -> None:
        """Forgets ``key``'s checkpoint (committed when it returns); nothing when there is none."""
        k = _check_key("clear", key)
        for slot in _SLOTS:
            try:
                self._store.delete_session(_slot_id(k, slot))
            except ThreadlineError as e:
                if e.code != "NOT_FOUND":
                    raise

    def _slots(self, key: str) -> List[Optional[Tuple[int, Any]]]:
        """Each slot's (generation, state), or None when empty."""
        out: List[Optional[Tuple[int, Any]]] = []
        for slot in _SLOTS:
            try:
                session = self._store.open_session(_slot_id(key, slot))
            except ThreadlineError as e:
                if e.code != "NOT_FOUND":
                    raise
                out.append(None)
                continue
            try:
                meta = (session.info.get("metadata") or {}).get(_META)
            finally:
                session.close()
            if not isinstance(meta, dict) or meta.get("key") != key:
                err = ThreadlineError(
                    f"load: checkpoint '{key}': session '{_slot_id(key, slot)}' is not one of its slots"
                )
                err.code = "STORE_CORRUPT"
                raise err
            out.append((int(meta["generation"]), meta.get("state")))
        return out

    @staticmethod
    def _newest(slots: List[Optional[Tuple[int, Any]]]) -> Optional[Tuple[int, Any]]:
        present = [s for s in slots if s is not None]
        return max(present, key=lambda s: s[0]) if present else None


def _check_key(what: str, key: Any) -> str:
    if not isinstance(key, str) or key == "":
        raise _invalid(f"{what}: key: expected a non-empty str, got {type(key).__name__}")
    return key


def _slot_id(key: str, slot: str) -> str:
    return f"checkpoint:{key}:{slot}"
