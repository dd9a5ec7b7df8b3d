//! Search and the recall tools from Rust, without Node: a real Claude Code session restored,
//! found by a phrase and an identifier, and a model's call answered.

mod common;

use serde_json::json;
use threadline::{RecallOptions, SearchOptions, SessionOptions, Store, StoreOptions};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = common::location(dir.path(), "recall.db");
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let s = store
        .create_session(SessionOptions {
            id: Some("tools".into()),
            project: Some("spotter".into()),
            ..SessionOptions::default()
        })
        .unwrap();
    s.restore_messages(common::fixture_lines("tool_heavy.jsonl"))
        .unwrap();
    (dir, store)
}

#[test]
fn a_phrase_and_an_identifier_are_found_in_their_records() {
    let (_dir, store) = store();
    let page = store
        .search("\"start phoenix\"", &SearchOptions::default())
        .unwrap();
    // the prompt, and the description of the command the model ran for it
    let mut snippets: Vec<&str> = page.hits.iter().map(|h| h.snippet.as_str()).collect();
    snippets.sort();
    assert_eq!(
        snippets,
        [
            "**start** **phoenix** in background",
            "Bash command: mix phx.server description: **Start** **Phoenix** server in background run_in_background: true",
        ]
    );
    let page = store
        .search("run_in_background", &SearchOptions::default())
        .unwrap();
    assert!(!page.hits.is_empty());
    assert!(page
        .hits
        .iter()
        .all(|h| h.field == threadline::Field::ToolInput));
    let e = store
        .search("\"open", &SearchOptions::default())
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT");
}

#[test]
fn a_models_call_is_answered_and_its_mistakes_are_is_error_results() {
    let (_dir, store) = store();
    let tools = store.recall_tools(RecallOptions::default()).unwrap();
    let r = tools
        .handle(&json!({"type": "tool_use", "id": "t1", "name": "session_search", "input": {"query": "phoenix"}}))
        .unwrap();
    assert_eq!(r["tool_use_id"], "t1");
    assert!(r.get("is_error").is_none(), "{r}");
    assert!(r["content"].as_str().unwrap().contains("session tools"));
    let r = tools
        .handle(&json!({"name": "session_read", "input": {"session_id": 7}}))
        .unwrap();
    assert_eq!(r["is_error"], true);
    assert_eq!(r["content"], "session_id: expected a string, got a number");
}

/// Issue 23, finding 10: a cursor's offset was not covered by its key (an offset of 2^63 gave
/// page 1 on SQLite and STORE_IO on PostgreSQL).
#[test]
fn a_cursor_is_refused_unless_it_is_one_this_search_gave() {
    let (_dir, store) = store();
    let with = |cursor: &str, limit: u64| SearchOptions {
        limit: Some(limit),
        cursor: (!cursor.is_empty()).then(|| cursor.to_string()),
        ..SearchOptions::default()
    };
    let first = store.search("phoenix", &with("", 1)).unwrap();
    let c = first.next_cursor.clone().unwrap();
    let second = store.search("phoenix", &with(&c, 1)).unwrap();
    assert_eq!(second.hits.len(), 1);
    assert_ne!(second.hits[0].uuid, first.hits[0].uuid);
    let refused = |query: &str, options: &SearchOptions| {
        let e = store.search(query, options).unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT", "{query} {options:?}: {e}");
        assert!(e.message().contains("cursor"), "{e}");
    };
    // altered anywhere, cut short, made longer, empty
    let mut bad: Vec<String> = (0..c.len())
        .map(|i| {
            let mut b = c.clone().into_bytes();
            b[i] = if b[i] == b'0' { b'1' } else { b'0' };
            String::from_utf8(b).unwrap()
        })
        .collect();
    bad.extend([
        c[..c.len() - 1].to_string(),
        c[1..].to_string(),
        format!("{c}0"),
        " ".into(),
    ]);
    // the offset replaced by one beyond any page (2^63, u64::MAX), the rest kept
    let rest = &c[c.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(c.len())..];
    for huge in ["9223372036854775808", "18446744073709551615", "1"] {
        bad.push(format!("{huge}{rest}"));
    }
    for b in &bad {
        refused("phoenix", &with(b, 1));
    }
    // made for another query or other options
    refused("phoenix server", &with(&c, 1));
    refused("phoenix", &with(&c, 2));
    // made by another store holding the same records
    let (_other_dir, other) = self::store();
    assert_eq!(other.search("phoenix", &with("", 1)).unwrap().hits.len(), 1);
    let e = other.search("phoenix", &with(&c, 1)).unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT", "{e}");
    // and the cursor as given still leads to the second page
    assert_eq!(
        store.search("phoenix", &with(&c, 1)).unwrap().hits[0].uuid,
        second.hits[0].uuid
    );
}

fn session_with(store: &Store, id: &str, texts: &[String]) {
    let s = store
        .create_session(SessionOptions {
            id: Some(id.into()),
            ..SessionOptions::default()
        })
        .unwrap();
    for t in texts {
        s.append(json!(t), None).unwrap();
    }
}

/// The hits of `query` in session `id`: their seqs.
fn seqs(store: &Store, query: &str, id: &str) -> Vec<u64> {
    let page = store
        .search(
            query,
            &SearchOptions {
                session_id: Some(id.into()),
                ..SearchOptions::default()
            },
        )
        .unwrap();
    let mut seqs: Vec<u64> = page.hits.iter().map(|h| h.seq).collect();
    seqs.sort();
    seqs
}

/// Issue 23, finding 12: fullwidth letters were not folded in search.
#[test]
fn fullwidth_letters_and_digits_are_found_as_the_ascii_ones_and_the_other_way() {
    let (_dir, store) = store();
    session_with(
        &store,
        "wide",
        &[
            "the Ｔｈｒｅａｄｌｉｎｅ index of ２０２６".into(),
            "plain threadline text of 2027".into(),
        ],
    );
    assert_eq!(seqs(&store, "threadline", "wide"), [0, 1]);
    assert_eq!(seqs(&store, "ＴＨＲＥＡＤＬＩＮＥ", "wide"), [0, 1]);
    assert_eq!(seqs(&store, "thread*", "wide"), [0, 1]);
    assert_eq!(seqs(&store, "2026", "wide"), [0]);
    assert_eq!(seqs(&store, "２０２７", "wide"), [1]);
    assert_eq!(seqs(&store, "\"ｉｎｄｅｘ of 2026\"", "wide"), [0]);
    // the snippet marks the word as it is written
    let page = store
        .search("threadline 2026", &SearchOptions::default())
        .unwrap();
    assert_eq!(
        page.hits[0].snippet,
        "the **Ｔｈｒｅａｄｌｉｎｅ** index of **２０２６**"
    );
}

/// Runs SQL on the store's database behind the library's back: `sqlite` on a SQLite file,
/// `postgres` in the store's schema on PostgreSQL.
fn behind_its_back(location: &str, sqlite: &str, postgres: &str) {
    if !location.starts_with("postgres") {
        let conn = rusqlite::Connection::open(location).unwrap();
        conn.execute_batch(sqlite).unwrap();
        return;
    }
    let (base, schema) = location.rsplit_once("schema=").unwrap();
    let base = base.trim_end_matches(['?', '&']);
    let mut c = postgres::Client::connect(base, postgres::NoTls).unwrap();
    c.batch_execute(&format!("SET search_path TO {schema}; {postgres}"))
        .unwrap();
}

/// A store indexed before text was folded (its fullwidth words indexed as they were written) is
/// indexed again at its first search.
#[test]
fn an_index_of_unfolded_tokens_is_made_again_at_the_first_search() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::location(dir.path(), "upgrade.db");
    {
        let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
        session_with(&store, "wide", &["the Ｔｈｒｅａｄｌｉｎｅ index".into()]);
        assert_eq!(seqs(&store, "threadline", "wide"), [0]);
        store.close().unwrap();
    }
    // The record's row as an older version indexed it, and no version of the index's tokens.
    let id =
        "(SELECT r.id FROM records r JOIN sessions s ON s.num = r.id >> 36 WHERE s.id = 'wide')";
    behind_its_back(
        &path,
        &format!(
            "DELETE FROM search WHERE rowid = {id};
             INSERT INTO search(rowid, text, thinking, tool_input, tool_output)
               VALUES ({id}, 'the Ｔｈｒｅａｄｌｉｎｅ index', '', '', '');
             DELETE FROM search_meta WHERE key = 'tokens';"
        ),
        &format!(
            "UPDATE search SET text = CAST('''the'':1 ''ｔｈｒｅａｄｌｉｎｅ'':2 ''index'':3' AS tsvector) WHERE id = {id};
             DELETE FROM meta WHERE key = 'search_tokens';"
        ),
    );
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    assert_eq!(seqs(&store, "threadline", "wide"), [0]);
    assert_eq!(seqs(&store, "index", "wide"), [0]);
}

/// Characters a model's tokenizer makes at least one token of (Han, kana, hangul) and emoji
/// (at least two), counted without the library's estimate.
fn lower_bound_tokens(text: &str) -> f64 {
    text.chars()
        .map(|c| match c as u32 {
            0x3040..=0x30FF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF => 1.0,
            0x1F000..=0x1FAFF => 2.0,
            0..=0x7F => 0.25,
            _ => 0.0,
        })
        .sum()
}

/// Issue 23, finding 12: budgets counted characters (at 1,000 tokens, `session_read` gave 4,115
/// CJK characters or 4,117 emoji).
#[test]
fn results_stay_within_the_budget_estimated_per_script() {
    let (_dir, store) = store();
    let sessions = [
        (
            "cjk",
            "我们决定认证流程使用令牌，一小时后过期。".repeat(300),
        ),
        ("emoji", "🚀🔥😀👍🎉".repeat(1200)),
        (
            "latin",
            "The quick brown fox jumps over the lazy dog. ".repeat(130),
        ),
        ("mixed", "认证 flow 🚀 ok; ".repeat(400)),
    ];
    for (id, text) in &sessions {
        session_with(&store, id, &[text.clone(), text.clone(), text.clone()]);
    }
    let tools = store
        .recall_tools(RecallOptions {
            max_result_tokens: Some(1000),
            ..RecallOptions::default()
        })
        .unwrap();
    let mut inputs = vec![
        json!(["session_list", {}]),
        json!(["session_search", {"query": "认证", "limit": 50}]),
        json!(["session_search", {"query": "quick OR flow", "limit": 50}]),
    ];
    for (id, _) in &sessions {
        inputs.push(json!(["session_read", {"session_id": id}]));
        inputs.push(json!(["session_read", {"session_id": id, "record_seq": 1}]));
        inputs
            .push(json!(["session_read", {"session_id": id, "record_seq": 1, "char_offset": 700}]));
    }
    for call in inputs {
        let r = tools
            .handle(&json!({"name": call[0], "input": call[1]}))
            .unwrap();
        let content = r["content"].as_str().unwrap();
        assert!(r.get("is_error").is_none(), "{call}: {content}");
        assert!(
            threadline::estimate_text_tokens(content) <= 1000,
            "{call}: {} tokens estimated",
            threadline::estimate_text_tokens(content)
        );
        assert!(
            lower_bound_tokens(content) <= 1000.0,
            "{call}: at least {} tokens",
            lower_bound_tokens(content)
        );
    }
    // A record larger than a result is shown cut, and reading on goes past it.
    let mut input = json!({"session_id": "cjk"});
    let mut shown = vec![];
    for _ in 0..10 {
        let r = tools
            .handle(&json!({"name": "session_read", "input": input}))
            .unwrap();
        let content = r["content"].as_str().unwrap().to_string();
        shown.extend(content.lines().filter_map(|l| {
            l.strip_prefix("[seq ")?
                .split(']')
                .next()?
                .parse::<u64>()
                .ok()
        }));
        let Some(at) = content.find("\"from_seq\": ") else {
            assert!(content.ends_with("(end of the session)"), "{content}");
            break;
        };
        let next: u64 = content[at + 12..].trim_end_matches('}').parse().unwrap();
        input = json!({"session_id": "cjk", "from_seq": next});
    }
    shown.dedup();
    assert_eq!(shown, [0, 1, 2]);
}

/// Issue 23, finding 12: a numeric id was dropped, `char_offset` past the end gave empty content,
/// and the selectors of `session_read` were accepted together.
#[test]
fn a_call_is_refused_or_answered_for_what_it_is() {
    let (_dir, store) = store();
    let tools = store.recall_tools(RecallOptions::default()).unwrap();
    let e = tools
        .handle(&json!({"type": "tool_use", "id": 7, "name": "session_list", "input": {}}))
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT");
    assert!(
        e.message().contains("id: expected a string, got a number"),
        "{e}"
    );
    // A Responses item: the output answers its call_id (the item's own id is another)
    let r = tools
        .handle(&json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "session_list", "arguments": "{}"}))
        .unwrap();
    assert_eq!(r["tool_use_id"], "call_1");
    let read = |input: serde_json::Value| {
        let r = tools
            .handle(&json!({"name": "session_read", "input": input}))
            .unwrap();
        (
            r["content"].as_str().unwrap().to_string(),
            r.get("is_error").is_some(),
        )
    };
    for (input, named) in [
        (
            json!({"session_id": "tools", "from_seq": 1, "record_seq": 2}),
            "from_seq and record_seq",
        ),
        (
            json!({"session_id": "tools", "around_uuid": "x", "record_seq": 2}),
            "around_uuid and record_seq",
        ),
        (
            json!({"session_id": "tools", "around_uuid": "x", "from_seq": 2}),
            "around_uuid and from_seq",
        ),
        (
            json!({"session_id": "tools", "around_uuid": "x", "from_seq": 1, "record_seq": 2}),
            "around_uuid, from_seq and record_seq",
        ),
    ] {
        let (content, error) = read(input.clone());
        assert!(error, "{input}: {content}");
        assert_eq!(
            content,
            format!("give one of around_uuid, from_seq or record_seq, not {named}")
        );
    }
    let (content, error) = read(json!({"session_id": "tools", "char_offset": 5}));
    assert!(error);
    assert_eq!(
        content,
        "char_offset: goes with record_seq (where to go on in that record)"
    );
    // The end of a record is said, past it too.
    let (whole, error) = read(json!({"session_id": "tools", "record_seq": 3}));
    assert!(
        !error && whole.ends_with("\n(end of the record)"),
        "{whole}"
    );
    let chars = whole.chars().count() - "\n(end of the record)".len();
    for offset in [chars, chars + 1, 10_000_000] {
        let (content, error) =
            read(json!({"session_id": "tools", "record_seq": 3, "char_offset": offset}));
        assert!(!error, "{content}");
        assert!(
            content.starts_with("(end of the record)"),
            "{offset}: {content}"
        );
    }
}

#[test]
fn a_search_behind_a_large_backlog_answers_in_its_time_and_says_what_it_did_not_see() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::location(dir.path(), "backlog.db");
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let s = store
        .create_session(SessionOptions {
            id: Some("long".into()),
            ..SessionOptions::default()
        })
        .unwrap();
    let role = |i: usize| {
        if i.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        }
    };
    s.append_many(
        (0..1600)
            .map(|i| json!({"role": role(i), "content": [{"type": "text", "text": format!("common marker{i}")}]}))
            .collect(),
    )
    .unwrap();
    let found = |q: &str| {
        let page = store.search(q, &SearchOptions::default()).unwrap();
        (page.hits.len(), page.unindexed)
    };
    // No time to index: each search indexes one batch (500 records, oldest first) and answers
    // from what is indexed, saying how many records it did not search.
    threadline::testing::set_index_budget(Some(std::time::Duration::ZERO));
    assert_eq!(found("marker1599"), (0, 1100));
    assert_eq!(found("marker10"), (1, 600));
    assert_eq!(found("marker999"), (1, 100));
    assert_eq!(found("marker1599"), (1, 0));
    assert_eq!(found("marker1599"), (1, 0));
    // With the usual budget, what was appended since is found at the next search, whole.
    threadline::testing::set_index_budget(None);
    s.append_many(
        (1600..2400)
            .map(|i| json!({"role": role(i), "content": [{"type": "text", "text": format!("common marker{i}")}]}))
            .collect(),
    )
    .unwrap();
    assert_eq!(found("marker2399"), (1, 0));
    assert_eq!(found("marker1600 OR marker2000 OR marker5"), (3, 0));
}
