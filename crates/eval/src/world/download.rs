//! Downloads, keyed by infohash: `download.add` derives it from the magnet, so a second add of
//! the same resource under another display name or hex case is the same download.

use super::{
    Answer, Call, Query, World, fail, invalid, list_reply, no_body, object, object_body, ok,
    plain_list, seen,
};
use crate::ledger::{Effect, Observation, ObservationKind};
use crate::magnet;
use crate::state::{Row, TORRENT_INFO_FIELDS, canonical_source, row_hash, unknown_fields};
use serde_json::{Value, json};

const ADD_FIELDS: &[&str] = &[
    "torrent_in",
    "media_source",
    "media_id",
    "downloader",
    "save_path",
    "music_type",
    "allow_unrecognized",
];

fn observation(row: &Row) -> (Value, Observation) {
    let id = row_hash(row).map_or(Value::Null, Value::from);
    seen(ObservationKind::Download, id, object(row))
}

/// `download.tasks.active` (`history` false) and `download.history.list` both list the
/// downloader's rows; history is always paged (30 a page).
pub(super) fn active(world: &mut World, call: &Call<'_>, history: bool) -> Answer {
    let allowed: &[&str] = if history {
        &["page", "count"]
    } else {
        &["page", "count", "name"]
    };
    let q = Query::new(call, allowed)?;
    no_body(call)?;
    let paging = q.paging(world, if history { 30 } else { 50 }, history)?;
    let name = q.str("name").filter(|n| !n.is_empty());
    let rows: Vec<&Row> = world
        .state
        .downloads
        .iter()
        .filter(|r| name.is_none_or(|n| r.get("downloader").and_then(Value::as_str) == Some(n)))
        .collect();
    Ok(list_reply(&rows, paging, true, |r| observation(r)))
}

pub(super) fn clients(world: &mut World, call: &Call<'_>) -> Answer {
    let rows = &world.state.downloaders;
    plain_list(world, call, rows, ObservationKind::Downloader, |d| {
        d.name.clone().into()
    })
}

pub(super) fn paths(world: &mut World, call: &Call<'_>) -> Answer {
    let rows = &world.state.download_paths;
    plain_list(world, call, rows, ObservationKind::DownloadPath, |p| {
        p.save_path.clone().into()
    })
}

fn text<'a>(obj: &'a Row, key: &str) -> Option<&'a str> {
    obj.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

pub(super) fn add(world: &mut World, call: &Call<'_>) -> Answer {
    Query::new(call, &[])?;
    let body = object_body(call, ADD_FIELDS)?;
    let Some(Value::Object(torrent)) = body.get("torrent_in") else {
        return Err(invalid(
            &["body", "torrent_in"],
            "model_type",
            "torrent_in must be a TorrentInfo object",
            body.get("torrent_in").cloned().unwrap_or(Value::Null),
        ));
    };
    if let Some(k) = unknown_fields(torrent, TORRENT_INFO_FIELDS).first() {
        return Err(invalid(
            &["body", "torrent_in", k],
            "extra_forbidden",
            "Extra inputs are not permitted (TorrentInfo fields only)",
            torrent[*k].clone(),
        ));
    }
    let Some(title) = text(torrent, "title") else {
        return Ok(fail("资源必须提供 title / torrent_in needs a title"));
    };
    let Some(infohash) = text(torrent, "enclosure").and_then(magnet::infohash) else {
        return Ok(fail(
            "只接受有效 BTIH 磁力资源 / enclosure must be a magnet link with xt=urn:btih:",
        ));
    };
    let catalogued = world.state.torrents.iter().find(|t| {
        t.torrent_info
            .get("enclosure")
            .and_then(Value::as_str)
            .and_then(magnet::infohash)
            .as_deref()
            == Some(infohash.as_str())
    });
    let identity = match (
        text(body, "media_source").or(text(torrent, "media_source")),
        text(body, "media_id").or(text(torrent, "media_id")),
    ) {
        (Some(s), Some(id)) => Some((canonical_source(s), id.to_string())),
        (None, None) => catalogued.map(|t| (canonical_source(&t.media_source), t.media_id.clone())),
        _ => None,
    };
    let Some((media_source, media_id)) = identity else {
        return Ok(fail(
            "需要有效的 media_source 和 media_id / media_source and media_id are required",
        ));
    };
    let downloader = match body.get("downloader").and_then(Value::as_str) {
        Some(name) if !world.state.downloaders.is_empty() => {
            if !world.state.downloaders.iter().any(|d| d.name == name) {
                return Ok(fail("下载器不存在 / no such downloader"));
            }
            Some(name.to_string())
        }
        Some(name) => Some(name.to_string()),
        None => world
            .state
            .downloaders
            .iter()
            .find(|d| d.default)
            .or(world.state.downloaders.first())
            .map(|d| d.name.clone()),
    };
    let save_path = body.get("save_path").and_then(Value::as_str);
    if let Some(path) = save_path
        && !world.state.download_paths.is_empty()
        && !world
            .state
            .download_paths
            .iter()
            .any(|p| p.save_path == path)
    {
        return Ok(fail("下载目录不存在 / no such download directory"));
    }
    if world
        .state
        .downloads
        .iter()
        .any(|r| row_hash(r) == Some(infohash.as_str()))
    {
        return Ok(
            fail("相同资源已存在，未重复添加 / this resource is already downloading").duplicate(),
        );
    }

    let media = world
        .state
        .media
        .iter()
        .find(|m| canonical_source(&m.media_source) == media_source && m.media_id == media_id);
    let mut row = Row::new();
    for k in ["id", "hash", "infohash"] {
        row.insert(k.into(), json!(infohash));
    }
    row.insert("media_source".into(), json!(media_source));
    row.insert("media_id".into(), json!(media_id));
    row.insert("title".into(), json!(title));
    row.insert(
        "name".into(),
        json!(media.map_or(title, |m| m.title.as_str())),
    );
    row.insert("downloader".into(), json!(downloader));
    row.insert("state".into(), json!("downloading"));
    row.insert("progress".into(), json!(0));
    if let Some(path) = save_path {
        row.insert("save_path".into(), json!(path));
    }
    if let Some(site) = torrent.get("site_name") {
        row.insert("site_name".into(), site.clone());
    }
    if let Some(size) = torrent.get("size") {
        row.insert("size".into(), size.clone());
    }
    row.insert(
        "media".into(),
        json!({
            "media_source": media_source,
            "media_id": media_id,
            "title": media.map_or(title, |m| m.title.as_str()),
            "type": media.map_or("电影", |m| m.media_type.as_str()),
        }),
    );
    row.insert("userid".into(), json!(call.user.id));
    row.insert("username".into(), json!(call.user.name));
    world.state.downloads.push(row.clone());
    Ok(
        ok("添加下载成功", json!({"download_id": infohash})).effect(Effect::DownloadAdded {
            infohash,
            record: object(&row),
        }),
    )
}
