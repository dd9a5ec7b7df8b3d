// The shapes of `@anthropic-ai/sdk`'s message types, reduced to what these tests need, written
// the way the SDK declares them: interfaces (no index signatures), required-but-nullable fields,
// literal unions, and block types Threadline does not model. The real package is not installed
// and must not be needed: Threadline's declarations do not import it. This file stands in for it
// so that "an SDK response can be appended as it is" is checked at compile time.

export interface CacheControlEphemeral { type: 'ephemeral'; ttl?: '5m' | '1h' }
export interface DirectCaller { type: 'direct' }
export interface CitationCharLocation {
  cited_text: string; document_index: number; document_title: string | null
  end_char_index: number; file_id: string | null; start_char_index: number; type: 'char_location'
}

// Response blocks
export interface TextBlock { citations: Array<CitationCharLocation> | null; text: string; type: 'text' }
export interface ThinkingBlock { signature: string; thinking: string; type: 'thinking' }
export interface RedactedThinkingBlock { data: string; type: 'redacted_thinking' }
export interface ToolUseBlock { id: string; caller: DirectCaller; input: unknown; name: string; type: 'tool_use' }
export interface ServerToolUseBlock {
  id: string; caller: DirectCaller; input: unknown; name: 'web_search' | 'web_fetch'; type: 'server_tool_use'
}
export interface WebSearchResultBlock {
  encrypted_content: string; page_age: string | null; title: string; type: 'web_search_result'; url: string
}
export interface WebSearchToolResultError { error_code: 'unavailable' | 'max_uses_exceeded'; type: 'web_search_tool_result_error' }
export interface WebSearchToolResultBlock {
  caller: DirectCaller; content: WebSearchToolResultError | Array<WebSearchResultBlock>
  tool_use_id: string; type: 'web_search_tool_result'
}
export interface ContainerUploadBlock { file_id: string; type: 'container_upload' }
export type ContentBlock =
  | TextBlock | ThinkingBlock | RedactedThinkingBlock | ToolUseBlock | ServerToolUseBlock
  | WebSearchToolResultBlock | ContainerUploadBlock

export interface Usage {
  cache_creation: { ephemeral_1h_input_tokens: number; ephemeral_5m_input_tokens: number } | null
  cache_creation_input_tokens: number | null
  cache_read_input_tokens: number | null
  inference_geo: string | null
  input_tokens: number
  output_tokens: number
  server_tool_use: { web_fetch_requests: number; web_search_requests: number } | null
  service_tier: 'standard' | 'priority' | 'batch' | null
}

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'pause_turn' | 'refusal'

/** A response of `client.messages.create()`. */
export interface Message {
  id: string
  container: { id: string; expires_at: string } | null
  content: Array<ContentBlock>
  model: 'claude-sonnet-4-5' | 'claude-opus-4-1' | (string & {})
  role: 'assistant'
  stop_reason: StopReason | null
  stop_sequence: string | null
  type: 'message'
  usage: Usage
}

// Request params
export interface TextBlockParam {
  text: string; type: 'text'; cache_control?: CacheControlEphemeral | null; citations?: Array<CitationCharLocation> | null
}
export interface Base64ImageSource { data: string; media_type: 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp'; type: 'base64' }
export interface URLImageSource { type: 'url'; url: string }
export interface ImageBlockParam { source: Base64ImageSource | URLImageSource; type: 'image'; cache_control?: CacheControlEphemeral | null }
export interface PlainTextSource { data: string; media_type: 'text/plain'; type: 'text' }
export interface ContentBlockSource { content: string | Array<TextBlockParam | ImageBlockParam>; type: 'content' }
export interface DocumentBlockParam {
  source: PlainTextSource | ContentBlockSource; type: 'document'
  cache_control?: CacheControlEphemeral | null; citations?: { enabled?: boolean } | null
  context?: string | null; title?: string | null
}
export interface SearchResultBlockParam {
  content: Array<TextBlockParam>; source: string; title: string; type: 'search_result'
  cache_control?: CacheControlEphemeral | null; citations?: { enabled?: boolean }
}
export interface ToolReferenceBlockParam { tool_name: string; type: 'tool_reference' }
export interface ThinkingBlockParam { signature: string; thinking: string; type: 'thinking' }
export interface ToolUseBlockParam {
  id: string; input: unknown; name: string; type: 'tool_use'; cache_control?: CacheControlEphemeral | null; caller?: DirectCaller
}
export interface ToolResultBlockParam {
  tool_use_id: string; type: 'tool_result'; cache_control?: CacheControlEphemeral | null
  content?: string | Array<TextBlockParam | ImageBlockParam | SearchResultBlockParam | DocumentBlockParam | ToolReferenceBlockParam>
  is_error?: boolean
}
export type ContentBlockParam =
  | TextBlockParam | ImageBlockParam | DocumentBlockParam | SearchResultBlockParam | ThinkingBlockParam
  | ToolUseBlockParam | ToolResultBlockParam

/** An element of `messages` in `client.messages.create({ messages })`. */
export interface MessageParam {
  content: string | Array<ContentBlockParam>
  role: 'user' | 'assistant'
}
