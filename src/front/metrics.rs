//! The metrics door (`metrics_listen`, `--metrics-listen`): `GET /metrics`
//! answers every metric of the gateway (every door's, the model door's
//! included) as Prometheus text, read from the instruments OTLP pushes;
//! plaintext, without credentials, as scrapers expect (bind it where only
//! the scraper reaches it). Any other path is 404.

use std::{net::SocketAddr, sync::Arc};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{body::Incoming, header, Method, Request, Response, StatusCode};

use crate::{
    server::{
        http::{serve_http, HttpEdge, Reply},
        Connections, Door, Peer, ServeError, Stopping,
    },
    telemetry::Scrape,
};

/// The door's name (logs, the listener's key).
pub(crate) const NAME: &str = "metrics";

/// The metrics door.
pub(crate) struct MetricsDoor {
    scrape: Option<Scrape>,
}

impl MetricsDoor {
    pub(crate) fn new(scrape: Option<Scrape>) -> Self {
        Self { scrape }
    }
}

impl Door for MetricsDoor {
    fn name(&self) -> &'static str {
        NAME
    }

    fn http1(&self) -> bool {
        true
    }

    async fn run(
        self,
        _local: Option<SocketAddr>,
        connections: Connections,
        stopping: Stopping,
    ) -> Result<(), ServeError> {
        serve_http(NAME, Arc::new(Edge { scrape: self.scrape }), connections, stopping).await;
        Ok(())
    }
}

struct Edge {
    scrape: Option<Scrape>,
}

impl HttpEdge for Edge {
    async fn handle(&self, request: Request<Incoming>, _connected: &Peer) -> Reply {
        let (status, kind, body) = match (request.method(), request.uri().path(), &self.scrape) {
            (&Method::GET, "/metrics", Some(scrape)) => {
                (StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", scrape.text())
            }
            (&Method::GET, "/metrics", None) => {
                (StatusCode::SERVICE_UNAVAILABLE, "text/plain", "the metrics cannot be read\n".to_owned())
            }
            _ => (StatusCode::NOT_FOUND, "text/plain", "the metrics door serves GET /metrics\n".to_owned()),
        };
        Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, kind)
            .body(Full::new(Bytes::from(body)).boxed())
            .expect("a valid response")
    }
}
