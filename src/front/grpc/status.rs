//! Errors of the RPC itself (never a tool's outcome, which is in-band) and
//! the one place that maps them to gRPC statuses, with rich details where
//! clients need to act on them. Handlers return [`RpcError`] and convert.

use prost::Message;
use prost_types::Any;
use tonic::{Code, Status};

use super::convert;
use crate::{
    exec::{rate::Limited, RequestError},
    identity::Unauthenticated,
    proto::v1 as pb,
    resolve::{message::MAX_REPORTED_UNKNOWN, NamesError, Resolution, Unknown},
};

/// Why an RPC failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// Names of the wrong shape: too many, empty, too long (INVALID_ARGUMENT).
    #[error(transparent)]
    Names(#[from] NamesError),
    /// A `format` that is not a `ToolFormat` (INVALID_ARGUMENT).
    #[error("unknown format {0}")]
    Format(i32),
    /// Names that must all resolve and did not (strict Resolve, ListTools):
    /// NOT_FOUND with `ErrorInfo` and `ResolveFailure` details.
    #[error("{}", .0.message())]
    UnknownNames(Resolution),
    /// A search's toolset that names nothing the caller may see: NOT_FOUND
    /// with the same details, its message saying it is a toolset.
    #[error("{message}")]
    UnknownToolset { resolution: Resolution, message: String },
    /// A strict Execute whose `tools` name what does not exist (INVALID_ARGUMENT).
    #[error("{}", .0.message())]
    UnknownTools(Resolution),
    /// A request that cannot be executed as sent (INVALID_ARGUMENT).
    #[error("{0}")]
    Invalid(String),
    /// No principal proven (UNAUTHENTICATED), one message for every reason.
    #[error("{0}")]
    Unauthenticated(String),
    /// The principal's request limit (RESOURCE_EXHAUSTED with
    /// `google.rpc.RetryInfo` and `google.rpc.QuotaFailure`).
    #[error("{message}")]
    RateLimited { message: String, subject: String, retry_after: std::time::Duration },
}

impl From<RequestError> for RpcError {
    fn from(err: RequestError) -> Self {
        match err {
            RequestError::Names(err) => RpcError::Names(err),
            RequestError::UnknownTools(resolution) => RpcError::UnknownTools(resolution),
            RequestError::UnknownNames(resolution) => RpcError::UnknownNames(resolution),
            RequestError::UnknownToolset { resolution, message } => RpcError::UnknownToolset { resolution, message },
            err @ RequestError::NoUser(_) => RpcError::Unauthenticated(err.to_string()),
            err @ (RequestError::BadId(_) | RequestError::KeyReused(_) | RequestError::BadSearch(_)) => {
                RpcError::Invalid(err.to_string())
            }
        }
    }
}

impl From<crate::live::Refused> for RpcError {
    fn from(refused: crate::live::Refused) -> Self {
        match refused {
            crate::live::Refused::Unauthenticated(err) => err.into(),
            crate::live::Refused::Limited(limited) => limited.into(),
            // No gRPC request names a toolset endpoint; were one to, its
            // name would be a bad argument.
            crate::live::Refused::UnknownToolset(message) => RpcError::Invalid(message),
            // RESOURCE_EXHAUSTED with a retry delay, as a request limit is.
            crate::live::Refused::Connections => RpcError::RateLimited {
                message: crate::live::Refused::CONNECTIONS.to_owned(),
                subject: String::new(),
                retry_after: std::time::Duration::from_secs(1),
            },
        }
    }
}

impl From<Unauthenticated> for RpcError {
    fn from(err: Unauthenticated) -> Self {
        RpcError::Unauthenticated(err.to_string())
    }
}

/// Every status message leaves within the trailer budget: a list of
/// unknown names names fewer of them, any other message is cut.
impl From<RpcError> for Status {
    fn from(err: RpcError) -> Self {
        match err {
            RpcError::UnknownNames(resolution) => unknown_names(&resolution),
            RpcError::UnknownToolset { resolution, message } => {
                let message = cut(message);
                let details =
                    details(&resolution.unknown, resolution.unknown.len().min(MAX_REPORTED_UNKNOWN), &message);
                Status::with_details(Code::NotFound, message, details.into())
            }
            RpcError::UnknownTools(resolution) => Status::invalid_argument(fitted(&resolution)),
            RpcError::Unauthenticated(_) => Status::unauthenticated(cut(err.to_string())),
            RpcError::RateLimited { message, subject, retry_after } => rate_limited(message, &subject, retry_after),
            RpcError::Names(_) | RpcError::Format(_) | RpcError::Invalid(_) => {
                Status::invalid_argument(cut(err.to_string()))
            }
        }
    }
}

/// The message for the unknown names of `resolution`, naming as many of the
/// first 20 as fit the trailer budget.
fn fitted(resolution: &Resolution) -> String {
    let mut shown = resolution.unknown.len().min(MAX_REPORTED_UNKNOWN);
    loop {
        let message = resolution.message_naming(shown);
        if shown <= 1 || trailer_size(&message, &[]) <= TRAILER_BUDGET {
            return cut(message);
        }
        shown -= 1;
    }
}

/// `message`, cut (at a character, then `…`) to fit the trailer budget.
fn cut(message: String) -> String {
    if trailer_size(&message, &[]) <= TRAILER_BUDGET {
        return message;
    }
    let mut size = trailer_size("…", &[]);
    let mut end = 0;
    for (at, c) in message.char_indices() {
        size += trailer_size(&message[at..at + c.len_utf8()], &[]);
        if size > TRAILER_BUDGET {
            break;
        }
        end = at + c.len_utf8();
    }
    format!("{}…", &message[..end])
}

/// `ErrorInfo.reason` of a strict Resolve that met unknown names.
pub(crate) const REASON_TOOL_NOT_FOUND: &str = "TOOL_NOT_FOUND";
/// `ErrorInfo.domain` of every toolgate error.
pub(crate) const DOMAIN: &str = "toolgate";

/// What the status message and details may take of the trailers: C-core
/// clients accept 8 KiB of metadata in all.
const TRAILER_BUDGET: usize = 6 * 1024;

/// NOT_FOUND for the unknown names of `resolution`, with
/// `google.rpc.ErrorInfo` (reason `TOOL_NOT_FOUND`, domain `toolgate`,
/// metadata `unknown_total`) and a `toolgate.v1.ResolveFailure` in the
/// details. The details' message is the status message. Both name the first
/// 20 unknown names (fewer, if long names would not fit the trailers) and say
/// how many there are in all.
fn unknown_names(resolution: &Resolution) -> Status {
    let most = resolution.unknown.len().min(MAX_REPORTED_UNKNOWN);
    let mut shown = most;
    loop {
        let message = cut(resolution.message_naming(shown));
        let details = details(&resolution.unknown, shown, &message);
        if shown <= 1 || trailer_size(&message, &details) <= TRAILER_BUDGET {
            return Status::with_details(Code::NotFound, message, details.into());
        }
        shown -= 1;
    }
}

/// The encoded `google.rpc.Status` of the details.
fn details(unknown: &[Unknown], shown: usize, message: &str) -> Vec<u8> {
    let total = unknown.len();
    let failure = pb::ResolveFailure {
        unknown: unknown.iter().take(shown).map(convert::unknown).collect(),
        unknown_total: total as u32,
    };
    let info = tonic_types::pb::ErrorInfo {
        reason: REASON_TOOL_NOT_FOUND.to_owned(),
        domain: DOMAIN.to_owned(),
        metadata: [("unknown_total".to_owned(), total.to_string())].into(),
    };
    let status = tonic_types::pb::Status {
        code: Code::NotFound as i32,
        message: message.to_owned(),
        details: vec![any("google.rpc.ErrorInfo", &info), any("toolgate.v1.ResolveFailure", &failure)],
    };
    status.encode_to_vec()
}

/// RESOURCE_EXHAUSTED for a request over its principal's limit: the
/// message says when to try again; `RetryInfo.retry_delay` says it to
/// clients, `QuotaFailure` which limit (`rate_limits.principal`).
fn rate_limited(message: String, subject: &str, retry_after: std::time::Duration) -> Status {
    let retry = tonic_types::pb::RetryInfo { retry_delay: Some(convert::duration(retry_after)) };
    let quota = tonic_types::pb::QuotaFailure {
        violations: vec![tonic_types::pb::quota_failure::Violation {
            subject: format!("principal:{subject}"),
            description: message.clone(),
            ..Default::default()
        }],
    };
    let status = tonic_types::pb::Status {
        code: Code::ResourceExhausted as i32,
        message: message.clone(),
        details: vec![any("google.rpc.RetryInfo", &retry), any("google.rpc.QuotaFailure", &quota)],
    };
    Status::with_details(Code::ResourceExhausted, message, status.encode_to_vec().into())
}

impl From<Limited> for RpcError {
    fn from(limited: Limited) -> Self {
        RpcError::RateLimited { message: limited.message, subject: limited.subject, retry_after: limited.retry_after }
    }
}

/// Bytes on the wire of `grpc-message` (percent-encoded) and
/// `grpc-status-details-bin` (base64).
fn trailer_size(message: &str, details: &[u8]) -> usize {
    let message: usize = message.bytes().map(|b| if (0x20..0x7f).contains(&b) && b != b'%' { 1 } else { 3 }).sum();
    message + details.len().div_ceil(3) * 4
}

fn any(type_name: &str, message: &impl Message) -> Any {
    Any { type_url: format!("type.googleapis.com/{type_name}"), value: message.encode_to_vec() }
}
