//! Interop: the histories other agents wrote, brought into a store (`import`), and sessions written
//! out in other formats (`export`).

pub mod export;
pub(crate) mod import;
pub mod mirror;

pub use export::{export, export_with, ExportFormat, ExportOptions};
pub use import::{import, Format, ImportOptions, ImportReport, Importer, Progress, SkippedLine};
