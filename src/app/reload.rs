//! Reload without restart (docs/architecture.md, "The path of one
//! reload"): SIGHUP, or a change in a folder holding a catalogue file, a
//! pack, the configuration file, a TLS file, the users' JWKS file or a pins
//! file (`mcp_pins`; those the catalogue named at start),
//! re-reads everything and swaps in the new snapshot when the whole of it is
//! valid.
//!
//! Folders are watched, not files: an editor that saves by renaming a new
//! file over the old one, and a Kubernetes ConfigMap volume (which swaps a
//! `..data` symlink to a new folder of files), both replace the file a watch
//! on it would follow. Events are not filtered by name, for the same reason;
//! only reads (open, read, close after reading) are ignored, since a reload
//! reads the files itself. Triggers are debounced on the trailing edge: a
//! reload starts once [`QUIET`] has passed without another, so a burst of
//! writes or signals makes one reload (another follows if a trigger comes
//! while it runs).

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use notify::{
    event::{AccessKind, AccessMode},
    EventKind, RecommendedWatcher, RecursiveMode, Watcher,
};
use tokio::{signal::unix::Signal, sync::mpsc};

use super::{App, ReloadError, Reloaded};
use crate::{
    catalog::log_problems,
    config::{Fixed, Settings},
    tls::ServerTls,
};

/// How long triggers must stop before a reload starts.
pub(crate) const QUIET: Duration = Duration::from_millis(500);

/// Re-reads the settings (flags, environment, configuration file).
pub(crate) type Rebuild = Arc<dyn Fn() -> anyhow::Result<Settings> + Send + Sync>;

/// What a reload works with.
pub(crate) struct Reloader {
    pub(crate) app: App,
    pub(crate) tls: Option<Arc<ServerTls>>,
    pub(crate) rebuild: Rebuild,
    /// The running process's fixed settings (a change says: restart).
    pub(crate) fixed: Fixed,
    /// `serve --allow-remote`: the exposure guard of `serve` is off.
    pub(crate) allow_remote: bool,
}

/// What a reload reads, as the file watcher sees it: the folders to watch,
/// and in them the entries a change to which matters.
pub(crate) struct Watched {
    /// Each registry folder, the folder of each registry file, the packs
    /// folder, and the folders of the configuration, TLS, JWKS and pins
    /// files; a
    /// file reached through a symlink has the folder of its target watched
    /// too. Folders that do not exist are left out.
    pub(crate) folders: BTreeSet<PathBuf>,
    /// Folders whose every `*.yaml` / `*.yml` is read (registry folders, packs).
    yaml_folders: BTreeSet<PathBuf>,
    /// Files read by name: as given (in its folder, resolved) and as its
    /// symlinks resolve.
    files: BTreeSet<PathBuf>,
}

impl Watched {
    /// What `settings` (and the configuration file, when there is one) read,
    /// and the catalogue's pins files (`pins`).
    pub(crate) fn of(settings: &Settings, config: Option<&Path>, pins: &[PathBuf]) -> Self {
        let mut watched = Self { folders: BTreeSet::new(), yaml_folders: BTreeSet::new(), files: BTreeSet::new() };
        let mut files: Vec<&Path> = Vec::new();
        for entry in &settings.load.registry {
            match entry.is_dir() {
                true => watched.yaml_folder(entry),
                false => files.push(entry),
            }
        }
        watched.yaml_folder(&settings.load.packs_dir);
        files.extend(config);
        files.extend(pins.iter().map(PathBuf::as_path));
        files.extend(settings.users.as_ref().and_then(|jwt| jwt.jwks_file.as_deref()));
        if let Some(tls) = &settings.tls {
            files.extend([tls.cert.as_path(), tls.key.as_path()]);
            files.extend(tls.client_ca.as_deref());
        }
        for file in files {
            let parent = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if let (Ok(parent), Some(name)) = (parent.canonicalize(), file.file_name()) {
                watched.files.insert(parent.join(name));
                watched.folders.insert(parent);
            }
            if let Ok(target) = file.canonicalize() {
                if let Some(folder) = target.parent() {
                    watched.folders.insert(folder.to_path_buf());
                }
                watched.files.insert(target);
            }
        }
        watched
    }

    fn yaml_folder(&mut self, dir: &Path) {
        if let Ok(dir) = dir.canonicalize() {
            self.folders.insert(dir.clone());
            self.yaml_folders.insert(dir);
        }
    }

    /// Whether a change to `path` can change what a reload reads: a file read
    /// by name, a YAML file in a folder read whole, or an entry whose name
    /// starts with `..` (Kubernetes swaps a mounted ConfigMap or Secret through
    /// `..data`). Anything else in a watched folder (a log written next to
    /// the configuration, an editor's swap file) is not a reason to reload:
    /// a log there made every reload's own lines trigger the next.
    pub(crate) fn matters(&self, path: &Path) -> bool {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return true };
        name.starts_with("..")
            || self.files.contains(path)
            || (path.parent().is_some_and(|folder| self.yaml_folders.contains(folder))
                && crate::catalog::is_catalogue_file(path))
    }
}

/// Watches `watched.folders`; a change that [`Watched::matters`] sends on the
/// receiver. `None` (with a warning) when the system offers no watcher:
/// SIGHUP still reloads.
pub(crate) fn watch(watched: Watched) -> (Option<RecommendedWatcher>, mpsc::UnboundedReceiver<()>) {
    let (changes, receiver) = mpsc::unbounded_channel();
    let folders = watched.folders.clone();
    let handler = move |event: notify::Result<notify::Event>| match event {
        // An event without paths (the watcher lost track) may be anything.
        Ok(event)
            if changes_something(&event.kind)
                && (event.paths.is_empty() || event.paths.iter().any(|p| watched.matters(p))) =>
        {
            let _ = changes.send(());
        }
        Ok(_) => {}
        Err(err) => tracing::warn!("watching the catalogue and configuration files: {err}"),
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(watcher) => watcher,
        Err(err) => {
            tracing::warn!("files are not watched ({err}); SIGHUP reloads");
            return (None, receiver);
        }
    };
    for folder in &folders {
        match watcher.watch(folder, RecursiveMode::NonRecursive) {
            Ok(()) => tracing::debug!(folder = %folder.display(), "watching for changes"),
            Err(err) => tracing::warn!("cannot watch {} ({err}); SIGHUP reloads it", folder.display()),
        }
    }
    (Some(watcher), receiver)
}

/// Everything but reading: a reload reads the files, and must not trigger
/// another.
fn changes_something(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

impl Reloader {
    /// Reloads on every SIGHUP or watched change, debounced, until the
    /// task is dropped.
    pub(crate) async fn run(self, mut hangup: Signal, mut changes: mpsc::UnboundedReceiver<()>) {
        loop {
            tokio::select! {
                Some(()) = hangup.recv() => tracing::info!("SIGHUP: reloading"),
                Some(()) = changes.recv() => tracing::info!("a watched file changed: reloading"),
                else => return,
            }
            // Trailing edge: wait for the triggers to stop.
            loop {
                tokio::select! {
                    () = tokio::time::sleep(QUIET) => break,
                    Some(()) = hangup.recv() => {}
                    Some(()) = changes.recv() => {}
                }
            }
            self.reload().await;
        }
    }

    /// One reload: settings, files, TLS files, then the new snapshot,
    /// swapped in only if valid. Every problem is logged as at start.
    pub(crate) async fn reload(&self) {
        let rebuild = Arc::clone(&self.rebuild);
        let settings = match tokio::task::spawn_blocking(move || rebuild()).await {
            Ok(Ok(settings)) => settings,
            Ok(Err(err)) => {
                self.app.live.observer().metrics.reload("rejected");
                return rejected(&format!("{err:#}"));
            }
            Err(err) => {
                tracing::error!("reload failed: {err}");
                return;
            }
        };
        // The guard `serve` applies at start, to every reloaded configuration.
        if let Err(err) = settings.check_reload_exposure(&self.fixed, self.allow_remote) {
            self.app.live.observer().metrics.reload("rejected");
            return rejected(&err.to_string());
        }
        let before = self.app.snapshot().identity.principals().len();
        if let Some(tls) = &self.tls {
            match tls.reload() {
                Ok(()) => tracing::info!("TLS certificate, key and client CA re-read"),
                Err(why) => tracing::error!("TLS files not re-read, the ones in use stay: {why}"),
            }
        }
        let restart = self.fixed.changed(&settings.fixed);
        if !restart.is_empty() {
            tracing::warn!(
                "the configuration changes {}, which take effect only after a restart; the running values stay",
                restart.join(", ")
            );
        }
        let strict = settings.load.strict;
        match self.app.reload(&settings).await {
            Ok(reloaded) => swapped(&reloaded, &settings, before),
            Err(ReloadError::Settings(why)) => rejected(&why),
            Err(ReloadError::Catalogue(problems)) => {
                log_problems(&problems, strict);
                tracing::error!(
                    problems = problems.len(),
                    "reload rejected: the current catalogue and configuration keep serving"
                );
            }
        }
    }
}

/// What a reload that was swapped in says: its warnings, authentication
/// removed (`before`: the principals there were), MCP servers connected and
/// ended, the new catalogue.
fn swapped(reloaded: &Reloaded, settings: &Settings, before: usize) {
    let strict = settings.load.strict;
    log_problems(&reloaded.warnings, strict);
    if before > 0 && settings.principals.is_empty() {
        tracing::warn!(
            "the reload removes authentication: the configuration has no principals now (it had \
             {before}), so every caller that can reach the gateway may resolve and run every tool"
        );
    }
    for server in &reloaded.connected {
        tracing::info!(server = %server, "MCP server connected for the reload");
    }
    for server in &reloaded.ended {
        tracing::info!(server = %server, "MCP server removed by the reload: ended once its calls finish");
    }
    tracing::info!(
        catalog_version = reloaded.version,
        tools = reloaded.tools,
        strict,
        principals = settings.principals.len(),
        "catalogue and configuration reloaded"
    );
}

/// A reload whose settings could not be read or built.
fn rejected(why: &str) {
    tracing::error!("reload rejected: {why}; the current catalogue and configuration keep serving");
}
