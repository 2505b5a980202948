//! The CJK tokenizer against SQLite's own unicode61 and FTS5: tokens, offsets, tables.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_history::tokenizer::cjk::*;
use mpa_history::tokenizer::fts5_ffi::*;
use mpa_history::tokenizer::unicode61::*;
use mpa_history::tokenizer::*;
use rusqlite::{Connection, ffi};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ops::ControlFlow;

/// SQLite's own `unicode61`, driven through the fts5_api: the oracle for the tables and for
/// everything outside CJK.
struct Unicode61 {
    _conn: Connection,
    module: ffi::fts5_tokenizer,
    handle: *mut ffi::Fts5Tokenizer,
}

type RefToken = (Vec<u8>, usize, usize);

unsafe extern "C" fn collect_token(
    ctx: *mut c_void,
    _tflags: c_int,
    token: *const c_char,
    n: c_int,
    start: c_int,
    end: c_int,
) -> c_int {
    // SAFETY: `ctx` is the `Vec<RefToken>` passed by `Unicode61::tokenize`; the token is valid
    // for `n` bytes during the call.
    unsafe {
        let tokens = &mut *ctx.cast::<Vec<RefToken>>();
        let bytes = if n == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(token.cast::<u8>(), n as usize).to_vec()
        };
        tokens.push((bytes, start as usize, end as usize));
    }
    ffi::SQLITE_OK
}

impl Unicode61 {
    fn new(args: &[&str]) -> Self {
        let conn = Connection::open_in_memory().unwrap();
        let api = fts5_api(&conn).unwrap();
        let mut user_data: *mut c_void = std::ptr::null_mut();
        let mut module = ffi::fts5_tokenizer {
            xCreate: None,
            xDelete: None,
            xTokenize: None,
        };
        let c_args: Vec<std::ffi::CString> = args
            .iter()
            .map(|a| std::ffi::CString::new(*a).unwrap())
            .collect();
        let mut ptrs: Vec<*const c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
        let mut handle: *mut ffi::Fts5Tokenizer = std::ptr::null_mut();
        // SAFETY: `api` belongs to `conn`, which the struct keeps alive; the out-parameters are
        // valid locals.
        unsafe {
            let rc = ((*api).xFindTokenizer.unwrap())(
                api,
                c"unicode61".as_ptr(),
                &mut user_data,
                &mut module,
            );
            assert_eq!(rc, ffi::SQLITE_OK);
            let rc = (module.xCreate.unwrap())(
                user_data,
                ptrs.as_mut_ptr(),
                ptrs.len() as c_int,
                &mut handle,
            );
            assert_eq!(rc, ffi::SQLITE_OK, "unicode61 rejected {args:?}");
        }
        Self {
            _conn: conn,
            module,
            handle,
        }
    }

    fn tokenize(&self, text: &[u8]) -> Vec<RefToken> {
        let mut tokens: Vec<RefToken> = Vec::new();
        // SAFETY: `handle` is a live unicode61 instance; `collect_token` matches the callback
        // contract and `tokens` outlives the call.
        unsafe {
            (self.module.xTokenize.unwrap())(
                self.handle,
                (&mut tokens as *mut Vec<RefToken>).cast::<c_void>(),
                ffi::FTS5_TOKENIZE_DOCUMENT,
                text.as_ptr().cast::<c_char>(),
                text.len() as c_int,
                Some(collect_token),
            );
        }
        tokens
    }
}

impl Drop for Unicode61 {
    fn drop(&mut self) {
        // SAFETY: created by this struct's xCreate and deleted once.
        unsafe { (self.module.xDelete.unwrap())(self.handle) }
    }
}

fn utf8(c: u32) -> Vec<u8> {
    let mut out = Vec::new();
    push_utf8(&mut out, c);
    out
}

fn decode_single(bytes: &[u8]) -> u32 {
    if bytes.is_empty() {
        return 0;
    }
    let (c, next) = read_utf8(bytes, 0);
    assert_eq!(next, bytes.len());
    c
}

/// Regenerates `tables.rs` from the bundled SQLite. Run after a SQLite upgrade:
/// `MPA_TOKENIZER_TABLES=crates/history/src/tokenizer/tables.rs cargo test -p mpa-history
/// tokenizer::tests::regenerate_tables -- --ignored`, then bump `TOKENIZER_VERSION` if it changed.
#[test]
#[ignore = "writes tables.rs; run by hand after a SQLite upgrade"]
fn regenerate_tables() {
    use std::fmt::Write as _;
    let path = std::env::var("MPA_TOKENIZER_TABLES").expect("set MPA_TOKENIZER_TABLES");
    let all = "L* N* Co M* P* S* Z* C*";
    // Category: the one single-category tokenizer that accepts it (0 = accepted by all).
    let probes: Vec<(u8, Unicode61)> = CATEGORY_NAMES
        .iter()
        .map(|&(name, index)| (index, Unicode61::new(&["categories", name])))
        .chain(std::iter::once((
            CATEGORY_CO,
            Unicode61::new(&["categories", "Co"]),
        )))
        .collect();
    let folders: Vec<Unicode61> = ["0", "1", "2"]
        .iter()
        .map(|m| Unicode61::new(&["categories", all, "remove_diacritics", m]))
        .collect();
    let default = Unicode61::new(&[]);
    let mut runs: Vec<(u32, u8)> = Vec::new();
    let mut folds: Vec<(u32, [u32; 3])> = Vec::new();
    let mut diacritics: Vec<u32> = Vec::new();
    for c in (0u32..0x11_0000).filter(|c| char::from_u32(*c).is_some() && *c != 0) {
        let bytes = utf8(c);
        let accepted: Vec<u8> = probes
            .iter()
            .filter(|(_, t)| !t.tokenize(&bytes).is_empty())
            .map(|(i, _)| *i)
            .collect();
        let category = if accepted.len() == probes.len() {
            0
        } else {
            assert_eq!(accepted.len(), 1, "U+{c:04X} in {accepted:?}");
            accepted[0]
        };
        if runs.last().is_none_or(|&(_, last)| last != category) {
            runs.push((c, category));
        }
        let mut folded = [c; 3];
        for (m, folder) in folders.iter().enumerate() {
            let tokens = folder.tokenize(&bytes);
            folded[m] = match tokens.as_slice() {
                [] => {
                    // Only diacritics fold away entirely at the start; read them after a letter.
                    let mut probe = b"a".to_vec();
                    probe.extend_from_slice(&bytes);
                    let tokens = folder.tokenize(&probe);
                    assert_eq!(tokens.len(), 1, "U+{c:04X}");
                    decode_single(&tokens[0].0[1..])
                }
                [(token, _, _)] => decode_single(token),
                more => panic!("U+{c:04X} gave {more:?}"),
            };
        }
        if folded != [c; 3] {
            folds.push((c, folded));
        }
        let mut probe = b"a".to_vec();
        probe.extend_from_slice(&bytes);
        if default.tokenize(&bytes).is_empty()
            && default
                .tokenize(&probe)
                .first()
                .is_some_and(|t| t.2 == probe.len())
        {
            diacritics.push(c);
        }
    }
    // NUL is never a token character; its category is Cc.
    runs[0].0 = 0;
    let mut out = String::from(
        "//! Generated by `tests::regenerate_tables` from the bundled SQLite's unicode61. Do not edit.\n\n\
         /// `(first code point, unicode61 category)`; a run lasts until the next entry.\n\
         pub(super) static CATEGORY_RUNS: &[(u32, u8)] = &[\n",
    );
    for chunk in runs.chunks(6) {
        out.push_str("   ");
        for (c, cat) in chunk {
            write!(out, " (0x{c:X}, {cat}),").unwrap();
        }
        out.push('\n');
    }
    out.push_str(
        "];\n\n/// `(code point, fold with remove_diacritics 0, 1, 2)` where any differs; 0 drops it.\n\
         pub(super) static FOLDS: &[(u32, [u32; 3])] = &[\n",
    );
    for chunk in folds.chunks(3) {
        out.push_str("   ");
        for (c, f) in chunk {
            write!(
                out,
                " (0x{c:X}, [0x{:X}, 0x{:X}, 0x{:X}]),",
                f[0], f[1], f[2]
            )
            .unwrap();
        }
        out.push('\n');
    }
    out.push_str(
        "];\n\n/// Marks that continue a token without starting one.\n\
         pub(super) static DIACRITICS: &[u32] = &[\n",
    );
    for chunk in diacritics.chunks(8) {
        out.push_str("   ");
        for c in chunk {
            write!(out, " 0x{c:X},").unwrap();
        }
        out.push('\n');
    }
    out.push_str("];\n");
    std::fs::write(path, out).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `(token, start, end, colocated)` as emitted.
type Tok = (String, usize, usize, bool);

fn run(text: &str, reason: TokenizeReason) -> Vec<Tok> {
    let mut out = Vec::new();
    tokenize(text, reason, &mut |t, s, e, c| {
        out.push((t.to_owned(), s, e, c))
    });
    out
}

fn texts(tokens: &[Tok]) -> Vec<&str> {
    tokens.iter().map(|t| t.0.as_str()).collect()
}

/// Tokens that take a position (what a phrase sees), in order.
fn positioned(text: &str, reason: TokenizeReason) -> Vec<String> {
    run(text, reason)
        .into_iter()
        .filter(|t| !t.3)
        .map(|t| t.0)
        .collect()
}

fn bytes_run(tokenizer: &CjkTokenizer, text: &[u8], reason: TokenizeReason) -> Vec<RefToken> {
    let mut out = Vec::new();
    tokenizer.tokenize_bytes(text, reason, &mut |t, s, e, _| {
        out.push((t.to_vec(), s, e));
        ControlFlow::Continue(())
    });
    out
}

const DOC: TokenizeReason = TokenizeReason::Document;
const QUERY: TokenizeReason = TokenizeReason::Query { prefix: false };

/// The spec §5.3 split applied to SQLite's unicode61 output: the oracle for token texts.
fn reference_split(unicode61: &Unicode61, text: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (token, _, _) in unicode61.tokenize(text) {
        let mut chars = Vec::new();
        let mut i = 0;
        while i < token.len() {
            let (c, next) = read_utf8(&token, i);
            chars.push((c, i, next));
            i = next;
        }
        if !chars.iter().any(|&(c, _, _)| is_cjk_code(c)) {
            out.push(token);
            continue;
        }
        let mut k = 0;
        while k < chars.len() {
            let cjk = is_cjk_code(chars[k].0);
            let len = chars[k..]
                .iter()
                .take_while(|&&(c, _, _)| is_cjk_code(c) == cjk)
                .count();
            let seg = &chars[k..k + len];
            if !cjk || len == 1 {
                out.push(token[seg[0].1..seg[len - 1].2].to_vec());
            } else {
                for pair in seg.windows(2) {
                    out.push(token[pair[0].1..pair[1].2].to_vec());
                }
            }
            k += len;
        }
    }
    out
}

fn no_run_ends(args: &[&str]) -> CjkTokenizer {
    let mut tokenizer = CjkTokenizer::new(args).unwrap();
    tokenizer.run_ends = false;
    tokenizer
}

// ---------------------------------------------------------------------------------------------
// The code-point predicate
// ---------------------------------------------------------------------------------------------

#[test]
fn cjk_predicate_covers_the_documented_scripts() {
    for c in [
        '中', '文', '𠀀', '𪚥', '丽', 'あ', 'ア', 'ー', 'ㇰ', 'ｱ', 'ﾞ', '한', 'ㄱ', 'ᄀ', '々',
        '〇', 'ㄅ',
    ] {
        assert!(is_cjk(c), "{c} should be CJK");
    }
    for c in [
        'a', 'é', '１', 'Ａ', '。', '、', '「', '」', '　', '・', '゛', '゠', '😀', '_', '〜',
    ] {
        assert!(!is_cjk(c), "{c} should not be CJK");
    }
}

#[test]
fn every_cjk_code_point_is_a_default_token_character_that_folds_to_itself() {
    let default = CjkTokenizer::default();
    let classes = bmp_classes();
    for c in (0u32..0x11_0000).filter(|&c| is_cjk_code(c)) {
        assert!(
            default.is_token_char(c, classes),
            "U+{c:04X} is a separator"
        );
        for mode in 0..3 {
            assert_eq!(fold(c, mode, classes), c, "U+{c:04X} folds in mode {mode}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Splitting rules (spec §5.3)
// ---------------------------------------------------------------------------------------------

#[test]
fn spec_worked_examples_query_side() {
    let cases: [(&str, &[&str]); 7] = [
        ("웅기가말했다", &["웅기", "기가", "가말", "말했", "했다"]),
        (
            "修改youer服务端的计划",
            &["修改", "youer", "服务", "务端", "端的", "的计", "计划"],
        ),
        ("A单B", &["a", "单", "b"]),
        ("Hello, 世界!", &["hello", "世界"]),
        (
            "日本語のテスト",
            &["日本", "本語", "語の", "のテ", "テス", "スト"],
        ),
        ("東京駅", &["東京", "京駅"]),
        // Half-width Katakana is CJK here (the C tokenizer kept it whole).
        ("ﾃｽﾄ", &["ﾃｽ", "ｽﾄ"]),
    ];
    for (input, expected) in cases {
        assert_eq!(texts(&run(input, QUERY)), expected, "{input}");
    }
}

#[test]
fn documents_add_the_last_character_of_each_run_colocated() {
    let tokens = run("修改youer服务端", DOC);
    assert_eq!(
        tokens,
        vec![
            ("修改".into(), 0, 6, false),
            ("改".into(), 3, 6, true),
            ("youer".into(), 6, 11, false),
            ("服务".into(), 11, 17, false),
            ("务端".into(), 14, 20, false),
            ("端".into(), 17, 20, true),
        ]
    );
    // A lone character is already whole: nothing extra.
    assert_eq!(run("A单B", DOC), run("A单B", QUERY));
}

#[test]
fn run_end_takes_its_own_position_before_another_run() {
    // Without the separating position, "ab" + "bc" would form the phrase for "abc".
    assert_eq!(
        run("中文 文本", DOC),
        vec![
            ("中文".into(), 0, 6, false),
            ("文".into(), 3, 6, false),
            ("文本".into(), 7, 13, false),
            ("本".into(), 10, 13, true),
        ]
    );
    // Queries place it the same way, so a quoted phrase across runs still lines up …
    assert_eq!(positioned("中文 文本", QUERY), ["中文", "文", "文本"]);
    assert_eq!(positioned("中文 文本", DOC), ["中文", "文", "文本"]);
    // … and never add it colocated or at the end.
    assert_eq!(texts(&run("中文", QUERY)), ["中文"]);
    assert_eq!(texts(&run("中文x", QUERY)), ["中文", "x"]);
}

#[test]
fn pure_runs_japanese_korean_and_mixed_tokens() {
    assert_eq!(positioned("中文", DOC), ["中文"]);
    assert_eq!(
        positioned("中华人民共和国", QUERY),
        ["中华", "华人", "人民", "民共", "共和", "和国"]
    );
    assert_eq!(
        positioned("ひらがなカタカナ", QUERY),
        ["ひら", "らが", "がな", "なカ", "カタ", "タカ", "カナ"]
    );
    assert_eq!(
        positioned("한국어 텍스트", QUERY),
        ["한국", "국어", "어", "텍스", "스트"]
    );
    assert_eq!(
        positioned("iPhone15发布会", QUERY),
        ["iphone15", "发布", "布会"]
    );
    assert_eq!(
        positioned("第3季第12集", QUERY),
        ["第", "3", "季第", "12", "集"]
    );
}

#[test]
fn full_width_digits_emoji_and_combining_marks() {
    // Full-width forms are not CJK and are not normalised: they stay one token.
    assert_eq!(texts(&run("第１２集", QUERY)), ["第", "１２", "集"]);
    assert_eq!(texts(&run("ＡＢＣ漫画", QUERY)), ["ａｂｃ", "漫画"]);
    // Emoji are separators.
    assert_eq!(texts(&run("看😀电影", QUERY)), ["看", "电影"]);
    // The run end keeps its own position here: the next token opens another run.
    assert_eq!(texts(&run("电影🎬推荐", QUERY)), ["电影", "影", "推荐"]);
    // A combining acute is removed with remove_diacritics=1, inside and outside CJK tokens.
    assert_eq!(texts(&run("Cafe\u{301} Café", QUERY)), ["cafe", "cafe"]);
    assert_eq!(texts(&run("e\u{301}影视", QUERY)), ["e", "影视"]);
    // A mark between two CJK characters folds away and the run stays a run.
    assert_eq!(
        run("影\u{301}视", QUERY),
        vec![("影视".into(), 0, 8, false)]
    );
    // A mark cannot start a token.
    assert_eq!(texts(&run("\u{301}影", QUERY)), ["影"]);
}

#[test]
fn offsets_point_at_the_original_bytes() {
    // Accented Latin changes length when folded; the offsets still frame the original bytes.
    let text = "Ünïcödé修改ÉTÉ服务 x";
    assert_eq!(
        run(text, QUERY)
            .iter()
            .map(|t| (t.0.as_str(), &text[t.1..t.2]))
            .collect::<Vec<_>>(),
        [
            ("unicode", "Ünïcödé"),
            ("修改", "修改"),
            ("ete", "ÉTÉ"),
            ("服务", "服务"),
            ("x", "x"),
        ]
    );
}

#[test]
fn flags_map_to_reasons() {
    use ffi::{
        FTS5_TOKENIZE_AUX, FTS5_TOKENIZE_DOCUMENT, FTS5_TOKENIZE_PREFIX, FTS5_TOKENIZE_QUERY,
    };
    assert_eq!(TokenizeReason::from_flags(FTS5_TOKENIZE_DOCUMENT), DOC);
    assert_eq!(
        TokenizeReason::from_flags(FTS5_TOKENIZE_AUX),
        TokenizeReason::Aux
    );
    assert_eq!(TokenizeReason::from_flags(FTS5_TOKENIZE_QUERY), QUERY);
    assert_eq!(
        TokenizeReason::from_flags(FTS5_TOKENIZE_QUERY | FTS5_TOKENIZE_PREFIX),
        TokenizeReason::Query { prefix: true }
    );
    // Aux must reproduce document positions exactly (highlight relies on it).
    let text = "修改youer服务端 中文 文本 A单B";
    assert_eq!(run(text, TokenizeReason::Aux), run(text, DOC));
    // A prefix query term tokenizes like a query; FTS5 applies the `*` to the last token.
    assert_eq!(
        run("服务端", TokenizeReason::Query { prefix: true }),
        run("服务端", QUERY)
    );
}

#[test]
fn arguments_are_parsed_like_unicode61() {
    assert!(CjkTokenizer::new(&["remove_diacritics"]).is_err());
    assert!(CjkTokenizer::new(&["remove_diacritics", "3"]).is_err());
    assert!(CjkTokenizer::new(&["bogus", "1"]).is_err());
    assert!(CjkTokenizer::new(&["categories", "Lx"]).is_err());
    let t = CjkTokenizer::new(&[
        "REMOVE_DIACRITICS",
        "0",
        "tokenchars",
        "_-",
        "separators",
        "x",
    ])
    .unwrap();
    let out = bytes_run(&t, "a_b-Café xyz".as_bytes(), QUERY);
    let out: Vec<&[u8]> = out.iter().map(|t| t.0.as_slice()).collect();
    assert_eq!(out, [b"a_b-caf\xc3\xa9".as_slice(), b"yz"]);
}

// ---------------------------------------------------------------------------------------------
// Equivalence with SQLite's unicode61
// ---------------------------------------------------------------------------------------------

fn assert_same_as_unicode61(args: &[&str], text: &[u8]) {
    let reference = Unicode61::new(args);
    let ours = no_run_ends(args);
    let expected = reference.tokenize(text);
    let actual = bytes_run(&ours, text, DOC);
    assert_eq!(actual.len(), expected.len(), "token count with {args:?}");
    for (a, e) in actual.iter().zip(&expected) {
        assert_eq!(a, e, "with {args:?}");
    }
}

#[test]
fn every_non_cjk_code_point_tokenizes_exactly_like_unicode61() {
    let mut text = Vec::new();
    for c in (1u32..0x11_0000).filter(|&c| char::from_u32(c).is_some() && !is_cjk_code(c)) {
        push_utf8(&mut text, c);
        text.push(b' ');
        // After a letter, to exercise continuation (diacritics) and folding inside tokens.
        text.push(b'Q');
        push_utf8(&mut text, c);
        text.push(b'\t');
    }
    for args in [
        &[][..],
        &["remove_diacritics", "0"],
        &["remove_diacritics", "2"],
        &[
            "categories",
            "L* N* Co Mn Sm",
            "tokenchars",
            "-.é",
            "separators",
            "xé",
        ],
    ] {
        assert_same_as_unicode61(args, &text);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    #[test]
    fn mixed_text_splits_like_the_reference_algorithm(
        text in "[a-zA-Z0-9 ,._'éÉÅǅΣ\u{301}\u{323}１２ＡＢ😀𐐀中文日本語の한국어ｶﾀｶﾅ𠀀々・「」]{0,40}"
    ) {
        let reference = Unicode61::new(&[]);
        let expected = reference_split(&reference, text.as_bytes());
        let actual: Vec<Vec<u8>> = bytes_run(&no_run_ends(&[]), text.as_bytes(), DOC)
            .into_iter()
            .map(|t| t.0)
            .collect();
        proptest::prop_assert_eq!(actual, expected);
        // Offsets: every token is exactly what its original bytes fold to.
        for (token, start, end, _) in run(&text, DOC) {
            let refold: String = text[start..end]
                .chars()
                .filter_map(|c| char::from_u32(fold(c as u32, 1, bmp_classes())))
                .filter(|&c| c != '\0')
                .collect();
            proptest::prop_assert_eq!(&refold, &token, "bytes {}..{}", start, end);
        }
    }

    #[test]
    fn arbitrary_bytes_match_unicode61(text in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
        let reference = Unicode61::new(&[]);
        let expected = reference.tokenize(&text);
        proptest::prop_assume!(expected.iter().all(|(t, _, _)| {
            let mut i = 0;
            while i < t.len() {
                let (c, next) = read_utf8(t, i);
                if is_cjk_code(c) { return false; }
                i = next;
            }
            true
        }));
        proptest::prop_assert_eq!(bytes_run(&CjkTokenizer::default(), &text, DOC), expected);
    }
}

// ---------------------------------------------------------------------------------------------
// On a real connection
// ---------------------------------------------------------------------------------------------

fn fts_connection(tokenize_arg: &str) -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    register_cjk_tokenizer(&conn).unwrap();
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{tokenize_arg}');"
    ))
    .unwrap();
    conn
}

fn matches(conn: &Connection, query: &str) -> Vec<i64> {
    let mut stmt = conn
        .prepare("SELECT rowid FROM t WHERE t MATCH ?1 ORDER BY rowid")
        .unwrap();
    stmt.query_map([query], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn registers_and_answers_match_queries_with_highlight() {
    let conn = fts_connection("cjk_unicode61");
    // Registering twice on one connection is harmless.
    register_cjk_tokenizer(&conn).unwrap();
    let docs = [
        "修改youer服务端的计划",
        "下载订阅 已完成",
        "单位的计划单",
        "Café au lait, 東京駅で",
        "웅기가 말했다",
    ];
    for (i, doc) in docs.iter().enumerate() {
        conn.execute(
            "INSERT INTO t(rowid, body) VALUES (?1, ?2)",
            rusqlite::params![i as i64 + 1, doc],
        )
        .unwrap();
    }
    assert_eq!(matches(&conn, "youer"), [1]);
    assert_eq!(matches(&conn, "\"服务端\""), [1]);
    assert_eq!(matches(&conn, "\"订阅\""), [2]);
    assert_eq!(matches(&conn, "\"计划\""), [1, 3]);
    assert_eq!(matches(&conn, "cafe"), [4]);
    assert_eq!(matches(&conn, "\"京駅\""), [4]);
    assert_eq!(matches(&conn, "\"말했\""), [5]);
    // Single characters through the index: bigram start, run end, isolated.
    assert_eq!(matches(&conn, "\"单\"*"), [3]);
    assert_eq!(matches(&conn, "\"端\"*"), [1]);
    assert_eq!(matches(&conn, "\"划\"*"), [1, 3]);
    assert_eq!(matches(&conn, "\"成\"*"), [2]);
    // Phrases never bridge two runs.
    assert_eq!(matches(&conn, "\"载订阅已\""), Vec::<i64>::new());
    assert_eq!(matches(&conn, "\"订阅 已完成\""), [2]);

    let highlighted: String = conn
        .query_row(
            "SELECT highlight(t, 0, '[', ']') FROM t WHERE t MATCH '\"服务\"'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(highlighted, "修改youer[服务]端的计划");
    let highlighted: String = conn
        .query_row(
            "SELECT highlight(t, 0, '[', ']') FROM t WHERE t MATCH 'cafe'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(highlighted, "[Café] au lait, 東京駅で");
    let snippet: String = conn
        .query_row(
            "SELECT snippet(t, 0, '[', ']', '…', 4) FROM t WHERE t MATCH '\"端\"*'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(snippet.contains("[端"), "{snippet}");

    conn.execute("INSERT INTO t(t) VALUES ('integrity-check')", [])
        .unwrap();
    conn.execute("DELETE FROM t WHERE rowid = 1", []).unwrap();
    conn.execute("INSERT INTO t(t) VALUES ('integrity-check')", [])
        .unwrap();
    assert_eq!(matches(&conn, "\"服务端\""), Vec::<i64>::new());
}

#[test]
fn positions_seen_by_fts5_include_colocated_run_ends() {
    let conn = fts_connection("cjk_unicode61");
    conn.execute_batch(
        "INSERT INTO t(rowid, body) VALUES (1, '中文 文本');
         CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');",
    )
    .unwrap();
    let mut stmt = conn
        .prepare("SELECT term, offset FROM v ORDER BY offset, term")
        .unwrap();
    let rows: Vec<(String, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows,
        [
            ("中文".to_owned(), 0),
            ("文".to_owned(), 1),
            ("文本".to_owned(), 2),
            ("本".to_owned(), 2),
        ]
    );
}

#[test]
fn tokenizer_arguments_pass_through_and_bad_ones_fail_the_create() {
    let conn = fts_connection("cjk_unicode61 remove_diacritics 0");
    conn.execute("INSERT INTO t(rowid, body) VALUES (1, 'Café 咖啡')", [])
        .unwrap();
    assert_eq!(matches(&conn, "cafe"), Vec::<i64>::new());
    assert_eq!(matches(&conn, "café"), [1]);

    let conn = Connection::open_in_memory().unwrap();
    register_cjk_tokenizer(&conn).unwrap();
    let err = conn
        .execute_batch("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='cjk_unicode61 bogus 1')")
        .unwrap_err();
    assert!(err.to_string().contains("tokenizer"), "{err}");
    // Without registration the table cannot be created at all.
    let conn = Connection::open_in_memory().unwrap();
    assert!(
        conn.execute_batch("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='cjk_unicode61')")
            .is_err()
    );
}

#[test]
fn invalid_utf8_in_stored_text_is_tokenized_without_error() {
    let conn = fts_connection("cjk_unicode61");
    conn.execute(
        "INSERT INTO t(rowid, body) VALUES (1, CAST(X'E4B8AD80FFE69687C3' || X'41E4B8AD' AS TEXT))",
        [],
    )
    .unwrap();
    conn.execute("INSERT INTO t(t) VALUES ('integrity-check')", [])
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Item 3: the indexed answer equals a LIKE scan
// ---------------------------------------------------------------------------------------------

const LIKE_ALPHABET: &[char] = &[
    '中', '文', '日', '本', '人', 'の', '한', 'a', 'B', '1', ' ', '，', '.', '々',
];
const QUERY_ALPHABET: &[char] = &['中', '文', '日', '本', '人', 'の', '한', '々'];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    #[test]
    fn cjk_index_answers_exactly_like_a_like_scan(
        docs in proptest::collection::vec(
            proptest::collection::vec(proptest::sample::select(LIKE_ALPHABET), 0..24), 1..10),
        queries in proptest::collection::vec(
            proptest::collection::vec(proptest::sample::select(QUERY_ALPHABET), 1..5), 1..6),
    ) {
        let conn = Connection::open_in_memory().unwrap();
        register_cjk_tokenizer(&conn).unwrap();
        conn.execute_batch(
            "CREATE TABLE docs(id INTEGER PRIMARY KEY, body TEXT);
             CREATE VIRTUAL TABLE t USING fts5(body, content='docs', content_rowid='id',
                                              tokenize='cjk_unicode61');",
        ).unwrap();
        for (i, doc) in docs.iter().enumerate() {
            let body: String = doc.iter().collect();
            conn.execute("INSERT INTO docs(id, body) VALUES (?1, ?2)",
                rusqlite::params![i as i64 + 1, body]).unwrap();
            conn.execute("INSERT INTO t(rowid, body) VALUES (?1, ?2)",
                rusqlite::params![i as i64 + 1, body]).unwrap();
        }
        for query in &queries {
            let q: String = query.iter().collect();
            let fts_query = if query.len() == 1 { format!("\"{q}\"*") } else { format!("\"{q}\"") };
            let indexed = matches(&conn, &fts_query);
            let mut stmt = conn.prepare(
                "SELECT id FROM docs WHERE body LIKE '%' || ?1 || '%' ORDER BY id").unwrap();
            let scanned: Vec<i64> = stmt.query_map([&q], |r| r.get(0)).unwrap()
                .collect::<Result<_, _>>().unwrap();
            proptest::prop_assert_eq!(indexed, scanned, "query {:?}", q);
        }
        conn.execute("INSERT INTO t(t) VALUES ('integrity-check')", []).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Panics never cross into C
// ---------------------------------------------------------------------------------------------

struct Panicky;

impl NativeTokenizer for Panicky {
    const NAME: &'static CStr = c"panicky";

    fn from_args(args: &[&str]) -> Result<Self, TokenizerArgError> {
        assert!(
            args.first() != Some(&"explode"),
            "deliberate panic in xCreate"
        );
        Ok(Self)
    }

    fn tokenize(&self, _text: &[u8], _reason: TokenizeReason, _emit: &mut impl Emit) {
        panic!("deliberate panic in xTokenize");
    }
}

#[test]
fn a_panicking_callback_becomes_an_sqlite_error() {
    let conn = Connection::open_in_memory().unwrap();
    register::<Panicky>(&conn).unwrap();
    conn.execute_batch("CREATE VIRTUAL TABLE p USING fts5(body, tokenize='panicky')")
        .unwrap();
    assert!(
        conn.execute("INSERT INTO p(body) VALUES ('x')", [])
            .is_err()
    );
    assert!(
        conn.execute_batch("CREATE VIRTUAL TABLE q USING fts5(body, tokenize='panicky explode 1')")
            .is_err()
    );
    // The connection is intact.
    let one: i64 = conn.query_row("SELECT 1", [], |r| r.get(0)).unwrap();
    assert_eq!(one, 1);
}
