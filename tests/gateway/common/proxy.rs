//! A TCP proxy on 127.0.0.1 that delays what the upstream answers (each
//! chunk held for the delay set at the moment it arrives): a slow Redis, on
//! demand, for the tests of what a slow or stopped store does.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

pub struct DelayingProxy {
    pub addr: SocketAddr,
    delay_ms: Arc<AtomicU64>,
}

impl DelayingProxy {
    /// A proxy to `upstream`, answering without delay until told otherwise.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let delay = Arc::clone(&delay_ms);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else { continue };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                });
                // Latency, not a narrow pipe: each chunk is due its delay
                // after it arrived, and they leave in order.
                let delay = Arc::clone(&delay);
                let (due, mut queued) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
                tokio::spawn(async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    while let Ok(read) = server_read.read(&mut buffer).await {
                        if read == 0 {
                            break;
                        }
                        let hold = Duration::from_millis(delay.load(Ordering::Relaxed));
                        if due.send((tokio::time::Instant::now() + hold, buffer[..read].to_vec())).is_err() {
                            break;
                        }
                    }
                });
                tokio::spawn(async move {
                    while let Some((at, bytes)) = queued.recv().await {
                        tokio::time::sleep_until(at).await;
                        if client_write.write_all(&bytes).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self { addr, delay_ms }
    }

    /// Every answer from now on arrives this much later.
    pub fn delay(&self, delay: Duration) {
        self.delay_ms.store(delay.as_millis() as u64, Ordering::Relaxed);
    }

    pub fn url(&self) -> String {
        format!("redis://{}/0", self.addr)
    }
}
