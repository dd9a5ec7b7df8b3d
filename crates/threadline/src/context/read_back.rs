//! Reading a long context back from its end, in chunks of records that double in size, until
//! what was read decides what is needed (a budget's cut, a compaction plan): the rest of the
//! session is never read.

use crate::context::{ratio_from_end, DEFAULT_TOKENS_PER_CHAR};
use crate::error::Result;
use crate::session::compaction_point::Start;
use crate::session::{Session, ViewRecord};
use crate::storage::db::Db;

/// Records read back from the end of a long context at first, doubling each time.
pub(crate) const FIRST_CHUNK: u64 = 512;

pub(crate) struct ReadBack {
    /// where the context starts (its summary, the ratio before it)
    pub start: Start,
    /// the current branch from the start of the context, as seq ranges
    pub segments: Vec<(u64, u64)>,
    /// the latest record that reported usage (by the index)
    latest: Option<u64>,
    /// the ratio when usage does not calibrate it, and whether it is a calibration
    fallback: (f64, bool),
    /// where the next chunk ends: (segment, seq)
    at: Option<(usize, u64)>,
    size: u64,
    /// chunks read, newest first, with the estimated characters of each record
    chunks: Vec<Vec<ViewRecord>>,
    chars: Vec<Vec<u64>>,
}

impl ReadBack {
    /// None for a session with no records.
    pub fn new(conn: &Db, s: &Session) -> Result<Option<ReadBack>> {
        ReadBack::for_target(conn, s, false)
    }

    /// As `new`, for a request to `anthropic` or not (`compaction_point::start_for`).
    pub fn for_target(conn: &Db, s: &Session, anthropic: bool) -> Result<Option<ReadBack>> {
        let tail = s.read_tail(conn)?;
        let start =
            crate::session::compaction_point::start_for(conn, s.num, &tail.state, anthropic)?;
        let Some(last) = tail.next_seq.checked_sub(1) else {
            return Ok(None);
        };
        let segments: Vec<(u64, u64)> = tail
            .state
            .path(last)
            .into_iter()
            .filter(|&(_, to)| to >= start.seq)
            .map(|(from, to)| (from.max(start.seq), to))
            .collect();
        let latest = crate::storage::records::latest_usage(conn, s.num, &segments)?;
        let fallback = start
            .tokens_per_char
            .map_or((DEFAULT_TOKENS_PER_CHAR, false), |r| (r, true));
        let at = segments.len().checked_sub(1).map(|i| (i, segments[i].1));
        Ok(Some(ReadBack {
            start,
            segments,
            latest,
            fallback,
            at,
            size: FIRST_CHUNK,
            chunks: Vec::new(),
            chars: Vec::new(),
        }))
    }

    /// Reads the next chunk back. False once the context was read to its start.
    pub fn read_more(&mut self, conn: &Db, num: i64) -> Result<bool> {
        let Some((i, upper)) = self.at else {
            return Ok(false);
        };
        let from = self.segments[i].0.max(upper.saturating_sub(self.size - 1));
        let chunk = crate::storage::records::view_from(conn, num, from, &[(from, upper)])?;
        self.chars.push(
            chunk
                .iter()
                .map(|r| crate::context::estimate_chars(&r.message))
                .collect(),
        );
        self.chunks.push(chunk);
        self.at = if from > self.segments[i].0 {
            Some((i, from - 1))
        } else {
            i.checked_sub(1).map(|j| (j, self.segments[j].1))
        };
        self.size = (self.size * 2).min(1 << 16);
        Ok(self.at.is_some())
    }

    /// Makes the next read take `n` records more at least, up to 1,048,576.
    pub fn read_at_least(&mut self, n: u64) {
        self.size = self.size.max(n.saturating_add(FIRST_CHUNK)).min(1 << 20);
    }

    /// Everything read, once the context was read to its start: the whole context, its summary
    /// first.
    pub fn into_whole(self) -> Vec<ViewRecord> {
        let mut view: Vec<ViewRecord> = self.start.summary.into_iter().collect();
        view.extend(self.chunks.into_iter().rev().flatten());
        view
    }

    /// The records read, oldest first, and their estimated characters.
    pub fn view(&self) -> (Vec<&ViewRecord>, Vec<u64>) {
        (
            self.chunks.iter().rev().flatten().collect(),
            self.chars.iter().rev().flatten().copied().collect(),
        )
    }

    /// The tokens-per-character ratio and whether usage calibrated it, if what was read decides
    /// it (`ratio_from_end`).
    pub fn ratio(&self, view: &[&ViewRecord], chars: &[u64]) -> Option<(f64, bool)> {
        ratio_from_end(view, chars, self.latest, self.fallback)
    }
}
