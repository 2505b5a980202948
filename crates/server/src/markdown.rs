//! Markdown as the web page shows it (issue 29 item 1): GitHub-flavoured — tables, nested and task
//! lists, strikethrough, fenced code with its language, and bare URLs linked — rendered by
//! `pulldown-cmark` on the server, so the answer looks the same while it streams and after a
//! reload (both go through [`render`], see `POST /api/v1/agent/render` in [`crate::web`]).
//!
//! Safe by construction: no HTML written by a model, a tool or a user reaches the page. Raw HTML
//! (blocks and inline) becomes text; a link or image is kept only for `http`, `https` and
//! `mailto` addresses (anything else — `javascript:`, `data:`, relative paths — is its text
//! alone); an image becomes a link to it, so nothing is fetched by showing an answer. Only the
//! markup written here, with fixed attributes, is HTML: the code block frame (its language
//! reduced to `[A-Za-z0-9_+#.-]`), the scrollable table frame and the task-list boxes.
//!
//! Bare URLs (GitHub's "extended autolinks", which `pulldown-cmark` does not do) are linked
//! here: `http://`, `https://` or `www.` after the start, a space, punctuation or a non-ASCII
//! character; the link ends at a space, `<` or a non-ASCII character (Chinese punctuation right
//! after a URL is not part of it), and trailing `? ! . , : ; * _ ~ ' "` and an unbalanced `)` are
//! left as text ("see https://example.org:" links the address, not the colon).

use pulldown_cmark::{CodeBlockKind, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// The HTML for `src`.
pub fn render(src: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = sanitise(merge_text(Parser::new_ext(src, options)));
    let mut html = String::with_capacity(src.len() + src.len() / 2);
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    html
}

/// Adjacent text events as one, so a URL the parser split (at `_`, `*`, `[`…) is seen whole.
fn merge_text<'a>(events: impl Iterator<Item = Event<'a>>) -> Vec<Event<'a>> {
    let mut out: Vec<Event<'a>> = Vec::new();
    for ev in events {
        if let Event::Text(t) = &ev
            && let Some(Event::Text(prev)) = out.last_mut()
        {
            let mut joined = prev.to_string();
            joined.push_str(t);
            *prev = CowStr::from(joined);
            continue;
        }
        out.push(ev);
    }
    out
}

/// Whether a link may point at `url`: web and mail addresses only.
fn allowed_url(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
}

/// A code block's language as a label: its first word, reduced to a safe alphabet.
fn code_language(kind: &CodeBlockKind<'_>) -> String {
    let CodeBlockKind::Fenced(info) = kind else {
        return String::new();
    };
    info.split_whitespace()
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "_+#.-".contains(*c))
        .take(32)
        .collect()
}

fn link<'a>(dest_url: CowStr<'a>, link_type: LinkType) -> Event<'a> {
    Event::Start(Tag::Link {
        link_type,
        dest_url,
        title: CowStr::Borrowed(""),
        id: CowStr::Borrowed(""),
    })
}

/// The events the page may see: see the module docs for the rules.
fn sanitise(events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    let mut out = Vec::with_capacity(events.len());
    // For each open link or image: whether its end is written (its address was allowed).
    let mut links: Vec<bool> = Vec::new();
    let mut in_code = false;
    for ev in events {
        match ev {
            Event::Html(raw) | Event::InlineHtml(raw) => out.push(Event::Text(raw)),
            Event::Start(Tag::HtmlBlock) => {
                out.push(Event::Html(CowStr::Borrowed(r#"<p class="raw-html">"#)));
            }
            Event::End(TagEnd::HtmlBlock) => out.push(Event::Html(CowStr::Borrowed("</p>\n"))),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            }) => {
                let keep = link_type == LinkType::Email || allowed_url(&dest_url);
                if keep {
                    out.push(link(dest_url, link_type));
                }
                links.push(keep);
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                let keep = allowed_url(&dest_url);
                if keep {
                    out.push(link(dest_url, LinkType::Inline));
                }
                links.push(keep);
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if links.pop().unwrap_or(false) {
                    out.push(Event::End(TagEnd::Link));
                }
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                in_code = true;
                let lang = code_language(&kind);
                out.push(Event::Html(CowStr::from(format!(
                    r#"<div class="code-block"><div class="code-head"><span class="code-lang">{lang}</span></div><pre tabindex="0"><code>"#
                ))));
            }
            Event::End(TagEnd::CodeBlock) => {
                in_code = false;
                out.push(Event::Html(CowStr::Borrowed("</code></pre></div>\n")));
            }
            Event::Start(Tag::Table(align)) => {
                out.push(Event::Html(CowStr::Borrowed(
                    r#"<div class="table-wrap" tabindex="0">"#,
                )));
                out.push(Event::Start(Tag::Table(align)));
            }
            Event::End(TagEnd::Table) => {
                out.push(Event::End(TagEnd::Table));
                out.push(Event::Html(CowStr::Borrowed("</div>\n")));
            }
            Event::TaskListMarker(done) => out.push(Event::Html(CowStr::Borrowed(if done {
                r#"<span class="task done">☑</span> "#
            } else {
                r#"<span class="task">☐</span> "#
            }))),
            Event::Text(text) if !in_code && links.is_empty() => autolink(text, &mut out),
            // Extensions that are not enabled cannot produce these; as text if they ever do.
            Event::InlineMath(raw) | Event::DisplayMath(raw) | Event::FootnoteReference(raw) => {
                out.push(Event::Text(raw));
            }
            other => out.push(other),
        }
    }
    out
}

/// `text` with its bare URLs as links.
fn autolink<'a>(text: CowStr<'a>, out: &mut Vec<Event<'a>>) {
    let s: &str = &text;
    let mut done = 0;
    let mut pieces: Vec<Event<'a>> = Vec::new();
    let mut at = 0;
    while let Some(found) = find_url(s, at) {
        let (start, end, href) = found;
        if start > done {
            pieces.push(Event::Text(CowStr::from(s[done..start].to_owned())));
        }
        pieces.push(link(CowStr::from(href), LinkType::Inline));
        pieces.push(Event::Text(CowStr::from(s[start..end].to_owned())));
        pieces.push(Event::End(TagEnd::Link));
        done = end;
        at = end;
    }
    if pieces.is_empty() {
        out.push(Event::Text(text));
        return;
    }
    if done < s.len() {
        pieces.push(Event::Text(CowStr::from(s[done..].to_owned())));
    }
    out.extend(pieces);
}

/// The next bare URL in `s` from byte `from`: its range and the address it links to.
fn find_url(s: &str, from: usize) -> Option<(usize, usize, String)> {
    let bytes = s.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        let rest = &s[i..];
        let prefix = ["https://", "http://", "www."].into_iter().find(|p| {
            rest.len() >= p.len() && rest.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
        });
        if let Some(prefix) = prefix
            && starts_word(s, i)
            && let Some(end) = url_end(s, i, prefix.len())
        {
            let url = &s[i..end];
            let href = if prefix == "www." {
                format!("http://{url}")
            } else {
                url.to_owned()
            };
            return Some((i, end, href));
        }
        // Next character boundary.
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// A URL may start at the beginning, after a space, ASCII punctuation other than the URL's
/// own characters, or any non-ASCII character (Chinese text has no spaces before a link).
fn starts_word(s: &str, i: usize) -> bool {
    match s[..i].chars().next_back() {
        None => true,
        Some(c) if !c.is_ascii() => true,
        Some(c) => !(c.is_ascii_alphanumeric() || "/:.@-_%&=+#?~".contains(c)),
    }
}

/// Where the URL starting at `start` (with a prefix of `prefix_len` bytes) ends, or `None` when
/// what follows the prefix is no host name.
fn url_end(s: &str, start: usize, prefix_len: usize) -> Option<usize> {
    let rest = &s[start..];
    let mut end = rest
        .char_indices()
        .find(|&(_, c)| c.is_whitespace() || c == '<' || !c.is_ascii())
        .map_or(rest.len(), |(i, _)| i);
    // Trailing punctuation is the sentence's, not the address's; an unbalanced `)` closes the
    // parenthesis the link stands in.
    loop {
        let candidate = &rest[..end];
        let Some(last) = candidate.chars().next_back() else {
            break;
        };
        let unbalanced_paren =
            last == ')' && candidate.matches(')').count() > candidate.matches('(').count();
        if "?!.,:;*_~'\"".contains(last) || unbalanced_paren {
            end -= 1;
        } else {
            break;
        }
    }
    if end <= prefix_len {
        return None;
    }
    let host_end = rest[prefix_len..end]
        .find(['/', '?', '#', ':'])
        .map_or(end, |i| prefix_len + i);
    let host = &rest[prefix_len..host_end];
    let www = rest[..prefix_len].eq_ignore_ascii_case("www.");
    let valid_host = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')
        && (!www || host.contains('.'));
    valid_host.then_some(start + end)
}
