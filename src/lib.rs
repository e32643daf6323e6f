//! toolgate: a gRPC tool gateway for LLM agent backends.
//!
//! Module map (dependencies point down the list):
//! - [`cli`]: the `toolgate` commands; the only user of anyhow.
//! - [`config`]: settings from flags, environment and file; the strict policy.
//! - [`federation`]: keeps the catalogue current: MCP discovery, retries, swaps.
//! - [`server`]: the tonic server (gateway, health, reflection), graceful shutdown.
//! - [`service`]: gRPC handlers; protobuf <-> domain; errors -> statuses.
//! - [`exec`]: Execute: name and argument repair, validation, backends, outcomes.
//! - [`mcp`]: connections to MCP servers (rmcp): list, call, reconnect.
//! - [`resolve`]: names -> tools or suggestions (normalisation, similarity, messages).
//! - [`catalog`]: YAML files -> an immutable catalogue; no network, no processes.
//! - [`telemetry`]: logs, OTLP traces and metrics, trace context propagation.
//! - [`proto`]: the generated contract. [`env`]: the environment as a value.
#![forbid(unsafe_code)]

pub mod catalog;
pub mod cli;
pub mod config;
pub mod env;
pub mod exec;
pub mod live;
pub mod mcp;
pub mod process;
pub mod proto;
pub mod resolve;
pub mod server;
pub mod service;
pub mod similar;
pub mod telemetry;
pub mod tls;
