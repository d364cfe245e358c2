//! A TCP proxy between the workers and the server, the one place network faults happen:
//! it passes bytes through, or delays them, and on command closes (FIN) or resets (RST)
//! every open connection. The server's restarts are invisible to it: each new client
//! connection dials the server afresh, and one the server refuses is closed at once.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch};

use crate::error::{ChaosError, Result};

/// How a cut ends the connections open at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    Close,
    Reset,
}

/// The proxy's controls; dropping it stops the proxy and closes every connection.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    delay: watch::Sender<Duration>,
    cut: broadcast::Sender<Cut>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| ChaosError::Server(format!("binding the proxy: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| ChaosError::Server(format!("the proxy's address: {e}")))?;
        let (delay, delay_rx) = watch::channel(Duration::ZERO);
        let (cut, _) = broadcast::channel(16);
        let cuts = cut.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let _ = client.set_nodelay(true);
                tokio::spawn(forward(
                    client,
                    upstream,
                    delay_rx.clone(),
                    cuts.subscribe(),
                ));
            }
        });
        Ok(Proxy {
            addr,
            delay,
            cut,
            accept,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Delays every chunk, both ways, by `delay` (zero passes bytes straight through).
    pub fn set_delay(&self, delay: Duration) {
        self.delay.send_replace(delay);
    }

    /// Closes every open connection, both sides, with a FIN.
    pub fn drop_all(&self) {
        let _ = self.cut.send(Cut::Close);
    }

    /// Resets every open connection, both sides: SO_LINGER 0 then close sends an RST.
    pub fn reset_all(&self) {
        let _ = self.cut.send(Cut::Reset);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = self.cut.send(Cut::Close);
    }
}

async fn forward(
    mut client: TcpStream,
    upstream: SocketAddr,
    delay: watch::Receiver<Duration>,
    mut cut: broadcast::Receiver<Cut>,
) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return; // the server is down: the client sees its connection closed
    };
    let _ = server.set_nodelay(true);
    let how = {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        tokio::select! {
            _ = pump(client_read, server_write, delay.clone()) => None,
            _ = pump(server_read, client_write, delay) => None,
            how = cut.recv() => how.ok(),
        }
    };
    if how == Some(Cut::Reset) {
        let _ = client.set_zero_linger();
        let _ = server.set_zero_linger();
    }
    // Dropping both streams closes them (with an RST after SO_LINGER 0).
}

/// Copies one direction until either side closes or fails, each chunk after the delay in
/// force when it was read.
async fn pump<R, W>(mut from: R, mut to: W, delay: watch::Receiver<Duration>)
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let wait = *delay.borrow();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server, a proxy in front of it, and one connection through the proxy.
    async fn echo_through_proxy() -> (Proxy, TcpStream) {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let proxy = Proxy::start(upstream).await.unwrap();
        let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
        conn.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        (proxy, conn)
    }

    #[tokio::test]
    async fn reset_all_resets_open_connections() {
        let (proxy, mut conn) = echo_through_proxy().await;
        proxy.reset_all();
        let mut buf = [0u8; 4];
        let err = conn.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    }

    #[tokio::test]
    async fn drop_all_closes_open_connections_cleanly() {
        let (proxy, mut conn) = echo_through_proxy().await;
        proxy.drop_all();
        let mut buf = [0u8; 4];
        assert_eq!(conn.read(&mut buf).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn delay_holds_each_chunk_back() {
        let (proxy, mut conn) = echo_through_proxy().await;
        proxy.set_delay(Duration::from_millis(150));
        let start = std::time::Instant::now();
        conn.write_all(b"pong").await.unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.unwrap();
        // Both directions are delayed.
        assert!(start.elapsed() >= Duration::from_millis(300));
        proxy.set_delay(Duration::ZERO);
        let start = std::time::Instant::now();
        conn.write_all(b"pong").await.unwrap();
        conn.read_exact(&mut buf).await.unwrap();
        assert!(start.elapsed() < Duration::from_millis(150));
    }
}
