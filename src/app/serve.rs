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
    front::{
        grpc,
        mcp::{http::McpDoor, limits::McpLimits},
        metrics::MetricsDoor,
        model::http::ModelDoor,
    },
    server::{self, ConnectionSettings, Door, ServeError, Stop},
    tls::ServerTls,
};

/// The listeners of the doors `settings` configure, bound: the gateway's
/// (`listen`), and every other door's by its name (`health_listen`,
/// `mcp_front_door.listen`: the settings' `door_addresses`).
pub struct Listeners {
    /// The gRPC door's; `None` with `listen: off`.
    pub(crate) grpc: Option<TcpListener>,
    doors: Vec<(&'static str, TcpListener)>,
}

impl Listeners {
    /// Binds every address `settings` name; an error names the one that
    /// failed.
    pub async fn bind(settings: &Settings) -> anyhow::Result<Self> {
        Self::bind_with(settings, settings.listen, &[]).await
    }

    /// The same with the gateway's address, and the addresses of the doors
    /// `doors` names, given (an embedding process, or a test on port 0): a
    /// door named there is served even if the settings name no address.
    pub async fn bind_at(
        settings: &Settings,
        grpc: SocketAddr,
        doors: &[(&'static str, SocketAddr)],
    ) -> anyhow::Result<Self> {
        Self::bind_with(settings, Some(grpc), doors).await
    }

    async fn bind_with(
        settings: &Settings,
        grpc: Option<SocketAddr>,
        doors: &[(&'static str, SocketAddr)],
    ) -> anyhow::Result<Self> {
        let bind = |addr, door: Option<&'static str>| async move {
            let what = door.map_or_else(String::new, |door| format!(" (the {door} door)"));
            TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}{what}"))
        };
        let mut addresses = settings.door_addresses();
        addresses.retain(|(door, _)| !doors.iter().any(|(given, _)| given == door));
        addresses.extend_from_slice(doors);
        let mut bound = Vec::new();
        for (door, addr) in addresses {
            bound.push((door, bind(addr, Some(door)).await?));
        }
        let grpc = match grpc {
            Some(grpc) => Some(bind(grpc, None).await?),
            None => None,
        };
        Ok(Self { grpc, doors: bound })
    }

    /// The gateway's address; `None` with `listen: off`.
    pub fn grpc_address(&self) -> std::io::Result<Option<SocketAddr>> {
        self.grpc.as_ref().map(TcpListener::local_addr).transpose()
    }

    /// The address of the door named `door`, if it has a listener.
    pub fn address(&self, door: &str) -> Option<SocketAddr> {
        self.doors.iter().find(|(name, _)| *name == door).and_then(|(_, listener)| listener.local_addr().ok())
    }

    /// The listener of the door named `door`, taken to serve it.
    fn take(&mut self, door: &str) -> Option<TcpListener> {
        let at = self.doors.iter().position(|(name, _)| *name == door)?;
        Some(self.doors.remove(at).1)
    }
}

/// How every door's connections are treated: the guards, and TLS (its
/// files re-read on every reload).
#[derive(Clone, Default)]
pub struct Serving {
    pub(crate) connections: ConnectionSettings,
    pub(crate) tls: Option<Arc<ServerTls>>,
    /// The MCP door's bounds per principal.
    pub(crate) mcp: McpLimits,
    /// The model door's settings, when it is on.
    pub(crate) model: Option<Arc<crate::config::ModelSettings>>,
}

impl Serving {
    /// TLS as `settings` ask (read now), with these connection guards.
    pub fn new(settings: &Settings, connections: ConnectionSettings) -> anyhow::Result<Self> {
        let tls = match &settings.tls {
            Some(files) => Some(Arc::new(ServerTls::load(files).map_err(|why| anyhow!("cannot start TLS: {why}"))?)),
            None => None,
        };
        let per_principal = settings.connections_per_principal.or(connections.connections_per_principal);
        let connections = ConnectionSettings { connections_per_principal: per_principal, ..connections };
        Ok(Self {
            connections,
            tls,
            mcp: McpLimits::of(settings.doors.mcp.as_ref()),
            model: settings.doors.model.clone(),
        })
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
        mut listeners: Listeners,
        serving: Serving,
        reloading: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
        stop: Stop<impl Future<Output = ()>, impl Future<Output = ()>>,
    ) -> Result<(), ServeError> {
        let Serving { connections, tls, mcp, model } = serving;
        let (fanned, relay) = fan_out(stop);
        let _reloading = reloading.map(|reloading| AbortOnDrop(tokio::spawn(reloading)));
        let grpc = grpc::GrpcDoor::new(self.grpc().with_tls(tls.clone())).await;
        let (probes, view) = (connections.for_probes(), self.view());
        let mut others = Vec::new();
        // Every door beside the gateway's: one statement each.
        others.extend(beside(&mut listeners, &fanned, &probes, None, grpc.health_only()));
        others.extend(beside(
            &mut listeners,
            &fanned,
            &connections,
            tls.clone(),
            McpDoor::new(view, tls.clone(), mcp, &connections),
        ));
        let scrape = self.live.observer().scrape.clone();
        others.extend(beside(&mut listeners, &fanned, &probes, None, MetricsDoor::new(scrape)));
        if let Some(model) = model {
            let door = ModelDoor::new(model, self.live.current(), tls.clone(), &connections);
            others.extend(beside(&mut listeners, &fanned, &connections, tls.clone(), door));
        }
        for (door, _) in &listeners.doors {
            tracing::error!(door, "an address is configured for a door that does not exist: nothing serves it");
        }
        let served = async {
            match listeners.grpc {
                Some(listener) => server::serve(listener, connections, tls, grpc, fanned.stop()).await,
                // `listen: off`: the other doors serve until told to stop.
                None => {
                    fanned.stop().shutdown.await;
                    Ok(())
                }
            }
        };
        // The relay never ends: the gateway's door does. It relays on while
        // the other doors drain (a second signal ends their drain too), and
        // their stop lives until they end: a door whose drain outlasts the
        // gateway's is not told to close at once.
        tokio::pin!(relay);
        let served = tokio::select! {
            served = served => served,
            never = &mut relay => match never {},
        };
        fanned.end_unless_stopping();
        let others = async {
            for other in others {
                if let Ok(Err(err)) = other.await {
                    tracing::warn!("a door failed: {err}");
                }
            }
        };
        tokio::select! {
            () = others => {}
            never = relay => match never {},
        }
        drop(fanned);
        served
    }
}

/// Serves `door` beside the gateway's, on its listener if it has one.
fn beside(
    listeners: &mut Listeners,
    fanned: &Fanned,
    settings: &ConnectionSettings,
    tls: Option<Arc<ServerTls>>,
    door: impl Door + 'static,
) -> Option<tokio::task::JoinHandle<Result<(), ServeError>>> {
    let listener = listeners.take(door.name())?;
    Some(tokio::spawn(server::serve(listener, settings.clone(), tls, door, fanned.stop())))
}

/// One stop for several doors: each [`Fanned::stop`] completes as `stop`
/// does, while the returned future (polled beside the doors) relays it.
fn fan_out(
    stop: Stop<impl Future<Output = ()>, impl Future<Output = ()>>,
) -> (Fanned, impl Future<Output = std::convert::Infallible>) {
    let Stop { shutdown, drain, now } = stop;
    let fanned =
        Fanned { shutdown: Arc::new(watch::Sender::new(false)), now: Arc::new(watch::Sender::new(false)), drain };
    let (shutdown_tx, now_tx) = (Arc::clone(&fanned.shutdown), Arc::clone(&fanned.now));
    let relay = async move {
        shutdown.await;
        shutdown_tx.send_replace(true);
        now.await;
        now_tx.send_replace(true);
        std::future::pending::<std::convert::Infallible>().await
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
    fn end_unless_stopping(&self) {
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
