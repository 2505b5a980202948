//! A deterministic, realistic benchmark corpus: mixed Chinese/English media-assistant chats in
//! which 20 % of messages are tool results of 0.3–12 KB (and about 1 in 100 tool results is
//! 60 KB). Same seed, same corpus, byte for byte — no external randomness.

use serde_json::json;

/// xorshift64*: tiny, deterministic, good enough for shaping text.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const TITLES_EN: [&str; 12] = [
    "Dune Part Two",
    "The Expanse",
    "Breaking Bad",
    "Oppenheimer",
    "Severance",
    "The Bear",
    "Arcane",
    "Shogun",
    "Fallout",
    "The Last of Us",
    "Blade Runner 2049",
    "Interstellar",
];
const TITLES_ZH: [&str; 10] = [
    "三体",
    "流浪地球",
    "狂飙",
    "繁花",
    "漫长的季节",
    "庆余年",
    "琅琊榜",
    "隐秘的角落",
    "沉默的真相",
    "觉醒年代",
];
const USER_EN: [&str; 8] = [
    "subscribe to {t} in 4K please",
    "why did the download of {t} fail yesterday?",
    "check the docker networking on the downloader, the tracker times out",
    "search for {t} with Chinese subtitles",
    "what's the status of my {t} subscription",
    "the TLS certificate for the site expired, can you check",
    "rename the files of {t} season 2 to the plex scheme",
    "is there a better release of {t} than the 1080p one",
];
const USER_ZH: [&str; 8] = [
    "帮我订阅{t}，要4K的",
    "{t}下载失败了，看看是什么原因",
    "下载器的网络好像有问题，站点一直超时",
    "搜索一下{t}的中文字幕资源",
    "我的{t}订阅现在什么状态",
    "站点证书过期了帮我检查一下",
    "把{t}第二季的文件重命名成媒体库的格式",
    "有没有比1080p更好的{t}资源",
];
const ASSISTANT: [&str; 8] = [
    "I subscribed to {t}; the next episode will download automatically when a 4K release appears.",
    "The download of {t} failed because the tracker returned 403. I retried with another site and it is downloading now.",
    "已为你订阅{t}，有新资源时会自动下载。",
    "{t}的下载失败是因为站点返回了403，我换了一个站点重新下载，现在进度正常。",
    "The downloader container could not resolve the tracker hostname; I restarted the docker network bridge and it works again.",
    "证书已经续期，站点现在可以正常访问了。",
    "Renamed 10 files of {t} to the Plex naming scheme and refreshed the library.",
    "找到了{t}的2160p REMUX版本，比当前的1080p版本更好，需要替换吗？",
];
const TOOLS: [&str; 6] = [
    "search_media",
    "add_subscribe",
    "query_downloads",
    "site_status",
    "transfer_files",
    "execute_command",
];

fn tool_body(rng: &mut Rng, title: &str, target: usize) -> String {
    let mut out = String::with_capacity(target + 256);
    out.push_str("{\"success\": true, \"items\": [");
    let mut i = 0;
    while out.len() < target {
        let size = 1 + rng.below(60);
        let seeders = rng.below(500);
        let site = *rng.pick(&["hdhome", "audiences", "pttime", "mteam"]);
        let entry = json!({
            "title": format!("{title} S0{}E{:02} 2160p WEB-DL HEVC", 1 + rng.below(4), 1 + rng.below(12)),
            "site": site,
            "size_gb": size, "seeders": seeders, "free": rng.below(2) == 0,
            "description": if rng.below(2) == 0 { "中文字幕 杜比视界 高码率" } else { "multi-audio, subtitles, dolby vision" },
        });
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&entry.to_string());
        i += 1;
    }
    out.push_str("]}");
    out
}

/// Generate `n` messages as JSONL lines (in session order), calling `emit` for each line.
/// Returns the number of sessions generated (ids `s0000001`…).
pub fn generate(n: usize, seed: u64, mut emit: impl FnMut(String)) -> usize {
    let mut rng = Rng::new(seed);
    let start = 1_700_000_000i64;
    let mut produced = 0usize;
    let mut session = 0usize;
    while produced < n {
        session += 1;
        let sid = format!("s{session:07}");
        let len = (6 + rng.below(40)) as usize;
        let source = match rng.below(20) {
            0 => "cron",
            1 => "subagent",
            2..=8 => "telegram",
            _ => "web",
        };
        let zh = rng.below(2) == 0;
        let title = if zh {
            *rng.pick(&TITLES_ZH)
        } else {
            *rng.pick(&TITLES_EN)
        };
        let t0 = start + (session as i64) * 1800;
        let mut k = 0usize;
        while k < len && produced < n {
            let ts = chrono::DateTime::from_timestamp(t0 + (k as i64) * 20, 0)
                .unwrap_or_default()
                .to_rfc3339();
            let mid = format!("{sid}-m{k}");
            let roll = rng.below(10);
            let mut line = if k == 0 || roll < 4 {
                let tpl = if zh {
                    *rng.pick(&USER_ZH)
                } else {
                    *rng.pick(&USER_EN)
                };
                json!({"session_id": sid, "message_id": mid, "role": "user", "content": tpl.replace("{t}", title), "ts": ts})
            } else if roll < 8 {
                let tpl = *rng.pick(&ASSISTANT);
                let mut v = json!({"session_id": sid, "message_id": mid, "role": "assistant", "content": tpl.replace("{t}", title), "ts": ts});
                if rng.below(3) == 0 {
                    v["tool_calls"] = json!([{"id": format!("call_{k}"), "name": *rng.pick(&TOOLS),
                        "arguments": json!({"title": title, "year": 2000 + rng.below(25)}).to_string()}]);
                }
                v
            } else {
                // 20 % tool results: 0.3–12 KB, ~1 % of them 60 KB.
                let target = if rng.below(100) == 0 {
                    60_000
                } else {
                    300 + rng.below(11_700) as usize
                };
                json!({"session_id": sid, "message_id": mid, "role": "tool", "tool_name": *rng.pick(&TOOLS),
                       "tool_call_id": format!("call_{k}"), "content": tool_body(&mut rng, title, target), "ts": ts})
            };
            if k == 0 {
                line["source"] = json!(source);
                line["title"] = json!(format!("{title} {}", if zh { "咨询" } else { "help" }));
            }
            emit(line.to_string());
            produced += 1;
            k += 1;
        }
    }
    session
}
