//! The TCP listeners: bind every `--bind_ip` address, accept connections up to `--maxConns`
//! (a semaphore: one permit per open connection), and spawn one task per connection. On shutdown
//! the listeners stop accepting and `run` waits for every connection task to end.

use crate::commands::ConnectionInfo;
use crate::state::ServerState;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Bind the configured addresses. Port 0 binds an ephemeral port (the first listener's port is
/// reused for the others so one port serves every address).
pub async fn bind(state: &ServerState) -> std::io::Result<Vec<TcpListener>> {
    if state.config.bind_ip_all {
        // One dual-stack socket serves IPv4 and IPv6 (Linux's default bindv6only=0); where IPv6 is
        // unavailable, fall back to the IPv4 wildcard.
        return match listen(SocketAddr::new(
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            state.config.port,
        )) {
            Ok(l) => Ok(vec![l]),
            Err(_) => Ok(vec![listen(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                state.config.port,
            ))?]),
        };
    }
    // Port 0 picks an ephemeral port; every further address reuses the first one's port.
    let mut port = state.config.port;
    let mut listeners = Vec::new();
    for ip in &state.config.bind_ip {
        let listener = listen(SocketAddr::new(*ip, port))?;
        port = listener.local_addr()?.port();
        listeners.push(listener);
    }
    Ok(listeners)
}

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket
        .bind(addr)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    socket.listen(1024)
}

/// Accept until shutdown, then wait (bounded) for connection tasks to finish their requests.
pub async fn serve(state: Arc<ServerState>, listeners: Vec<TcpListener>) {
    let permits = Arc::new(Semaphore::new(state.config.max_conns));
    let mut accepts = JoinSet::new();
    for listener in listeners {
        accepts.spawn(accept_loop(state.clone(), listener, permits.clone()));
    }
    let _ = state.shutdown_requested().wait_for(|stop| *stop).await;
    accepts.abort_all();
    while accepts.join_next().await.is_some() {}
    // Connection tasks finish the request they are in, then see the shutdown flag and return.
    let grace = Duration::from_millis(crate::limits::SHUTDOWN_GRACE_MS);
    let waited = tokio::time::timeout(grace, async {
        while state.connections.current.load(Relaxed) > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    if waited.is_err() {
        tracing::warn!(
            open = state.connections.current.load(Relaxed),
            "connections still open after the shutdown grace period"
        );
    }
}

async fn accept_loop(state: Arc<ServerState>, listener: TcpListener, permits: Arc<Semaphore>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off briefly rather than spin.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(remote = %peer, limit = state.config.max_conns, "connection refused because too many open connections");
            drop(stream);
            continue;
        };
        let unauthenticated_max =
            state.params.get_i64("maxUnauthenticatedConnections").max(1) as usize;
        let Some(session) = state.auth.admit(unauthenticated_max) else {
            tracing::warn!(remote = %peer, limit = unauthenticated_max, "connection refused because too many unauthenticated connections are open");
            drop(stream);
            continue;
        };
        let id = state.next_connection_id.fetch_add(1, Relaxed);
        let current = state.connections.current.fetch_add(1, Relaxed) + 1;
        state.connections.total_created.fetch_add(1, Relaxed);
        tracing::info!(remote = %peer, connection_id = id, connection_count = current, "Connection accepted");
        let local = stream.local_addr().unwrap_or(peer);
        let _ = stream.set_nodelay(true);
        let info = ConnectionInfo {
            id,
            peer,
            local,
            client_metadata: None,
            query_stats_client: None,
            compressors: vec![],
            hello_seen: false,
            auth: session,
        };
        let state = state.clone();
        tokio::spawn(async move {
            // TLS or plain is decided (and the handshake done) here, off the accept loop.
            let driver = match crate::tls::accept(&state.tls, stream).await {
                Ok(crate::tls::Accepted::Plain(s)) => {
                    crate::connection::serve(state.clone(), s, info).await
                }
                Ok(crate::tls::Accepted::Tls(s)) => {
                    crate::connection::serve(state.clone(), s, info).await
                }
                Err(why) => {
                    tracing::info!(remote = %peer, connection_id = id, reason = %why, "closing connection before its first message");
                    "unknown".to_string()
                }
            };
            let left = state.connections.current.fetch_sub(1, Relaxed) - 1;
            tracing::info!(remote = %peer, connection_id = id, connection_count = left, driver = %driver, "Connection ended");
            drop(permit);
        });
    }
}
