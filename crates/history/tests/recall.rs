//! Recall on a mixed corpus (issue 5 acceptance): planted Chinese, English and mixed phrases,
//! each in one dedicated session among the deterministic benchmark corpus and among decoy
//! sessions that share some of its words, must bring their session into the top 3 results.
//!
//! Everything is deterministic: the corpus is seeded, every timestamp is fixed, and the planted
//! sessions are interleaved with the corpus sessions (in id order and in time), so neither the
//! newest-rows rank window nor recency can favour them.

#![expect(clippy::unwrap_used, reason = "test assertions")]

use crate::common::*;
use mpa_history::recall::DiscoverRequest;
use mpa_history::{SearchRequest, corpus, import};
use serde_json::{Value, json};

/// Corpus size: big enough that common words (订阅, 字幕, docker, Oppenheimer, 三体…) match
/// hundreds of rows, small enough for a debug build in a few seconds.
const CORPUS_MESSAGES: usize = 4_000;
const CORPUS_SEED: u64 = 20_240_505;

/// One planted phrase: the query, the message that holds it, and decoy messages (one decoy
/// session each) that share some of its words but never the whole phrase.
struct Plant {
    /// What kind of phrase this is (for failure messages).
    kind: &'static str,
    query: &'static str,
    /// Role of the planted message (`user` or `assistant`).
    role: &'static str,
    text: &'static str,
    decoys: &'static [&'static str],
    /// More queries that must find the same session (e.g. with an extra word the plant lacks,
    /// so only the OR-relaxed retry can answer and BM25 must put the plant first).
    also: &'static [&'static str],
}

const PLANTS: &[Plant] = &[
    Plant {
        kind: "Chinese 2-char, rare",
        query: "刮削",
        role: "user",
        text: "刮削器又没拿到海报和简介，帮我看看是不是网络问题",
        decoys: &[
            "海报不显示，简介也是空的",
            "元数据刮取的顺序能改吗",
            "削减一下下载任务的数量",
        ],
        also: &[],
    },
    Plant {
        kind: "Chinese 2-char, rare, in an assistant reply",
        query: "硬链",
        role: "assistant",
        text: "整理失败是因为硬链接不能跨盘，源目录和媒体库不在同一个分区上。",
        decoys: &[
            "软链接可以吗，我的媒体库在另一块盘",
            "这个分享链接失效了",
            "硬盘快满了，整理一下旧资源",
        ],
        also: &[],
    },
    Plant {
        kind: "Chinese 4-char",
        query: "蓝光原盘",
        role: "user",
        text: "帮我找一下流浪地球的蓝光原盘资源，要带中文字幕的",
        decoys: &[
            "蓝光版本太大了，换个小一点的",
            "原盘画质确实好，但是太占空间",
            "流浪地球的中文字幕资源找到了吗",
        ],
        also: &[],
    },
    Plant {
        kind: "Chinese 6-char",
        query: "豆瓣想看同步",
        role: "user",
        text: "豆瓣想看同步好像停了，最近加的电影都没有自动订阅",
        decoys: &[
            "豆瓣评分低于7分的就不要订阅了",
            "想看列表同步到trakt可以吗",
            "同步一下豆瓣的榜单",
        ],
        also: &[],
    },
    Plant {
        kind: "Chinese, two words",
        query: "洗版 规则",
        role: "user",
        text: "洗版规则改成只要杜比视界的，其他的都不要",
        decoys: &["洗版失败了，站点没有更好的资源", "过滤规则里把HDR10也加上"],
        also: &[],
    },
    Plant {
        kind: "English multiword",
        query: "jellyfin hardware transcoding",
        role: "user",
        text: "Jellyfin hardware transcoding stopped working after the update, playback stutters",
        decoys: &[
            "the jellyfin library scan is really slow tonight",
            "planning a hardware upgrade for the NAS",
            "transcoding in plex uses too much CPU",
        ],
        also: &["jellyfin hardware transcoding broken"],
    },
    Plant {
        kind: "English, case-insensitive, common words",
        query: "PLEX TOKEN EXPIRED",
        role: "assistant",
        text: "The Plex token expired, so the library refresh was rejected; I asked for a new token.",
        decoys: &[
            "I refreshed the plex token and the library works again",
            "the TLS certificate for the site expired again",
            "rename the files to the plex scheme please",
        ],
        also: &["plex token expired yesterday"],
    },
    Plant {
        kind: "English episode code",
        query: "S03E07 remux",
        role: "user",
        text: "grab The Bear S03E07 remux, the web-dl has broken audio",
        decoys: &["The Bear S03E06 remux is fine", "S03E07 web-dl please"],
        also: &[],
    },
    Plant {
        kind: "mixed, Latin fused to CJK",
        query: "修改youer服务端",
        role: "user",
        text: "帮我修改youer服务端的端口配置，改成8096",
        decoys: &["修改服务端配置以后要重启吗", "端口配置改成8097了"],
        also: &["youer服务端"],
    },
    Plant {
        kind: "Latin term only inside fused CJK text (substring retry)",
        query: "embyserver",
        role: "assistant",
        text: "已经重启了embyserver容器，媒体库扫描恢复正常。",
        decoys: &["emby 的媒体库扫描很慢", "server 容器重启了"],
        also: &[],
    },
    Plant {
        kind: "film title + Chinese",
        query: "Oppenheimer 国语配音",
        role: "user",
        text: "Oppenheimer 有国语配音的版本吗？没有的话中字也行",
        decoys: &[
            "Oppenheimer 英语原声就行",
            "流浪地球 国语配音 4K",
            "有没有比1080p更好的Oppenheimer资源",
        ],
        also: &[],
    },
    Plant {
        kind: "Chinese title + number+CJK",
        query: "狂飙 第3季",
        role: "user",
        text: "狂飙第3季出了吗？出了就帮我订阅",
        decoys: &["狂飙第2季的字幕不同步", "庆余年第3季什么时候更新"],
        also: &[],
    },
    Plant {
        kind: "mixed Latin word + Chinese word",
        query: "docker 代理",
        role: "user",
        text: "docker 容器走代理以后下载很慢，能不能绕过",
        decoys: &["代理服务器挂了，换一个节点", "docker 升级到最新版本了"],
        also: &[],
    },
    Plant {
        kind: "Japanese kana",
        query: "ダウンロード",
        role: "user",
        text: "ダウンロードが遅いです、トラッカーを確認してください",
        decoys: &["トラッカーの証明書が切れました", "ロードが重い"],
        also: &[],
    },
];

fn line(sid: &str, k: usize, role: &str, content: &str, ts: i64, first: Option<&str>) -> String {
    let mut v = json!({
        "session_id": sid,
        "message_id": format!("{sid}-m{k}"),
        "role": role,
        "content": content,
        "ts": chrono::DateTime::from_timestamp(ts, 0).unwrap().to_rfc3339(),
    });
    if let Some(title) = first {
        v["source"] = json!("web");
        v["title"] = json!(title);
    }
    v.to_string()
}

/// One planted or decoy session: a little small talk around `text` so the phrase is neither the
/// first nor the last message.
fn session_lines(sid: &str, title: &str, role: &str, text: &str, t0: i64) -> Vec<String> {
    let (before, after) = if role == "user" {
        (
            vec![
                ("user", "你好，有个问题想问一下"),
                ("assistant", "好的，请说。"),
            ],
            vec![("assistant", "我来检查一下。"), ("user", "谢谢")],
        )
    } else {
        (
            vec![
                ("user", "帮我看看昨天的整理记录"),
                ("assistant", "好的，我先查一下日志。"),
                ("user", "结果怎么样"),
            ],
            vec![("user", "明白了，谢谢")],
        )
    };
    before
        .into_iter()
        .chain(std::iter::once((role, text)))
        .chain(after)
        .enumerate()
        .map(|(k, (r, c))| line(sid, k, r, c, t0 + 20 * k as i64, (k == 0).then_some(title)))
        .collect()
}

/// The corpus with the planted and decoy sessions spread between its sessions (one extra
/// session after every few corpus sessions, in both id order and time). Returns the JSONL.
fn build_jsonl() -> String {
    let mut corpus_lines = Vec::new();
    let n_sessions = corpus::generate(CORPUS_MESSAGES, CORPUS_SEED, |l| corpus_lines.push(l));
    let mut extra: Vec<(String, String, &str, &str)> = Vec::new();
    for (i, p) in PLANTS.iter().enumerate() {
        extra.push((format!("plant-{i:02}"), format!("问题 {i}"), p.role, p.text));
        for (j, d) in p.decoys.iter().enumerate() {
            extra.push((
                format!("decoy-{i:02}-{j}"),
                format!("闲聊 {i}-{j}"),
                "user",
                d,
            ));
        }
    }
    // Deterministic shuffle so a plant and its decoys are not neighbours.
    let mut rng = corpus::Rng::new(7);
    for i in (1..extra.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        extra.swap(i, j);
    }
    let every = (n_sessions / extra.len()).max(1);
    let mut out = String::new();
    let mut pending = extra.into_iter();
    // Emit the next extra session right after corpus session `after_session` (in time too:
    // corpus session N starts at 1_700_000_000 + N * 1800, this one starts 900 s later).
    let mut emit = |out: &mut String, after_session: usize| -> bool {
        let Some((sid, title, role, text)) = pending.next() else {
            return false;
        };
        let t0 = 1_700_000_000 + after_session as i64 * 1800 + 900;
        for l in session_lines(&sid, &title, role, text, t0) {
            out.push_str(&l);
            out.push('\n');
        }
        true
    };
    let mut seen_sessions = 0usize;
    let mut current = String::new();
    for l in corpus_lines {
        let v: Value = serde_json::from_str(&l).unwrap();
        let sid = v["session_id"].as_str().unwrap();
        if sid != current {
            if seen_sessions > 0 && seen_sessions.is_multiple_of(every) {
                emit(&mut out, seen_sessions);
            }
            seen_sessions += 1;
            current = sid.to_owned();
        }
        out.push_str(&l);
        out.push('\n');
    }
    // Whatever did not fit between corpus sessions goes after the last one.
    while emit(&mut out, seen_sessions) {
        seen_sessions += 1;
    }
    out
}

#[tokio::test]
async fn planted_phrases_rank_in_the_top_three() {
    let e = env();
    let u = user("recall");
    let jsonl = build_jsonl();
    let stats = import::import_reader(&e.hub, &u, "recall", jsonl.as_bytes(), |_| {})
        .await
        .unwrap();
    assert!(stats.skipped.is_empty(), "{:?}", stats.skipped);
    let planted_sessions = e.sql_i64(&u, "SELECT COUNT(*) FROM sessions WHERE id LIKE 'plant-%'");
    assert_eq!(planted_sessions, PLANTS.len() as i64);
    // The corpus really shares the common words the plants use.
    for (word, min) in [
        ("订阅", 100),
        ("字幕", 50),
        ("docker", 50),
        ("Oppenheimer", 10),
    ] {
        let n = e.sql_i64(
            &u,
            &format!(
                "SELECT COUNT(*) FROM messages WHERE role <> 'tool' AND content LIKE '%{word}%'"
            ),
        );
        assert!(n >= min, "corpus has only {n} rows with {word}");
    }

    let mut failures = Vec::new();
    let mut report = Vec::new();
    let queries = PLANTS.iter().enumerate().flat_map(|(i, p)| {
        std::iter::once(p.query)
            .chain(p.also.iter().copied())
            .map(move |q| (i, p, q))
    });
    for (i, p, q) in queries {
        let want = format!("plant-{i:02}");
        let req = SearchRequest::Discover(DiscoverRequest {
            limit: 3,
            ..DiscoverRequest::new(q)
        });
        let (path, ids, error) = match e.try_run(&u, None, req).await {
            Ok(r) => {
                let d = r.outcome.discover();
                (d.search_path.to_owned(), session_ids(&d), None)
            }
            Err(err) => ("?".to_owned(), Vec::new(), Some(err.to_string())),
        };
        report.push(format!("{q:<40} {path:<10} {ids:?}"));
        if error.is_some() || !ids.contains(&want) {
            failures.push(format!(
                "{q} ({}): want {want} in top 3, got search_path={path} ids={ids:?} error={error:?}",
                p.kind
            ));
        }
    }
    eprintln!("query / search_path / top 3:\n{}", report.join("\n"));
    assert!(
        failures.is_empty(),
        "recall failures:\n{}\n\nall queries:\n{}",
        failures.join("\n"),
        report.join("\n")
    );
}
