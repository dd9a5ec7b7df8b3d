//! Session state kept incrementally: every stored record carries the state of its session right
//! after it (message count, the current turn, pending tool calls, token counters). Appending folds
//! one record into the previous state; reading token state is one row; reading turns is one row
//! per turn (the state just before the next turn starts).

use serde::{Deserialize, Serialize};

use crate::model::message::{MessageFacts, Role};
use crate::model::usage::Usage;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// messages so far (records in `messages`)
    #[serde(rename = "m")]
    pub messages: u64,
    #[serde(rename = "t")]
    pub turns: u64,
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub last_role: Option<Role>,
    #[serde(rename = "lu", default, skip_serializing_if = "Option::is_none")]
    pub last_message_uuid: Option<String>,
    /// tool_use ids of the current turn still waiting for their tool_result
    #[serde(rename = "p", default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    #[serde(rename = "ct", default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnState>,
    /// usage of the latest response
    #[serde(rename = "l", default, with = "compact")]
    pub latest: Usage,
    #[serde(rename = "lk", default, skip_serializing_if = "Option::is_none")]
    pub latest_key: Option<String>,
    /// sums over distinct responses
    #[serde(rename = "c", default, with = "compact")]
    pub cumulative: Usage,
    /// JSON bytes of messages after the latest usage (estimated into contextTokens)
    #[serde(rename = "b", default)]
    pub bytes_since_usage: u64,
    /// contextTokens set by restoreTokenState, until the next usage
    #[serde(rename = "cb", default, skip_serializing_if = "Option::is_none")]
    pub context_base: Option<u64>,
    /// a response being streamed: its partial output is in `stream` records from `seq` on
    #[serde(rename = "os", default, skip_serializing_if = "Option::is_none")]
    pub open_stream: Option<OpenStream>,
    /// the latest successful compaction: context starts there
    #[serde(rename = "cp", default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionPoint>,
    /// the latest message holding an Anthropic `compaction` block: a request to Anthropic starts
    /// there (the server ignores what lies before it)
    #[serde(rename = "ab", default, skip_serializing_if = "Option::is_none")]
    pub compaction_block: Option<u64>,
    /// the current branch before its last segment, as inclusive seq ranges (empty while the
    /// session was never rewound)
    #[serde(rename = "bp", default, skip_serializing_if = "Vec::is_empty")]
    pub branch_path: Vec<(u64, u64)>,
    /// where the current branch's last segment starts
    #[serde(rename = "bs", default, skip_serializing_if = "is_zero")]
    pub segment_start: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionPoint {
    /// the compaction record
    #[serde(rename = "s")]
    pub seq: u64,
    /// the first record kept after it (messages from here on, after the summary)
    #[serde(rename = "k")]
    pub kept: u64,
    /// tokens of the context right after it, when known
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenStream {
    #[serde(rename = "i")]
    pub id: String,
    #[serde(rename = "s")]
    pub seq: u64,
}

impl State {
    /// The records of the branch ending at record `last`, as inclusive seq ranges in order.
    pub fn path(&self, last: u64) -> Vec<(u64, u64)> {
        let mut p = self.branch_path.clone();
        if self.segment_start <= last {
            p.push((self.segment_start, last));
        }
        p
    }

    /// A compaction moves the start of the context and re-bases the token tracker on it.
    pub fn compacted(&mut self, point: CompactionPoint) {
        if let Some(t) = point.tokens_after {
            self.context_base = Some(t);
            self.bytes_since_usage = 0;
        }
        self.compaction = Some(point);
    }

    /// Follows streamed responses: a `stream` record opens one (if it is not open already), a
    /// record naming it in `streamId` (its final message, its error, its repair) closes it.
    pub fn track_stream(&mut self, env: &serde_json::Map<String, serde_json::Value>, seq: u64) {
        let ty = env.get("type").and_then(|t| t.as_str());
        let part_of = env
            .get("stream")
            .and_then(|s| s.get("id"))
            .and_then(|i| i.as_str());
        if let (Some("stream"), Some(id)) = (ty, part_of) {
            if self.open_stream.as_ref().map(|o| o.id.as_str()) != Some(id) {
                self.open_stream = Some(OpenStream {
                    id: id.to_string(),
                    seq,
                });
            }
            return;
        }
        let ends = env.get("streamId").and_then(|i| i.as_str());
        if ends.is_some() && self.open_stream.as_ref().map(|o| o.id.as_str()) == ends {
            self.open_stream = None;
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnState {
    #[serde(rename = "i")]
    pub index: u64,
    #[serde(rename = "s")]
    pub start_index: u64,
    #[serde(rename = "su")]
    pub start_uuid: String,
    #[serde(rename = "tu")]
    pub tool_uses: u64,
    #[serde(rename = "u", with = "compact")]
    pub usage: Usage,
}

/// Usage in the state stored with every record: `[input, output, cache read, cache creation]`,
/// a quarter of the size of the provider's field names.
mod compact {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::model::usage::Usage;

    pub fn serialize<S: Serializer>(u: &Usage, s: S) -> Result<S::Ok, S::Error> {
        [
            u.input_tokens,
            u.output_tokens,
            u.cache_read_input_tokens,
            u.cache_creation_input_tokens,
        ]
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Usage, D::Error> {
        let [i, o, r, c] = <[u64; 4]>::deserialize(d)?;
        Ok(Usage {
            input_tokens: i,
            output_tokens: o,
            cache_read_input_tokens: r,
            cache_creation_input_tokens: c,
        })
    }
}

/// One message as state sees it.
pub struct Step<'a> {
    pub uuid: &'a str,
    pub facts: &'a MessageFacts,
    /// bytes of the message as stored
    pub bytes: u64,
    pub response_key: Option<&'a str>,
    /// usage already counted for this response (recorded earlier on another record)
    pub prior: Option<Usage>,
}

/// Where a message landed: its index in `messages` and whether it starts a turn.
pub struct Placed {
    pub index: u64,
    pub turn_start: bool,
}

impl State {
    pub fn apply(&mut self, step: &Step) -> Placed {
        let f = step.facts;
        let index = self.messages;
        self.messages += 1;
        for id in &f.tool_result_ids {
            self.pending.retain(|p| p != id);
        }
        // A system message starts no turn: one before the first prompt belongs to none, one
        // later to the turn it is in.
        let system = f.role == Some(Role::System);
        let turn_start = f.is_prompt || (self.turn.is_none() && !system);
        if turn_start {
            self.pending.clear();
            self.turn = Some(TurnState {
                index: self.turns,
                start_index: index,
                start_uuid: step.uuid.to_string(),
                ..Default::default()
            });
            self.turns += 1;
        }
        if let Some(turn) = self.turn.as_mut() {
            turn.tool_uses += f.tool_calls;
        }
        if f.role == Some(Role::Assistant) {
            // A response after user messages is a new one: calls of the last response that got
            // no result by now never will (the provider wants results in the very next user
            // message), so they stop being awaited. This keeps `pending` one response long.
            if self.last_role == Some(Role::User) {
                self.pending.clear();
            }
            self.pending.extend(f.tool_use_ids.iter().cloned());
        }
        match &f.usage {
            Some(u) => {
                let old = step.prior.unwrap_or_default();
                self.cumulative = self.cumulative.replace(&old, u);
                if let Some(turn) = self.turn.as_mut() {
                    turn.usage = turn.usage.replace(&old, u);
                }
                self.latest = *u;
                self.latest_key = step.response_key.map(str::to_string);
                self.bytes_since_usage = 0;
                self.context_base = None;
            }
            None => self.bytes_since_usage += step.bytes,
        }
        // The turn's status follows the user and assistant messages only.
        if !system {
            self.last_role = f.role;
        }
        self.last_message_uuid = Some(step.uuid.to_string());
        Placed { index, turn_start }
    }

    pub fn tracker(&self) -> TokenTracker {
        let base = self
            .context_base
            .unwrap_or_else(|| self.latest.context_total());
        TokenTracker {
            input_tokens: self.latest.input_tokens,
            output_tokens: self.latest.output_tokens,
            cache_read_input_tokens: self.latest.cache_read_input_tokens,
            cache_creation_input_tokens: self.latest.cache_creation_input_tokens,
            context_tokens: base + estimate_tokens(self.bytes_since_usage),
            cumulative_input_tokens: self.cumulative.input_tokens,
            cumulative_output_tokens: self.cumulative.output_tokens,
            cumulative_cache_read_tokens: self.cumulative.cache_read_input_tokens,
            cumulative_cache_creation_tokens: self.cumulative.cache_creation_input_tokens,
        }
    }

    /// The turn in progress, as of this state (the turn's end if the next record starts another).
    pub fn current_turn(&self) -> Option<Turn> {
        let t = self.turn.as_ref()?;
        let end_index = self.messages.checked_sub(1)?;
        Some(Turn {
            index: t.index,
            start_index: t.start_index,
            end_index,
            start_uuid: t.start_uuid.clone(),
            end_uuid: self.last_message_uuid.clone().unwrap_or_default(),
            message_count: end_index + 1 - t.start_index,
            tool_use_count: t.tool_uses,
            usage: t.usage,
            status: if !self.pending.is_empty() {
                TurnStatus::AwaitingToolResults
            } else if self.last_role == Some(Role::Assistant) {
                TurnStatus::Complete
            } else {
                TurnStatus::AwaitingResponse
            },
        })
    }

    /// Sets what `restoreTokenState` gives; the rest stays.
    pub fn restore_tokens(&mut self, t: &TokenPatch) {
        let set = |dst: &mut u64, v: Option<u64>| {
            if let Some(v) = v {
                *dst = v
            }
        };
        set(&mut self.latest.input_tokens, t.input_tokens);
        set(&mut self.latest.output_tokens, t.output_tokens);
        set(
            &mut self.latest.cache_read_input_tokens,
            t.cache_read_input_tokens,
        );
        set(
            &mut self.latest.cache_creation_input_tokens,
            t.cache_creation_input_tokens,
        );
        set(&mut self.cumulative.input_tokens, t.cumulative_input_tokens);
        set(
            &mut self.cumulative.output_tokens,
            t.cumulative_output_tokens,
        );
        set(
            &mut self.cumulative.cache_read_input_tokens,
            t.cumulative_cache_read_tokens,
        );
        set(
            &mut self.cumulative.cache_creation_input_tokens,
            t.cumulative_cache_creation_tokens,
        );
        if let Some(c) = t.context_tokens {
            self.context_base = Some(c);
            self.bytes_since_usage = 0;
        }
    }
}

/// A plain length estimate: about four bytes of JSON per token.
pub fn estimate_tokens(bytes: u64) -> u64 {
    bytes.div_ceil(4)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Complete,
    AwaitingToolResults,
    AwaitingResponse,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    pub index: u64,
    pub start_index: u64,
    pub end_index: u64,
    pub start_uuid: String,
    pub end_uuid: String,
    pub message_count: u64,
    pub tool_use_count: u64,
    /// snake_case inside, like the provider's usage
    pub usage: Usage,
    pub status: TurnStatus,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenTracker {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub context_tokens: u64,
    pub cumulative_input_tokens: u64,
    pub cumulative_output_tokens: u64,
    pub cumulative_cache_read_tokens: u64,
    pub cumulative_cache_creation_tokens: u64,
}

/// A partial TokenTracker, as `restoreTokenState` takes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenPatch {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
    pub context_tokens: Option<u64>,
    pub cumulative_input_tokens: Option<u64>,
    pub cumulative_output_tokens: Option<u64>,
    pub cumulative_cache_read_tokens: Option<u64>,
    pub cumulative_cache_creation_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(
        role: Role,
        prompt: bool,
        uses: &[&str],
        results: &[&str],
        usage: Option<Usage>,
    ) -> MessageFacts {
        MessageFacts {
            role: Some(role),
            is_prompt: prompt,
            tool_use_ids: uses.iter().map(|s| s.to_string()).collect(),
            tool_calls: uses.len() as u64,
            tool_result_ids: results.iter().map(|s| s.to_string()).collect(),
            usage,
            id: None,
            ..Default::default()
        }
    }

    fn step<'a>(uuid: &'a str, f: &'a MessageFacts) -> Step<'a> {
        Step {
            uuid,
            facts: f,
            bytes: 40,
            response_key: None,
            prior: None,
        }
    }

    #[test]
    fn parallel_tool_calls_stay_in_one_turn_until_all_results_arrive() {
        let mut s = State::default();
        let u = Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Default::default()
        };
        s.apply(&step("a", &facts(Role::User, true, &[], &[], None)));
        s.apply(&step(
            "b",
            &facts(Role::Assistant, false, &["t1", "t2"], &[], Some(u)),
        ));
        assert_eq!(
            s.current_turn().unwrap().status,
            TurnStatus::AwaitingToolResults
        );
        s.apply(&step("c", &facts(Role::User, false, &[], &["t1"], None)));
        assert_eq!(
            s.current_turn().unwrap().status,
            TurnStatus::AwaitingToolResults
        );
        s.apply(&step("d", &facts(Role::User, false, &[], &["t2"], None)));
        assert_eq!(
            s.current_turn().unwrap().status,
            TurnStatus::AwaitingResponse
        );
        s.apply(&step(
            "e",
            &facts(Role::Assistant, false, &[], &[], Some(u)),
        ));
        let t = s.current_turn().unwrap();
        assert_eq!(
            (t.index, t.message_count, t.tool_use_count, t.status),
            (0, 5, 2, TurnStatus::Complete)
        );
        assert_eq!(t.usage.input_tokens, 20);
        assert_eq!(s.tracker().context_tokens, 15);
    }

    #[test]
    fn the_same_response_recorded_twice_counts_once() {
        let mut s = State::default();
        let u = Usage {
            input_tokens: 3,
            output_tokens: 7,
            ..Default::default()
        };
        let f = facts(Role::Assistant, false, &[], &[], Some(u));
        s.apply(&Step {
            uuid: "a",
            facts: &f,
            bytes: 1,
            response_key: Some("m1"),
            prior: None,
        });
        s.apply(&Step {
            uuid: "b",
            facts: &f,
            bytes: 1,
            response_key: Some("m1"),
            prior: Some(u),
        });
        assert_eq!(s.cumulative, u);
    }
}
