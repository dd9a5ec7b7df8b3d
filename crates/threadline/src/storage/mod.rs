//! Storage: the physical layout (records, sessions, blobs, the tool-call journal, ownership,
//! write order, checksums, the search index) and the SQL that reads and writes it. Layers above
//! use these functions and never write SQL of their own.

pub(crate) mod append_log;
pub(crate) mod batch;
pub(crate) mod blob;
pub(crate) mod checkpoint;
pub(crate) mod checksum;
pub(crate) mod connection;
pub(crate) mod db;
pub(crate) mod encode;
pub(crate) mod integrity;
pub(crate) mod journal;
pub(crate) mod maintenance;
pub(crate) mod notice;
pub(crate) mod open_file;
pub(crate) mod owner;
pub(crate) mod ownership;
pub(crate) mod postgres;
pub(crate) mod records;
pub(crate) mod schema;
pub(crate) mod scratch;
pub(crate) mod search_index;
pub(crate) mod sessions;
pub(crate) mod shared;
pub(crate) mod txn;
pub(crate) mod write_order;
