//! FFI: the `mpa_rank` FTS5 auxiliary function — BM25 exactly as FTS5's `bm25()` computes it,
//! but with the collection statistics (average document length, one idf per phrase) supplied
//! by the caller instead of recomputed by every statement. That is what lets one query score
//! range after range with the same numbers (FTS5's own `bm25()` counts every phrase over the
//! whole table again in each statement), and what makes the rows it scores comparable with the
//! posting-list scorer's: both call [`super::bm25`].
//!
//! `mpa_rank(table, avgdl, idf_0, …, idf_{n-1})` returns the (positive) score of the current
//! row; `n` must equal the query's phrase count, or the call fails (the caller then falls
//! back to FTS5's `bm25()`). `mpa_phrase(table)` returns, for a query of one phrase, its
//! occurrences and the row's length (a posting). The only unsafe code of the ranking; the
//! callbacks run under `catch_unwind`.

use rusqlite::Connection;
use rusqlite::ffi;
use std::ffi::{CStr, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The SQL name of the function.
pub(crate) const RANK_FUNCTION: &str = "mpa_rank";
const RANK_FUNCTION_C: &CStr = c"mpa_rank";

/// `mpa_phrase(table)`: for a query of one phrase, the phrase's occurrences in the current row
/// and the row's length, packed as `occurrences << 32 | length` — a posting, read from FTS5
/// for ids no posting list covers yet.
pub(crate) const PHRASE_FUNCTION: &str = "mpa_phrase";
const PHRASE_FUNCTION_C: &CStr = c"mpa_phrase";

/// Phrases one call can score (queries are capped at 1024 characters; more phrases than this
/// is refused and served by `bm25()`).
pub(crate) const MAX_PHRASES: usize = 64;

/// Registers `mpa_rank` and `mpa_phrase` on `conn`; registering again replaces them.
pub(crate) fn register_rank_function(conn: &Connection) -> rusqlite::Result<()> {
    let api = crate::tokenizer::fts5_api_of(conn)?;
    for (name, function) in [
        (RANK_FUNCTION_C, x_rank as Extension),
        (PHRASE_FUNCTION_C, x_phrase as Extension),
    ] {
        // SAFETY: `api` is the live fts5_api of `conn` (non-null, version ≥ 2, checked by
        // `fts5_api_of`); the name is a NUL-terminated static; no user data, no destructor.
        let rc = unsafe {
            match (*api).xCreateFunction {
                Some(create) => create(
                    api,
                    name.as_ptr(),
                    std::ptr::null_mut(),
                    Some(function),
                    None,
                ),
                None => ffi::SQLITE_MISUSE,
            }
        };
        if rc != ffi::SQLITE_OK {
            return Err(rusqlite::Error::SqliteFailure(
                ffi::Error::new(rc),
                Some(format!("registering {} failed", name.to_string_lossy())),
            ));
        }
    }
    Ok(())
}

type Extension = unsafe extern "C" fn(
    *const ffi::Fts5ExtensionApi,
    *mut ffi::Fts5Context,
    *mut ffi::sqlite3_context,
    c_int,
    *mut *mut ffi::sqlite3_value,
);

unsafe extern "C" fn x_phrase(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    _n_val: c_int,
    _values: *mut *mut ffi::sqlite3_value,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: FTS5 passes its live extension API and the context of the current row.
        unsafe { phrase_row(api, fts) }
    }));
    // SAFETY: `ctx` is the live function context of this call.
    unsafe { answer(ctx, outcome.map(|r| r.map(Answer::Int))) };
}

/// # Safety
/// `api` and `fts` must be what FTS5 passed to the current call.
unsafe fn phrase_row(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
) -> Result<i64, Failure> {
    // SAFETY: `api` is FTS5's extension API table for this call.
    let api = unsafe { &*api };
    let (Some(phrase_count), Some(inst_count), Some(column_size)) =
        (api.xPhraseCount, api.xInstCount, api.xColumnSize)
    else {
        return Err(Failure::Message(API_ERROR));
    };
    // SAFETY: `fts` is the current row's context.
    if unsafe { phrase_count(fts) } != 1 {
        return Err(Failure::Message(ONE_PHRASE_ERROR));
    }
    let mut n_inst: c_int = 0;
    // SAFETY: `fts` is the current row's context; the out-pointer is a local.
    check(unsafe { inst_count(fts, &mut n_inst) })?;
    let mut tokens: c_int = 0;
    // SAFETY: column -1 asks for the row's total size; the out-pointer is a local.
    check(unsafe { column_size(fts, -1, &mut tokens) })?;
    let occurrences = i64::from(n_inst.max(0));
    Ok((occurrences << 32) | i64::from(tokens.max(0)))
}

/// Why a row could not be scored (reported as an SQL error).
const ARITY_ERROR: &CStr = c"mpa_rank: one idf per phrase expected";
const API_ERROR: &CStr = c"mpa_rank: FTS5 API unavailable";
const ONE_PHRASE_ERROR: &CStr = c"mpa_phrase: a query of one phrase expected";

unsafe extern "C" fn x_rank(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: FTS5 passes its live extension API, the context of the current row and
        // `n_val` argument values, all valid for the duration of this call.
        unsafe { score_row(api, fts, n_val, values) }
    }));
    // SAFETY: `ctx` is the live function context of this call.
    unsafe { answer(ctx, outcome.map(|r| r.map(Answer::Real))) };
}

enum Answer {
    Real(f64),
    Int(i64),
}

/// Sets a call's result: its value, its error, or a plain error after a panic.
///
/// # Safety
/// `ctx` must be the live function context of the current call.
unsafe fn answer(
    ctx: *mut ffi::sqlite3_context,
    outcome: std::thread::Result<Result<Answer, Failure>>,
) {
    match outcome {
        Ok(Ok(Answer::Real(v))) => {
            // SAFETY: the caller passes the live context.
            unsafe { ffi::sqlite3_result_double(ctx, v) };
        }
        Ok(Ok(Answer::Int(v))) => {
            // SAFETY: as above.
            unsafe { ffi::sqlite3_result_int64(ctx, v) };
        }
        Ok(Err(Failure::Message(msg))) => {
            // SAFETY: as above; `msg` is NUL-terminated and -1 lets SQLite measure it.
            unsafe { ffi::sqlite3_result_error(ctx, msg.as_ptr(), -1) };
        }
        Ok(Err(Failure::Code(rc))) => {
            // SAFETY: as above.
            unsafe { ffi::sqlite3_result_error_code(ctx, rc) };
        }
        Err(_) => {
            // SAFETY: as above.
            unsafe { ffi::sqlite3_result_error_code(ctx, ffi::SQLITE_ERROR) };
        }
    }
}

enum Failure {
    Message(&'static CStr),
    Code(c_int),
}

fn check(rc: c_int) -> Result<(), Failure> {
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(Failure::Code(rc))
    }
}

/// # Safety
/// `api`, `fts` and `values[..n_val]` must be what FTS5 passed to the current call.
unsafe fn score_row(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) -> Result<f64, Failure> {
    // SAFETY: `api` is FTS5's extension API table for this call.
    let api = unsafe { &*api };
    let (Some(phrase_count), Some(inst_count), Some(inst), Some(column_size)) =
        (api.xPhraseCount, api.xInstCount, api.xInst, api.xColumnSize)
    else {
        return Err(Failure::Message(API_ERROR));
    };
    // SAFETY: `fts` is the current row's context.
    let phrases = usize::try_from(unsafe { phrase_count(fts) }).unwrap_or(0);
    let n_val = usize::try_from(n_val).unwrap_or(0);
    if phrases == 0 || phrases > MAX_PHRASES || n_val != phrases + 1 || values.is_null() {
        return Err(Failure::Message(ARITY_ERROR));
    }
    // SAFETY: FTS5 passes `n_val` valid value pointers.
    let args = unsafe { std::slice::from_raw_parts(values, n_val) };
    // SAFETY: each value pointer is valid for this call.
    let avgdl = unsafe { ffi::sqlite3_value_double(args[0]) };
    let mut freq = [0f64; MAX_PHRASES];
    let mut n_inst: c_int = 0;
    // SAFETY: `fts` is the current row's context; the out-pointer is a local.
    check(unsafe { inst_count(fts, &mut n_inst) })?;
    for i in 0..n_inst {
        let (mut phrase, mut column, mut offset) = (0, 0, 0);
        // SAFETY: `i < n_inst` as FTS5 reported; the out-pointers are locals.
        check(unsafe { inst(fts, i, &mut phrase, &mut column, &mut offset) })?;
        if let Some(f) = usize::try_from(phrase).ok().and_then(|p| freq.get_mut(p)) {
            *f += 1.0;
        }
    }
    let mut tokens: c_int = 0;
    // SAFETY: column -1 asks for the row's total size; the out-pointer is a local.
    check(unsafe { column_size(fts, -1, &mut tokens) })?;
    let mut idf = [0f64; MAX_PHRASES];
    for (p, w) in idf.iter_mut().take(phrases).enumerate() {
        // SAFETY: `p + 1 < n_val`, checked above.
        *w = unsafe { ffi::sqlite3_value_double(args[p + 1]) };
    }
    Ok(super::bm25(
        &freq[..phrases],
        &idf[..phrases],
        f64::from(tokens),
        avgdl,
    ))
}
