//! Both languages for what the web page shows (issue 29 item 6): the Chinese text of every
//! stable error code a person may read (HTTP errors and SSE `error` frames), whether retrying
//! may help, and the codes of host notices stored in a chat (so the page renders them in its own
//! language, whatever language they were written in).

/// The language a front end asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Locale {
    #[default]
    En,
    Zh,
}

impl Locale {
    /// From an explicit choice (`X-MoviePilot-Locale`), which wins, or `Accept-Language`: the
    /// first language tag whose weight is not zero decides; Chinese for any `zh…`.
    pub fn negotiate(explicit: Option<&str>, accept_language: Option<&str>) -> Locale {
        let zh = |tag: &str| tag.trim().to_ascii_lowercase().starts_with("zh");
        if let Some(choice) = explicit.map(str::trim).filter(|c| !c.is_empty()) {
            return if zh(choice) { Locale::Zh } else { Locale::En };
        }
        let first = accept_language.and_then(|header| {
            header
                .split(',')
                .map(|item| {
                    let mut parts = item.split(';');
                    let tag = parts.next().unwrap_or_default().trim().to_string();
                    let q = parts
                        .find_map(|p| p.trim().strip_prefix("q="))
                        .and_then(|q| q.trim().parse::<f32>().ok())
                        .unwrap_or(1.0);
                    (tag, q)
                })
                .filter(|(tag, q)| !tag.is_empty() && *q > 0.0)
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(tag, _)| tag)
        });
        match first {
            Some(tag) if zh(&tag) => Locale::Zh,
            _ => Locale::En,
        }
    }
}

impl From<mpa_protocol::Lang> for Locale {
    fn from(lang: mpa_protocol::Lang) -> Locale {
        match lang {
            mpa_protocol::Lang::En => Locale::En,
            mpa_protocol::Lang::Zh => Locale::Zh,
        }
    }
}

impl From<Locale> for mpa_protocol::Lang {
    fn from(locale: Locale) -> mpa_protocol::Lang {
        match locale {
            Locale::En => mpa_protocol::Lang::En,
            Locale::Zh => mpa_protocol::Lang::Zh,
        }
    }
}

/// The Chinese text for an error code; `None` for codes without one (the English text stands).
pub fn zh(code: &str) -> Option<&'static str> {
    Some(match code {
        "unauthorized" => "未登录、令牌无效或已过期，请重新登录",
        "not_found" => "没有这个接口",
        "method_not_allowed" => "该接口不支持这种请求方法",
        "session_not_found" => "会话不存在",
        "invalid_session_id" => "会话 ID 无效：只能使用 1-128 个字母、数字或 : . _ -",
        "bad_request" => "请求有误",
        "invalid_json" => "请求内容不是有效的 JSON",
        "invalid_body" => "请求内容的格式不对",
        "invalid_query" => "查询参数有误",
        "invalid_path" => "路径参数有误",
        "invalid_input" => "输入的值不符合要求",
        "unsupported_media_type" => "请求内容须为 JSON（Content-Type: application/json）",
        "payload_too_large" => "请求内容超过服务器允许的大小",
        "request_timeout" => "请求内容传输超时，请重新发送",
        "body_unreadable" => "请求内容未能完整读取",
        "too_many_requests" | "too_many_connections" => "请求过多，请稍后再试",
        "agent_manager_unavailable" => "智能体服务暂不可用（主机正在关闭）",
        "agent_manager_queue_full" => "该会话排队的消息已满，请等当前任务完成后再发送",
        "internal_error" => "服务器处理失败",
        "storage_unavailable" | "storage_error" => "存储暂不可用",
        "storage_full" => "主机磁盘已满，新的对话暂时无法保存",
        "message_too_large" => "消息太长",
        "message_exceeds_context_window" => "消息超出了模型的上下文窗口",
        "invalid_credentials" => "用户名或密码错误",
        "too_many_login_attempts" => "登录失败次数过多，请稍后再试",
        "login_busy" => "服务器正忙于处理其他登录，请稍后再试",
        "account_disabled" => "该账户未启用",
        "attachment_too_large" => "文件过大：附件最大 32 MiB",
        "empty_file" => "文件是空的",
        "attachment_not_found" => "附件不存在（未知、已过期或不属于你）",
        "attachment_storage_error" => "附件未能保存",
        "missing_file" => "表单中没有 file 字段",
        "invalid_multipart" => "请以 multipart/form-data 上传文件，字段名为 file",
        "admin_required" => "只有系统管理员可以执行此操作",
        "session_busy" => "该会话正在执行任务，请先停止或等待其结束",
        "nothing_to_regenerate" => "该会话中没有可重新发送的消息",
        "model_unreachable" => {
            "无法连接到模型服务。请检查 LLM_BASE_URL 是否指向正在运行的 OpenAI 兼容服务、LLM_MODEL 是否为该服务提供的模型，然后重试。"
        }
        "model_network_error" => "与模型服务的网络连接出错，请重试",
        "model_auth" => "模型服务拒绝了密钥（LLM_API_KEY）",
        "model_rate_limited" => "模型服务限流，请稍后重试",
        "model_server_error" => "模型服务出错，请稍后重试",
        "model_bad_response" => "模型服务的回复无法解析",
        "model_config" => "模型配置有误（LLM_BASE_URL / LLM_MODEL）",
        "model_context_exceeded" => "对话已超出模型的上下文窗口：请新建会话，或调大模型的上下文",
        "iteration_limit" => "本轮达到了模型调用次数上限（LLM_MAX_ITERATIONS），工作可能未完成",
        "model_empty_answer" => "模型连续两次返回空回答，请重试或换用更强的模型",
        "output_truncated" => "回答被模型的输出上限截断（LLM_MAX_OUTPUT_TOKENS），可以让它继续",
        "continuation_exhausted" => "本轮未完成：模型仍只描述下一步，未给出完成结果",
        _ => return None,
    })
}

/// Whether the English message of `code` carries details worth keeping next to the Chinese
/// text (a field name, a size), rather than being the code's fixed sentence.
pub fn has_detail(code: &str) -> bool {
    matches!(
        code,
        "invalid_body"
            | "invalid_json"
            | "invalid_query"
            | "invalid_path"
            | "invalid_input"
            | "bad_request"
            | "message_too_large"
            | "message_exceeds_context_window"
            | "model_network_error"
            | "model_server_error"
            | "model_bad_response"
    )
}

/// `message` in `locale`: English as it is; Chinese from the table (with the English detail
/// when the message has one), or the English text for a code the table lacks.
pub fn localise(code: &str, message: &str, locale: Locale) -> String {
    match (locale, zh(code)) {
        (Locale::En, _) | (Locale::Zh, None) => message.to_string(),
        (Locale::Zh, Some(zh)) if has_detail(code) && !message.is_empty() => {
            format!("{zh}（{message}）")
        }
        (Locale::Zh, Some(zh)) => zh.to_string(),
    }
}

/// Whether trying the same thing again may succeed (the page offers a retry button).
pub fn retryable(code: &str) -> bool {
    matches!(
        code,
        "model_unreachable"
            | "model_network_error"
            | "model_rate_limited"
            | "model_server_error"
            | "model_empty_answer"
            | "agent_manager_queue_full"
            | "too_many_requests"
            | "request_timeout"
            | "storage_error"
            | "storage_unavailable"
    )
}

/// The code of a host notice stored in a chat, from its text (chats written before notices had
/// codes included): `turn_stopped_by_user`, `turn_stopped_by_shutdown`, `turn_failed`,
/// `turn_interrupted` (the process died mid-turn).
pub fn notice_code(text: &str) -> Option<&'static str> {
    let t = text.trim_start();
    if t.starts_with("[The previous turn was stopped by the user") {
        Some("turn_stopped_by_user")
    } else if t.starts_with("[The previous turn was stopped because the host was shutting down") {
        Some("turn_stopped_by_shutdown")
    } else if t.starts_with("[The previous turn ended with an error") {
        Some("turn_failed")
    } else if t.starts_with("[The previous turn did not finish") {
        Some("turn_interrupted")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_explicit_choice_wins_over_accept_language() {
        assert_eq!(
            Locale::negotiate(None, Some("zh-CN,zh;q=0.9,en;q=0.8")),
            Locale::Zh
        );
        assert_eq!(Locale::negotiate(None, Some("en-US,zh;q=0.5")), Locale::En);
        assert_eq!(Locale::negotiate(None, Some("en;q=0.1, zh-TW")), Locale::Zh);
        assert_eq!(Locale::negotiate(Some("en"), Some("zh-CN")), Locale::En);
        assert_eq!(Locale::negotiate(Some("zh-CN"), None), Locale::Zh);
        assert_eq!(Locale::negotiate(None, None), Locale::En);
    }

    #[test]
    fn details_survive_translation() {
        assert_eq!(
            localise("invalid_body", "missing field `text`", Locale::Zh),
            "请求内容的格式不对（missing field `text`）"
        );
        assert_eq!(
            localise("session_not_found", "session not found", Locale::Zh),
            "会话不存在"
        );
        assert_eq!(localise("no_such_code", "as is", Locale::Zh), "as is");
    }
}
