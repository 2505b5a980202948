//! Route templates: segments, built URLs that match only their own route.

use mpa_gateway::{TemplateSegment, build_url, template_segments, url_matches};
use reqwest::Url;

#[test]
fn segments_of_templates() {
    use TemplateSegment::*;
    assert_eq!(
        template_segments("/api/v1/subscribe/").collect::<Vec<_>>(),
        vec![
            Literal("api"),
            Literal("v1"),
            Literal("subscribe"),
            Literal("")
        ]
    );
    assert_eq!(
        template_segments("/api/v1/{source}/person/credits/{person_id}").collect::<Vec<_>>(),
        vec![
            Literal("api"),
            Literal("v1"),
            Param("source"),
            Literal("person"),
            Literal("credits"),
            Param("person_id")
        ]
    );
}

#[test]
fn built_urls_match_only_their_own_route() {
    let base = Url::parse("http://127.0.0.1:3001/mp").unwrap();
    let values = vec!["tmdb:1 二".to_string()];
    let url = build_url(&base, "/api/v1/subscribe/media/{media_id}", &values, None).unwrap();
    assert_eq!(url.path(), "/mp/api/v1/subscribe/media/tmdb:1%20%E4%BA%8C");
    assert!(url_matches(
        &base,
        &url,
        "/api/v1/subscribe/media/{media_id}",
        &values
    ));
    assert!(!url_matches(&base, &url, "/api/v1/subscribe/{id}", &values));
    let dots = vec!["..".to_string()];
    // The URL library drops a `..` segment; the check notices the route changed.
    let url = build_url(&base, "/api/v1/subscribe/media/{media_id}", &dots, None).unwrap();
    assert!(!url_matches(
        &base,
        &url,
        "/api/v1/subscribe/media/{media_id}",
        &dots
    ));
}
