//! The LSP message path: arbitrary bytes through the framing guard (`decode_stream`), and the
//! same bytes as JSON bodies (split on a separator, framed with correct Content-Length headers
//! after an `initialize`/`initialized` handshake) through the whole server in-process. The server
//! must not panic or hang, and everything it writes must be well-formed JSON-RPC frames.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, BufReader};

fuzz_target!(|data: &[u8]| {
    // 1. The raw stream: every decoded message is JSON.
    for body in inplace_server::decode_stream(data).into_iter().flatten() {
        assert!(serde_json::from_slice::<serde_json::Value>(&body).is_ok());
    }

    // 2. A session: the input's pieces (split on 0xFF) as messages after a handshake.
    let stream = inplace_server::session_stream(data);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (output, complete) = rt.block_on(async move {
        let (client, server_out) = tokio::io::duplex(1 << 16);
        // Read concurrently (the server blocks when the pipe is full), into a shared buffer.
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let reader = tokio::spawn(async move {
            let mut client = BufReader::new(client);
            let mut buf = [0u8; 8192];
            while let Ok(n) = client.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let serve = inplace_server::serve_guarded(std::io::Cursor::new(stream), server_out);
        let served = tokio::time::timeout(std::time::Duration::from_secs(10), serve).await;
        assert!(
            served.is_ok(),
            "the server did not stop within 10 s of the end of its input"
        );
        // Tasks still publishing may hold the pipe open: in the binary the process ends here.
        let complete = tokio::time::timeout(std::time::Duration::from_secs(1), reader)
            .await
            .is_ok();
        let out = std::mem::take(&mut *seen.lock().unwrap());
        (out, complete)
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    // Everything written is a sequence of frames holding JSON-RPC 2.0 messages (the last one may
    // be cut short when the read stopped early).
    let frames = inplace_server::decode_stream(&output);
    let whole = if complete {
        &frames[..]
    } else {
        &frames[..frames.len().saturating_sub(1)]
    };
    assert!(
        whole.iter().all(Option::is_some),
        "the server wrote something that is not a well-formed message: {:?}",
        String::from_utf8_lossy(&output)
    );
});
