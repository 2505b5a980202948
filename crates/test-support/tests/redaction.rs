//! `mpa-redact`'s rules (the one redactor history, model errors and the gateway share) and the
//! user key. The leaf crate has no test binary of its own: its tests run in this workspace-wide
//! binary.

// From crates/redact/src/value.rs.
use mpa_redact::*;
use serde_json::json;
use std::borrow::Cow;

#[test]
fn secret_keys_by_whole_word() {
    for k in [
        "apikey",
        "apiKey",
        "API_KEY",
        "TMDB_API_KEY",
        "cookie",
        "Cookie",
        "passkey",
        "password",
        "site_password",
        "token",
        "github_token",
        "CookieCloudKey",
        "COOKIECLOUD_KEY",
        "secret",
        "client-secret",
        "rss_encrypt_key",
    ] {
        assert!(is_secret_key(k), "{k}");
    }
    for k in [
        "token_count",
        "max_tokens",
        "tokens",
        "passkey_expire",
        "name",
        "cookies_enabled",
        "keyword",
        "secretary",
        "",
    ] {
        assert!(!is_secret_key(k), "{k}");
    }
}

#[test]
fn redacts_nested_values_and_setting_rows() {
    let mut v = json!({
        "data": [
            {"id": 1, "name": "site", "cookie": "uid=1; pass=abc", "apikey": "", "ua": "x"},
            {"key": "TMDB_API_KEY", "value": "0123"},
            {"key": "DOWNLOAD_PATH", "value": "/media"},
        ],
        "token": null,
    });
    assert!(redact_secrets(&mut v));
    assert_eq!(
        v,
        json!({
            "data": [
                {"id": 1, "name": "site", "cookie": REDACTED, "apikey": "", "ua": "x"},
                {"key": "TMDB_API_KEY", "value": REDACTED},
                {"key": "DOWNLOAD_PATH", "value": "/media"},
            ],
            "token": null,
        })
    );
    assert!(!redact_secrets(&mut v), "a second pass finds nothing new");
    assert!(!redact_secrets(&mut json!({"title": "三体", "count": 3})));
}

/// Issue 24 item 7: a credential inside a value reached the model, because results were
/// redacted by key name only.
#[test]
fn credentials_inside_values_are_redacted() {
    let mut v = json!({
        "data": [
            {"key": "PROXY_HOST", "value": "http://bob:s3cret@proxy.lan:7890"},
            {"key": "RSS_URL", "value": "https://pt.example/rss?passkey=0a1b2c3d4e5f&x=1"},
            {"id": 7, "headers": "Authorization: Bearer abcdefgh12345678"},
            {"note": "uses sk-proj-ABCDEFGHIJKLMNOPqrstuv", "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_abc-123"},
        ],
    });
    assert!(redact_secrets(&mut v));
    assert_eq!(
        v,
        json!({
            "data": [
                {"key": "PROXY_HOST", "value": "http://bob:[REDACTED:password]@proxy.lan:7890"},
                {"key": "RSS_URL", "value": "https://pt.example/rss?passkey=[REDACTED:password]&x=1"},
                {"id": 7, "headers": "Authorization: Bearer [REDACTED:token]"},
                {"note": "uses [REDACTED:api_key]", "jwt": "[REDACTED:jwt]"},
            ],
        })
    );
    assert!(!redact_secrets(&mut v), "a second pass finds nothing new");
    // Ordinary strings are left alone.
    let mut plain =
        json!({"title": "流浪地球", "path": "/media/movies", "site": "https://pt.example/"});
    assert!(!redact_secrets(&mut plain));
}

/// Issue 25 item 4: a site's sign-in options (form descriptors) were redacted as secrets.
#[test]
fn form_descriptors_of_credential_fields_stay() {
    let options = json!({
        "hhclub": {
            "name": "HHCLUB",
            "params": {
                "uid": {"name": "UID", "type": "str"},
                "passkey": {"name": "密钥", "type": "password"},
                "password": {"label": "密码", "type": "password", "placeholder": "站点密码"},
            },
        },
    });
    let mut v = options.clone();
    assert!(!redact_secrets(&mut v));
    assert_eq!(v, options);
    // A descriptor that carries what was filled in loses that, and only that.
    let mut filled = json!({
        "passkey": {"name": "密钥", "type": "password", "value": "0a1b2c3d", "default": ""},
        "cookie": {"type": "text", "value": "uid=1; pass=abc", "extra": {"k": 1}},
    });
    assert!(redact_secrets(&mut filled));
    assert_eq!(
        filled,
        json!({
            "passkey": {"name": "密钥", "type": "password", "value": REDACTED, "default": ""},
            "cookie": REDACTED,
        })
    );
}

// From crates/redact/src/user_key.rs.

/// Data directories written before the key moved here (from `mpa-protocol`) are named by
/// these: the derivation must never change a byte.
#[test]
fn keys_are_byte_identical_to_the_stored_ones() {
    for (id, key) in [
        ("42", "fab0a8e0dab62cfe3d8df37119958bde"),
        ("1", "1a055316bcf257d4cb75c1df7393ca1a"),
        ("alice", "cdd7afc5bcea5d8a77df841037c5780a"),
        ("system", "9a46ac033b90164c92038c64dfa92dfd"),
        ("", "542e2cdb8d53a84b7e78e9ed0291640c"),
        ("用户", "bc7d7b6d1e4273027117b78c6dbdc9e1"),
    ] {
        assert_eq!(UserKey::for_user(id).as_str(), key, "id {id:?}");
    }
}

#[test]
fn user_key_is_stable_and_irreversible() {
    let k = UserKey::for_user("42");
    assert_eq!(k.as_str().len(), 32);
    assert_eq!(k, UserKey::for_user(&String::from("42")));
    assert_ne!(k, UserKey::for_user("43"));
    assert_eq!(serde_json::to_value(&k).unwrap(), k.as_str());
}

// From crates/redact/src/text.rs.

#[test]
fn pattern_compiles() {
    // The pattern is private; it compiled if it redacts.
    let header = "Authorization: Bearer abcdef1234567890XYZ";
    assert_ne!(redact(header), header);
}

#[test]
fn redacts_common_secret_shapes() {
    let cases = [
        (
            "Authorization: Bearer abcdef1234567890XYZ",
            "Authorization: Bearer [REDACTED:token]",
        ),
        (
            "login?user=bob&password=hunter2&x=1",
            "login?user=bob&password=[REDACTED:password]&x=1",
        ),
        (
            "key sk-proj-ABCDEFGHIJKLMNOPqrstuv done",
            "key [REDACTED:api_key] done",
        ),
        (
            r#"{"api_key": "k-123456", "n": 1}"#,
            r#"{"api_key": "[REDACTED:api_key]", "n": 1}"#,
        ),
        (
            "https://bob:s3cret@example.com/x",
            "https://bob:[REDACTED:password]@example.com/x",
        ),
        (
            "Cookie: sid=abc; other=def\nnext",
            "Cookie: [REDACTED:cookie]\nnext",
        ),
        (
            "MOVIEPILOT_API_TOKEN=abcdef",
            "MOVIEPILOT_API_TOKEN=[REDACTED:token]",
        ),
        (
            r#"{"arguments":"{\"password\":\"pw123\"}"}"#,
            r#"{"arguments":"{\"password\":\"[REDACTED:password]\"}"}"#,
        ),
    ];
    for (input, want) in cases {
        assert_eq!(redact(input), want, "input: {input}");
    }
}

#[test]
fn jwt_and_pem() {
    let jwt = "tok eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcDEF123_-x end";
    assert_eq!(redact(jwt), "tok [REDACTED:jwt] end");
    let pem = "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\nb";
    assert_eq!(redact(pem), "a\n[REDACTED:private_key]\nb");
}

/// Regression (issue 12, item 6): a password told in a sentence was stored as is.
#[test]
fn passwords_told_in_sentences_are_redacted() {
    let cases = [
        (
            "my password is hunter2",
            "my password is [REDACTED:password]",
        ),
        (
            "My password is sunshine.",
            "My password is [REDACTED:password].",
        ),
        (
            "our wifi password is Tr0ub4dor&3, ok?",
            "our wifi password is [REDACTED:password], ok?",
        ),
        (
            "the new password is: Xk9#mm2q",
            "the new password is: [REDACTED:password]",
        ),
        (
            r#"my password is "correct horse battery" now"#,
            "my password is [REDACTED:password] now",
        ),
        (
            "password was still p4ssw0rd!",
            "password was still [REDACTED:password]",
        ),
        ("我的密码是abc12345", "我的密码是[REDACTED:password]"),
        ("密码：Pa55word,记住", "密码：[REDACTED:password],记住"),
        (
            "NAS 的口令为 s3cr3t!x 别外传",
            "NAS 的口令为 [REDACTED:password] 别外传",
        ),
        ("密码是“hunter two”", "密码是[REDACTED:password]"),
        ("密碼為 qwerty123。", "密碼為 [REDACTED:password]。"),
    ];
    for (input, want) in cases {
        assert_eq!(redact(input), want, "input: {input}");
    }
}

/// Ordinary sentences about passwords survive the sentence patterns unchanged.
#[test]
fn sentences_about_passwords_survive() {
    for s in [
        "The password is too short.",
        "Your password is incorrect, please try again.",
        "the password is required for login",
        "my password is wrong",
        "My password is being reset by the admin",
        "the password was changed yesterday",
        "password is case-sensitive",
        "the password is generated by the server",
        "my password is the same as before",
        "密码是什么?",
        "密码是8位以上的数字和字母组合",
        "请输入密码:",
        "密码为空",
        "忘记密码是很常见的事",
        "密码长度是 16 位",
    ] {
        assert_eq!(redact(s), s, "changed: {s}");
    }
}

/// Redacting twice changes nothing more: the live tool line (redacted result, summarised)
/// and the stored one (redacted again at capture) are the same text.
#[test]
fn redaction_is_idempotent() {
    for s in [
        "Authorization: Bearer abcdef1234567890XYZ",
        "login?user=bob&password=hunter2&x=1",
        "https://bob:s3cret@example.com/x",
        "Cookie: sid=abc; other=def",
        r#"{"api_key": "k-123456"}"#,
        "my password is hunter2",
        "密码：Pa55word",
    ] {
        let once = redact(s).into_owned();
        assert_eq!(redact(&once), once, "input: {s}");
    }
}

/// The model client's error rules, now these: the configured key verbatim whatever its
/// shape, bearer credentials and `sk-` keys from eight characters, and nothing else.
#[test]
fn known_secrets_and_model_error_shapes() {
    let known = [KnownSecret {
        kind: "api_key",
        value: " MYSECRETKEY123 ",
    }];
    assert_eq!(
        redact_known(
            "key MYSECRETKEY123 rejected; header Authorization: Bearer abc.def-ghi; \
             also sk-proj-ABCDEFGH1234 and sk-ABCD1234 and risk-free",
            &known
        ),
        "key [REDACTED:api_key] rejected; header Authorization: Bearer [REDACTED:token]; \
         also [REDACTED:api_key] and [REDACTED:api_key] and risk-free"
    );
    // Too short to be told apart from words.
    let short = [KnownSecret {
        kind: "api_key",
        value: "abc",
    }];
    assert!(matches!(
        redact_known("abc abcd", &short),
        Cow::Borrowed("abc abcd")
    ));
    assert_eq!(redact("sk-short task-force"), "sk-short task-force");
}

#[test]
fn leaves_ordinary_text_alone() {
    for s in [
        "max_tokens=4096 and token_count: 12",
        "the password field is empty: password=\"\"",
        "下载订阅成功 docker networking fixed",
        "token budget is low",
    ] {
        assert!(
            matches!(redact(s), Cow::Borrowed(_)) || redact(s) == s,
            "changed: {s}"
        );
    }
}
