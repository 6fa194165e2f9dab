//! A small TCP proxy between the gateway and one broker that can pass,
//! delay, black-hole (hold every byte) and reset (RST every open
//! connection). The broker advertises the proxy's address (its EXTERNAL
//! listener, see scripts/kafka-cluster), so every connection the producer
//! makes, bootstrap and leader alike, goes through it.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass,
    /// Every chunk waits this long before it is forwarded.
    Delay(Duration),
    /// Nothing gets through either way until the mode changes (a cut path
    /// that later heals: what was in flight then arrives, like TCP
    /// retransmission would deliver it).
    BlackHole,
    /// The gateway's requests pass, the broker's answers are held until the
    /// mode changes: records land while their acknowledgements are in limbo.
    HoldReplies,
}

#[derive(Clone)]
pub struct Proxy {
    mode: Rc<Cell<Mode>>,
    resets: Rc<watch::Sender<u64>>,
}

impl Proxy {
    /// Listens on 127.0.0.1:`listen` and forwards to 127.0.0.1:`upstream`.
    pub async fn start(listen: u16, upstream: u16) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", listen)).await.expect("proxy binds");
        let proxy = Self { mode: Rc::new(Cell::new(Mode::Pass)), resets: Rc::new(watch::channel(0).0) };
        let me = proxy.clone();
        actix_web::rt::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let me = me.clone();
                actix_web::rt::spawn(async move {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else { return };
                    me.connection(client, server).await;
                });
            }
        });
        proxy
    }

    pub fn set(&self, mode: Mode) {
        self.mode.set(mode);
    }

    /// Closes every open connection with a TCP RST.
    pub fn reset_all(&self) {
        self.resets.send_modify(|n| *n += 1);
    }

    async fn connection(&self, client: TcpStream, server: TcpStream) {
        // Linger 0: closing sends RST, as a crashed middlebox would.
        let _ = client.set_zero_linger();
        let _ = server.set_zero_linger();
        let mut resets = self.resets.subscribe();
        let (cr, cw) = client.into_split();
        let (sr, sw) = server.into_split();
        tokio::select! {
            _ = pump(cr, sw, Rc::clone(&self.mode), false) => {}
            _ = pump(sr, cw, Rc::clone(&self.mode), true) => {}
            _ = resets.changed() => {}
        }
    }
}

/// Copies `from` to `to` as the mode says; `replies`: the broker-to-client direction.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mode: Rc<Cell<Mode>>, replies: bool) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        match mode.get() {
            Mode::Pass => {}
            Mode::Delay(d) => actix_web::rt::time::sleep(d).await,
            Mode::BlackHole => {
                while mode.get() == Mode::BlackHole {
                    actix_web::rt::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Mode::HoldReplies if replies => {
                while mode.get() == Mode::HoldReplies {
                    actix_web::rt::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Mode::HoldReplies => {}
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
