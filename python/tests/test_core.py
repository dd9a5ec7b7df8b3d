"""The core's behaviours through Python, on each engine: lossless round trips, turns, token
state, valid requests, coded errors with paths, hostile inputs refused with nothing stored."""

from __future__ import annotations

import json
import math
from typing import Any, Dict

import pytest

import threadline
from threadline import Store, ThreadlineError


def user(text: str) -> Dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text: str, **extra: Any) -> Dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], **extra}


def test_a_dict_comes_back_equal_key_order_and_numbers_kept(location: str) -> None:
    message = {
        "content": [{"text": "weights", "type": "text"}],
        "role": "user",
        "z_first_then_a": {"z": 1, "a": 2, "m": [3, 2, 1]},
        "hundred": 1e2,
        "big": 123456789012345678901234567890,
        "negative_big": -987654321098765432109876543210,
        "ratio": 0.1,
        "tiny": 5e-324,
        "unicode": "naïve ☃ \U0001f600",
        "nothing": None,
        "flags": [True, False],
    }
    with Store.open(location) as store:
        session = store.create_session(project="py", model="claude-sonnet-4-5")
        filled = session.append(message)
        assert list(filled) == ["type", "uuid", "parentUuid", "sessionId", "seq", "timestamp"]
        assert filled["seq"] == 0 and filled["sessionId"] == session.id
        got = session.messages[0]
        assert got == message
        assert json.dumps(got) == json.dumps(message)  # key order too
        assert list(got["z_first_then_a"]) == ["z", "a", "m"]
        assert type(got["hundred"]) is float and got["hundred"] == 100.0
        assert type(got["big"]) is int and got["big"] == 123456789012345678901234567890
        session_id = session.id
    # and from a new store handle
    with Store.open(location) as store:
        assert store.open_session(session_id).messages == [message]


def test_envelope_pages_parse_to_the_same_values_as_envelopes(location: str) -> None:
    """The stored JSON pages the OpenAI Agents adapter reads with `json.loads` (a restore's main
    cost) give the values `envelopes()` builds: key order, big ints, floats, from any seq; with
    `without_message_of`, the records holding that key come without their message, others whole."""
    tricky = {
        "content": [{"text": "w", "type": "text"}],
        "role": "user",
        "z": {"z": 1, "a": 2},
        "hundred": 1e2,
        "big": 123456789012345678901234567890,
        "tiny": 5e-324,
        "neg_zero": -0.0,
        "unicode": "naïve ☃ \U0001f600 \"quoted\"",
    }
    with Store.open(location) as store:
        session = store.create_session(project="py")
        session.append(tricky)
        session.append_many([{"message": assistant(f"a{i}"), "kept": {"b": 1, "a": [i]}} for i in range(50)])
        native = session._native
        for start in (0, 1, 30):
            pages = native.envelope_pages(start)
            assert all(isinstance(p, bytes) for p in pages)
            parsed = [e for p in pages for e in json.loads(p)]
            assert json.dumps(parsed) == json.dumps(native.envelopes(start, None))
        parsed = [e for p in native.envelope_pages(0, "kept") for e in json.loads(p)]
        full = native.envelopes(0, None)
        assert len(parsed) == len(full) == 51
        assert parsed[0] == full[0] and json.dumps(parsed[0]) == json.dumps(full[0])
        for got, whole in zip(parsed[1:], full[1:]):
            assert "message" not in got
            assert got == {k: v for k, v in whole.items() if k != "message"}
            assert json.dumps(got["kept"]) == json.dumps(whole["kept"])


def test_turns_token_tracker_and_context(location: str) -> None:
    with Store.open(location) as store:
        session = store.create_session(model="claude-sonnet-4-5")
        session.append("What is in main.rs?")
        session.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "main.rs"}},
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 1200, "output_tokens": 40},
            }
        )
        session.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "fn main() {}"}]}
        )
        session.append(assistant("It is an empty main.", stop_reason="end_turn", usage={"input_tokens": 1300, "output_tokens": 9}))
        turns = session.turns
        assert len(turns) == 1
        assert turns[0]["messageCount"] == 4 and turns[0]["toolUseCount"] == 1
        assert turns[0]["status"] == "complete"
        tracker = session.token_tracker
        assert tracker["inputTokens"] == 1300 and tracker["outputTokens"] == 9
        assert tracker["cumulativeInputTokens"] == 2500 and tracker["cumulativeOutputTokens"] == 49
        ctx = session.build_context(target="anthropic", max_tokens=150_000)
        assert [m["role"] for m in ctx["messages"]] == ["user", "assistant", "user", "assistant"]
        assert ctx["messages"][1]["content"][1]["id"] == "toolu_1"
        chat = session.build_context(target="openai-chat", max_tokens=150_000)
        assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert session.info["messageCount"] == 4


def test_build_context_keeps_a_dangling_tool_call_out_and_recover_repairs_it(location: str) -> None:
    with Store.open(location) as store:
        session = store.create_session()
        session.append("Run the tests.")
        session.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_9", "name": "bash", "input": {"cmd": "cargo test"}}],
                "stop_reason": "tool_use",
            }
        )
        # the process died before the tool's result: a request must still be valid
        ctx = session.build_context(max_tokens=10_000)
        for m in ctx["messages"]:
            for block in m["content"] if isinstance(m["content"], list) else []:
                assert block.get("type") != "tool_use" or any(
                    b.get("tool_use_id") == block["id"]
                    for n in ctx["messages"]
                    if isinstance(n["content"], list)
                    for b in n["content"]
                )
        report = session.recover()
        assert report["clean"] is False and report["recordsWritten"] >= 1
        assert session.recover()["clean"] is True


def test_list_search_recall_snapshot(location: str, tmp_path: Any) -> None:
    with Store.open(location) as store:
        a = store.create_session(project="alpha", title="lexer")
        a.append(user("the lexer drops the final token"))
        b = store.create_session(project="beta")
        b.append(user("unrelated"))
        assert {s["id"] for s in store.list_sessions()} == {a.id, b.id}
        assert [s["id"] for s in store.list_sessions(project="alpha")] == [a.id]
        page = store.search("lexer")
        assert [h["sessionId"] for h in page["hits"]] == [a.id]
        tools = store.recall_tools(project="alpha")
        assert tools.names == ["session_list", "session_search", "session_read"]
        assert {t["name"] for t in tools.anthropic} == set(tools.names)
        result = tools.handle({"type": "tool_use", "id": "toolu_r", "name": "session_search", "input": {"query": "lexer"}})
        assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_r"
        assert "lexer" in json.dumps(result["content"])
        snapshot = a.snapshot()
        messages = a.messages
    with Store.open(str(tmp_path / "other.db")) as other:
        copy = other.import_snapshot(snapshot)
        assert copy.id == a.id and copy.messages == messages


def expect(code: str, fn: Any, *parts: str) -> ThreadlineError:
    with pytest.raises(ThreadlineError) as info:
        fn()
    assert info.value.code == code, str(info.value)
    for p in parts:
        assert p in str(info.value), str(info.value)
    return info.value


def test_errors_carry_codes_and_paths(location: str) -> None:
    assert threadline.ERROR_CODES[:2] == ["INVALID_INPUT", "NOT_FOUND"]
    with Store.open(location) as store:
        expect("NOT_FOUND", lambda: store.open_session("no-such-session"))
        expect("INVALID_INPUT", lambda: store.create_session(context_window=-1), "contextWindow")
        expect("INVALID_INPUT", lambda: Store.open(location, durability="sometimes"), "durability")
        expect("INVALID_INPUT", lambda: store.list_sessions(status="sleeping"), "status")
        session = store.create_session()
        expect("INVALID_INPUT", lambda: session.append({"role": "robot", "content": "x"}), "role")
        expect("INVALID_INPUT", lambda: session.build_context(target="gopher"), "target")
        expect("INVALID_INPUT", lambda: session.recover(unknown_outcome="maybe"), "unknown_outcome")
        assert session.messages == []
    store.close()  # twice is fine
    expect("CLOSED", lambda: store.create_session())


def test_hostile_inputs_are_invalid_input_naming_the_path_and_store_nothing(location: str) -> None:
    deep: Any = "x"
    for _ in range(200):
        deep = [deep]
    looped: Dict[str, Any] = {"role": "user"}
    looped["content"] = [looped]

    class Weird:
        pass

    cases = [
        ({"role": "user", "content": [{"type": "text", "text": "x", 1: "one"}]}, "append: message.content[0]", "not a str"),
        ({"role": "user", "content": [{"type": "text", "text": float("nan")}]}, "message.content[0].text", "NaN"),
        ({"role": "user", "content": "x", "w": float("inf")}, "message.w", "inf"),
        ({"role": "user", "content": "x", "b": b"bytes"}, "message.b", "bytes"),
        ({"role": "user", "content": "x", "s": {1, 2}}, "message.s", "set"),
        ({"role": "user", "content": "x", "o": Weird()}, "message.o", "Weird"),
        ({"role": "user", "content": "x", "d": deep}, "message.d", "nested deeper"),
        (looped, "message.content[0]", "nested deeper"),
        ({"role": "user", "content": "x", "huge": 10**5000}, "message.huge", "too large (more than 4300 digits)"),
        ({"role": "user", "content": "x", "huge": -(2**20000)}, "message.huge", "20001 bits"),
        ({"role": "user", "content": "\ud800"}, "message.content", "surrogate"),
        (b"user", "append: message", "bytes"),
        (42, "append", ""),
    ]
    with Store.open(location) as store:
        session = store.create_session()
        session.append("kept")
        for value, path, why in cases:
            err = expect("INVALID_INPUT", lambda: session.append(value), path, why)
            assert len(str(err)) < 2000
        expect("INVALID_INPUT", lambda: session.append_many(["ok", {"role": "user", "content": math.nan}]), "[1]")
        assert len(session.messages) == 1  # nothing stored by a refused call
        assert session.info["messageCount"] == 1


def test_integers_up_to_4000_digits_are_kept_exactly(location: str) -> None:
    with Store.open(location) as store:
        session = store.create_session()
        n = 7**4700  # 3972 digits
        session.append({"role": "user", "content": "x", "n": n, "m": -n})
        got = session.messages[0]
        assert got["n"] == n and got["m"] == -n


def test_arguments_of_the_wrong_type_are_invalid_input(location: str) -> None:
    with Store.open(location) as store:
        expect("INVALID_INPUT", lambda: Store.open(42), "open: path: expected a str or os.PathLike, got int")  # type: ignore[arg-type]
        expect("INVALID_INPUT", lambda: store.open_session(7), "open_session: id: expected a str, got int")  # type: ignore[arg-type]
        expect("INVALID_INPUT", lambda: store.search(b"q"), "search: query")  # type: ignore[arg-type]
        session = store.create_session()
        expect("INVALID_INPUT", lambda: session.append_many("one"), "append_many: messages: expected a list")  # type: ignore[arg-type]
        expect("INVALID_INPUT", lambda: session.set_status(None), "set_status: status")  # type: ignore[arg-type]
        assert session.messages == []


def test_sdk_message_objects_are_appended_as_their_wire_dicts(location: str) -> None:
    # The anthropic SDK's models have to_dict() (wire names, unset fields left out); pydantic
    # models model_dump(). Both are stored as those dicts.
    wire = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "Done."}],
        "model": "claude-sonnet-4-5",
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }

    class SdkMessage:
        def to_dict(self) -> Dict[str, Any]:
            return json.loads(json.dumps(wire))

    class PydanticLike:
        def model_dump(self, by_alias: bool, exclude_unset: bool) -> Dict[str, Any]:
            assert by_alias and exclude_unset
            return {"role": "user", "content": [{"type": "text", "text": "next"}]}

    with Store.open(location) as store:
        session = store.create_session()
        session.append("Do it.")
        assert session.append(SdkMessage())["type"] == "assistant"
        session.append_many([PydanticLike()])
        messages = session.messages
        assert messages[1] == wire
        assert messages[2] == {"role": "user", "content": [{"type": "text", "text": "next"}]}
        assert session.token_tracker["outputTokens"] == 2


def test_a_panic_is_a_coded_error_not_a_crash() -> None:
    err = expect("INVALID_INPUT", threadline._native._panic_for_test, "internal error", "a deliberate panic")
    assert isinstance(err, Exception)


def test_context_managers_close(sqlite_path: str) -> None:
    with Store.open(sqlite_path) as store:
        with store.create_session() as session:
            session.append("hi")
        expect("CLOSED", lambda: session.append("after close"))
    expect("CLOSED", lambda: store.list_sessions())
