//! Connection threads: one thread a core, each running a runtime of its
//! own, on which a door's connections are served whole. A connection handed
//! to one ([`spawn`]) has its socket and timer moved there
//! ([`super::Accepted::rehome`]), so its requests, the tasks they start and
//! the upstream connections they drive are woken and run on that one
//! thread: no worker steals them, and no wake-up crosses to another core
//! between reading a request and writing its answer.
//!
//! On the gateway's shared runtime a proxied exchange passed between its
//! two workers: on a 2-core machine, at 1 request in flight, the model door
//! spent about 225 µs of CPU and 4.3 context switches a request; on a
//! connection thread, 86 µs and 2.0, about what a plain proxy that reads
//! nothing spends (docs/benchmarks.md, "The model door"). The gRPC and MCP
//! doors stay on the shared runtime.
//!
//! A thread takes the next connection when it holds the fewest open ones.
//! The threads last as long as the process; a connection on one ends as it
//! would on the shared runtime (its door's drain, its deadlines).

use std::{
    cell::Cell,
    future::Future,
    sync::{
        atomic::{AtomicUsize, Ordering},
        OnceLock,
    },
};

use tokio::runtime::Handle;

/// One connection thread: where its runtime takes tasks, and how many
/// connections it serves.
struct Thread {
    runtime: Handle,
    open: AtomicUsize,
}

static THREADS: OnceLock<Vec<Thread>> = OnceLock::new();

thread_local! {
    /// The connection thread this is, on one.
    static HOME: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Which connection thread the caller runs on; `None` off them (the shared
/// runtime). What a connection thread keeps for its own use (the model
/// door's idle upstream connections) is kept by this number.
pub(crate) fn home() -> Option<usize> {
    HOME.with(Cell::get)
}

/// How many connection threads there are: one a core.
fn count() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The descriptors the connection threads will hold once started (each
/// runtime's event queue and its waker), none once they hold them: what
/// the connection budget leaves them ([`super::connections`]).
pub(crate) fn descriptors_to_come() -> usize {
    match THREADS.get() {
        Some(_) => 0,
        None => 2 * count(),
    }
}

/// The connection threads, started on first use: as many as the machine
/// has cores (one that cannot start is left out, with a warning).
fn threads() -> &'static [Thread] {
    THREADS.get_or_init(|| {
        (0..count())
            .filter_map(|at| match start(at) {
                Ok(thread) => Some(thread),
                Err(err) => {
                    tracing::warn!("cannot start connection thread {at}: {err}; the others serve its share");
                    None
                }
            })
            .collect()
    })
}

fn start(at: usize) -> std::io::Result<Thread> {
    // Sockets and timers only: what is served here starts no process and
    // waits for no signal (the shared runtime's drivers do both).
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new().name(format!("toolgate-conn-{at}")).spawn(move || {
        HOME.with(|home| home.set(Some(at)));
        runtime.block_on(std::future::pending::<()>());
    })?;
    Ok(Thread { runtime: handle, open: AtomicUsize::new(0) })
}

/// Runs `connection` on the connection thread that serves the fewest open
/// connections (on the caller's runtime if none could start). Its first
/// poll is on that thread: what it makes there (a socket registered, a
/// timer) belongs to that thread's runtime.
pub(crate) fn spawn(connection: impl Future<Output = ()> + Send + 'static) {
    let Some(thread) = threads().iter().min_by_key(|thread| thread.open.load(Ordering::Relaxed)) else {
        tokio::spawn(connection);
        return;
    };
    let open = Open::count(&thread.open);
    thread.runtime.spawn(async move {
        let _open = open;
        connection.await;
    });
}

/// A connection counted open on its thread until dropped.
struct Open(&'static AtomicUsize);

impl Open {
    fn count(open: &'static AtomicUsize) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        Self(open)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
