//! The stream decoder: the end of a stream, error chunks, undecodable chunks.

use mpa_model::StreamEvent;
use mpa_model::decoder::*;
use mpa_model::error::ModelError;

#[test]
fn done_ends_and_error_chunk_classified() {
    let mut d = StreamDecoder::new();
    let mut seen = Vec::new();
    d.feed(
        b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\ndata: garbage\n\n",
        &mut |e| seen.push(e),
    )
    .unwrap();
    assert!(d.is_done());
    assert_eq!(d.finish(&mut |_| {}).unwrap().content, "hi");
    assert_eq!(seen, vec![StreamEvent::Content("hi".into())]);

    let mut d = StreamDecoder::with_api_key(Some("sekrit-key"));
    let err = d
        .feed(
            b"data: {\"error\":{\"message\":\"overloaded, key sekrit-key\",\"type\":\"server_error\"}}\n\n",
            &mut |_| {},
        )
        .unwrap_err();
    assert!(matches!(err, ModelError::Server { .. }), "{err:?}");
    assert!(!err.to_string().contains("sekrit-key"));
}

#[test]
fn eof_without_done_needs_finish_reason() {
    let mut d = StreamDecoder::new();
    d.feed(
        b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
        &mut |_| {},
    )
    .unwrap();
    assert!(matches!(
        d.finish(&mut |_| {}),
        Err(ModelError::Network { .. })
    ));

    let mut d = StreamDecoder::new();
    d.feed(
        b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choi",
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(
        d.finish(&mut |_| {}).unwrap().finish_reason,
        Some(mpa_model::FinishReason::Stop)
    );
}

#[test]
fn undecodable_chunk_mid_stream_is_bad_response() {
    let mut d = StreamDecoder::new();
    let err = d.feed(b"data: {nope\n\n", &mut |_| {}).unwrap_err();
    assert!(matches!(err, ModelError::BadResponse { .. }));
}
