//! Attribute, event and metric names. The GenAI and RPC semantic conventions
//! are written out here rather than taken from the conventions crate, which
//! marks the GenAI ones deprecated while they stabilise.

// RPC (server spans and the RPC duration).
pub(crate) const RPC_SYSTEM_NAME: &str = "rpc.system.name";
pub(crate) const RPC_METHOD: &str = "rpc.method";
pub(crate) const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";

// GenAI tool execution.
pub(crate) const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
pub(crate) const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
pub(crate) const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
pub(crate) const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
pub(crate) const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub(crate) const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub(crate) const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub(crate) const HTTP_REQUEST_METHOD: &str = "http.request.method";
pub(crate) const HTTP_ROUTE: &str = "http.route";
pub(crate) const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
/// The model door's metrics, as the semantic conventions name them.
pub(crate) const HTTP_SERVER_REQUEST_DURATION: &str = "http.server.request.duration";
pub(crate) const GEN_AI_CLIENT_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
pub(crate) const GEN_AI_CLIENT_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
pub(crate) const GEN_AI_SERVER_TIME_TO_FIRST_TOKEN: &str = "gen_ai.server.time_to_first_token";
/// `input` or `output`.
pub(crate) const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
/// The model door's upstream (its configured name).
pub(crate) const UPSTREAM: &str = "toolgate.upstream";
pub(crate) const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
pub(crate) const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub(crate) const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
pub(crate) const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
pub(crate) const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
pub(crate) const ERROR_TYPE: &str = "error.type";
pub(crate) const EXECUTE_TOOL: &str = "execute_tool";
/// Who called (span attributes): the principal, and the end user's id.
pub(crate) const PRINCIPAL: &str = "toolgate.principal";
pub(crate) const USER_ID: &str = "user.id";
/// The front door a call came through (`grpc` | `mcp`): span attribute and
/// metric label.
pub(crate) const FRONT_DOOR: &str = "toolgate.front_door";
/// The metric label of the principal (bounded: principals come from configuration).
pub(crate) const PRINCIPAL_LABEL: &str = "principal";

// Events.
pub(crate) const REPAIR_EVENT: &str = "toolgate.repair";
pub(crate) const REPAIR_KIND: &str = "toolgate.repair.kind";
pub(crate) const REPAIR_FROM: &str = "toolgate.repair.from";
pub(crate) const REPAIR_TO: &str = "toolgate.repair.to";
pub(crate) const HINT_EVENT: &str = "toolgate.hint";
pub(crate) const HINT_KIND: &str = "toolgate.hint.kind";
pub(crate) const HINT_SUGGESTIONS: &str = "toolgate.hint.suggestions";

// Metrics.
pub(crate) const CALLS: &str = "toolgate.tool.calls";
pub(crate) const REPAIRS: &str = "toolgate.tool.repairs";
pub(crate) const HINTS: &str = "toolgate.tool.hints";
pub(crate) const VIOLATIONS: &str = "toolgate.tool.violations";
pub(crate) const DURATION: &str = "toolgate.tool.duration";
pub(crate) const RPC_DURATION: &str = "rpc.server.call.duration";

// MCP (server spans and the operation duration of the MCP front door).
pub(crate) const MCP_METHOD_NAME: &str = "mcp.method.name";
pub(crate) const MCP_SESSION_ID: &str = "mcp.session.id";
pub(crate) const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
pub(crate) const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
pub(crate) const MCP_DURATION: &str = "mcp.server.operation.duration";
/// Span attributes of once-only calls and budgets.
pub(crate) const REPLAYED: &str = "toolgate.idempotency.replayed";
pub(crate) const BUDGET_REMAINING: &str = "toolgate.retry_budget.remaining";
pub(crate) const REPLAYS: &str = "toolgate.idempotency.replays";
pub(crate) const BUDGET_EXHAUSTIONS: &str = "toolgate.retry_budget.exhaustions";
pub(crate) const STATE_ERRORS: &str = "toolgate.state.errors";
/// Requests and calls refused by a rate limit, by `scope` and tool.
pub(crate) const RATE_LIMITED: &str = "toolgate.rate_limited";
pub(crate) const RATE_SCOPE: &str = "scope";
/// Span attribute: the calls the tightest of a call's limits would still take.
pub(crate) const RATE_REMAINING: &str = "toolgate.rate_limit.remaining";
/// Catalogue reloads, by `result` (`ok` | `rejected`).
pub(crate) const RELOADS: &str = "toolgate.catalog.reloads";
/// The model door's second chance: extra requests made, by `outcome`
/// (`corrected` | `exhausted`).
pub(crate) const MODEL_DOOR_RETRIES: &str = "toolgate.model_door.retries";
/// `corrected`: the last try's answer was ready; `exhausted`: it was not.
pub(crate) const RETRY_OUTCOME: &str = "outcome";
/// A span event per extra request the model door made.
pub(crate) const RETRY_EVENT: &str = "toolgate.retry";
/// The try's number (1 for the first extra request).
pub(crate) const RETRY_TRY: &str = "toolgate.retry.try";
/// The model door's failovers: requests an upstream failed before its
/// first byte and the next one got, by `from` and `to` (upstream names,
/// bounded by the configuration).
pub(crate) const MODEL_DOOR_FAILOVERS: &str = "toolgate.model_door.failovers";
/// The upstream that failed, and the one that got the request.
pub(crate) const FAILOVER_FROM: &str = "from";
pub(crate) const FAILOVER_TO: &str = "to";
/// A span event per failover, with `from`, `to` and `reason`.
pub(crate) const FAILOVER_EVENT: &str = "toolgate.failover";
pub(crate) const FAILOVER_REASON: &str = "reason";
pub(crate) const RELOAD_RESULT: &str = "result";
/// Federated tools found to differ from their pins, once per tool and
/// listed digest, by `server`, `tool` (its name on the server), `action`
/// (`served` | `quarantined`) and `fields` (what changed:
/// `description,inputSchema`…, or `unknown`).
pub(crate) const MCP_PIN_CHANGES: &str = "toolgate.mcp.pin_changes";
pub(crate) const PIN_SERVER: &str = "server";
pub(crate) const PIN_TOOL: &str = "tool";
pub(crate) const PIN_ACTION: &str = "action";
pub(crate) const PIN_FIELDS: &str = "fields";
/// What the state store was doing when it failed: `idempotency` or `budget`.
pub(crate) const STATE_USE: &str = "toolgate.state.use";
/// The outcome of a call: `ok` or the error kind (`unknown_tool`, …).
pub(crate) const OUTCOME: &str = "toolgate.outcome";
/// The tool label of calls that resolved to no tool, and of tools past the
/// label limit.
pub(crate) const OTHER: &str = "_OTHER";
