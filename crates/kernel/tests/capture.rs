//! Output capture: the inline preview and sentinel markers split across reads.

use mpa_kernel::{Capture, find, partial_suffix};

#[test]
fn preview_is_head_and_tail() {
    let mut c = Capture::new(1000, 60);
    for i in 0..100u32 {
        c.push(format!("line {i:03}\n").as_bytes());
    }
    let (text, truncated, shown) = c.preview(100);
    assert!(truncated);
    assert!(text.starts_with("line 000\n"));
    assert!(text.ends_with("line 099\n"));
    assert_eq!(shown, 100);
    let (all, cut, _) = Capture::new(10, 10).preview(100);
    assert!(!cut && all.is_empty());
}

#[test]
fn markers_split_across_reads_are_found() {
    assert_eq!(partial_suffix(b"abc\nSEN", b"\nSENTINEL "), 4);
    assert_eq!(partial_suffix(b"abc", b"\nSENTINEL "), 0);
    assert_eq!(find(b"xx\nSENTINEL 12\n", b"\nSENTINEL "), Some(2));
}
