//! toolgate: a gRPC tool gateway for LLM agent backends.
//!
//! Layers, highest first; a module uses only modules of lower rows (the
//! `layers` integration test reads `src/` and holds every import to this):
//!
//! | layer | modules | what they own |
//! |---|---|---|
//! | 1 | [`cli`] | the `toolgate` commands, start-up reporting, what a person reads |
//! | 2 | [`server`] | the tonic server (gateway, health, reflection), graceful shutdown |
//! | 3 | [`service`] | gRPC handlers: protobuf <-> domain; the one map of errors to statuses |
//! | 4 | [`live`] | keeps the catalogue current (MCP changes): validate, then swap |
//! | 5 | [`config`] | settings from flags, environment and file; the strict policy |
//! | 6 | [`auth`] | principals (API keys, client certificates) and their grants |
//! | 7 | [`exec`] | Execute: name and argument repair, validation, backends, outcomes |
//! | 8 | [`resolve`], [`mcp`] | names -> tools or suggestions and their messages; the MCP client |
//! | 9 | [`catalog`] | YAML files -> an immutable catalogue; no network, no processes |
//! | 10 | [`similar`], [`process`], [`telemetry`], [`tls`], [`proto`], [`state`] | pure name functions; child processes; logs, OTLP and trace context; rustls set-up; the generated contract; shared call state (memory, Redis) |
//! | 11 | [`env`](mod@env) | the process environment as a value, read nowhere else |

pub mod auth;
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
pub mod state;
pub mod telemetry;
pub mod tls;
