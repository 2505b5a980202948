//! The output log: numbered chunks, paging by whole chunks or bytes, a bounded window.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_exec::{CHUNK_BYTES, Cursor, OutputLog, PageError, Stream};

fn whole(seq: u64) -> Cursor {
    Cursor {
        seq,
        offset: 0,
        partial: false,
    }
}

fn partial(seq: u64, offset: usize) -> Cursor {
    Cursor {
        seq,
        offset,
        partial: true,
    }
}

fn read_all(log: &OutputLog, mut cursor: Cursor, max: usize) -> String {
    let mut out = String::new();
    loop {
        let page = log.page(cursor, max).unwrap();
        out.push_str(&page.text);
        cursor = Cursor {
            seq: page.until_seq,
            offset: page.until_offset,
            partial: cursor.partial,
        };
        if !page.more {
            return out;
        }
    }
}

#[test]
fn chunks_are_numbered_from_one_and_bounded() {
    let mut log = OutputLog::new(1 << 20);
    log.append(Stream::Pty, &"x".repeat(10_000));
    assert_eq!(log.last_seq(), 3);
    assert_eq!(log.retained_from_seq(), 1);
    // Whole-chunk pages hold whole chunks only: each page below is exactly one chunk.
    let first = log.page(whole(0), CHUNK_BYTES).unwrap();
    assert_eq!((first.text.len(), first.until_seq), (CHUNK_BYTES, 1));
    let last = log.page(whole(2), 1 << 20).unwrap();
    assert_eq!(
        (last.text.len(), last.until_seq),
        (10_000 - 2 * CHUNK_BYTES, 3)
    );
}

#[test]
fn partial_paging_reproduces_text_byte_for_byte() {
    let mut log = OutputLog::new(1 << 20);
    let text: String = (0..3000).map(|i| format!("行 {i} é\n")).collect();
    for piece in text.as_bytes().chunks(777) {
        log.append(Stream::Pty, std::str::from_utf8(piece).unwrap_or("?"));
    }
    let expected: String = text
        .as_bytes()
        .chunks(777)
        .map(|p| std::str::from_utf8(p).unwrap_or("?").to_string())
        .collect();
    for max in [4, 5, 100, 4096, 65536] {
        assert_eq!(read_all(&log, partial(0, 0), max), expected, "max {max}");
    }
}

#[test]
fn whole_chunk_mode_rejects_a_page_smaller_than_the_next_chunk() {
    let mut log = OutputLog::new(1 << 20);
    log.append(Stream::Pty, "hello world");
    assert_eq!(
        log.page(whole(0), 5),
        Err(PageError::LimitTooSmall { minimum: 11 })
    );
    let page = log.page(whole(0), 11).unwrap();
    assert_eq!(page.text, "hello world");
    assert_eq!(
        (page.until_seq, page.until_offset, page.more),
        (1, 0, false)
    );
}

#[test]
fn partial_mode_needs_room_for_one_character() {
    let mut log = OutputLog::new(1 << 20);
    log.append(Stream::Pty, "世界");
    assert_eq!(
        log.page(partial(0, 0), 2),
        Err(PageError::LimitTooSmall { minimum: 3 })
    );
    let page = log.page(partial(0, 0), 4).unwrap();
    assert_eq!((page.text.as_str(), page.until_offset), ("世", 3));
}

#[test]
fn invalid_cursors_are_rejected() {
    let mut log = OutputLog::new(1 << 20);
    log.append(Stream::Pty, "世界");
    assert!(matches!(
        log.page(whole(2), 10),
        Err(PageError::InvalidCursor(_))
    ));
    assert!(matches!(
        log.page(partial(0, 1), 10),
        Err(PageError::InvalidCursor(_))
    ));
    assert!(matches!(
        log.page(partial(0, 7), 10),
        Err(PageError::InvalidCursor(_))
    ));
    assert!(matches!(
        log.page(partial(1, 1), 10),
        Err(PageError::InvalidCursor(_))
    ));
    // An offset at the very end of a chunk is the start of the next one.
    let page = log.page(partial(0, 6), 10).unwrap();
    assert_eq!((page.text.as_str(), page.until_seq), ("", 1));
}

#[test]
fn a_cursor_behind_the_window_reports_loss_and_resumes() {
    let mut log = OutputLog::new(3 * CHUNK_BYTES);
    for i in 0..10 {
        log.append(Stream::Pty, &format!("{i}").repeat(CHUNK_BYTES));
    }
    assert_eq!(log.retained_from_seq(), 8);
    assert!(log.retained_bytes() <= 3 * CHUNK_BYTES);
    let page = log.page(partial(2, 10), CHUNK_BYTES).unwrap();
    assert!(page.lost);
    assert_eq!(page.text, "7".repeat(CHUNK_BYTES));
    assert_eq!((page.until_seq, page.until_offset), (8, 0));
    let next = log.page(whole(8), CHUNK_BYTES).unwrap();
    assert!(!next.lost);
    assert_eq!(next.text, "8".repeat(CHUNK_BYTES));
}

#[test]
fn pipe_labels_mark_stream_switches_and_count_in_offsets() {
    let mut log = OutputLog::new(1 << 20);
    log.append(Stream::Stdout, "out1\n");
    log.append(Stream::Stderr, "err\n");
    log.append(Stream::Stderr, "err2\n");
    log.append(Stream::Stdout, "out2\n");
    let all = read_all(&log, partial(0, 0), 7);
    assert_eq!(all, "out1\n\n[错误输出]\nerr\nerr2\n\n[标准输出]\nout2\n");
    assert_eq!(log.total_bytes() as usize, all.len());
}
