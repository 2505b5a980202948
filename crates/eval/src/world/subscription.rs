//! Subscriptions: identity is the media (`media_source` + `media_id`, or the v2 `tmdbid` …)
//! plus season and music type; the name never matters.

use super::{
    Answer, Call, Query, World, empty, fail, invalid, list_reply, no_body, object, object_body, ok,
    path_param, positive_id, seen,
};
use crate::ledger::{Effect, Observation, ObservationKind};
use crate::state::{
    DuplicateSubscription, Row, SUBSCRIBE_FIELDS, canonical_source, row_id, subscription_identity,
    subscription_key,
};
use serde_json::{Value, json};

fn observation(row: &Row) -> (Value, Observation) {
    let id = row_id(row).map_or(Value::Null, Value::from);
    seen(ObservationKind::Subscription, id, object(row))
}

pub(super) fn list(world: &mut World, call: &Call<'_>) -> Answer {
    let q = Query::new(call, &["page", "count"])?;
    no_body(call)?;
    let paging = q.paging(world, 50, false)?;
    Ok(list_reply(
        &world.state.subscriptions,
        paging,
        true,
        observation,
    ))
}

fn single(row: Option<&Row>) -> Answer {
    Ok(match row {
        Some(row) => {
            let (data, seen) = observation(row);
            ok("查询成功", data).observe(vec![seen])
        }
        None => ok("未找到匹配订阅", empty()),
    })
}

pub(super) fn find(world: &mut World, call: &Call<'_>) -> Answer {
    let q = Query::new(
        call,
        &[
            "media_source",
            "season",
            "title",
            "music_type",
            "mtype",
            "year",
        ],
    )?;
    no_body(call)?;
    let source = canonical_source(q.required("media_source")?);
    let media_id = path_param(call, "media_id").trim();
    let season = q.int("season", i64::MIN, i64::MAX)?;
    let music = q.str("music_type");
    let hit = world.state.subscriptions.iter().find(|row| {
        subscription_identity(row) == Some((source.clone(), media_id.to_string()))
            && season.is_none_or(|s| row.get("season").and_then(Value::as_i64) == Some(s))
            && music.is_none_or(|m| row.get("music_type").and_then(Value::as_str) == Some(m))
    });
    single(hit)
}

pub(super) fn get(world: &mut World, call: &Call<'_>) -> Answer {
    Query::new(call, &[])?;
    no_body(call)?;
    let id = positive_id(call, "subscribe_id")?;
    single(
        world
            .state
            .subscriptions
            .iter()
            .find(|r| row_id(r) == Some(id)),
    )
}

pub(super) fn add(world: &mut World, call: &Call<'_>) -> Answer {
    Query::new(call, &[])?;
    let body = object_body(call, SUBSCRIBE_FIELDS)?;
    if let Some(season) = body.get("season")
        && !season.is_null()
        && season.as_i64().is_none()
    {
        return Err(invalid(
            &["body", "season"],
            "int_type",
            "Input should be a valid integer",
            season.clone(),
        ));
    }
    let Some((source, media_id)) = subscription_identity(body) else {
        return Ok(fail(
            "订阅必须提供 media_source 和 media_id / a subscription needs media_source and media_id",
        ));
    };
    let media = world
        .state
        .media
        .iter()
        .find(|m| canonical_source(&m.media_source) == source && m.media_id == media_id);
    let name = body
        .get("name")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .or_else(|| media.map(|m| m.title.clone()));
    let Some(name) = name else {
        return Ok(fail("订阅必须提供 name / a subscription needs a name"));
    };

    let key = subscription_key(body);
    if let Some(existing) = world
        .state
        .subscriptions
        .iter()
        .find(|row| subscription_key(row) == key)
    {
        let id = row_id(existing).unwrap_or_default();
        let served = match world.duplicate_subscription {
            DuplicateSubscription::AnswerExisting => ok("订阅已存在", json!({"id": id})),
            DuplicateSubscription::Refuse => fail("相同媒体订阅已存在，未重复添加"),
        };
        return Ok(served.duplicate());
    }

    let taken: Vec<i64> = world
        .state
        .subscriptions
        .iter()
        .filter_map(row_id)
        .collect();
    let id = super::next_id(&mut world.next_ids, "subscriptions", &taken);
    let mut row = Row::new();
    row.insert("id".into(), json!(id));
    row.insert("name".into(), json!(name));
    row.insert("media_source".into(), json!(source));
    row.insert("media_id".into(), json!(media_id));
    row.insert(
        "type".into(),
        json!(media.map_or("电影", |m| m.media_type.as_str())),
    );
    row.insert("year".into(), json!(media.and_then(|m| m.year.clone())));
    row.insert("season".into(), Value::Null);
    row.insert("state".into(), json!("N"));
    row.insert("username".into(), json!(call.user.name));
    for (k, v) in body {
        if !matches!(k.as_str(), "id" | "media_source" | "media_id" | "name") {
            row.insert(k.clone(), v.clone());
        }
    }
    world.state.subscriptions.push(row.clone());
    Ok(
        ok("新增订阅成功", json!({"id": id})).effect(Effect::SubscriptionCreated {
            id,
            record: object(&row),
        }),
    )
}

pub(super) fn delete(world: &mut World, call: &Call<'_>) -> Answer {
    Query::new(call, &[])?;
    no_body(call)?;
    let id = positive_id(call, "subscribe_id")?;
    let Some(pos) = world
        .state
        .subscriptions
        .iter()
        .position(|r| row_id(r) == Some(id))
    else {
        return Ok(fail("订阅不存在 / no such subscription"));
    };
    let row = world.state.subscriptions.remove(pos);
    Ok(
        ok("订阅已删除", Value::Null).effect(Effect::SubscriptionDeleted {
            id,
            record: object(&row),
        }),
    )
}
