"""threadline.openai_agents.ThreadlineSession against the OpenAI Agents SDK's own SQLiteSession
(file-backed) and a JSONL file (json.dumps + write; read back with json.loads per line).

    .tools/py/bin/python python/bench/sessions.py [--runs N] [--items N]

The items are the Responses-API shapes the adapter's tests use (a user message, reasoning with
encrypted content, a function_call, its function_call_output, the assistant's message), in turns
of five, with texts of a few hundred characters. Operations, each on a fresh store file per run:

- ``add_items``, one item per call (the first ONE items of the conversation);
- ``add_items``, a turn (5 items) per call, for all ITEMS items;
- ``get_items()`` of the whole conversation (ITEMS items) on the object that wrote it;
- restore: a fresh store / session object (a new process's first call) reading every item.

The three kinds run interleaved within each run, in an order rotating run by run; a ratio is
Threadline / the other within one run, and the figures are the medians over the runs (the machine
is shared: ratios, never absolute goals). Durability as each gives it: Threadline and SQLiteSession
commit each call (SQLite WAL); the JSONL file is written and closed, not fsynced. Writes
python/bench/results-sessions.json (``--results FILE`` elsewhere). ``--profile`` prints cProfile's
top entries for Threadline's ``add_items`` and ``get_items``, and the time in the native calls.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents.memory import SQLiteSession  # noqa: E402

import threadline  # noqa: E402
from threadline import Store  # noqa: E402
from threadline.openai_agents import ThreadlineSession  # noqa: E402

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
WORDS = "the store keeps each record exactly as given and in the order it was written".split()


def text(n: int, salt: int) -> str:
    return " ".join(WORDS[(salt + i) % len(WORDS)] for i in range(n))


def turn(t: int) -> List[Dict[str, Any]]:
    """One turn of a tool-using agent, as the SDK stores it (the adapter tests' shapes)."""
    call_id = f"call_{t}"
    return [
        {"role": "user", "content": f"Question {t}: " + text(30, t)},
        {
            "id": f"rs_{t}",
            "summary": [{"text": text(20, t + 1), "type": "summary_text"}],
            "type": "reasoning",
            "encrypted_content": "gAAAAB" + "x9" * 200,
        },
        {
            "arguments": json.dumps({"path": f"src/file_{t}.rs", "query": text(5, t)}),
            "call_id": call_id,
            "name": "lookup",
            "type": "function_call",
            "id": f"fc_{t}",
            "status": "completed",
        },
        {"call_id": call_id, "output": text(60, t + 2), "type": "function_call_output"},
        {
            "id": f"msg_{t}",
            "content": [{"annotations": [], "text": text(50, t + 3), "type": "output_text", "logprobs": []}],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        },
    ]


def conversation(n: int) -> List[Dict[str, Any]]:
    items: List[Dict[str, Any]] = []
    t = 0
    while len(items) < n:
        items.extend(turn(t))
        t += 1
    return items[:n]


class JsonlSession:
    """The baseline: a session as a JSONL file, json.dumps + write per add_items, json.loads per
    line on get_items (the simplest durable-ish store one would write; no fsync)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def add_items(self, items: List[Dict[str, Any]]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(i) + "\n" for i in items))

    async def get_items(self, limit: Any = None) -> List[Dict[str, Any]]:
        with open(self.path, encoding="utf-8") as f:
            items = [json.loads(line) for line in f]
        return items if limit is None else items[len(items) - limit :]


class Kind:
    """How to make a session of one kind over a directory, and to close what it opened."""

    def __init__(self, name: str, dir: Path) -> None:
        self.name = name
        self.dir = dir
        self.opened: List[Any] = []

    def session(self, sid: str) -> Any:
        if self.name == "threadline":
            store = Store.open(str(self.dir / "threadline.db"))
            self.opened.append(store)
            return ThreadlineSession(sid, store)
        if self.name == "sqlite":
            s = SQLiteSession(sid, self.dir / "agents.db")
            self.opened.append(s)
            return s
        return JsonlSession(self.dir / f"{sid}.jsonl")

    def close(self) -> None:
        for o in self.opened:
            o.close()
        self.opened = []


KINDS = ["threadline", "sqlite", "jsonl"]


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    await fn()
    return time.perf_counter() - t0


async def one_run(root: Path, r: int, items: List[Dict[str, Any]], one: int) -> Dict[str, Dict[str, float]]:
    """Every operation for every kind, kinds interleaved operation by operation (rotated by run)."""
    order = KINDS[r % 3 :] + KINDS[: r % 3]
    kinds = {}
    for k in order:
        d = root / f"run{r}-{k}"
        d.mkdir()
        kinds[k] = Kind(k, d)
    out: Dict[str, Dict[str, float]] = {k: {} for k in order}
    turns = [items[i : i + 5] for i in range(0, len(items), 5)]
    try:
        objects = {k: kinds[k].session("one") for k in order}
        for k in order:
            s = objects[k]

            async def per_item(s: Any = s) -> None:
                for item in items[:one]:
                    await s.add_items([item])

            out[k]["add_one_us_per_item"] = await timed(per_item) / one * 1e6
        objects = {k: kinds[k].session("conv") for k in order}
        for k in order:
            s = objects[k]

            async def per_turn(s: Any = s) -> None:
                for batch in turns:
                    await s.add_items(batch)

            out[k]["add_turn_us_per_item"] = await timed(per_turn) / len(items) * 1e6
        for k in order:
            got: List[Any] = []

            async def get(s: Any = objects[k]) -> None:
                got.append(await s.get_items())

            out[k]["get_items_ms"] = await timed(get) * 1e3
            assert len(got[0]) == len(items), (k, len(got[0]))
            assert got[0][-1] == items[-1], k
        for k in order:
            kinds[k].close()
        for k in order:
            got = []

            async def restore(k: str = k) -> None:
                got.append(await kinds[k].session("conv").get_items())

            out[k]["restore_ms"] = await timed(restore) * 1e3
            assert len(got[0]) == len(items), (k, len(got[0]))
    finally:
        for k in order:
            kinds[k].close()
    return out


def profile(root: Path, items: List[Dict[str, Any]]) -> None:
    """cProfile of Threadline's add_items (a turn per call) and get_items, with the time the
    native calls (the binding, GIL released) take on their own."""
    d = root / "profile"
    d.mkdir()
    kind = Kind("threadline", d)
    s = kind.session("p")
    turns = [items[i : i + 5] for i in range(0, len(items), 5)]

    async def add() -> None:
        for b in turns:
            await s.add_items(b)

    pr = cProfile.Profile()
    pr.runcall(asyncio.run, add())
    print("== add_items, a turn per call")
    pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
    pr = cProfile.Profile()
    pr.runcall(asyncio.run, s.get_items())
    print("== get_items of the whole conversation")
    pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
    kind.close()


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    quick = os.environ.get("BENCH_QUICK") == "1"
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3 if quick else 7)
    p.add_argument("--items", type=int, default=1000 if quick else 10000)
    p.add_argument("--one", type=int, default=200 if quick else 1000, help="items added one per call")
    p.add_argument("--results", default=str(HERE / "results-sessions.json"))
    p.add_argument("--profile", action="store_true")
    a = p.parse_args()
    items = conversation(a.items)
    root = Path(tempfile.mkdtemp(prefix="threadline-pybench-"))
    try:
        if a.profile:
            profile(root, items)
            return
        runs = []
        for r in range(a.runs):
            got = asyncio.run(one_run(root, r, items, min(a.one, a.items)))
            runs.append(got)
            print(f"run {r + 1}/{a.runs}: " + json.dumps(got), file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    ops = list(runs[0]["threadline"].keys())
    summary: Dict[str, Any] = {}
    for op in ops:
        row: Dict[str, Any] = {k: statistics.median(run[k][op] for run in runs) for k in KINDS}
        for base in ("sqlite", "jsonl"):
            row[f"ratio_{base}"] = statistics.median(run["threadline"][op] / run[base][op] for run in runs)
        summary[op] = row
    goals = [
        ("add_turn_us_per_item", "sqlite", 1.0),
        ("add_one_us_per_item", "sqlite", 1.0),
        ("get_items_ms", "sqlite", 1.0),
        ("add_turn_us_per_item", "jsonl", 2.0),
        ("add_one_us_per_item", "jsonl", 2.0),
    ]
    targets = [
        {"op": op, "baseline": base, "max": m, "measured": summary[op][f"ratio_{base}"],
         "pass": summary[op][f"ratio_{base}"] <= m}
        for op, base, m in goals
    ]
    results = {
        "bench": "python/bench/sessions.py",
        "commit": commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "threadline": threadline.__file__,
        "items": a.items,
        "one_per_call_items": min(a.one, a.items),
        "runs": a.runs,
        "summary": summary,
        "targets": targets,
        "per_run": runs,
    }
    Path(a.results).write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'operation':24} {'threadline':>11} {'SQLiteSession':>14} {'JSONL':>10} {'/sqlite':>8} {'/jsonl':>8}")
    for op, row in summary.items():
        print(
            f"{op:24} {row['threadline']:11.1f} {row['sqlite']:14.1f} {row['jsonl']:10.1f} "
            f"{row['ratio_sqlite']:7.2f}x {row['ratio_jsonl']:7.2f}x"
        )
    for t in targets:
        print(f"goal {t['op']} <= {t['max']}x {t['baseline']}: {t['measured']:.2f}x {'ok' if t['pass'] else 'MISSED'}")


if __name__ == "__main__":
    main()
