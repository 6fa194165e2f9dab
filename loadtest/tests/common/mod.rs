//! The ceiling server with a known delay on a free port, and the runs the
//! generators' own tests make against it.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use eventgw_loadtest::ceiling;
use eventgw_loadtest::generator::{Auth, RunConfig};
use eventgw_loadtest::workload::Workload;

/// The catalog's examples in batches of `batch` over 100 users.
pub fn workload(batch: usize, gzip: bool) -> Arc<Workload> {
    let catalog = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas");
    Arc::new(Workload::from_catalog(&catalog, batch, gzip, 100).expect("workload"))
}

/// `rate` requests per second to `url` for `seconds`, with a write key.
pub fn config(url: String, rate: f64, seconds: u64) -> RunConfig {
    RunConfig {
        url,
        rate,
        duration: Duration::from_secs(seconds),
        auth: Auth::WriteKey("k".into()),
        timeout: Duration::from_secs(10),
    }
}

/// A one-thread runtime for the generator.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt")
}

/// A running ceiling server: its batch URL; `stop` ends it.
pub struct Ceiling {
    /// `http://127.0.0.1:PORT/v1/batch`.
    pub url: String,
    handle: ServerHandle,
    thread: JoinHandle<std::io::Result<()>>,
}

impl Ceiling {
    /// Starts one worker that answers every request after `delay`.
    pub fn start(delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1/batch", listener.local_addr().expect("addr"));
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                let server = ceiling::serve(listener, 1, delay).expect("ceiling");
                handle_tx.send(server.handle()).expect("handle");
                server.await
            })
        });
        let handle = handle_rx.recv().expect("server started");
        Self { url, handle, thread }
    }

    /// Stops the server and waits for its thread.
    pub fn stop(self) {
        futures::executor::block_on(self.handle.stop(true));
        self.thread.join().expect("server thread").expect("server ran");
    }
}
