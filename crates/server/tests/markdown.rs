//! The web page's Markdown rendering: tables, lists, code, raw HTML as text, images as links, URLs.

use mpa_server::markdown::*;

#[test]
fn a_table_is_a_table_in_a_focusable_frame() {
    let html = render("| a | b |\n|---|---|\n| 1 | 2 |\n");
    assert!(
        html.starts_with(r#"<div class="table-wrap" tabindex="0"><table>"#),
        "{html}"
    );
    assert!(
        html.contains("<th>a</th>") && html.contains("<td>2</td>"),
        "{html}"
    );
}

#[test]
fn nested_and_task_lists_nest() {
    let html = render("- one\n  - inner\n- [x] done\n- [ ] open\n");
    assert!(html.contains("<li>one\n<ul>\n<li>inner</li>"), "{html}");
    assert!(
        html.contains(r#"<span class="task done">☑</span> done"#),
        "{html}"
    );
    assert!(!html.contains("<input"), "{html}");
}

#[test]
fn fenced_code_has_its_language_label_and_is_escaped() {
    let html = render("```rust\"><img src=x>\nlet a = \"<b>\";\n```\n");
    assert!(
        html.contains(r#"<span class="code-lang">rustimg</span>"#),
        "{html}"
    );
    assert!(html.contains("let a = \"&lt;b&gt;\";"), "{html}");
}

#[test]
fn raw_html_and_script_links_are_text() {
    let html = render(
        "<script>alert(1)</script>\n\nhi <img src=x onerror=alert(2)> [x](javascript:alert(3)) ![i](data:x)",
    );
    assert!(
        !html.contains("<script") && !html.contains("<img"),
        "{html}"
    );
    assert!(html.contains("&lt;script&gt;"), "{html}");
    assert!(
        !html.contains("javascript:") && !html.contains("data:x"),
        "{html}"
    );
}

#[test]
fn an_image_becomes_a_link_and_fetches_nothing() {
    let html = render("![poster](https://example.org/p.jpg)");
    assert_eq!(
        html,
        "<p><a href=\"https://example.org/p.jpg\">poster</a></p>\n"
    );
}

#[test]
fn bare_urls_link_and_stop_before_trailing_punctuation() {
    let html = render("see https://example.org/a_b: and (www.example.com/x). 见https://a.cn/q，好");
    assert!(
        html.contains(r#"<a href="https://example.org/a_b">https://example.org/a_b</a>:"#),
        "{html}"
    );
    assert!(
        html.contains(r#"(<a href="http://www.example.com/x">www.example.com/x</a>)."#),
        "{html}"
    );
    assert!(
        html.contains(r#"见<a href="https://a.cn/q">https://a.cn/q</a>，好"#),
        "{html}"
    );
}

#[test]
fn urls_inside_code_and_links_stay_as_written() {
    let html = render("`https://x.org` [site](https://y.org) user@https://no");
    assert!(html.contains("<code>https://x.org</code>"), "{html}");
    assert_eq!(html.matches("<a ").count(), 1, "{html}");
}

#[test]
fn strikethrough_is_del() {
    assert_eq!(render("~~gone~~"), "<p><del>gone</del></p>\n");
}
