//! A server that never answers, for testing that a driver's calls keep their bound.

use std::net::TcpListener;

/// Opens a loopback port that accepts every connection and never writes a byte (a frozen or
/// half-started broker), and returns it. The port stays open until the process ends.
///
/// # Panics
/// When no loopback port can be opened.
pub fn silent_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    let port = listener.local_addr().expect("a bound address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}
