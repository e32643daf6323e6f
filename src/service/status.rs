//! Errors of the RPC itself as gRPC statuses, with rich details where clients
//! need to act on them.

use prost::Message;
use prost_types::Any;
use tonic::{Code, Status};

use super::convert;
use crate::{
    proto::v1 as pb,
    resolve::{message::MAX_REPORTED_UNKNOWN, NamesError, Unknown},
};

/// `ErrorInfo.reason` of a strict Resolve that met unknown names.
pub const REASON_TOOL_NOT_FOUND: &str = "TOOL_NOT_FOUND";
/// `ErrorInfo.domain` of every toolgate error.
pub const DOMAIN: &str = "toolgate";

pub fn invalid_names(err: NamesError) -> Status {
    Status::invalid_argument(err.to_string())
}

/// NOT_FOUND for unknown names, with `google.rpc.ErrorInfo` (reason
/// `TOOL_NOT_FOUND`, domain `toolgate`, metadata `unknown_total`) and a
/// `toolgate.v1.ResolveFailure` in the details. The details' message is the
/// status message; both name at most the first 20 names, to keep trailers
/// small, and say how many there are in all.
pub fn unknown_names(unknown: &[Unknown], message: String) -> Status {
    let total = unknown.len();
    let failure = pb::ResolveFailure {
        unknown: unknown.iter().take(MAX_REPORTED_UNKNOWN).map(convert::unknown).collect(),
        unknown_total: total as u32,
    };
    let info = tonic_types::pb::ErrorInfo {
        reason: REASON_TOOL_NOT_FOUND.to_owned(),
        domain: DOMAIN.to_owned(),
        metadata: [("unknown_total".to_owned(), total.to_string())].into(),
    };
    let details = tonic_types::pb::Status {
        code: Code::NotFound as i32,
        message: message.clone(),
        details: vec![any("google.rpc.ErrorInfo", &info), any("toolgate.v1.ResolveFailure", &failure)],
    };
    Status::with_details(Code::NotFound, message, details.encode_to_vec().into())
}

fn any(type_name: &str, message: &impl Message) -> Any {
    Any { type_url: format!("type.googleapis.com/{type_name}"), value: message.encode_to_vec() }
}
