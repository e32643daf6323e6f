//! Serving: every configured door on its listener, and the reloader, until
//! the process is told to stop. Each door is served by [`server::serve`]
//! (one accept, TLS, cap, deadline and drain path); a door is a value of
//! its front door's module and one line here.

use std::{future::Future, net::SocketAddr, pin::Pin, sync::Arc};

use anyhow::{anyhow, Context};
use tokio::{net::TcpListener, sync::watch};

use super::App;
use crate::{
    config::Settings,
    front::{grpc, mcp},
    server::{self, ConnectionSettings, ServeError, Stop},
    tls::ServerTls,
};

/// The listeners of the doors `settings` configure, bound: the gateway's
/// (`listen`), the probe port's (`health_listen`), the MCP door's
/// (`mcp_front_door.listen`).
pub struct Listeners {
    pub grpc: TcpListener,
    pub health: Option<TcpListener>,
    pub mcp: Option<TcpListener>,
}

impl Listeners {
    /// Binds every address `settings` name; an error names the one that
    /// failed.
    pub async fn bind(settings: &Settings) -> anyhow::Result<Self> {
        Self::bind_at(settings, settings.listen, settings.mcp.as_ref().map(|mcp| mcp.listen)).await
    }

    /// The same with the gateway's and the MCP door's addresses given (an
    /// embedding process, or a test on port 0).
    pub async fn bind_at(settings: &Settings, grpc: SocketAddr, mcp: Option<SocketAddr>) -> anyhow::Result<Self> {
        let bind = |addr, what: &'static str| async move {
            TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}{what}"))
        };
        let grpc = bind(grpc, "").await?;
        let health = match settings.health_listen {
            Some(addr) => Some(bind(addr, " (health_listen)").await?),
            None => None,
        };
        let mcp = match mcp {
            Some(addr) => Some(bind(addr, " (mcp_front_door)").await?),
            None => None,
        };
        Ok(Self { grpc, health, mcp })
    }
}

/// How every door's connections are treated: the guards, and TLS (its
/// files re-read on every reload).
#[derive(Clone, Default)]
pub struct Serving {
    pub(crate) connections: ConnectionSettings,
    pub(crate) tls: Option<Arc<ServerTls>>,
}

impl Serving {
    /// TLS as `settings` ask (read now), with these connection guards.
    pub fn new(settings: &Settings, connections: ConnectionSettings) -> anyhow::Result<Self> {
        let tls = match &settings.tls {
            Some(files) => Some(Arc::new(ServerTls::load(files).map_err(|why| anyhow!("cannot start TLS: {why}"))?)),
            None => None,
        };
        Ok(Self { connections, tls })
    }

    /// Whether the doors speak TLS.
    pub fn tls(&self) -> bool {
        self.tls.is_some()
    }
}

impl App {
    /// Runs every door that has a listener, and `reloading` (the reloader,
    /// for `serve`) when given, until `stop` says; then every door drains at
    /// once, for at most the drain time. The gRPC door's result is the
    /// answer (the others log theirs); should it end first, the others stop.
    pub async fn serve(
        &self,
        listeners: Listeners,
        serving: Serving,
        reloading: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
        stop: Stop<impl Future<Output = ()>, impl Future<Output = ()>>,
    ) -> Result<(), ServeError> {
        let Serving { connections, tls } = serving;
        let (fanned, relay) = fan_out(stop);
        let _reloading = reloading.map(|reloading| AbortOnDrop(tokio::spawn(reloading)));
        let grpc = grpc::GrpcDoor::new(self.grpc().with_tls(tls.clone()), &connections).await;
        let mut others = Vec::new();
        if let Some(listener) = listeners.health {
            let probes = connections.for_probes();
            let door = grpc.health_only(&probes);
            others.push(tokio::spawn(server::serve(listener, probes, None, door, fanned.stop())));
        }
        if let Some(listener) = listeners.mcp {
            let loopback = listener.local_addr().is_ok_and(|addr| addr.ip().is_loopback());
            let door = mcp::http::McpDoor::new(self.view(), tls.clone(), loopback);
            others.push(tokio::spawn(server::serve(listener, connections.clone(), tls.clone(), door, fanned.stop())));
        }
        let served = server::serve(listeners.grpc, connections, tls, grpc, fanned.stop());
        tokio::pin!(served, relay);
        let served = loop {
            tokio::select! {
                served = &mut served => break served,
                () = &mut relay => {}
            }
        };
        fanned.end_unless_stopping();
        for other in others {
            if let Ok(Err(err)) = other.await {
                tracing::warn!("a door failed: {err}");
            }
        }
        served
    }
}

/// One stop for several doors: each [`Fanned::stop`] completes as `stop`
/// does, while the returned future (polled beside the doors) relays it.
fn fan_out(stop: Stop<impl Future<Output = ()>, impl Future<Output = ()>>) -> (Fanned, impl Future<Output = ()>) {
    let Stop { shutdown, drain, now } = stop;
    let fanned =
        Fanned { shutdown: Arc::new(watch::Sender::new(false)), now: Arc::new(watch::Sender::new(false)), drain };
    let (shutdown_tx, now_tx) = (Arc::clone(&fanned.shutdown), Arc::clone(&fanned.now));
    let relay = async move {
        shutdown.await;
        shutdown_tx.send_replace(true);
        now.await;
        now_tx.send_replace(true);
        std::future::pending::<()>().await;
    };
    (fanned, relay)
}

/// A stop shared by the doors ([`fan_out`]).
struct Fanned {
    shutdown: Arc<watch::Sender<bool>>,
    now: Arc<watch::Sender<bool>>,
    drain: std::time::Duration,
}

impl Fanned {
    fn stop(&self) -> Stop<impl Future<Output = ()> + Send + 'static, impl Future<Output = ()> + Send + 'static> {
        let told = |mut signal: watch::Receiver<bool>| async move {
            let _ = signal.wait_for(|&told| told).await;
        };
        Stop { shutdown: told(self.shutdown.subscribe()), drain: self.drain, now: told(self.now.subscribe()) }
    }

    /// The gRPC door ended: if it was not told to, the others stop too,
    /// at once; if it was, they finish their drain.
    fn end_unless_stopping(self) {
        if !*self.shutdown.borrow() {
            self.shutdown.send_replace(true);
            self.now.send_replace(true);
        }
    }
}

/// A task ended when its handle goes.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
