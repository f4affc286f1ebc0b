//! Inputs the `lsp_messages` fuzz target (crates/fuzz) found, replayed the way it runs them:
//! the pieces of the file (split on 0xFF) framed as messages after an initialize handshake, fed
//! to the whole server in-process. The server must stop within a bound after its input ends and
//! write only well-formed messages.

use std::time::Duration;
use tokio::io::AsyncReadExt;

async fn replay(data: &[u8]) -> Vec<u8> {
    let stream = inplace_server::session_stream(data);
    let (mut client, server_out) = tokio::io::duplex(1 << 16);
    let reader = tokio::spawn(async move {
        let mut out = Vec::new();
        let _ = client.read_to_end(&mut out).await;
        out
    });
    let served = tokio::time::timeout(
        Duration::from_secs(10),
        inplace_server::serve_guarded(std::io::Cursor::new(stream), server_out),
    )
    .await;
    assert!(
        served.is_ok(),
        "the server did not stop after the end of its input"
    );
    tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the output was not closed")
        .unwrap()
}

#[test]
fn fuzz_regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let out = rt.block_on(replay(&std::fs::read(&path).unwrap()));
        rt.shutdown_timeout(Duration::from_secs(1));
        let frames = inplace_server::decode_stream(&out);
        assert!(
            frames.iter().all(Option::is_some),
            "{}: not well-formed output",
            path.display()
        );
        n += 1;
    }
    assert!(n > 0);
}
