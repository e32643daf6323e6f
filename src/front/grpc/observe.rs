//! The SERVER span and the duration of each RPC (RPC semantic conventions),
//! joined to the caller's trace by its `traceparent`.

use std::{future::Future, pin::Pin, time::Instant};

use opentelemetry::{trace::SpanKind, KeyValue};
use tonic::{metadata::MetadataMap, Code, Status};

use super::status::RpcError;
use crate::telemetry::{propagation, semconv, span, Observer};

pub(crate) const RESOLVE: &str = "toolgate.v1.ToolGatewayService/Resolve";
pub(crate) const EXECUTE: &str = "toolgate.v1.ToolGatewayService/Execute";
pub(crate) const LIST_TOOLS: &str = "toolgate.v1.ToolGatewayService/ListTools";
pub(crate) const SEARCH_TOOLS: &str = "toolgate.v1.ToolGatewayService/SearchTools";

/// Runs one RPC under its SERVER span and records its duration and status.
/// `handler` is pinned by the caller (see [`span::Span::run`]).
pub(crate) async fn rpc<T>(
    observer: &Observer,
    method: &'static str,
    metadata: &MetadataMap,
    handler: Pin<&mut impl Future<Output = Result<T, RpcError>>>,
) -> Result<T, Status> {
    let started = Instant::now();
    let span = span::Span::start(
        observer.tracer.as_ref(),
        method,
        SpanKind::Server,
        || propagation::caller(metadata.as_ref()),
        // These two and the status code.
        3,
        || [KeyValue::new(semconv::RPC_SYSTEM_NAME, "grpc"), KeyValue::new(semconv::RPC_METHOD, method)],
    );
    let result = span.run(handler).await.map_err(Status::from);
    let code = match &result {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    };
    let name = code_name(code);
    span.set(semconv::RPC_RESPONSE_STATUS_CODE, name);
    // What the server did wrong, not what the caller sent wrong.
    if matches!(
        code,
        Code::Unknown
            | Code::DeadlineExceeded
            | Code::Unimplemented
            | Code::Internal
            | Code::Unavailable
            | Code::DataLoss
    ) {
        span.failed();
    }
    span.end();
    observer.metrics.rpc(method, name, started.elapsed().as_secs_f64());
    result
}

fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
