//! Where an append's time goes: validation + encoding vs the SQLite commit.
//! `cargo run --release -p threadline --example append_cost`
use std::time::Instant;

use serde_json::json;
use threadline::{SessionOptions, Store, StoreOptions};

fn msg(i: usize) -> serde_json::Value {
    if i.is_multiple_of(3) {
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{}", i - 1), "content": "x".repeat(2000)}]})
    } else {
        json!({"role": "assistant", "id": format!("msg_{i}"), "content": [{"type": "text", "text": "hello ".repeat(50)},
            {"type": "tool_use", "id": format!("t{i}"), "name": "bash", "input": {"command": format!("ls -la {i}")}}],
            "usage": {"input_tokens": 100, "output_tokens": 20}})
    }
}

fn main() {
    let dir = std::env::temp_dir().join(format!("tl-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n: usize = std::env::var("TL_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let msgs: Vec<_> = match std::env::var("TL_INPUT") {
        Ok(file) => std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .take(n)
            .map(|l| threadline::parse(l).unwrap())
            .collect(),
        Err(_) => (0..n).map(msg).collect(),
    };
    let n = msgs.len();
    let texts: Vec<String> = msgs.iter().map(|m| m.to_string()).collect();
    let t = Instant::now();
    for s in &texts {
        std::hint::black_box(threadline::parse(s).unwrap());
    }
    println!(
        "parse: {:.2} us",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    let p = std::env::var("TL_PATH")
        .unwrap_or_else(|_| dir.join("a.db").to_string_lossy().into_owned());
    let store = Store::open(Some(&p), StoreOptions::default()).unwrap();
    let s = store.create_session(SessionOptions::default()).unwrap();
    let mut lat: Vec<f64> = Vec::with_capacity(n);
    for m in msgs {
        let t = Instant::now();
        s.append(m, None).unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    for w in lat.chunks(2000) {
        let mut c = w.to_vec();
        c.sort_by(|a, b| a.partial_cmp(b).unwrap());
        print!("{:.0} ", c[c.len() / 2]);
    }
    println!();
    let mut sorted = lat.clone();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "append (pre-parsed): median {:.2} us, p99 {:.2} us, mean {:.2} us",
        sorted[n / 2],
        sorted[n * 99 / 100],
        lat.iter().sum::<f64>() / n as f64
    );
    std::fs::remove_dir_all(&dir).ok();
}
