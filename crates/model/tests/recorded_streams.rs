//! Recorded vendor streams assemble to the expected completion however the bytes are cut, both
//! through the pure decoder and through the real client over a socket.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use common::{client, expected_fixture, hello, run};
use mpa_model::decoder::StreamDecoder;
use mpa_model::{Completion, StreamEvent};
use mpa_test_support::{FIXTURES, MockModelServer, MockReply};
use proptest::prelude::*;

fn decode(pieces: &[&[u8]]) -> (Completion, Vec<StreamEvent>) {
    let mut decoder = StreamDecoder::new();
    let mut events = Vec::new();
    for piece in pieces {
        decoder.feed(piece, &mut |e| events.push(e)).unwrap();
    }
    let completion = decoder.finish(&mut |e| events.push(e)).unwrap();
    (completion, events)
}

fn joined(events: &[StreamEvent], reasoning: bool) -> String {
    events
        .iter()
        .filter_map(|e| match (e, reasoning) {
            (StreamEvent::Content(t), false) | (StreamEvent::Reasoning(t), true) => {
                Some(t.as_str())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn every_fixture_assembles_to_its_expected_completion() {
    for f in FIXTURES {
        let (completion, events) = decode(&[f.bytes]);
        let expected = expected_fixture(f.name);
        assert_eq!(completion, expected, "fixture {}", f.name);
        assert_eq!(joined(&events, false), expected.content, "{}", f.name);
        assert_eq!(joined(&events, true), expected.reasoning, "{}", f.name);
    }
}

#[test]
fn byte_at_a_time_gives_the_same_completion() {
    for f in FIXTURES {
        let singles: Vec<&[u8]> = f.bytes.chunks(1).collect();
        assert_eq!(decode(&singles), decode(&[f.bytes]), "fixture {}", f.name);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_chunk_boundaries_give_identical_completions(
        which in 0..FIXTURES.len(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..64),
    ) {
        let bytes = FIXTURES[which].bytes;
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        points.dedup();
        let mut pieces: Vec<&[u8]> = Vec::new();
        let mut start = 0;
        for p in points {
            pieces.push(&bytes[start..p]);
            start = p;
        }
        pieces.push(&bytes[start..]);
        let whole = decode(&[bytes]);
        prop_assert_eq!(decode(&pieces), whole);
    }
}

#[tokio::test]
async fn fixtures_replayed_over_a_socket_assemble_the_same() {
    let server = MockModelServer::start().await;
    let client = client(&server);
    for f in FIXTURES {
        server.push(MockReply::fixture(f.name));
        let (result, events) = run(&client, &hello()).await;
        let completion = result.unwrap_or_else(|e| panic!("fixture {}: {e}", f.name));
        assert_eq!(completion, expected_fixture(f.name), "fixture {}", f.name);
        assert_eq!(joined(&events, false), completion.content);
    }
    // Odd write boundaries (mid-line, mid-UTF-8, mid-CRLF) over the socket too.
    for f in FIXTURES {
        let segments: Vec<Vec<u8>> = f.bytes.chunks(7).map(<[u8]>::to_vec).collect();
        server.push(MockReply::raw_bytes(segments));
        let (result, _) = run(&client, &hello()).await;
        assert_eq!(
            result.unwrap(),
            expected_fixture(f.name),
            "fixture {}",
            f.name
        );
    }
    assert_eq!(server.request_count(), 2 * FIXTURES.len());
}
