//! The model door's listener and edge: `POST /v1/chat/completions`
//! (streaming and not) and `GET /v1/models`, over HTTP/1.1 and HTTP/2 on
//! the connections [`crate::server::serve`] accepted (caps, deadlines,
//! TLS). Each request is admitted as at every door (API key or
//! certificate when principals are configured, the principal's rate
//! limit), its body read whole (at most 16 MiB, within the connection's
//! deadlines), routed to an upstream and forwarded as a proxy does; the
//! response comes back repaired ([`super::response`], [`super::stream`]).

use std::{net::SocketAddr, sync::Arc};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::{body::Incoming as Body, header, HeaderMap, Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use super::{
    driven::{Driven, Outgoing, Unanswered},
    observe::Spans,
    request::Asked,
    response::{
        header as repairs_header, repair_completion, repair_completion_text, repair_message, repair_response, InPlace,
        Lifting, Made,
    },
    retry, route,
    stream::{relay, Choices, Rules},
    stream_messages::MessageEvents,
    stream_responses::ResponseEvents,
    tools::ToolCache,
    NAME, REPAIRS_HEADER, STRICT_HEADER, UNREPAIRED_HEADER,
};
use crate::{
    config::{Api, ModelSettings, StreamCalls, Upstream, UpstreamProxy},
    exec::declared::Declared,
    live::{Refused, SnapshotSlot},
    server::{
        body::{read_body, BodyDeadlines},
        connections::Guarded,
        http::{serve_http, HttpEdge, Reply},
        Connections, Door, Peer, ServeError, Stopping,
    },
    telemetry::Observer,
    tls::ServerTls,
};

/// The largest request body; past it, 413.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// The largest `x-toolgate-repairs` header.
const MAX_REPAIRS_HEADER: usize = 4 * 1024;

/// The paths the door serves, for a 404.
const SERVED: &str = "the model door serves POST /v1/chat/completions, POST /v1/responses (and /v1/responses/…), \
     POST /v1/messages (and /v1/messages/count_tokens), GET /v1/models, every other /v1/… path passed to the \
     model server unchanged, and GET /health";

/// The model door.
pub(crate) struct ModelDoor {
    settings: Arc<ModelSettings>,
    current: SnapshotSlot,
    tls: Option<Arc<ServerTls>>,
    body: BodyDeadlines,
    /// The connection budget every door shares.
    budget: Arc<tokio::sync::Semaphore>,
}

impl ModelDoor {
    pub(crate) fn new(
        settings: Arc<ModelSettings>,
        current: SnapshotSlot,
        tls: Option<Arc<ServerTls>>,
        connections: &crate::server::ConnectionSettings,
    ) -> Self {
        let budget = connections.budget.permits(connections.max_connections);
        Self { settings, current, tls, body: BodyDeadlines::of(connections), budget }
    }
}

/// What every request of the listener shares.
struct Edge {
    settings: Arc<ModelSettings>,
    current: SnapshotSlot,
    tls: Option<Arc<ServerTls>>,
    body: BodyDeadlines,
    /// The listener is on a loopback address: requests must name a
    /// loopback `Host` ([`crate::server::foreign`]).
    loopback: bool,
    /// One client an upstream, in the order of `settings.upstreams`.
    clients: Vec<reqwest::Client>,
    /// The connections the door drives itself, of each upstream reached
    /// over plain HTTP without a proxy ([`Driven`]), in the same order.
    driven: Vec<Option<Arc<Driven>>>,
    /// The connection budget every door shares: a request to an upstream
    /// holds one of its permits while it lasts, as an accepted connection
    /// does, so upstream sockets never take the descriptors others need.
    budget: Arc<tokio::sync::Semaphore>,
    /// The requests each principal keeps open
    /// (`model_door.requests_per_principal`).
    open: crate::server::PerPrincipal,
    tools: ToolCache,
}

/// The client of `upstream`: no timeout of its own (the upstream's
/// `timeout` bounds each request, the stream included), reaching it as its
/// `proxy` says, never through a proxy nobody configured.
fn client(upstream: &Upstream) -> reqwest::Client {
    let builder = crate::tls::client_builder();
    let builder = match &upstream.proxy {
        UpstreamProxy::None => builder.no_proxy(),
        UpstreamProxy::Env => builder,
        UpstreamProxy::Url(url) => match reqwest::Proxy::all(url.as_str()) {
            Ok(proxy) => builder.proxy(proxy),
            Err(err) => {
                tracing::error!(door = NAME, upstream = upstream.name, "its proxy cannot be used: {err}");
                builder.no_proxy()
            }
        },
    };
    builder.build().expect("an HTTP client")
}

impl Door for ModelDoor {
    fn name(&self) -> &'static str {
        NAME
    }

    fn http1(&self) -> bool {
        true
    }

    async fn run(
        self,
        local: Option<SocketAddr>,
        connections: Connections,
        stopping: Stopping,
    ) -> Result<(), ServeError> {
        let clients = self.settings.upstreams.iter().map(client).collect();
        let driven = self.settings.upstreams.iter().map(Driven::of).collect();
        let edge = Arc::new(Edge {
            tools: ToolCache::new(self.settings.tools),
            open: crate::server::PerPrincipal::new(self.settings.requests_per_principal),
            settings: self.settings,
            current: self.current,
            tls: self.tls,
            body: self.body,
            loopback: local.is_some_and(|local| local.ip().is_loopback()),
            clients,
            driven,
            budget: self.budget,
        });
        serve_http(NAME, edge, connections, stopping).await;
        Ok(())
    }
}

impl HttpEdge for Edge {
    /// Each connection whole on one thread: a request, the connection it
    /// drives to the model server and its answer never change threads.
    const ON_THREADS: bool = true;

    /// The answer; on the Messages API's paths, the door's own errors in
    /// that API's shape.
    async fn handle(&self, request: Request<Body>, connected: &Peer) -> Reply {
        let messages = request.uri().path().starts_with("/v1/messages");
        let reply = self.answer(request, connected).await;
        match messages {
            true => in_messages_shape(reply),
            false => reply,
        }
    }
}

impl Edge {
    async fn answer(&self, request: Request<Body>, connected: &Peer) -> Reply {
        let route = match route_of(request.method(), request.uri().path()) {
            Ok(Route::Health) => return json_reply(StatusCode::OK, &json!({"status": "serving"})),
            Ok(route) => route,
            Err(reply) => return reply,
        };
        let snapshot = self.current.load_full();
        if let Some(foreign) = crate::server::foreign(&request, self.loopback, snapshot.identity.allowed_origins(NAME))
        {
            return error(StatusCode::FORBIDDEN, foreign.message(), "invalid_request_error");
        }
        // A generation's body is JSON; what passes through (uploads
        // included) is the upstream's to read.
        if matches!(route, Route::Complete(_)) && !json_body(request.headers()) {
            let message = "the request body must be JSON (Content-Type: application/json)";
            return error(StatusCode::UNSUPPORTED_MEDIA_TYPE, message, "invalid_request_error");
        }
        let presented = connected.presented(&snapshot.identity, request.headers(), self.tls.as_deref(), false);
        // The Messages API's clients send their key in `x-api-key`.
        let presented = presented.with_api_key(request.headers());
        let (caller, admitted) =
            match snapshot.admit(&presented.credentials(), None, |p| connected.authenticated(p)).await {
                Ok(admitted) => admitted,
                Err(refused) => return refusal(refused),
            };
        let Some(open) = self.open.hold(caller.principal.as_ref()) else {
            let message = format!(
                "this client has {} requests open at the model door (model_door.requests_per_principal): \
                 wait for one to end",
                self.open.bound()
            );
            return busy(StatusCode::TOO_MANY_REQUESTS, &message, "rate_limit_exceeded");
        };
        let Ok(permit) = Arc::clone(&self.budget).try_acquire_owned() else {
            let message = "the gateway holds as many connections as it may: try again shortly";
            return busy(StatusCode::SERVICE_UNAVAILABLE, message, "server_overloaded");
        };
        let passing = Passing {
            open: snapshot.identity.principals().is_empty(),
            user_header: snapshot.identity.user_header().map(str::to_owned),
        };
        let limits = snapshot.executor.limits();
        let guard = connected.call();
        let reply = match route {
            Route::Models => self.models(request.headers(), &passing).await,
            Route::Complete(api) => {
                let asking = Asking { passing: &passing, snapshot: &snapshot, caller: &caller };
                self.complete(request, api, asking, limits, snapshot.executor.observer()).await
            }
            Route::Forward(api) => self.pass(request, api, &passing, snapshot.executor.observer()).await,
            Route::Health => json_reply(StatusCode::OK, &json!({"status": "serving"})),
        };
        reply.map(|body| Guarded::new(body, (guard, admitted, open, permit)).boxed())
    }
}

/// What a request asks of the door.
#[derive(Clone, Copy)]
enum Route {
    /// `GET /v1/models`.
    Models,
    /// A generation of `api` (`POST /v1/chat/completions`, `POST
    /// /v1/responses`): forwarded and its answer repaired.
    Complete(Api),
    /// Another request of `api` (a stored response, its input items, its
    /// cancellation; any other `/v1/…` path as Chat Completions'
    /// upstreams serve it: embeddings, completions, audio, files…):
    /// forwarded unchanged.
    Forward(Api),
    /// `GET /health`: 200 while the door serves (no credential).
    Health,
}

/// The route of `method` on `path` (its query string apart), or the
/// answer: 405 for another method on a path served, 404 for a path that
/// is not.
#[allow(clippy::result_large_err)] // the error is the request's answer, built once
fn route_of(method: &Method, path: &str) -> Result<Route, Reply> {
    let path = match path.trim_end_matches('/') {
        "" => "/",
        trimmed => trimmed,
    };
    match (method, path) {
        (&Method::POST, "/v1/chat/completions") => Ok(Route::Complete(Api::Chat)),
        (&Method::POST, "/v1/responses") => Ok(Route::Complete(Api::Responses)),
        (&Method::GET, "/v1/models") => Ok(Route::Models),
        (&Method::POST, "/v1/messages") => Ok(Route::Complete(Api::Messages)),
        (_, "/v1/chat/completions" | "/v1/responses" | "/v1/messages") => {
            Err(error(StatusCode::METHOD_NOT_ALLOWED, "use POST", "invalid_request_error"))
        }
        (_, "/v1/models") => Err(error(StatusCode::METHOD_NOT_ALLOWED, "use GET", "invalid_request_error")),
        (_, path) if path.starts_with("/v1/responses/") => Ok(Route::Forward(Api::Responses)),
        (_, path) if path.starts_with("/v1/messages/") => Ok(Route::Forward(Api::Messages)),
        (&Method::GET, "/health") => Ok(Route::Health),
        (_, "/health") => Err(error(StatusCode::METHOD_NOT_ALLOWED, "use GET", "invalid_request_error")),
        (_, path) if path.starts_with("/v1/") => Ok(Route::Forward(Api::Chat)),
        _ => Err(error(StatusCode::NOT_FOUND, &format!("not found: {SERVED}"), "invalid_request_error")),
    }
}

/// The path of `api`'s generations under an upstream's `base_url`.
fn api_path(api: Api) -> &'static str {
    match api {
        Api::Chat => "/chat/completions",
        Api::Responses => "/responses",
        Api::Messages => "/messages",
    }
}

/// A request refused for what is open (429 or 503), in OpenAI's shape,
/// with `Retry-After: 1`: a request ends in the meantime.
fn busy(status: StatusCode, message: &str, kind: &str) -> Reply {
    let mut reply = error(status, message, kind);
    reply.headers_mut().insert(header::RETRY_AFTER, 1.into());
    reply
}

impl Edge {
    /// The client that reaches `upstream`, one of the settings' own.
    fn client(&self, upstream: &Upstream) -> &reqwest::Client {
        &self.clients[self.at(upstream)]
    }

    /// The place of `upstream`, one of the settings' own.
    fn at(&self, upstream: &Upstream) -> usize {
        let at = self.settings.upstreams.iter().position(|u| std::ptr::eq(u, upstream));
        at.expect("an upstream of these settings")
    }

    /// `request` sent to `upstream`: on a connection the door drives when
    /// it reaches the upstream over plain HTTP, else through its client.
    async fn exchange(&self, upstream: &Upstream, request: Outgoing) -> Result<reqwest::Response, Unanswered> {
        match &self.driven[self.at(upstream)] {
            Some(driven) => driven.execute(request).await,
            None => {
                let Outgoing { method, path, headers, body, timeout } = request;
                let sending = self.client(upstream).request(method, format!("{}{path}", upstream.base_url));
                let sending = sending.headers(headers).timeout(timeout);
                let sending = match body.is_empty() {
                    true => sending,
                    false => sending.body(body),
                };
                Ok(sending.send().await?)
            }
        }
    }

    /// `GET /v1/models`: the union of the upstreams' lists (each model
    /// once, the first upstream's entry kept).
    async fn models(&self, headers: &HeaderMap, passing: &Passing) -> Reply {
        let mut data: Vec<Value> = Vec::new();
        let mut failures = Vec::new();
        for upstream in &self.settings.upstreams {
            let url = format!("{}/models", upstream.base_url);
            let request = self
                .client(upstream)
                .get(&url)
                .headers(forwarded(headers, upstream, passing, Api::Chat))
                .timeout(upstream.timeout);
            let listed = async {
                let response = request.send().await.map_err(|err| err.to_string())?;
                if !response.status().is_success() {
                    return Err(format!("status {}", response.status()));
                }
                response.json::<Value>().await.map_err(|err| err.to_string())
            };
            match listed.await {
                Ok(list) => {
                    for model in list.get("data").and_then(Value::as_array).into_iter().flatten() {
                        let id = model.get("id");
                        if id.is_some() && !data.iter().any(|seen| seen.get("id") == id) {
                            data.push(model.clone());
                        }
                    }
                }
                Err(why) => failures.push(format!("{}: {why}", upstream.name)),
            }
        }
        if data.is_empty() && !failures.is_empty() {
            let message = format!("no model server answered: {}", failures.join("; "));
            return error(StatusCode::BAD_GATEWAY, &message, "upstream_error");
        }
        for failure in &failures {
            tracing::warn!(door = NAME, "a model server did not list its models: {failure}");
        }
        json_reply(StatusCode::OK, &json!({"object": "list", "data": data}))
    }

    /// A generation of `api` (`POST /v1/chat/completions`, `POST
    /// /v1/responses`): forwarded, and its answer repaired.
    async fn complete(
        &self,
        request: Request<Body>,
        api: Api,
        asking: Asking<'_>,
        limits: crate::exec::ExecLimits,
        observer: &Observer,
    ) -> Reply {
        let (parts, body) = request.into_parts();
        let query = parts.uri.query().map(|q| format!("?{q}")).unwrap_or_default();
        let bytes = match read_body(body, MAX_BODY_BYTES, self.body).await {
            Ok(bytes) => bytes,
            Err(unread) => {
                return error(unread.status(), &unread.message(MAX_BODY_BYTES), "invalid_request_error");
            }
        };
        let asked = match Asked::read(&bytes) {
            Ok(asked) => asked,
            Err(why) => return error(StatusCode::BAD_REQUEST, &why, "invalid_request_error"),
        };
        let Some(model) = asked.model() else {
            return error(StatusCode::BAD_REQUEST, "the request names no model", "invalid_request_error");
        };
        let upstreams = route::candidates(&self.settings, &model, api);
        if upstreams.is_empty() {
            return unserved(&self.settings, &model, api);
        }
        let strict = self.settings.strict
            || parts.headers.get(STRICT_HEADER).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim() == "true");
        let (declared, unrepaired) = match asked.tools().filter(|_| !strict) {
            None => (None, None),
            Some(tools) => match self.tools.of(tools, limits, api).await {
                Ok(declared) => (declared, None),
                Err(unrepaired) => {
                    tracing::warn!(door = NAME, "the request's tools are not read against: {}", unrepaired.why());
                    (None, Some(unrepaired))
                }
            },
        };
        // With a conversation stored upstream, the lifted call would not be
        // in it: calls are repaired, text never lifted.
        let stored = asked.stored();
        let on = !asked.no_tools() && !asked.structured() && !stored;
        let lifting = Lifting { on, several: !asked.one_call_only() };
        let header = parts.headers.get(retry::RETRY_HEADER).map(|v| v.to_str().unwrap_or("?"));
        let tries = match retry::tries(header, self.settings.retry, self.settings.retry_max) {
            Ok(tries) => tries,
            Err(why) => return error(StatusCode::BAD_REQUEST, &why, "invalid_request_error"),
        };
        // Asked again without a stored conversation.
        let tries = if !stored && declared.is_some() { tries } else { 0 };
        let forward = Forward { upstreams, asking, declared, lifting, streaming: asked.stream(), api, query, tries };
        let mut reply = self.forward(&parts.headers, &model, bytes.clone(), forward, observer).await;
        if let Some(unrepaired) = unrepaired {
            reply.headers_mut().insert(UNREPAIRED_HEADER, header::HeaderValue::from_static(unrepaired.said()));
        }
        reply
    }

    /// Another request of `api` (`/v1/responses/{id}`, its `input_items`,
    /// `cancel`): forwarded unchanged, its method, body and query string
    /// as sent, to the upstream its body's `model` routes to, else
    /// `default_upstream` (or the first upstream) speaking `api`; the
    /// answer as it comes.
    async fn pass(&self, request: Request<Body>, api: Api, passing: &Passing, observer: &Observer) -> Reply {
        let (parts, body) = request.into_parts();
        let bytes = match read_body(body, MAX_BODY_BYTES, self.body).await {
            Ok(bytes) => bytes,
            Err(unread) => {
                return error(unread.status(), &unread.message(MAX_BODY_BYTES), "invalid_request_error");
            }
        };
        let model = Asked::read(&bytes).ok().and_then(|asked| asked.model());
        let upstreams = match &model {
            Some(model) => route::candidates(&self.settings, model, api),
            None => route::any(&self.settings, api).into_iter().collect(),
        };
        if upstreams.is_empty() {
            return unserved(&self.settings, model.as_deref().unwrap_or_default(), api);
        }
        let path = parts.uri.path().strip_prefix("/v1").unwrap_or(parts.uri.path());
        let path = match parts.uri.query() {
            Some(query) => format!("{path}?{query}"),
            None => path.to_owned(),
        };
        let request = |upstream: &Upstream| Outgoing {
            method: parts.method.clone(),
            path: path.clone(),
            headers: forwarded(&parts.headers, upstream, passing, api),
            body: bytes.clone(),
            timeout: upstream.timeout,
        };
        let (upstream, sent) = self.send(&upstreams, request, observer, None).await;
        let response = match sent {
            Ok(response) => response,
            Err(err) => return unreachable_upstream(upstream, &err),
        };
        let (status, headers) = (response.status(), response.headers().clone());
        relayed(status, &headers, response.bytes_stream().boxed())
    }

    /// The request sent to its upstream, and the answer repaired.
    async fn forward(
        &self,
        headers: &HeaderMap,
        model: &str,
        bytes: Bytes,
        forward: Forward<'_>,
        observer: &Observer,
    ) -> Reply {
        let Forward { upstreams, asking, declared, lifting, streaming, api, query, tries } = forward;
        let route = match api {
            Api::Chat => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
            Api::Messages => "/v1/messages",
        };
        let spans = Spans::start(observer, headers, model, route).await;
        let sending_to = |upstream: &Upstream| {
            let mut sending = forwarded(headers, upstream, asking.passing, api);
            sending.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
            sending
        };
        let path = format!("{}{query}", api_path(api));
        let request = |upstream: &Upstream| Outgoing {
            method: Method::POST,
            path: path.clone(),
            headers: sending_to(upstream),
            body: bytes.clone(),
            timeout: upstream.timeout,
        };
        let (upstream, sent) = self.send(&upstreams, request, observer, Some(&spans)).await;
        spans.answered_by(&upstream.name);
        let asker = (tries > 0).then(|| Asker {
            client: self.client(upstream).clone(),
            url: format!("{}{path}", upstream.base_url),
            headers: sending_to(upstream),
            api,
            lifting_on: lifting.on,
            // The tries share the upstream's timeout.
            deadline: tokio::time::Instant::now() + upstream.timeout,
            snapshot: Arc::clone(asking.snapshot),
            caller: asking.caller.clone(),
            request: bytes.clone(),
            tries,
        });
        let response = match sent {
            Ok(response) => response,
            Err(err) => return spans.ended(observer, unreachable_upstream(upstream, &err), &[]),
        };
        let status = response.status();
        let headers = response.headers().clone();
        let event_stream = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let second = asker.zip(declared.clone()).map(|(asker, declared)| Second { asker, declared });
        if status.is_success() && event_stream && streaming && api == Api::Responses {
            let rules = ResponseEvents::new(declared, lifting).retrying(second.is_some());
            return streamed(status, &headers, response, rules, spans, observer.clone(), second);
        }
        if status.is_success() && event_stream && streaming && api == Api::Messages {
            let rules = MessageEvents::new(declared, lifting).retrying(second.is_some());
            return streamed(status, &headers, response, rules, spans, observer.clone(), second);
        }
        if status.is_success() && event_stream && streaming {
            let pass_calls = self.settings.stream_calls == StreamCalls::PassWellFormed;
            let holder =
                Choices::new(declared, lifting, spans.reading()).passing_calls(pass_calls).retrying(second.is_some());
            return streamed(status, &headers, response, holder, spans, observer.clone(), second);
        }
        let body = match whole(response).await {
            Whole::Read(body) => body,
            Whole::Longer(head, rest) => return spans.ended(observer, longer(status, &headers, head, rest), &[]),
            Whole::Failed(err) => return spans.ended(observer, unreachable_upstream(upstream, &err.into()), &[]),
        };
        let declared = declared.filter(|_| status.is_success());
        let (answer, made_tries) = match (&declared, second) {
            (Some(declared), Some(Second { asker, .. })) => match serde_json::from_slice::<Value>(&body) {
                Ok(answer) => {
                    // Repaired first: an answer the repair makes ready
                    // costs no more than without retries.
                    let mut repaired = answer.clone();
                    let made = repair(api, &mut repaired, declared, lifting);
                    match retry::corrective(&repaired, declared, lifting.on, api) {
                        None => (Answer::Repaired(body, repaired, made), Some(0)),
                        Some(_) => {
                            let retried = asker.again(answer, declared, &spans).await;
                            if retried.made > 0 {
                                observer.metrics.retries(u64::from(retried.made), retried.outcome);
                            }
                            let body = match retried.made {
                                0 => body,
                                _ => json_bytes(&retried.answer),
                            };
                            (Answer::Parsed(body, retried.answer), Some(retried.made))
                        }
                    }
                }
                Err(_) => (Answer::AsCame(body), Some(0)),
            },
            _ => (Answer::AsCame(body), None),
        };
        let (mut reply, made) = repaired(status, &headers, answer, declared.as_deref(), lifting, &spans, api);
        if let Some(made_tries) = made_tries {
            reply.headers_mut().insert(retry::RETRIES_HEADER, made_tries.into());
        }
        spans.ended(observer, reply, &made)
    }
}

impl Edge {
    /// The request (`request` builds it for an upstream) sent to the first
    /// of `upstreams` that answers: on a connection failure, a timeout
    /// before the answer's first byte, 429 or 5xx, the next one gets it
    /// (logged, counted in `toolgate.model_door.failovers`, an event on the
    /// generation's span). Once an answer has begun there is no switch. The
    /// upstream that answered last, and its answer or failure.
    async fn send<'u>(
        &self,
        upstreams: &[&'u Upstream],
        request: impl Fn(&Upstream) -> Outgoing,
        observer: &Observer,
        spans: Option<&Spans>,
    ) -> (&'u Upstream, Result<reqwest::Response, Unanswered>) {
        let mut at = 0;
        loop {
            let upstream = upstreams[at];
            let sent = self.exchange(upstream, request(upstream)).await;
            let Some(next) = upstreams.get(at + 1) else { return (upstream, sent) };
            let reason = match &sent {
                Ok(response) if response.status() == StatusCode::TOO_MANY_REQUESTS => "status 429".to_owned(),
                Ok(response) if response.status().is_server_error() => format!("status {}", response.status().as_u16()),
                Ok(_) => return (upstream, sent),
                Err(err) if err.is_timeout() => "no answer within its timeout".to_owned(),
                Err(err) => format!("could not be reached: {}", err.cause()),
            };
            tracing::warn!(door = NAME, from = upstream.name, to = next.name, "failing over: {reason}");
            observer.metrics.failover(&upstream.name, &next.name);
            if let Some(spans) = spans {
                spans.failed_over(&upstream.name, &next.name, &reason);
            }
            at += 1;
        }
    }
}

/// Who asks, for the second chance: what of the caller's headers may go
/// upstream, and the snapshot and caller each try counts against.
#[derive(Clone, Copy)]
struct Asking<'a> {
    passing: &'a Passing,
    snapshot: &'a Arc<crate::live::Snapshot>,
    caller: &'a crate::identity::Caller,
}

/// What asking the model again needs, owned (a stream asks from its own
/// task): the upstream's client, URL and headers, the first request, the
/// deadline every try shares, and whom each try counts against.
struct Asker {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    api: Api,
    lifting_on: bool,
    deadline: tokio::time::Instant,
    snapshot: Arc<crate::live::Snapshot>,
    caller: crate::identity::Caller,
    request: Bytes,
    /// Extra requests the answer may take.
    tries: u32,
}

/// The second chance taken: the last answer (the usage of every try
/// summed), the extra requests made, and the outcome (`corrected` once an
/// answer needs no other try, else `exhausted`).
struct Retried {
    answer: Value,
    made: u32,
    outcome: &'static str,
}

impl Asker {
    /// While `answer` holds a call that cannot be made ready and tries are
    /// left, the model is asked again (the request, the answer, a turn
    /// saying what was wrong), whole, within the deadline; each try counts
    /// against the principal's rate (a try the rate refuses is not made).
    async fn again(self, answer: Value, declared: &Declared, spans: &Spans) -> Retried {
        let (mut request, mut answer, mut made) = (self.request.clone(), answer, 0);
        let mut usage: Option<Value> = None;
        let mut outcome = "exhausted";
        loop {
            let Some(corrective) = retry::corrective(&answer, declared, self.lifting_on, self.api) else {
                outcome = "corrected";
                break;
            };
            if made == self.tries {
                break;
            }
            let Some(next) = retry::asked_again(&request, &answer, corrective, self.api) else { break };
            if !self.snapshot.executor.admit_again(&self.caller).await {
                tracing::info!(door = NAME, "the second chance stopped at the client's rate");
                break;
            }
            let sent = self
                .client
                .post(&self.url)
                .headers(self.headers.clone())
                .body(next.clone())
                .timeout(self.deadline.saturating_duration_since(tokio::time::Instant::now()))
                .send()
                .await;
            let Ok(Ok(response)) = sent.map(|r| r.error_for_status()) else { break };
            let Whole::Read(body) = whole(response).await else { break };
            let Ok(again) = serde_json::from_slice::<Value>(&body) else { break };
            retry::add_usage(&mut usage, answer.get("usage"));
            made += 1;
            spans.asked_again(made);
            (request, answer) = (next, again);
        }
        if made > 0 {
            tracing::info!(door = NAME, tries = made, outcome, "the second chance");
        }
        if usage.is_some() {
            retry::add_usage(&mut usage, answer.get("usage"));
            answer["usage"] = usage.unwrap_or(Value::Null);
        }
        Retried { answer, made, outcome }
    }
}

/// A stream's second chance: who asks, against what tools.
struct Second {
    asker: Asker,
    declared: Arc<Declared>,
}

/// What [`Edge::forward`] needs of the request.
struct Forward<'u> {
    /// The upstreams that may serve it, in the order they are tried.
    upstreams: Vec<&'u Upstream>,
    asking: Asking<'u>,
    declared: Option<Arc<Declared>>,
    lifting: Lifting,
    streaming: bool,
    api: Api,
    /// The request's query string (`?…`), forwarded as sent.
    query: String,
    /// Extra requests the answer may take (the second chance).
    tries: u32,
}

/// A whole answer, repaired against `declared` when it can be read; what
/// was repaired.
fn repaired(
    status: StatusCode,
    headers: &HeaderMap,
    answer: Answer,
    declared: Option<&Declared>,
    lifting: Lifting,
    spans: &Spans,
    api: Api,
) -> (Reply, Vec<Made>) {
    // A chat completion read where its calls lie, without a tree.
    if let (Answer::AsCame(body), Some(declared), Api::Chat) = (&answer, declared, api) {
        if let Some(InPlace { written, made, said }) = repair_completion_text(body, declared, lifting, spans.reading())
        {
            spans.said(said);
            let body = written.map_or_else(|| body.clone(), Bytes::from);
            return (with_repairs(status, headers, body, &made), made);
        }
    }
    let (body, parsed, already) = match answer {
        Answer::AsCame(body) => match declared.is_some() || spans.reading() {
            true => {
                let parsed = serde_json::from_slice::<Value>(&body).ok();
                (body, parsed, None)
            }
            false => (body, None, None),
        },
        Answer::Parsed(body, answer) => (body, Some(answer), None),
        Answer::Repaired(body, answer, made) => (body, Some(answer), Some(made)),
    };
    if let Some(completion) = &parsed {
        spans.answered(completion);
    }
    let (Some(declared), Some(mut completion)) = (declared, parsed) else {
        return (passed(status, headers, body, None), Vec::new());
    };
    let made = match already {
        Some(made) => made,
        None => repair(api, &mut completion, declared, lifting),
    };
    let body = match made.is_empty() {
        true => body,
        false => json_bytes(&completion),
    };
    (with_repairs(status, headers, body, &made), made)
}

/// A whole answer of `body`; when `made` holds repairs, logged and listed
/// in `x-toolgate-repairs`.
fn with_repairs(status: StatusCode, headers: &HeaderMap, body: Bytes, made: &[Made]) -> Reply {
    if made.is_empty() {
        return passed(status, headers, body, None);
    }
    tracing::debug!(door = NAME, repairs = made.len(), "repaired a completion");
    passed(status, headers, body, Some(repairs_header(made, MAX_REPAIRS_HEADER)))
}

/// A whole answer's bytes and how much of it was done before
/// [`repaired`]: nothing, read (as a tree), or read and repaired (with what
/// was made; the bytes still the answer as it came).
enum Answer {
    AsCame(Bytes),
    Parsed(Bytes, Value),
    Repaired(Bytes, Value, Vec<Made>),
}

/// `answer` (a whole answer of `api`) repaired against `declared`; what
/// was made.
fn repair(api: Api, answer: &mut Value, declared: &Declared, lifting: Lifting) -> Vec<Made> {
    match api {
        Api::Responses => repair_response(answer, declared, lifting),
        Api::Messages => repair_message(answer, declared, lifting),
        Api::Chat => repair_completion(answer, declared, lifting),
    }
}

/// 404 for a model no upstream serves in `api`.
fn unserved(settings: &ModelSettings, model: &str, api: Api) -> Reply {
    let speaking = || settings.upstreams.iter().filter(|u| u.speaks(api));
    if speaking().next().is_none() {
        let message = format!("no model server is configured for the {} API (model_door.upstreams[].apis)", api.name());
        return error(StatusCode::NOT_FOUND, &message, "invalid_request_error");
    }
    let configured: Vec<&str> = speaking().flat_map(|u| u.models.iter().map(glob::Pattern::as_str)).collect();
    let message =
        format!("no model server serves the model '{model}': the configured models are {}", configured.join(", "));
    error(StatusCode::NOT_FOUND, &message, "invalid_request_error")
}

/// Whether a body is JSON as its `Content-Type` says: `application/json`
/// or a `+json` type, or no type at all (what a browser's simple request,
/// `text/plain` or a form, never is).
fn json_body(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE) else { return true };
    let essence = value.to_str().unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// What of the caller's own headers may go upstream.
struct Passing {
    /// The gateway has no principals: the caller's `Authorization` goes
    /// upstream when the upstream has no key of its own.
    open: bool,
    /// The header carrying an end user's token (`users.jwt.header`), when
    /// users are configured: a credential of the gateway's, never passed.
    user_header: Option<String>,
}

/// The headers sent upstream: the caller's, less hop-by-hop ones, `Host`,
/// `Content-Length`, `Accept-Encoding`, the door's own, every header the
/// gateway reads as a credential (`Authorization`, the end user's token);
/// then `Authorization` as the credentials rule says: the upstream's key
/// when `api_key_env` names one; else, on a gateway without principals,
/// the caller's own (a gateway with principals never passes its callers'
/// keys on).
fn forwarded(headers: &HeaderMap, upstream: &Upstream, passing: &Passing, api: Api) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let dropped = HOP_BY_HOP.contains(&name.as_str())
            || matches!(name.as_str(), "host" | "content-length" | "accept-encoding" | "authorization" | "x-api-key")
            || name.as_str().starts_with("x-toolgate-")
            || passing.user_header.as_deref().is_some_and(|user| name.as_str().eq_ignore_ascii_case(user));
        if !dropped {
            out.append(name.clone(), value.clone());
        }
    }
    match &upstream.api_key {
        // The Messages API takes its key in `x-api-key`, the others as a
        // bearer token.
        Some(key) => {
            let (name, text) = match api {
                Api::Messages => (X_API_KEY, key.expose().to_owned()),
                _ => (header::AUTHORIZATION, format!("Bearer {}", key.expose())),
            };
            if let Ok(mut value) = header::HeaderValue::from_str(&text) {
                value.set_sensitive(true);
                out.insert(name, value);
            }
        }
        None if passing.open => {
            for name in [header::AUTHORIZATION, X_API_KEY] {
                for value in headers.get_all(&name) {
                    out.append(name.clone(), value.clone());
                }
            }
        }
        None => {}
    }
    out
}

/// The header the Messages API takes its key in.
const X_API_KEY: header::HeaderName = header::HeaderName::from_static("x-api-key");

/// Headers that belong to one connection, never forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The upstream's answer with `body`: its status and headers (less
/// hop-by-hop ones and its length), and `repairs` when any were made.
fn passed(status: StatusCode, headers: &HeaderMap, body: Bytes, repairs: Option<String>) -> Reply {
    let mut reply = Response::new(Full::new(body).boxed());
    *reply.status_mut() = status;
    copy_headers(headers, reply.headers_mut());
    if let Some(repairs) = repairs.and_then(|r| header::HeaderValue::from_str(&r).ok()) {
        reply.headers_mut().insert(REPAIRS_HEADER, repairs);
    }
    reply
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from {
        if !HOP_BY_HOP.contains(&name.as_str()) && name != header::CONTENT_LENGTH {
            to.append(name.clone(), value.clone());
        }
    }
}

/// The most of a whole answer the door reads to repair; a longer one
/// passes unchanged as it arrives.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// An upstream's whole answer, read.
enum Whole {
    Read(Bytes),
    /// Longer than [`MAX_ANSWER_BYTES`]: what was read, and the rest still
    /// to come.
    Longer(Bytes, futures::stream::BoxStream<'static, reqwest::Result<Bytes>>),
    Failed(reqwest::Error),
}

/// Reads `response` whole, up to [`MAX_ANSWER_BYTES`].
async fn whole(response: reqwest::Response) -> Whole {
    let mut rest = response.bytes_stream().boxed();
    let mut read = bytes::BytesMut::new();
    while let Some(piece) = rest.next().await {
        match piece {
            Ok(piece) => read.extend_from_slice(&piece),
            Err(err) => return Whole::Failed(err),
        }
        if read.len() > MAX_ANSWER_BYTES {
            return Whole::Longer(read.freeze(), rest);
        }
    }
    Whole::Read(read.freeze())
}

/// An answer too long to repair: what was read, then the rest, unchanged
/// (a failure on the way ends the body early, as the upstream's would).
fn longer(
    status: StatusCode,
    headers: &HeaderMap,
    head: Bytes,
    rest: futures::stream::BoxStream<'static, reqwest::Result<Bytes>>,
) -> Reply {
    relayed(status, headers, futures::stream::once(async { Ok(head) }).chain(rest).boxed())
}

/// A reply whose body is `body` as it arrives (a failure on the way ends
/// it early, as the upstream's would).
fn relayed(
    status: StatusCode,
    headers: &HeaderMap,
    mut body: futures::stream::BoxStream<'static, reqwest::Result<Bytes>>,
) -> Reply {
    let (to, from) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        while let Some(Ok(piece)) = body.next().await {
            if to.send(piece).await.is_err() {
                return;
            }
        }
    });
    sent(status, headers, from)
}

/// A reply of `status` and the upstream's `headers` whose body is what
/// arrives on `from`.
fn sent(status: StatusCode, headers: &HeaderMap, from: tokio::sync::mpsc::Receiver<Bytes>) -> Reply {
    sent_noting(status, headers, from, || {})
}

/// [`sent`], calling `first` as the body's first bytes go.
fn sent_noting(
    status: StatusCode,
    headers: &HeaderMap,
    from: tokio::sync::mpsc::Receiver<Bytes>,
    first: impl FnOnce() + Send + Sync + 'static,
) -> Reply {
    let mut first = Some(first);
    let frames = tokio_stream::wrappers::ReceiverStream::new(from).map(move |bytes| {
        if let Some(first) = first.take() {
            first();
        }
        Ok(hyper::body::Frame::data(bytes))
    });
    let mut reply = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    *reply.status_mut() = status;
    copy_headers(headers, reply.headers_mut());
    reply
}

/// A streamed answer, relayed under `holder`'s rules; the spans end with
/// the stream.
fn streamed(
    status: StatusCode,
    headers: &HeaderMap,
    response: reqwest::Response,
    holder: impl Rules,
    spans: Spans,
    observer: Observer,
    second: Option<Second>,
) -> Reply {
    let (to, from) = tokio::sync::mpsc::channel::<Bytes>(16);
    let first = spans.first_bytes(&observer);
    tokio::spawn(async move {
        let mut choices = relay(Box::pin(response.bytes_stream()), &to, holder).await;
        let mut made = choices.made();
        // Kept back for the second chance: the model asked again, whole,
        // and the last answer sent as the rest of the stream.
        if let (Some(kept), Some(Second { asker, declared })) = (choices.kept_back(), second) {
            let retried = asker.again(kept, &declared, &spans).await;
            if retried.made > 0 {
                observer.metrics.retries(u64::from(retried.made), retried.outcome);
            }
            let (rest, repaired) = choices.rest(retried.answer);
            made.extend(repaired);
            for bytes in rest {
                if to.send(bytes).await.is_err() {
                    break;
                }
            }
        }
        if !made.is_empty() {
            tracing::debug!(door = NAME, repairs = made.len(), "repaired a streamed completion");
        }
        let generation = choices.generation();
        let reasons = generation.reasons.iter().map(|r| r.clone().into()).collect();
        spans.generation(generation.model.as_deref(), reasons, generation.usage.as_ref());
        spans.end(&observer, status.as_u16(), &made);
    });
    sent_noting(status, headers, from, first)
}

/// 502 for an upstream that could not be reached or answered nothing
/// readable (504 when it took too long), in OpenAI's error shape.
fn unreachable_upstream(upstream: &Upstream, err: &Unanswered) -> Reply {
    let (status, what) = match err.is_timeout() {
        true => (
            StatusCode::GATEWAY_TIMEOUT,
            format!("did not answer within {}", humantime::format_duration(upstream.timeout)),
        ),
        false => (StatusCode::BAD_GATEWAY, format!("could not be reached: {}", err.cause())),
    };
    tracing::warn!(door = NAME, upstream = upstream.name, "the model server {what}");
    error(status, &format!("the model server '{}' {what}", upstream.name), "upstream_error")
}

/// A refusal at the gate, in OpenAI's error shape: 401, or 429 with
/// `Retry-After`.
fn refusal(refused: Refused) -> Reply {
    match refused {
        Refused::Limited(limited) => {
            let mut reply = error(StatusCode::TOO_MANY_REQUESTS, &limited.message, "rate_limit_exceeded");
            reply.headers_mut().insert(header::RETRY_AFTER, limited.retry_after_seconds().into());
            reply
        }
        Refused::Connections => busy(StatusCode::TOO_MANY_REQUESTS, Refused::CONNECTIONS, "rate_limit_exceeded"),
        Refused::Unauthenticated(_) | Refused::UnknownToolset(_) => {
            let mut reply = error(StatusCode::UNAUTHORIZED, crate::identity::UNAUTHENTICATED, "invalid_api_key");
            reply.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            reply
        }
    }
}

/// An error in OpenAI's shape, marked as the door's own (its message kept
/// for [`in_messages_shape`]).
fn error(status: StatusCode, message: &str, kind: &str) -> Reply {
    let mut reply =
        json_reply(status, &json!({"error": {"message": message, "type": kind, "param": null, "code": null}}));
    reply.extensions_mut().insert(DoorError(message.to_owned()));
    reply
}

/// The message of an error the door made itself.
#[derive(Clone)]
struct DoorError(String);

/// `reply` with the door's own error, if it is one, in the Messages API's
/// shape (`{"type": "error", "error": {"type", "message"}}`), its status
/// and headers kept.
fn in_messages_shape(reply: Reply) -> Reply {
    let Some(DoorError(message)) = reply.extensions().get::<DoorError>().cloned() else { return reply };
    let kind = match reply.status().as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    };
    let (parts, _) = reply.into_parts();
    let body = json!({"type": "error", "error": {"type": kind, "message": message}}).to_string();
    Response::from_parts(parts, Full::new(Bytes::from(body)).boxed())
}

fn json_reply(status: StatusCode, value: &Value) -> Reply {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(json_bytes(value)).boxed())
        .expect("a valid response")
}

/// `value` as JSON text (written straight into bytes: `to_string` goes
/// through the formatter a piece at a time, about twice the work).
pub(super) fn json_bytes(value: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("a JSON value serialises"))
}
