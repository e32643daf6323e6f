//! Attribute, event and metric names. The GenAI and RPC semantic conventions
//! are written out here rather than taken from the conventions crate, which
//! marks the GenAI ones deprecated while they stabilise.

// RPC (server spans and the RPC duration).
pub const RPC_SYSTEM_NAME: &str = "rpc.system.name";
pub const RPC_METHOD: &str = "rpc.method";
pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";

// GenAI tool execution.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
pub const ERROR_TYPE: &str = "error.type";
pub const EXECUTE_TOOL: &str = "execute_tool";
/// Who called (span attributes): the principal, and the end user's id.
pub const PRINCIPAL: &str = "toolgate.principal";
pub const USER_ID: &str = "user.id";
/// The metric label of the principal (bounded: principals come from configuration).
pub const PRINCIPAL_LABEL: &str = "principal";

// Events.
pub const REPAIR_EVENT: &str = "toolgate.repair";
pub const REPAIR_KIND: &str = "toolgate.repair.kind";
pub const REPAIR_FROM: &str = "toolgate.repair.from";
pub const REPAIR_TO: &str = "toolgate.repair.to";
pub const HINT_EVENT: &str = "toolgate.hint";
pub const HINT_KIND: &str = "toolgate.hint.kind";
pub const HINT_SUGGESTIONS: &str = "toolgate.hint.suggestions";

// Metrics.
pub const CALLS: &str = "toolgate.tool.calls";
pub const REPAIRS: &str = "toolgate.tool.repairs";
pub const HINTS: &str = "toolgate.tool.hints";
pub const VIOLATIONS: &str = "toolgate.tool.violations";
pub const DURATION: &str = "toolgate.tool.duration";
pub const RPC_DURATION: &str = "rpc.server.call.duration";
/// Span attributes of once-only calls and budgets.
pub const REPLAYED: &str = "toolgate.idempotency.replayed";
pub const BUDGET_REMAINING: &str = "toolgate.retry_budget.remaining";
pub const REPLAYS: &str = "toolgate.idempotency.replays";
pub const BUDGET_EXHAUSTIONS: &str = "toolgate.retry_budget.exhaustions";
pub const STATE_ERRORS: &str = "toolgate.state.errors";
/// Catalogue reloads, by `result` (`ok` | `rejected`).
pub const RELOADS: &str = "toolgate.catalog.reloads";
pub const RELOAD_RESULT: &str = "result";
/// What the state store was doing when it failed: `idempotency` or `budget`.
pub const STATE_USE: &str = "toolgate.state.use";
/// The outcome of a call: `ok` or the error kind (`unknown_tool`, …).
pub const OUTCOME: &str = "toolgate.outcome";
/// The tool label of calls that resolved to no tool, and of tools past the
/// label limit.
pub const OTHER: &str = "_OTHER";
