//! Bulk reads that use two cores: while the caller decodes one page (in Node, `JSON.parse` on the
//! main thread), a thread reads the next from the store. At most two pages are in flight, so
//! memory stays bounded however long the session is.

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

use crate::error::Result;
use crate::session::{MessageView, Page, Session};

/// What to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Messages,
    /// Envelopes of records before seq `end`.
    Envelopes {
        end: u64,
    },
}

/// Pages of a bulk read, in order; the first is read before this is returned.
pub struct PageStream {
    /// a page that goes before the read ones (a compaction's summary)
    before: Option<Page>,
    first: Option<Result<Page>>,
    rest: Rest,
}

enum Rest {
    Done,
    Thread(Receiver<Result<Page>>),
    /// No thread could be had: each page is read when asked for.
    Inline {
        session: Arc<Session>,
        source: Source,
        from: Option<u64>,
        max_bytes: usize,
    },
}

impl Iterator for PageStream {
    type Item = Result<Page>;

    fn next(&mut self) -> Option<Result<Page>> {
        if let Some(p) = self.before.take() {
            return Some(Ok(p));
        }
        if let Some(p) = self.first.take() {
            return Some(p);
        }
        match &mut self.rest {
            Rest::Done => None,
            Rest::Thread(rx) => rx.recv().ok(),
            Rest::Inline {
                session,
                source,
                from,
                max_bytes,
            } => {
                let page = read(session, *source, (*from)?, *max_bytes);
                *from = page.as_ref().ok().and_then(|p| p.next);
                Some(page)
            }
        }
    }
}

fn read(session: &Session, source: Source, from: u64, max_bytes: usize) -> Result<Page> {
    match source {
        Source::Messages => session.messages_page(from, max_bytes),
        Source::Envelopes { end } => {
            session.envelopes_page(from, end.saturating_sub(from), max_bytes)
        }
    }
}

/// Reads `source` from record `from_seq` in pages of about `max_bytes`.
pub fn pages(
    session: &Arc<Session>,
    source: Source,
    from_seq: u64,
    max_bytes: usize,
) -> PageStream {
    let first = read(session, source, from_seq, max_bytes);
    let Some(next) = first.as_ref().ok().and_then(|p| p.next) else {
        return PageStream {
            before: None,
            first: Some(first),
            rest: Rest::Done,
        };
    };
    let (tx, rx) = sync_channel(1);
    let s = Arc::clone(session);
    let spawned = std::thread::Builder::new()
        .name("threadline-read".into())
        .spawn(move || {
            let mut from = Some(next);
            while let Some(f) = from {
                let page = read(&s, source, f, max_bytes);
                from = page.as_ref().ok().and_then(|p| p.next);
                // A closed channel means the reader stopped early.
                if tx.send(page).is_err() {
                    break;
                }
            }
        });
    let rest = match spawned {
        Ok(_) => Rest::Thread(rx),
        Err(_) => Rest::Inline {
            session: Arc::clone(session),
            source,
            from: Some(next),
            max_bytes,
        },
    };
    PageStream {
        before: None,
        first: Some(first),
        rest,
    }
}

/// The messages of `view` in pages: from the latest compaction (its summary first), or all.
pub fn message_pages(session: &Arc<Session>, view: MessageView, max_bytes: usize) -> PageStream {
    match session.message_start(view) {
        Err(e) => PageStream {
            before: None,
            first: Some(Err(e)),
            rest: Rest::Done,
        },
        Ok((start, first)) => {
            let mut stream = pages(session, Source::Messages, start, max_bytes);
            stream.before = first.map(|m| Page {
                json: serde_json::to_vec(&[m]).unwrap_or_default(),
                next: None,
            });
            stream
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SessionOptions, Store};
    use serde_json::{json, Value};

    #[test]
    fn pages_read_ahead_cover_everything_once_in_order() {
        let store = Store::memory().unwrap();
        let s = Arc::new(store.create_session(SessionOptions::default()).unwrap());
        for i in 0..300 {
            s.append(json!(format!("message {i} {}", "x".repeat(i))), None)
                .unwrap();
        }
        s.append_event("e", None, None).unwrap();
        let mut all = Vec::new();
        let mut count = 0;
        for page in pages(&s, Source::Messages, 0, 2_000) {
            let items: Vec<Value> = serde_json::from_slice(&page.unwrap().json).unwrap();
            count += 1;
            all.extend(items);
        }
        assert!(count > 10);
        assert_eq!(all, s.messages().unwrap());
        let envs: usize = pages(&s, Source::Envelopes { end: 250 }, 10, 2_000)
            .map(|p| {
                serde_json::from_slice::<Vec<Value>>(&p.unwrap().json)
                    .unwrap()
                    .len()
            })
            .sum();
        assert_eq!(envs, 240);
    }
}
