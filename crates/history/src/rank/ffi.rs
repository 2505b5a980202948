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
//! occurrences and the row's length (a posting). `mpa_occurrences(table, cap)` counts the
//! query's phrase occurrences in the row, stopping past `cap` (it gates FTS5's quadratic
//! `snippet()`). The only unsafe code of the ranking; the callbacks run under `catch_unwind`.
//!
//! Occurrences are counted phrase by phrase (`xPhraseFirst`/`xPhraseNext`), never through
//! `xInstCount`: FTS5 builds the instance list by picking, for each occurrence, the smallest
//! position among all phrases, which costs occurrences × phrases inside one SQLite step, out
//! of reach of the query deadline.

use rusqlite::Connection;
use rusqlite::ffi;
use std::ffi::{CStr, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The SQL name of the function.
pub const RANK_FUNCTION: &str = "mpa_rank";
const RANK_FUNCTION_C: &CStr = c"mpa_rank";

/// `mpa_phrase(table)`: for a query of one phrase, the phrase's occurrences in the current row
/// and the row's length, packed as `occurrences << 32 | length` — a posting, read from FTS5
/// for ids no posting list covers yet.
pub(crate) const PHRASE_FUNCTION: &str = "mpa_phrase";
const PHRASE_FUNCTION_C: &CStr = c"mpa_phrase";

/// `mpa_occurrences(table, cap)`: the query's phrase occurrences in the current row, counted up
/// to `cap + 1`.
pub(crate) const OCCURRENCES_FUNCTION: &str = "mpa_occurrences";
const OCCURRENCES_FUNCTION_C: &CStr = c"mpa_occurrences";

/// Phrases one call can score (queries are capped at 1024 characters; more phrases than this
/// is refused and served by `bm25()`).
pub(crate) const MAX_PHRASES: usize = 64;

/// Registers `mpa_rank` and `mpa_phrase` on `conn`; registering again replaces them.
pub fn register_rank_function(conn: &Connection) -> rusqlite::Result<()> {
    let api = crate::tokenizer::fts5_api_of(conn)?;
    for (name, function) in [
        (RANK_FUNCTION_C, x_call::<Rank> as Extension),
        (PHRASE_FUNCTION_C, x_call::<Phrase> as Extension),
        (OCCURRENCES_FUNCTION_C, x_call::<Occurrences> as Extension),
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

/// The body of one auxiliary function, for one row.
trait Call {
    /// # Safety
    /// `api`, `fts` and `values[..n_val]` must be what FTS5 passed to the current call.
    unsafe fn row(
        api: *const ffi::Fts5ExtensionApi,
        fts: *mut ffi::Fts5Context,
        n_val: c_int,
        values: *mut *mut ffi::sqlite3_value,
    ) -> Result<Answer, Failure>;
}

/// `mpa_rank`.
struct Rank;
/// `mpa_phrase`.
struct Phrase;
/// `mpa_occurrences`.
struct Occurrences;

impl Call for Rank {
    unsafe fn row(
        api: *const ffi::Fts5ExtensionApi,
        fts: *mut ffi::Fts5Context,
        n_val: c_int,
        values: *mut *mut ffi::sqlite3_value,
    ) -> Result<Answer, Failure> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { score_row(api, fts, n_val, values) }.map(Answer::Real)
    }
}

impl Call for Phrase {
    unsafe fn row(
        api: *const ffi::Fts5ExtensionApi,
        fts: *mut ffi::Fts5Context,
        _n_val: c_int,
        _values: *mut *mut ffi::sqlite3_value,
    ) -> Result<Answer, Failure> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { phrase_row(api, fts) }.map(Answer::Int)
    }
}

impl Call for Occurrences {
    unsafe fn row(
        api: *const ffi::Fts5ExtensionApi,
        fts: *mut ffi::Fts5Context,
        n_val: c_int,
        values: *mut *mut ffi::sqlite3_value,
    ) -> Result<Answer, Failure> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { occurrences_row(api, fts, n_val, values) }.map(Answer::Int)
    }
}

/// Every auxiliary function's entry point: its body under `catch_unwind`, the result (or the
/// error) set on `ctx`.
unsafe extern "C" fn x_call<C: Call>(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: FTS5 passes its live extension API, the context of the current row and
        // `n_val` argument values, all valid for the duration of this call.
        unsafe { C::row(api, fts, n_val, values) }
    }));
    // SAFETY: `ctx` is the live function context of this call.
    unsafe { answer(ctx, outcome) };
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

/// # Safety
/// `api`, `fts` and `values[..n_val]` must be what FTS5 passed to the current call.
unsafe fn occurrences_row(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) -> Result<i64, Failure> {
    if n_val != 1 || values.is_null() {
        return Err(Failure::Message(OCCURRENCES_ARITY_ERROR));
    }
    // SAFETY: FTS5 passes one valid value pointer (checked above).
    let cap = unsafe { ffi::sqlite3_value_int64(*values) }.max(0);
    // SAFETY: `api` is FTS5's extension API table for this call.
    let api = unsafe { &*api };
    let Some(phrase_count) = api.xPhraseCount else {
        return Err(Failure::Message(API_ERROR));
    };
    // SAFETY: `fts` is the current row's context.
    let phrases = unsafe { phrase_count(fts) };
    let mut total = 0i64;
    for p in 0..phrases {
        // SAFETY: `p` is a phrase of the current query.
        total += unsafe { phrase_occurrences(api, fts, p, cap + 1 - total) }?;
        if total > cap {
            break;
        }
    }
    Ok(total)
}

/// Occurrences of phrase `p` in the current row, counted up to `limit`.
///
/// # Safety
/// `api` and `fts` must be what FTS5 passed to the current call; `p` < the phrase count.
unsafe fn phrase_occurrences(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    p: c_int,
    limit: i64,
) -> Result<i64, Failure> {
    let (Some(first), Some(next)) = (api.xPhraseFirst, api.xPhraseNext) else {
        return Err(Failure::Message(API_ERROR));
    };
    let mut iter = ffi::Fts5PhraseIter {
        a: std::ptr::null(),
        b: std::ptr::null(),
    };
    let (mut column, mut offset): (c_int, c_int) = (0, 0);
    // SAFETY: `fts` is the current row's context and `p` one of its phrases; the iterator and
    // the out-pointers are locals that outlive the iteration (FTS5 points the iterator into
    // the row's position list, valid during this call).
    check(unsafe { first(fts, p, &mut iter, &mut column, &mut offset) })?;
    let mut n = 0;
    while column >= 0 && n < limit {
        n += 1;
        // SAFETY: as above; FTS5 sets `column` to -1 at the end of the list.
        unsafe { next(fts, &mut iter, &mut column, &mut offset) };
    }
    Ok(n)
}

/// Why a row could not be scored (reported as an SQL error).
const ARITY_ERROR: &CStr = c"mpa_rank: one idf per phrase expected";
const API_ERROR: &CStr = c"mpa_rank: FTS5 API unavailable";
const ONE_PHRASE_ERROR: &CStr = c"mpa_phrase: a query of one phrase expected";
const OCCURRENCES_ARITY_ERROR: &CStr = c"mpa_occurrences: one argument (the cap) expected";

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
    let (Some(phrase_count), Some(column_size)) = (api.xPhraseCount, api.xColumnSize) else {
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
    for (p, f) in (0..).zip(freq.iter_mut().take(phrases)) {
        // SAFETY: `p` < the phrase count FTS5 reported.
        *f = unsafe { phrase_occurrences(api, fts, p, i64::MAX) }? as f64;
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
