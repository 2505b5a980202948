//! Close matches for an unknown operation id.

use mpa_gateway::{edit_distance, suggest};

const IDS: [&str; 6] = [
    "subscription.list",
    "subscription.follow.list",
    "subscription.add",
    "download.add",
    "download.tasks.active",
    "site.list",
];

#[test]
fn ranks_words_then_spelling() {
    let s = suggest(IDS.into_iter(), "subscribe.list", 3);
    assert_eq!(s[0], "subscription.list");
    assert_eq!(
        suggest(IDS.into_iter(), "downloads.add", 1),
        vec!["download.add"]
    );
    assert_eq!(
        suggest(IDS.into_iter(), "list.subscription", 1),
        vec!["subscription.list"]
    );
    assert_eq!(suggest(IDS.into_iter(), "sitee.list", 1), vec!["site.list"]);
    assert!(suggest(IDS.into_iter(), "weather.forecast", 3).is_empty());
    assert!(suggest(IDS.into_iter(), "", 3).is_empty());
}

#[test]
fn edit_distance_counts_chars() {
    assert_eq!(edit_distance("订阅", "订阅s"), 1);
    assert_eq!(edit_distance("kitten", "sitting"), 3);
}
