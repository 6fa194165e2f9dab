//! The ceiling server with a known delay on a free port, for the
//! generators' own tests.

use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use eventgw_loadtest::ceiling;

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
