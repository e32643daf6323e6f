//! A real HTTP backend on 127.0.0.1:0 (axum), answering the ways a tool can:
//! well, with its own errors, badly, slowly, hugely. It counts the calls it
//! receives, so tests can prove that invalid calls never reach it.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
    routing::{post, MethodRouter},
    Router,
};

/// The last request's body and headers.
type Last = Option<(String, HeaderMap)>;

#[derive(Clone, Default)]
pub struct Seen {
    pub calls: Arc<AtomicUsize>,
    pub last: Arc<Mutex<Last>>,
}

impl Seen {
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub fn last_body(&self) -> Option<String> {
        self.last.lock().unwrap().as_ref().map(|(b, _)| b.clone())
    }

    /// A header of the last request.
    pub fn last_header(&self, name: &str) -> Option<String> {
        let last = self.last.lock().unwrap();
        last.as_ref().and_then(|(_, headers)| String::from_utf8(headers.get(name)?.as_bytes().to_vec()).ok())
    }
}

pub struct HttpBackend {
    pub addr: SocketAddr,
    pub seen: Seen,
}

impl HttpBackend {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

fn record(seen: &Seen, headers: &HeaderMap, body: &Bytes) {
    seen.calls.fetch_add(1, Ordering::SeqCst);
    *seen.last.lock().unwrap() = Some((String::from_utf8_lossy(body).into_owned(), headers.clone()));
}

fn json(status: StatusCode, body: &str) -> Response {
    (status, [("content-type", "application/json")], body.to_owned()).into_response()
}

/// A route that records each request, then answers with `respond(body)`.
fn recorded(respond: fn(&Bytes) -> Response) -> MethodRouter<Seen> {
    post(move |State(seen): State<Seen>, headers: HeaderMap, body: Bytes| async move {
        record(&seen, &headers, &body);
        respond(&body)
    })
}

/// Starts the backend; it serves until the test's runtime ends.
pub async fn start() -> HttpBackend {
    let seen = Seen::default();
    let slow = post(|State(seen): State<Seen>, headers: HeaderMap, body: Bytes| async move {
        record(&seen, &headers, &body);
        tokio::time::sleep(Duration::from_secs(30)).await;
        json(StatusCode::OK, "{}")
    });
    let pause = post(|State(seen): State<Seen>, headers: HeaderMap, body: Bytes| async move {
        record(&seen, &headers, &body);
        tokio::time::sleep(Duration::from_millis(500)).await;
        json(StatusCode::OK, &String::from_utf8_lossy(&body))
    });
    let app = Router::new()
        .route("/pause", pause)
        .route("/echo", recorded(|body| json(StatusCode::OK, &String::from_utf8_lossy(body))))
        .route("/result", recorded(|_| json(StatusCode::OK, "{\"b\": 2, \"a\": [1.50, 1e3], \"z\": null}")))
        .route("/not_found", recorded(|_| (StatusCode::NOT_FOUND, "no order 42 in this shop").into_response()))
        .route("/conflict", recorded(|_| (StatusCode::CONFLICT, "the order was already shipped").into_response()))
        .route(
            "/typed_error",
            recorded(|_| {
                let body = r#"{"error": {"kind": "invalid_arguments", "message": "day 6 is a Saturday; we deliver Monday to Friday"}}"#;
                json(StatusCode::BAD_REQUEST, body)
            }),
        )
        .route(
            "/typed_not_found",
            recorded(|_| {
                json(StatusCode::UNPROCESSABLE_ENTITY, r#"{"error": {"kind": "not_found", "message": "no parcel PK-9"}}"#)
            }),
        )
        .route(
            "/crash",
            recorded(|_| {
                let trace = "Traceback: db at 10.0.0.7:5432 password=hunter2";
                (StatusCode::INTERNAL_SERVER_ERROR, trace).into_response()
            }),
        )
        .route(
            "/ansi",
            recorded(|_| {
                let text = "\u{1b}[31mno such \u{1b}]0;pwned\u{7}order\u{1b}[0m \u{202e}42\u{202c}\u{200b} in\u{0}\u{7} this shop";
                (StatusCode::NOT_FOUND, text).into_response()
            }),
        )
        .route("/garbage", recorded(|_| (StatusCode::OK, "<html>oops</html>").into_response()))
        .route("/empty", recorded(|_| StatusCode::OK.into_response()))
        .route("/huge", recorded(|_| json(StatusCode::OK, &format!("[{}0]", "0,".repeat(5 * 1024 * 1024)))))
        .route("/slow", slow)
        .route("/redirect", recorded(|_| Redirect::temporary("/echo").into_response()))
        // Redirects to wherever the request's `x-redirect-to` header says.
        .route(
            "/away",
            post(|State(seen): State<Seen>, headers: HeaderMap, body: Bytes| async move {
                record(&seen, &headers, &body);
                let to = headers.get("x-redirect-to").and_then(|v| v.to_str().ok()).unwrap_or("/echo").to_owned();
                Redirect::temporary(&to).into_response()
            }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    HttpBackend { addr, seen }
}

/// A loopback address where nothing listens.
pub fn closed_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}
