//! Integration tests: the real server on 127.0.0.1:0, called through the
//! generated gRPC client; the real `toolgate` binary for the commands.

// Tests start the real binary and helper processes, read the test machine's
// environment, and print what they measured.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]
// The helpers in `common` are modules of this one binary.
#![allow(unreachable_pub)]

mod common;

mod catalog_problems;
mod cli;
mod conditions;
mod connections;
mod dashboard;
mod deploy;
mod docs;
mod door_deploy;
mod door_hardening;
mod door_messages;
mod door_responses;
mod door_retry;
mod door_streaming;
mod exact_reading;
mod execute_arguments;
mod execute_backends;
mod execute_names;
mod general_reading;
mod hardening;
mod health_reflection;
mod hostile_reading;
mod identity;
mod layers;
mod list_tools;
mod mcp;
mod mcp_conformance;
mod mcp_fidelity;
mod mcp_front_door;
mod mcp_hardening;
mod model_door;
mod model_output;
mod once;
mod otlp;
mod peer_fixtures;
mod rate_limits;
mod reload;
mod resolve_rpc;
mod shipped_catalog;
mod suggestion_quality;
mod telemetry;
mod tool_search;
mod words_rule;
