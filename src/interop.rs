//! Import and export: `NativeImporter` runs an import one file per step (each step on the thread
//! pool, progress reported between steps by index.js), and `export` on a session.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::AsyncTask;
use napi_derive::napi;
use threadline::interop::{ExportFormat, ExportOptions, Format, ImportOptions, Importer};
use threadline::Store;

use crate::error::{parse_opt, to_json, OrThrow, Result};
use crate::session::NativeSession;
use crate::store::NativeStore;

#[napi]
pub struct NativeImporter {
    store: Arc<Store>,
    importer: Arc<Mutex<Importer>>,
}

#[napi]
impl NativeStore {
    /// Finds the files of an import; nothing is written until the first step.
    #[napi(catch_unwind)]
    pub fn begin_import(
        &self,
        format: String,
        path: String,
        options_json: Option<String>,
    ) -> Result<NativeImporter> {
        crate::error::guard("import", || {
            let format = Format::parse(&format).or_throw()?;
            let options: ImportOptions = parse_opt(options_json, "import: options")?;
            let importer =
                Importer::new(format, std::path::Path::new(&path), options).or_throw()?;
            Ok(NativeImporter {
                store: self.shared(),
                importer: Arc::new(Mutex::new(importer)),
            })
        })
    }
}

impl NativeImporter {
    fn step(&self) -> Result<Option<String>> {
        crate::error::guard("import", || {
            let mut importer = self.importer.lock().unwrap_or_else(|e| e.into_inner());
            match importer.step(&self.store).or_throw()? {
                Some(at) => Ok(Some(to_json(&at)?)),
                None => Ok(None),
            }
        })
    }

    fn handle(&self) -> NativeImporter {
        NativeImporter {
            store: self.store.clone(),
            importer: self.importer.clone(),
        }
    }
}

#[napi]
impl NativeImporter {
    /// Imports the next file on the thread pool: its progress as JSON, or null when done.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn step_async(&self) -> AsyncTask<crate::job::Job<Option<String>>> {
        let this = self.handle();
        crate::job::Job::task(move || this.step())
    }

    /// The report so far (the whole report once `stepAsync` gave null).
    #[napi(catch_unwind)]
    pub fn report(&self) -> Result<String> {
        let importer = self.importer.lock().unwrap_or_else(|e| e.into_inner());
        to_json(importer.report())
    }
}

#[napi]
impl NativeSession {
    #[napi(catch_unwind)]
    pub fn export(&self, format: String, options_json: Option<String>) -> Result<String> {
        crate::error::guard("export", || {
            let format = ExportFormat::parse(&format).or_throw()?;
            let options: ExportOptions = parse_opt(options_json, "export: options")?;
            threadline::interop::export_with(&self.inner, format, &options).or_throw()
        })
    }
}
