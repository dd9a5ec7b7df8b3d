#!/usr/bin/env python3
# Folds `perf script` output (recorded with --call-graph dwarf, see bench/profile.js) into where
# the time of one operation goes. Each sample goes to the first category, in the order listed,
# that has a frame anywhere in its stack.
#   perf script -i FILE | python3 bench/perf-breakdown.py append|restore
import collections
import sys

CATEGORIES = {
    'append': [
        ('SQLite: checkpoint (copy WAL into the db, fsync)', ['sqlite3WalCheckpoint', 'walCheckpoint']),
        ('SQLite: commit, writing WAL frames', ['pagerWalFrames', 'sqlite3PagerCommitPhaseOne']),
        ('SQLite: commit, end of transaction (unlock, shm)', ['sqlite3BtreeCommitPhaseTwo', 'pager_end_transaction']),
        ('SQLite: BEGIN IMMEDIATE (locks, shm, read WAL index)', ['btreeBeginTrans', 'sqlite3PagerSharedLock']),
        ('SQLite: blobs + blob_refs INSERTs', ['threadline::storage::blob::put']),
        ('SQLite: sync_tail SELECT', ['Session::sync_tail']),
        ('SQLite: uuid / prior-usage SELECTs', ['threadline::storage::records::prior_usage', 'Statement::query_row']),
        ('SQLite: INSERT INTO records', ['Statement::execute', 'sqlite3_step']),
        ('Rust: state JSON for the record', ['State>::serialize']),
        ('Rust: encode_envelope (ASCII escaping, blob hashing)', ['threadline::storage::encode::']),
        ('Rust: envelope/message validation (Draft)', ['threadline::model::envelope::', 'threadline::model::message::']),
        ('Rust: serde_json parse of the JSON text into a Value tree', ['threadline::model::json::parse', 'parse_json']),
        ('N-API: JS string -> Rust String (UTF-8 copy)', ['from_napi_value', 'napi_get_value_string_utf8']),
        ('N-API: result String -> JS', ['to_napi_value', 'napi_create_string']),
        ('Rust: filled fields + result JSON', ['threadline_node::session::filled', 'threadline_node::error::to_json']),
        ('JS: JSON.stringify of the message (index.js)', ['JsonStringify']),
        ('JS: JSON.parse of the result (index.js)', ['JsonParse']),
        ('V8 GC', ['Heap::', 'Scavenge', 'MarkCompact', 'GCTracer']),
        ('Rust: rest of append (Value drop/alloc, uuid v7, clock)', ['NativeSession::append', 'append_c_callback']),
        ('JS: rest of the facade (envelopeOf, checks)', ['index.js']),
    ],
    'restore': [
        ('JS: JSON.parse of the pages (index.js readPages)', ['JsonParse']),
        ('V8 GC', ['Heap::', 'Scavenge', 'MarkCompact', 'GCTracer', 'Sweeper', 'Evacuat']),
        ('N-API: latin1 page -> JS string (copy)', ['napi_create_string_latin1', 'NewStringFromOneByte']),
        ('Rust: blob expansion', ['Expander']),
        ('SQLite: reading rows (step, overflow pages, page faults on the mmap)', ['sqlite3_step', 'sqlite3VdbeExec', 'rusqlite']),
        ('Rust: read_page (copying rows into the page)', ['threadline::storage::records::read_page']),
        ('JS: Array concat of pages (index.js readPages)', ['ArrayConcat', 'ArrayPrototypeConcat']),
        ('Store.open / openSession / close', ['NativeStore', 'open_session', 'Store::open']),
    ],
}


def main():
    op = sys.argv[1] if len(sys.argv) > 1 else 'append'
    cats = CATEGORIES[op]
    counts = collections.Counter()
    threads = collections.Counter()
    samples = []
    total = 0
    stack = []
    header = ['']

    def flush():
        if not stack:
            return
        # samples of other threads (the checkpoint thread, V8's GC helpers) are counted apart:
        # they run beside the operation, on the other core
        f = header[0].split()
        thread = f'{f[0]}/{f[1]}' if len(f) > 1 else '?'
        threads[thread] += 1
        samples.append((thread, list(stack)))

    for line in sys.stdin:
        if not line.strip():
            flush()
            stack.clear()
        elif line[0] in ' \t':
            stack.append(line.strip().split(' ', 1)[-1])
        else:
            header[0] = line
    flush()
    # the thread with most 'node' samples is the JS main thread; others (the checkpoint thread,
    # V8's GC and compiler helpers) run beside it, on the other core, and are counted apart
    all_samples = sum(threads.values())
    node_threads = [t for t, _ in threads.most_common() if t.startswith('node/')]
    main_thread = node_threads[0] if node_threads else None
    print('samples by thread: ' + ', '.join(f'{t} {100.0 * c / max(all_samples, 1):.1f}%' for t, c in threads.most_common(6)))
    for thread, st in samples:
        if thread != main_thread:
            continue
        total += 1
        text = '\n'.join(st)
        for name, keys in cats:
            if any(k in text for k in keys):
                counts[name] += 1
                break
        else:
            counts['other: ' + st[0][:70]] += 1
    print(f'main thread ({main_thread}), where its time goes:')
    shown = 0.0
    for name, c in counts.most_common():
        pct = 100.0 * c / max(total, 1)
        if name.startswith('other: ') and pct < 0.5:
            continue
        shown += pct
        print(f'{pct:5.1f}%  {name}')
    print(f'{100 - shown:5.1f}%  (other, each < 0.5%)')
    print(f'{total} main-thread samples')


if __name__ == '__main__':
    main()
