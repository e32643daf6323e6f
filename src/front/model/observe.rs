//! The model door's spans (OpenTelemetry's HTTP and GenAI conventions): a
//! SERVER span for each request (`POST /v1/chat/completions`), joined to
//! the caller's trace by its `traceparent`, and under it a CLIENT span
//! `chat {model}` for the upstream's generation with the GenAI attributes
//! and a `toolgate.repair` event per repair (its tool, kind, and the text
//! before and after: arguments only when content is recorded). Each
//! repair counts in `toolgate.tool.repairs` (tool names bounded as every
//! tool label is).

use std::pin::pin;

use opentelemetry::{trace::SpanKind, KeyValue};
use serde_json::Value;

use super::response::Made;
use crate::server::http::Reply;
use crate::{
    exec::RepairKind,
    telemetry::{propagation, semconv, span::Span, Observer},
};

/// The longest text put on an event.
const MAX_TEXT: usize = 4096;

/// One request's spans, and what its metrics say of it.
pub(super) struct Spans {
    server: Span,
    chat: Span,
    /// When the request was read.
    started: std::time::Instant,
    route: &'static str,
    model: String,
    /// The upstream that answered, once one did.
    upstream: std::sync::Mutex<Option<String>>,
    /// The generation's input and output tokens, as its usage said.
    tokens: std::sync::Mutex<(Option<u64>, Option<u64>)>,
    /// Metrics are recorded.
    measuring: bool,
}

impl Spans {
    /// The SERVER span of the request (under the caller's trace context in
    /// `headers`) and the CLIENT span of `model`'s generation under it.
    pub(super) async fn start(
        observer: &Observer,
        headers: &http::HeaderMap,
        model: &str,
        route: &'static str,
    ) -> Self {
        let started = std::time::Instant::now();
        let tracer = observer.tracer.as_ref();
        let server = Span::start(
            tracer,
            "POST /v1/chat/completions",
            SpanKind::Server,
            || propagation::caller(headers),
            5,
            || {
                vec![
                    KeyValue::new(semconv::HTTP_REQUEST_METHOD, "POST"),
                    KeyValue::new(semconv::HTTP_ROUTE, "/v1/chat/completions"),
                    KeyValue::new(semconv::FRONT_DOOR, super::NAME),
                ]
            },
        );
        let model = model.to_owned();
        let child = pin!(async {
            let chat = Span::child(tracer, "chat", SpanKind::Client, 8, || {
                vec![
                    KeyValue::new(semconv::GEN_AI_OPERATION_NAME, "chat"),
                    KeyValue::new(semconv::GEN_AI_PROVIDER_NAME, "openai"),
                    KeyValue::new(semconv::GEN_AI_REQUEST_MODEL, model.clone()),
                ]
            });
            chat.rename(|| format!("chat {model}"));
            chat
        });
        let chat = server.run(child).await;
        Self {
            server,
            chat,
            started,
            route,
            model: model.to_owned(),
            upstream: std::sync::Mutex::new(None),
            tokens: std::sync::Mutex::new((None, None)),
            measuring: observer.metrics.enabled(),
        }
    }

    /// The upstream that answered.
    pub(super) fn answered_by(&self, upstream: &str) {
        *crate::lock::lock(&self.upstream) = Some(upstream.to_owned());
    }

    /// Whether an answer is worth reading for what it says of the
    /// generation (a span records, or metrics are recorded).
    pub(super) fn reading(&self) -> bool {
        self.measuring || self.chat.is_recording()
    }

    /// Records, once, that a stream's first bytes reach the client now.
    pub(super) fn first_bytes(&self, observer: &Observer) -> impl FnOnce() + Send + Sync + 'static {
        let (metrics, started, model) = (observer.metrics.clone(), self.started, self.model.clone());
        let upstream = crate::lock::lock(&self.upstream).clone().unwrap_or_default();
        move || metrics.first_token(started.elapsed().as_secs_f64(), &model, &upstream)
    }

    /// The model was asked again (try `number`): an event on the
    /// generation's span.
    pub(super) fn asked_again(&self, number: u32) {
        self.chat.event(semconv::RETRY_EVENT, || vec![KeyValue::new(semconv::RETRY_TRY, i64::from(number))]);
    }

    /// The request moved from the upstream `from` to `to`, for `reason`:
    /// an event on the generation's span.
    pub(super) fn failed_over(&self, from: &str, to: &str, reason: &str) {
        self.chat.event(semconv::FAILOVER_EVENT, || {
            vec![
                KeyValue::new(semconv::FAILOVER_FROM, from.to_owned()),
                KeyValue::new(semconv::FAILOVER_TO, to.to_owned()),
                KeyValue::new(semconv::FAILOVER_REASON, reason.to_owned()),
            ]
        });
    }

    /// [`Spans::end`] with `reply`'s status; the reply.
    pub(super) fn ended(self, observer: &Observer, reply: Reply, made: &[Made]) -> Reply {
        self.end(observer, reply.status().as_u16(), made);
        reply
    }

    /// What a whole answer says of the generation: the model, the finish
    /// reasons, the tokens.
    pub(super) fn answered(&self, completion: &Value) {
        if !self.reading() {
            return;
        }
        let reasons: Vec<opentelemetry::StringValue> = completion
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|choice| choice.get("finish_reason")?.as_str().map(|r| r.to_owned().into()))
            .collect();
        self.generation(completion.get("model").and_then(Value::as_str), reasons, completion.get("usage"));
    }

    /// The same, of an answer read in place.
    pub(super) fn said(&self, said: super::response::Generation) {
        if !self.reading() {
            return;
        }
        let reasons = said.reasons.into_iter().map(Into::into).collect();
        self.generation(said.model.as_deref(), reasons, said.usage.as_ref());
    }

    /// The generation's model, finish reasons and usage, as read.
    pub(super) fn generation(
        &self,
        model: Option<&str>,
        reasons: Vec<opentelemetry::StringValue>,
        usage: Option<&Value>,
    ) {
        if let Some(model) = model {
            self.chat.set(semconv::GEN_AI_RESPONSE_MODEL, model.to_owned());
        }
        if !reasons.is_empty() {
            self.chat.set(
                semconv::GEN_AI_RESPONSE_FINISH_REASONS,
                opentelemetry::Value::Array(opentelemetry::Array::String(reasons)),
            );
        }
        // Chat Completions' names, else those of Responses and Messages.
        let tokens = |keys: [&str; 2]| keys.iter().find_map(|key| usage?.get(key)?.as_i64());
        let (input, output) =
            (tokens(["prompt_tokens", "input_tokens"]), tokens(["completion_tokens", "output_tokens"]));
        if let Some(input) = input {
            self.chat.set(semconv::GEN_AI_USAGE_INPUT_TOKENS, input);
        }
        if let Some(output) = output {
            self.chat.set(semconv::GEN_AI_USAGE_OUTPUT_TOKENS, output);
        }
        let counted = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok());
        *crate::lock::lock(&self.tokens) = (counted(input), counted(output));
    }

    /// Ends both spans: the answer's status, and what was repaired.
    pub(super) fn end(self, observer: &Observer, status: u16, made: &[Made]) {
        for repair in made {
            self.chat.event(semconv::REPAIR_EVENT, || {
                let mut attributes = vec![
                    KeyValue::new(semconv::REPAIR_KIND, repair.kind.label()),
                    KeyValue::new(semconv::GEN_AI_TOOL_NAME, repair.tool.clone()),
                ];
                // Argument text is content: its before and after only on opt-in.
                if repair.kind == super::response::Kind::Repair(RepairKind::ToolName) || observer.record_content {
                    attributes.push(KeyValue::new(semconv::REPAIR_FROM, cut(&repair.original).to_owned()));
                    attributes.push(KeyValue::new(semconv::REPAIR_TO, cut(&repair.repaired).to_owned()));
                }
                attributes
            });
            observer.metrics.repair(Some(&repair.tool), repair.kind.label());
        }
        let upstream = crate::lock::lock(&self.upstream).clone();
        let (input_tokens, output_tokens) = *crate::lock::lock(&self.tokens);
        observer.metrics.door_request(&crate::telemetry::metrics::DoorRequest {
            route: self.route,
            status,
            seconds: self.started.elapsed().as_secs_f64(),
            model: &self.model,
            upstream: upstream.as_deref(),
            input_tokens,
            output_tokens,
        });
        self.server.set(semconv::HTTP_RESPONSE_STATUS_CODE, i64::from(status));
        if status >= 500 {
            self.server.set(semconv::ERROR_TYPE, status.to_string());
            self.server.failed();
            self.chat.failed();
        }
        self.chat.end();
        self.server.end();
    }
}

fn cut(text: &str) -> &str {
    match text.char_indices().nth(MAX_TEXT) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}
