//! toolgate: a tool gateway for LLM agent backends, reached over gRPC, MCP
//! and the model door.
//!
//! One core, thin front doors (docs/architecture.md). Layers, highest
//! first; a module uses only modules of lower rows (the `layers`
//! integration test reads `src/` and holds every import to this):
//!
//! | layer | modules | what they own |
//! |---|---|---|
//! | 1 | [`cli`] | the `toolgate` commands: flags, signals, what a person reads |
//! | 2 | [`app`] | the composition root: settings → stores, identity, catalogue, executor, front doors; reload |
//! | 3 | `front` | the front doors, a folder each: gRPC (proto ↔ core, errors → statuses), MCP, the model door (an OpenAI-compatible proxy that repairs a model's calls) |
//! | 4 | [`server`] | the one edge: `serve` (accept, TLS handshakes, caps, deadlines, drain) for every door |
//! | 5 | `live` | keeps the snapshot (executor and identity) current: validate, then swap |
//! | 6 | [`config`] | plain settings from flags, environment and file; builds nothing |
//! | 7 | [`exec`] | the core: prepare (named stages), dispatch, once-only, budgets, outcomes; resolve and list |
//! | 8 | [`identity`] | who calls (principals, keys, certificates, user tokens) and what each may run |
//! | 9 | [`resolve`], `mcp`, `state` | names → tools and their messages; the MCP client; the state stores |
//! | 10 | `tls` | rustls: the provider, HTTPS clients' roots, the listeners' certificates and client CA |
//! | 11 | [`catalog`] | YAML files → an immutable catalogue; no network, no processes |
//! | 12 | [`similar`], [`search`], `process`, [`telemetry`], [`proto`] | pure name functions; tool search's ranking; child processes; logs, OTLP and trace context; the generated contract |
//! | 13 | [`env`](mod@env), `lock` | the process environment as a value, read nowhere else; one policy for a poisoned lock |
//!
//! The public modules are what the binary, the integration tests and the
//! benchmarks use; everything else is `pub(crate)`.

pub mod app;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod env;
pub mod exec;
pub(crate) mod front;
pub mod identity;
pub(crate) mod live;
pub(crate) mod lock;
pub(crate) mod mcp;
pub mod process;
pub mod proto;
pub mod resolve;
pub mod search;
pub mod server;
pub mod similar;
pub(crate) mod state;
pub mod telemetry;
pub(crate) mod tls;
