//! An admin's server configuration: what is accepted, what is refused (with a message that
//! never echoes a value), and the view shown back, which never carries an env or header value.

use mpa_mcp::{ServerConfig, TransportKind};
use serde_json::json;

#[test]
fn stdio_and_http_configurations_are_accepted_and_shown_without_their_values() {
    let stdio = ServerConfig::from_json(json!({
        "name": "files", "transport": "stdio", "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
        "env": {"API_TOKEN": "tok-123456789"}, "read_tools": ["read_file"],
    }))
    .unwrap();
    assert_eq!(stdio.transport, TransportKind::Stdio);
    assert!(stdio.is_read("read_file") && !stdio.is_read("write_file"));
    let shown = stdio.public_view();
    assert_eq!(shown["env_names"], json!(["API_TOKEN"]));
    assert!(!shown.to_string().contains("tok-123456789"), "{shown}");

    // `http` is accepted as the reference's name for streamable HTTP.
    let http = ServerConfig::from_json(json!({
        "name": "home", "transport": "http", "url": "https://mcp.example/mcp",
        "headers": {"Authorization": "Bearer abcdefgh12345"},
    }))
    .unwrap();
    assert_eq!(http.transport, TransportKind::StreamableHttp);
    let shown = http.public_view();
    assert_eq!(shown["header_names"], json!(["Authorization"]));
    assert!(!shown.to_string().contains("abcdefgh12345"), "{shown}");
}

#[test]
fn bad_configurations_are_refused_by_field_without_echoing_values() {
    let cases = [
        (
            json!({"name": "", "transport": "stdio", "command": "x"}),
            "name",
        ),
        (
            json!({"name": "a__b", "transport": "stdio", "command": "x"}),
            "name",
        ),
        (
            json!({"name": "a".repeat(25), "transport": "stdio", "command": "x"}),
            "name",
        ),
        (
            json!({"name": "ok", "transport": "stdio", "command": "  "}),
            "command",
        ),
        (
            json!({"name": "ok", "transport": "stdio", "command": "x", "url": "http://h"}),
            "url",
        ),
        (
            json!({"name": "ok", "transport": "streamable_http", "url": "h"}),
            "url",
        ),
        (
            json!({"name": "ok", "transport": "streamable_http", "url": "http://h/mcp",
                   "headers": {"bad header": "v"}}),
            "header",
        ),
        (
            json!({"name": "ok", "transport": "streamable_http", "url": "ftp://h/mcp"}),
            "http:// or https://",
        ),
        (
            json!({"name": "ok", "transport": "streamable_http", "url": "file:///etc/passwd"}),
            "http:// or https://",
        ),
        (
            json!({"name": "ok", "transport": "streamable_http", "url": "http://"}),
            "http:// or https://",
        ),
        (
            json!({"name": "ok", "transport": "streamable_http",
                   "url": "https://me:12345678@h/mcp"}),
            "credentials in headers",
        ),
        (
            json!({"name": "ok", "transport": "streamable_http", "url": "http://h/mcp",
                   "headers": {"Mcp-Session-Id": "12345678"}}),
            "Mcp-Session-Id is set by the MCP transport",
        ),
        (
            json!({"name": "ok", "transport": "streamable_http", "url": "http://h/mcp",
                   "headers": {"Authorization": "Bearer 12345678\r\nX-Evil: 1"}}),
            "the value of header Authorization",
        ),
        (
            json!({"name": "ok", "transport": "pigeon", "command": "x"}),
            "expected one of",
        ),
        (
            json!({"name": "ok", "transport": "stdio", "command": "x", "extra": 1}),
            "extra",
        ),
        (
            json!({"name": "ok", "transport": "stdio", "command": "x",
                   "env": {"K": 12345678}}),
            "wrong type",
        ),
    ];
    for (v, names) in cases {
        let err = ServerConfig::from_json(v.clone()).unwrap_err();
        assert_eq!(err.code(), "invalid_mcp_server");
        let text = err.to_string();
        assert!(text.contains(names), "{v}: {text}");
        assert!(!text.contains("12345678"), "{text}");
    }
}
