//! The read-only catalogue operations: sites, library, transfer queue, media, resource search.

use super::{
    Answer, Call, Query, World, fail, list_reply, media_key, no_body, ok, path_param, seen,
    to_value,
};
use crate::ledger::{Observation, ObservationKind};
use crate::magnet;
use crate::state::{Media, Site, Torrent, canonical_source};
use serde_json::{Map, Value, json};

/// Fields of a site row only a superuser may read (MoviePilot hides them from others).
const SITE_SECRETS: [&str; 4] = ["cookie", "apikey", "token", "ua"];

pub(super) fn sites(world: &mut World, call: &Call<'_>) -> Answer {
    let q = Query::new(call, &["page", "count", "name", "status"])?;
    no_body(call)?;
    let status = q.str("status").unwrap_or("all");
    if !matches!(status, "all" | "active" | "inactive") {
        return Err(super::invalid(
            &["query", "status"],
            "enum",
            "Input should be 'active', 'inactive' or 'all'",
            json!(status),
        ));
    }
    let paging = q.paging(world, 50, false)?;
    let name = q.str("name").map(str::to_lowercase);
    let rows: Vec<&Site> = world
        .state
        .sites
        .iter()
        .filter(|s| status == "all" || s.active() == (status == "active"))
        .filter(|s| {
            name.as_ref()
                .is_none_or(|n| s.name.to_lowercase().contains(n.as_str()))
        })
        .collect();
    let super_user = call.super_user;
    Ok(list_reply(&rows, paging, true, |site| {
        let mut record = to_value(*site);
        if !super_user && let Value::Object(m) = &mut record {
            for k in SITE_SECRETS {
                m.remove(k);
            }
        }
        seen(ObservationKind::Site, site.id, record)
    }))
}

pub(super) fn library_exists(world: &mut World, call: &Call<'_>) -> Answer {
    let q = Query::new(
        call,
        &[
            "media_id",
            "media_source",
            "mtype",
            "season",
            "title",
            "year",
        ],
    )?;
    no_body(call)?;
    let season = q.int("season", i64::MIN, i64::MAX)?;
    let source = q.str("media_source").map(canonical_source);
    let media_id = q.str("media_id").filter(|s| !s.is_empty());
    let title = q
        .str("title")
        .map(str::to_lowercase)
        .filter(|s| !s.is_empty());
    let year = q.str("year").filter(|s| !s.is_empty());
    let hit = world.state.library.iter().find(|item| {
        let same = match (media_id, &title) {
            (Some(id), _) => {
                item.media_id == id
                    && source
                        .as_ref()
                        .is_none_or(|s| canonical_source(&item.media_source) == *s)
            }
            (None, Some(t)) => {
                item.title
                    .as_ref()
                    .is_some_and(|it| it.to_lowercase() == *t)
                    && year.is_none_or(|y| item.year.as_deref() == Some(y))
            }
            (None, None) => false,
        };
        same && season.is_none_or(|s| item.seasons.is_empty() || item.seasons.contains(&s))
    });
    Ok(match hit {
        Some(item) => {
            let key = media_key(&item.media_source, &item.media_id);
            let (record, observation) = seen(ObservationKind::Library, key, to_value(item));
            ok("媒体库中已存在", json!({"exists": true, "item": record})).observe(vec![observation])
        }
        None => ok("媒体库中不存在", json!({"exists": false, "item": null})),
    })
}

pub(super) fn transfer_queue(world: &mut World, call: &Call<'_>) -> Answer {
    let q = Query::new(call, &["page", "count"])?;
    no_body(call)?;
    let paging = q.paging(world, 50, false)?;
    let indexed: Vec<(usize, &Value)> = world.state.transfers.iter().enumerate().collect();
    Ok(list_reply(&indexed, paging, true, |(i, job)| {
        let id = job.get("id").cloned().unwrap_or_else(|| json!(i));
        seen(ObservationKind::Transfer, id, (*job).clone())
    }))
}

fn resource_observation(item: &Value) -> Observation {
    let info = item.get("torrent_info").unwrap_or(item);
    let id = info
        .get("enclosure")
        .and_then(Value::as_str)
        .and_then(magnet::infohash)
        .map(Value::from)
        .or_else(|| info.get("title").cloned())
        .unwrap_or(Value::Null);
    Observation::new(ObservationKind::Resource, id, item.clone())
}

pub(super) fn search_results(world: &mut World, call: &Call<'_>) -> Answer {
    Query::new(call, &[])?;
    no_body(call)?;
    let last = world.state.last_search.clone().unwrap_or_default();
    let observations = last.results.iter().map(resource_observation).collect();
    Ok(ok(
        "查询成功",
        json!({"params": last.params, "results": last.results}),
    )
    .observe(observations))
}

fn media_summary(media: Option<&Media>, source: &str, id: &str) -> Value {
    match media {
        Some(m) => media_info(m),
        None => json!({"media_source": source, "media_id": id}),
    }
}

fn context(t: &Torrent, media: Option<&Media>) -> Value {
    json!({
        "meta_info": {"season": t.season},
        "media_info": media_summary(media, &t.media_source, &t.media_id),
        "torrent_info": t.torrent_info,
    })
}

pub(super) fn search_torrents(world: &mut World, call: &Call<'_>) -> Answer {
    let q = Query::new(
        call,
        &[
            "media_source",
            "page",
            "count",
            "area",
            "include_candidates",
            "mtype",
            "music_type",
            "season",
            "sites",
        ],
    )?;
    no_body(call)?;
    let source = canonical_source(q.required("media_source")?);
    let media_id = path_param(call, "media_id").trim().to_string();
    let season = q.int("season", i64::MIN, i64::MAX)?;
    q.bool("include_candidates")?;
    let paging = q.paging(world, 50, false)?;
    let media = find_media(&world.state.media, &source, &media_id).cloned();
    let results: Vec<Value> = world
        .state
        .torrents
        .iter()
        .filter(|t| canonical_source(&t.media_source) == source && t.media_id == media_id)
        .filter(|t| season.is_none_or(|s| t.season.is_none_or(|ts| ts == s)))
        .map(|t| context(t, media.as_ref()))
        .collect();
    let mut params = Map::new();
    params.insert("media_source".into(), json!(source));
    params.insert("media_id".into(), json!(media_id));
    if let Some(s) = season {
        params.insert("season".into(), json!(s));
    }
    world.state.last_search = Some(crate::state::LastSearch {
        params,
        results: results.clone(),
    });
    Ok(list_reply(&results, paging, true, |item| {
        (item.clone(), resource_observation(item))
    }))
}

fn find_media<'a>(media: &'a [Media], source: &str, id: &str) -> Option<&'a Media> {
    media
        .iter()
        .find(|m| canonical_source(&m.media_source) == source && m.media_id == id)
}

/// A `MediaInfo`-shaped record, paired with `media_source` + `media_id` like MoviePilot v3.
fn media_info(m: &Media) -> Value {
    let source = canonical_source(&m.media_source);
    let mut info = json!({
        "source": source,
        "media_source": source,
        "media_id": m.media_id,
        "type": m.media_type,
        "title": m.title,
        "en_title": m.en_title,
        "original_title": m.original_title,
        "year": m.year,
        "title_year": match &m.year { Some(y) => format!("{} ({y})", m.title), None => m.title.clone() },
        "overview": m.overview,
        "poster_path": m.poster_path,
        "vote_average": m.vote_average,
        "names": m.names,
        "seasons": m.seasons,
    });
    let id_field = match source.as_str() {
        "themoviedb" => Some("tmdb_id"),
        "douban" => Some("douban_id"),
        "bangumi" => Some("bangumi_id"),
        _ => None,
    };
    if let (Some(field), Value::Object(obj)) = (id_field, &mut info) {
        let id = m
            .media_id
            .parse::<i64>()
            .map_or(json!(m.media_id), Value::from);
        obj.insert(field.to_string(), id);
    }
    info
}

pub(super) fn media_search(world: &mut World, call: &Call<'_>) -> Answer {
    let q = Query::new(
        call,
        &[
            "title",
            "type",
            "media_source",
            "music_type",
            "page",
            "count",
        ],
    )?;
    no_body(call)?;
    let title = q.required("title")?.trim().to_lowercase();
    let sources: Vec<String> = q
        .all("media_source")
        .into_iter()
        .map(canonical_source)
        .collect();
    let paging = q.paging(world, 8, true)?;
    let hits: Vec<&Media> = world
        .state
        .media
        .iter()
        .filter(|m| sources.is_empty() || sources.contains(&canonical_source(&m.media_source)))
        .filter(|m| {
            std::iter::once(&m.title)
                .chain(m.original_title.iter())
                .chain(m.en_title.iter())
                .chain(m.names.iter())
                .any(|n| n.to_lowercase().contains(&title))
        })
        .collect();
    // `media.search` reports no total (`list/endpoint-defined/no-total`).
    Ok(list_reply(&hits, paging, false, |m| media_seen(m)))
}

fn media_seen(m: &Media) -> (Value, Observation) {
    seen(
        ObservationKind::Media,
        media_key(&m.media_source, &m.media_id),
        media_info(m),
    )
}

pub(super) fn media_detail(world: &mut World, call: &Call<'_>) -> Answer {
    let q = Query::new(call, &["media_source", "type_name"])?;
    no_body(call)?;
    let source = canonical_source(q.required("media_source")?);
    q.required("type_name")?;
    let media_id = path_param(call, "media_id").trim();
    Ok(match find_media(&world.state.media, &source, media_id) {
        Some(m) => {
            let (record, observation) = media_seen(m);
            ok("查询成功", record).observe(vec![observation])
        }
        None => fail("未识别到媒体信息 / no such media"),
    })
}
