//! Framing between the editor and tower-lsp. tower-lsp's reader ends the session on the first
//! message it cannot decode; this layer frames stdin itself, passes well-formed JSON-RPC
//! through, answers anything else with a `-32700 Parse error` (id null) and resynchronises on
//! the next `Content-Length` header. One task writes whole frames to stdout, so replies never
//! interleave.

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// How long the server may go on after its input ended (see [`crate::serve_until`]).
const END_OF_INPUT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Largest message accepted (a bigger Content-Length is answered as a parse error).
const MAX_MESSAGE: usize = 256 << 20;

/// One frame from a byte stream: `Ok(Some(body))`, `Ok(None)` at the end, `Err(reason)` for a
/// frame whose header was unusable (the stream has been advanced past it).
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
) -> Result<Option<Vec<u8>>, String> {
    let mut length: Option<usize> = None;
    let mut saw_header = false;
    loop {
        let mut line = Vec::new();
        if r.read_until(b'\n', &mut line)
            .await
            .map_err(|e| e.to_string())?
            == 0
        {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if !saw_header {
                continue;
            }
            let Some(n) = length else {
                return Err("no Content-Length header".into());
            };
            if n > MAX_MESSAGE {
                return Err(format!("message of {n} bytes is too large"));
            }
            let mut body = vec![0; n];
            r.read_exact(&mut body).await.map_err(|e| e.to_string())?;
            return Ok(Some(body));
        }
        saw_header = true;
        if let Some((name, value)) = text.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok();
                if length.is_none() {
                    return Err(format!("bad Content-Length `{}`", value.trim()));
                }
            }
        }
    }
}

/// The message to forward, or `None` when the body is not a JSON-RPC 2.0 message tower-lsp can
/// decode (one parse). `"params": null` (sent by some clients on `shutdown`/`exit`) is dropped,
/// as tower-lsp rejects it; any other message is forwarded as it came.
fn vet(body: Vec<u8>) -> Option<Vec<u8>> {
    let Ok(Value::Object(mut m)) = serde_json::from_slice::<Value>(&body) else {
        return None;
    };
    let id_ok = m
        .get("id")
        .is_none_or(|id| id.is_number() || id.is_string() || id.is_null());
    let shape = m.contains_key("method") && m.get("method").is_some_and(Value::is_string)
        || m.contains_key("result")
        || m.contains_key("error");
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !id_ok || !shape {
        return None;
    }
    if m.get("params").is_some_and(Value::is_null) {
        m.remove("params");
        return serde_json::to_vec(&m).ok();
    }
    Some(body)
}

/// The messages of a byte stream as the guard sees them: each well-formed one as it is forwarded
/// to the server (`Some`), `None` for each that is answered with a parse error. For fuzzing and
/// tests; the server itself reads the stream as it arrives.
pub fn decode_stream(bytes: &[u8]) -> Vec<Option<Vec<u8>>> {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else {
        return Vec::new();
    };
    rt.block_on(async {
        let mut r = BufReader::new(bytes);
        let mut out = Vec::new();
        loop {
            match read_frame(&mut r).await {
                Ok(None) => break,
                Ok(Some(body)) => out.push(vet(body)),
                Err(_) => out.push(None),
            }
        }
        out
    })
}

/// A byte stream for the server made of `pieces` (split on 0xFF, which JSON never holds), each
/// framed as a message after an `initialize`/`initialized` handshake: how the `lsp_messages`
/// fuzz target and its regression test feed the server.
pub fn session_stream(pieces: &[u8]) -> Vec<u8> {
    const HANDSHAKE: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"general":{"positionEncodings":["utf-8","utf-16"]}}}}"#,
        r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#,
    ];
    let mut out = Vec::new();
    let bodies = HANDSHAKE
        .iter()
        .map(|m| m.as_bytes())
        .chain(pieces.split(|&b| b == 0xFF).take(32));
    for body in bodies {
        out.extend_from_slice(&frame(body));
    }
    out
}

async fn write_frame<O: AsyncWrite + Unpin>(output: &mut O, body: &[u8]) -> bool {
    output.write_all(&frame(body)).await.is_ok() && output.flush().await.is_ok()
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// Serve on `input`/`output` with the guard in between. Returns whether `shutdown` came before `exit`.
pub async fn serve_guarded<I, O>(input: I, mut output: O) -> bool
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (mut to_server, server_in) = tokio::io::duplex(1 << 20);
    let (server_out, from_server) = tokio::io::duplex(1 << 20);
    let (errors_tx, mut errors_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let input_ended = std::sync::Arc::new(tokio::sync::Notify::new());
    let ended = input_ended.clone();

    let reader = tokio::spawn(async move {
        let mut input = BufReader::new(input);
        loop {
            match read_frame(&mut input).await.map(|f| f.map(vet)) {
                Ok(None) => break,
                Ok(Some(Some(body))) => {
                    if to_server.write_all(&frame(&body)).await.is_err() {
                        break;
                    }
                }
                Ok(Some(None)) | Err(_) => {
                    let reply = br#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}"#;
                    if errors_tx.send(reply.to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
        // End of input: the server sees it and stops.
        let _ = to_server.shutdown().await;
        ended.notify_one();
    });

    let writer = tokio::spawn(async move {
        let mut from_server = BufReader::new(from_server);
        let (mut server_open, mut errors_open) = (true, true);
        while server_open || errors_open {
            let body = tokio::select! {
                f = read_frame(&mut from_server), if server_open => match f {
                    Ok(Some(body)) => Some(body),
                    _ => {
                        server_open = false;
                        None
                    }
                },
                r = errors_rx.recv(), if errors_open => {
                    errors_open = r.is_some();
                    r
                }
            };
            if let Some(body) = body {
                if !write_frame(&mut output, &body).await {
                    break;
                }
            }
            if !server_open {
                // The server is done: send what is queued and stop.
                while let Ok(body) = errors_rx.try_recv() {
                    write_frame(&mut output, &body).await;
                }
                break;
            }
        }
    });

    // Once the editor is gone, handlers still running get a moment to finish, no more.
    let grace = async move {
        input_ended.notified().await;
        tokio::time::sleep(END_OF_INPUT_GRACE).await;
    };
    let clean = crate::serve_until(server_in, server_out, grace).await;
    reader.abort();
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), writer).await;
    clean
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_and_resynchronises() {
        let input: &[u8] = b"Content-Length: 2\r\n\r\n{}garbage\r\nContent-Length: 3\r\n\r\n[1]Content-Length: x\r\n\r\n";
        let mut r = BufReader::new(input);
        assert_eq!(read_frame(&mut r).await, Ok(Some(b"{}".to_vec())));
        // "garbage" is read as a header line without a value; the next header is found.
        assert_eq!(read_frame(&mut r).await, Ok(Some(b"[1]".to_vec())));
        assert!(read_frame(&mut r).await.is_err());
        let vetted = |b: &[u8]| vet(b.to_vec());
        assert!(vetted(b"{not json}").is_none());
        assert!(vetted(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#).is_none());
        assert!(vetted(br#"{"jsonrpc":"2.0","id":1,"method":"x"}"#).is_some());
        let n = vetted(br#"{"jsonrpc":"2.0","id":2,"method":"shutdown","params":null}"#).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&n).unwrap(),
            serde_json::json!({"jsonrpc":"2.0","id":2,"method":"shutdown"})
        );
    }
}
