//! Timestamps: ISO 8601 UTC with milliseconds, as JavaScript's `Date#toISOString` writes them.

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Now, as `2026-11-22T10:04:05.123Z`.
pub fn now_iso() -> String {
    iso(OffsetDateTime::now_utc())
}

pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

pub fn iso(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

pub fn iso_from_ms(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .map(iso)
        .unwrap_or_default()
}

/// Parses an RFC 3339 / ISO 8601 date-time with an offset.
pub fn parse(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}

/// Milliseconds since the epoch of an ISO date-time, for comparisons.
pub fn parse_ms(s: &str) -> Option<i64> {
    parse(s).map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
}
