//! Admin operations: system settings (with secrets redacted unless asked for) and scheduler jobs.

use super::{
    Answer, Call, Query, World, fail, invalid, no_body, object_body, ok, plain_list, seen,
};
use crate::ledger::{Effect, ObservationKind};
use serde_json::{Map, Value, json};

const REDACTED: &str = "******";

/// Whether a setting or field name holds a credential.
fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "password", "passwd", "token", "secret", "cookie", "apikey", "api_key", "_key",
    ]
    .iter()
    .any(|s| n.contains(s))
        || n == "key"
}

/// Masks credential-named fields at any depth.
fn redact(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let masked = if secret_name(k) && !v.is_null() && v != "" {
                        json!(REDACTED)
                    } else {
                        redact(v)
                    };
                    (k.clone(), masked)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        other => other.clone(),
    }
}

fn shown(key: &str, value: &Value, show_secrets: bool) -> Value {
    match (show_secrets, secret_name(key)) {
        (true, _) => value.clone(),
        (false, true) if !value.is_null() => json!(REDACTED),
        (false, _) => redact(value),
    }
}

pub(super) fn settings_get(world: &mut World, call: &Call<'_>) -> Answer {
    let q = Query::new(
        call,
        &[
            "group",
            "include_values",
            "keyword",
            "setting_key",
            "show_secrets",
        ],
    )?;
    no_body(call)?;
    let include_values = q.bool("include_values")?.unwrap_or(false);
    let show_secrets = q.bool("show_secrets")?.unwrap_or(false);
    let keyword = q
        .str("keyword")
        .map(str::to_lowercase)
        .filter(|k| !k.is_empty());
    let setting_key = q.str("setting_key").filter(|k| !k.is_empty());
    let group = q.str("group").unwrap_or("all");
    let group_keys = (group != "all").then(|| world.state.setting_groups.get(group));
    if let Some(None) = group_keys {
        return Ok(fail("未知的设置分组 / unknown settings group"));
    }
    let mut items = Vec::new();
    let mut observations = Vec::new();
    for (key, value) in &world.state.settings {
        if setting_key.is_some_and(|k| k != key)
            || keyword
                .as_ref()
                .is_some_and(|kw| !key.to_lowercase().contains(kw.as_str()))
            || group_keys.flatten().is_some_and(|keys| !keys.contains(key))
        {
            continue;
        }
        let mut item = Map::new();
        item.insert("key".into(), json!(key));
        item.insert("secret".into(), json!(secret_name(key)));
        if include_values || setting_key.is_some() {
            item.insert("value".into(), shown(key, value, show_secrets));
        }
        let (item, observation) = seen(ObservationKind::Setting, key.clone(), Value::Object(item));
        observations.push(observation);
        items.push(item);
    }
    if let Some(k) = setting_key
        && items.is_empty()
    {
        return Ok(fail(&format!("设置项不存在 / no such setting: {k}")));
    }
    Ok(ok("查询成功", Value::Array(items)).observe(observations))
}

fn item_matches(item: &Value, item_key: &str, wanted: &Value) -> bool {
    let wanted = match wanted {
        Value::Object(m) => m.get(item_key).unwrap_or(&Value::Null),
        other => other,
    };
    !wanted.is_null() && item.get(item_key) == Some(wanted)
}

pub(super) fn settings_update(world: &mut World, call: &Call<'_>) -> Answer {
    Query::new(call, &[])?;
    let body = object_body(call, &["key", "op", "value", "item_key"])?;
    let Some(key) = body
        .get("key")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
    else {
        return Err(invalid(
            &["body", "key"],
            "missing",
            "Field required",
            Value::Null,
        ));
    };
    let op = body.get("op").and_then(Value::as_str).unwrap_or("replace");
    let item_key = body
        .get("item_key")
        .and_then(Value::as_str)
        .unwrap_or("name");
    let value = body.get("value").cloned().unwrap_or(Value::Null);
    let before = world.state.settings.get(key).cloned();
    let after = match (op, before.clone()) {
        ("replace", _) => value,
        ("merge_dict", current @ (None | Some(Value::Object(_)))) => {
            let Value::Object(patch) = value else {
                return Ok(fail(
                    "merge_dict 需要对象 value / merge_dict needs an object value",
                ));
            };
            let mut merged = match current {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            merged.extend(patch);
            Value::Object(merged)
        }
        ("upsert_list_item", current @ (None | Some(Value::Array(_)))) => {
            if value.get(item_key).is_none_or(Value::is_null) {
                return Ok(fail(&format!(
                    "upsert_list_item 需要带 {item_key} 的对象 / needs an object with `{item_key}`"
                )));
            }
            let mut list = match current {
                Some(Value::Array(l)) => l,
                _ => Vec::new(),
            };
            match list.iter_mut().find(|i| item_matches(i, item_key, &value)) {
                Some(existing) => *existing = value,
                None => list.push(value),
            }
            Value::Array(list)
        }
        ("remove_list_item", Some(Value::Array(mut list))) => {
            let len = list.len();
            list.retain(|i| !item_matches(i, item_key, &value));
            if list.len() == len {
                return Ok(fail("未找到要删除的条目 / no matching list item"));
            }
            Value::Array(list)
        }
        ("merge_dict" | "upsert_list_item" | "remove_list_item", _) => {
            return Ok(fail(&format!(
                "设置 {key} 的类型不支持 {op} / setting {key} does not support {op}"
            )));
        }
        _ => {
            return Err(invalid(
                &["body", "op"],
                "enum",
                "Input should be 'replace', 'merge_dict', 'upsert_list_item' or 'remove_list_item'",
                json!(op),
            ));
        }
    };
    world.state.settings.insert(key.to_string(), after.clone());
    let reply = json!({"key": key, "value": shown(key, &after, false)});
    Ok(ok("设置已更新", reply).effect(Effect::SettingUpdated {
        key: key.to_string(),
        op: op.to_string(),
        before,
        after: Some(after),
    }))
}

pub(super) fn scheduler_list(world: &mut World, call: &Call<'_>) -> Answer {
    let jobs = &world.state.scheduler;
    plain_list(world, call, jobs, ObservationKind::SchedulerJob, |j| {
        j.id.clone().into()
    })
}

pub(super) fn scheduler_run(world: &mut World, call: &Call<'_>) -> Answer {
    let q = Query::new(call, &["jobid"])?;
    no_body(call)?;
    let job_id = q.required("jobid")?;
    let Some(job) = world.state.scheduler.iter_mut().find(|j| j.id == job_id) else {
        return Ok(fail("定时任务不存在 / no such scheduled job"));
    };
    job.status = "正在运行".to_string();
    Ok(
        ok("定时任务已启动 / the job was started", Value::Null).effect(Effect::SchedulerJobRun {
            job_id: job_id.to_string(),
        }),
    )
}
