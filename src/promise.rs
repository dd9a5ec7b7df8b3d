//! The `...Async` twins of the native classes' methods, for `threadline/promise` (see job.rs).

use crate::recovery::NativeResponseWriter;
use crate::session::NativeSession;
use crate::store::NativeStore;
use crate::text::NativePage;
use threadline::{MessageView, Source, PAGE_BYTES};

async_twins!(NativeSession {
    info_async => info() -> String, "Promise<string>";
    append_async => append(json: String, envelope_json: Option<String>) -> String, "Promise<string>";
    append_many_async => append_many(json: String) -> String, "Promise<string>";
    append_event_async => append_event(name: String, data_json: Option<String>, envelope_json: Option<String>) -> String, "Promise<string>";
    restore_messages_async => restore_messages(json: String) -> String, "Promise<string>";
    restore_token_state_async => restore_token_state(json: String) -> (), "Promise<void>";
    turns_async => turns() -> String, "Promise<string>";
    token_tracker_async => token_tracker() -> String, "Promise<string>";
    context_fill_async => context_fill() -> String, "Promise<string>";
    set_status_async => set_status(status: String) -> (), "Promise<void>";
    verify_async => verify() -> String, "Promise<string>";
    update_async => update(json: String) -> String, "Promise<string>";
    tool_call_started_async => tool_call_started(id: String) -> (), "Promise<void>";
    record_tool_outcome_async => record_tool_outcome(id: String, result_json: String) -> (), "Promise<void>";
    tool_calls_async => tool_calls(state: Option<String>) -> String, "Promise<string>";
    cached_tool_result_async => cached_tool_result(id: String) -> Option<String>, "Promise<string | null>";
    pending_repairs_async => pending_repairs() -> String, "Promise<string>";
    recover_async => recover(options_json: Option<String>) -> String, "Promise<string>";
    snapshot_async => snapshot() -> String, "Promise<string>";
    export_async => export(format: String, options_json: Option<String>) -> String, "Promise<string>";
    begin_response_async => begin_response(options_json: Option<String>) -> NativeResponseWriter, "Promise<NativeResponseWriter>";
    build_context_async => build_context(options_json: String) -> crate::text::Latin1, "Promise<string>";
    read_tool_output_async => read_tool_output(id: String) -> String, "Promise<string>";
    compaction_plan_async => compaction_plan(options_json: String) -> String, "Promise<string>";
    rewind_async => rewind(to_uuid: String) -> (), "Promise<void>";
    branches_async => branches() -> String, "Promise<string>";
    compact_async => compact(options_json: String) -> String, "Promise<string>";
    read_messages_async => all_message_pages(full: bool) -> Vec<NativePage>, "Promise<NativePage[]>";
    read_envelopes_async => all_envelope_pages(from_seq: f64, limit: f64) -> Vec<NativePage>, "Promise<NativePage[]>";
});

async_twins!(NativeStore {
    create_session_async => create_session(options_json: Option<String>) -> NativeSession, "Promise<NativeSession>";
    list_sessions_async => list_sessions(filter_json: Option<String>) -> String, "Promise<string>";
    import_snapshot_async => import_snapshot(json: String) -> NativeSession, "Promise<NativeSession>";
    fork_session_async => fork_session(id: String, at_uuid: Option<String>, title: Option<String>) -> NativeSession, "Promise<NativeSession>";
    interrupted_sessions_async => interrupted_sessions() -> String, "Promise<string>";
    delete_session_async => delete_session(id: String) -> (), "Promise<void>";
    search_async => search(query: String, options_json: Option<String>) -> String, "Promise<string>";
    recall_tools_async => recall_tools(options_json: Option<String>) -> String, "Promise<string>";
    recall_handle_async => recall_handle(options_json: Option<String>, call_json: String) -> String, "Promise<string>";
    verify_async => verify(options_json: Option<String>) -> String, "Promise<string>";
    close_async => close() -> (), "Promise<void>";
    stats_async => stats() -> String, "Promise<string>";
    vacuum_async => vacuum() -> String, "Promise<string>";
    backup_async => backup(path: String) -> String, "Promise<string>";
    begin_import_async => begin_import(format: String, path: String, options_json: Option<String>) -> crate::interop::NativeImporter, "Promise<NativeImporter>";
});

async_twins!(NativeResponseWriter {
    push_async => push(chunk_json: String) -> (), "Promise<void>";
    finish_async => finish(message_json: Option<String>) -> String, "Promise<string>";
    fail_async => fail(message: String, code: Option<String>) -> String, "Promise<string>";
});

impl NativeSession {
    /// Every page of `messages` (`full`: `allMessages`), read on the calling thread.
    fn all_message_pages(&self, full: bool) -> crate::error::Result<Vec<NativePage>> {
        let view = if full {
            MessageView::Full
        } else {
            MessageView::Context
        };
        collect(threadline::message_pages(&self.inner, view, PAGE_BYTES))
    }

    fn all_envelope_pages(
        &self,
        from_seq: f64,
        limit: f64,
    ) -> crate::error::Result<Vec<NativePage>> {
        let from = from_seq as u64;
        let end = from.saturating_add(limit as u64);
        collect(threadline::pages(
            &self.inner,
            Source::Envelopes { end },
            from,
            PAGE_BYTES,
        ))
    }
}

fn collect(pages: threadline::PageStream) -> crate::error::Result<Vec<NativePage>> {
    crate::error::guard("read", || {
        pages
            .map(|p| crate::error::OrThrow::or_throw(p).map(NativePage::from))
            .collect()
    })
}
