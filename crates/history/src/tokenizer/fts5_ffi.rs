//! FFI: registration with FTS5 and the three `fts5_tokenizer` callbacks. The only unsafe code of
//! the tokenizer; every callback runs under `catch_unwind` and reports a panic as `SQLITE_ERROR`.

use super::*;

/// The safe face of an FTS5 tokenizer: the FFI below adapts any implementation, so nothing
/// outside this section touches a raw pointer.
pub trait NativeTokenizer: Sized + 'static {
    /// The name tables use in `tokenize='…'`.
    const NAME: &'static CStr;
    /// Builds an instance from the arguments after the name.
    fn from_args(args: &[&str]) -> Result<Self, TokenizerArgError>;
    /// Calls `emit(token, start, end, colocated)` for each token; stops when it breaks.
    fn tokenize(&self, text: &[u8], reason: TokenizeReason, emit: &mut impl Emit);
}

impl NativeTokenizer for CjkTokenizer {
    const NAME: &'static CStr = c"cjk_unicode61";

    fn from_args(args: &[&str]) -> Result<Self, TokenizerArgError> {
        Self::new(args)
    }

    fn tokenize(&self, text: &[u8], reason: TokenizeReason, emit: &mut impl Emit) {
        self.tokenize_bytes(text, reason, emit);
    }
}

/// Registers `cjk_unicode61` on `conn`. Call it on every connection before touching a table
/// that uses it; registering again on the same connection is harmless.
pub fn register_cjk_tokenizer(conn: &Connection) -> rusqlite::Result<()> {
    register::<CjkTokenizer>(conn)
}

pub fn register<T: NativeTokenizer>(conn: &Connection) -> rusqlite::Result<()> {
    let api = fts5_api(conn)?;
    let mut module = ffi::fts5_tokenizer {
        xCreate: Some(x_create::<T>),
        xDelete: Some(x_delete::<T>),
        xTokenize: Some(x_tokenize::<T>),
    };
    // SAFETY: `api` is the live fts5_api of `conn` (checked non-null and version ≥ 2 by
    // `fts5_api`); the name is a NUL-terminated static; FTS5 copies `module` before returning,
    // and the user-data pointer is unused (null, no destructor).
    let rc = unsafe {
        match (*api).xCreateTokenizer {
            Some(create) => create(
                api,
                T::NAME.as_ptr(),
                std::ptr::null_mut(),
                &mut module,
                None,
            ),
            None => ffi::SQLITE_MISUSE,
        }
    };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(rc),
            Some(format!(
                "registering the {} tokenizer failed",
                T::NAME.to_string_lossy()
            )),
        ))
    }
}

/// Binds the out-pointer that `SELECT fts5(?1)` fills with the connection's `fts5_api`.
pub(crate) struct Fts5ApiSlot(*mut *mut ffi::fts5_api);

impl ToSql for Fts5ApiSlot {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Pointer((
            self.0.cast::<c_void>().cast_const(),
            c"fts5_api_ptr",
            None,
        )))
    }
}

pub fn fts5_api(conn: &Connection) -> rusqlite::Result<*mut ffi::fts5_api> {
    let mut api: *mut ffi::fts5_api = std::ptr::null_mut();
    conn.query_row("SELECT fts5(?1)", [Fts5ApiSlot(&mut api)], |_| Ok(()))
        .map_err(|err| match err {
            // Only a missing `fts5()` means FTS5 is unavailable; a damaged or unreadable file
            // fails here first (the statement reads the schema) and keeps SQLite's own words.
            rusqlite::Error::SqliteFailure(code, _)
                if code.code == rusqlite::ErrorCode::Unknown =>
            {
                rusqlite::Error::SqliteFailure(
                    code,
                    Some(format!("{TOKENIZER_NAME}: FTS5 unavailable")),
                )
            }
            other => other,
        })?;
    // SAFETY: when non-null, `api` was written by FTS5 and points at the connection's
    // fts5_api, which lives as long as the connection.
    if api.is_null() || unsafe { (*api).iVersion } < 2 {
        return Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_ERROR),
            Some(format!("{TOKENIZER_NAME}: FTS5 unavailable")),
        ));
    }
    Ok(api)
}

/// Runs a callback body, turning a panic into `SQLITE_ERROR` so it never unwinds into C.
pub(crate) fn guarded(body: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(ffi::SQLITE_ERROR)
}

pub(crate) unsafe extern "C" fn x_create<T: NativeTokenizer>(
    _user_data: *mut c_void,
    args: *mut *const c_char,
    n_args: c_int,
    out: *mut *mut ffi::Fts5Tokenizer,
) -> c_int {
    guarded(|| {
        let n_args = usize::try_from(n_args).unwrap_or(0);
        let mut parsed = Vec::with_capacity(n_args);
        for k in 0..n_args {
            // SAFETY: FTS5 passes `n_args` valid NUL-terminated strings in `args`.
            let arg = unsafe { CStr::from_ptr(*args.add(k)) };
            match arg.to_str() {
                Ok(arg) => parsed.push(arg),
                Err(_) => return ffi::SQLITE_ERROR,
            }
        }
        match T::from_args(&parsed) {
            Ok(tokenizer) => {
                let raw = Box::into_raw(Box::new(tokenizer));
                // SAFETY: `out` is FTS5's out-parameter; the box is reclaimed in `x_delete`.
                unsafe { *out = raw.cast::<ffi::Fts5Tokenizer>() };
                ffi::SQLITE_OK
            }
            Err(_) => ffi::SQLITE_ERROR,
        }
    })
}

pub(crate) unsafe extern "C" fn x_delete<T: NativeTokenizer>(tokenizer: *mut ffi::Fts5Tokenizer) {
    guarded(|| {
        if !tokenizer.is_null() {
            // SAFETY: the pointer came from `Box::into_raw` in `x_create`, and FTS5 deletes
            // each tokenizer exactly once.
            drop(unsafe { Box::from_raw(tokenizer.cast::<T>()) });
        }
        ffi::SQLITE_OK
    });
}

pub(crate) type TokenCallback =
    unsafe extern "C" fn(*mut c_void, c_int, *const c_char, c_int, c_int, c_int) -> c_int;

pub(crate) unsafe extern "C" fn x_tokenize<T: NativeTokenizer>(
    tokenizer: *mut ffi::Fts5Tokenizer,
    ctx: *mut c_void,
    flags: c_int,
    text: *const c_char,
    n_text: c_int,
    token_callback: Option<TokenCallback>,
) -> c_int {
    guarded(|| {
        let Some(token_callback) = token_callback else {
            return ffi::SQLITE_MISUSE;
        };
        // SAFETY: `tokenizer` is the live box created by `x_create::<T>`.
        let tokenizer = unsafe { &*tokenizer.cast::<T>() };
        let len = usize::try_from(n_text).unwrap_or(0);
        let text: &[u8] = if text.is_null() || len == 0 {
            &[]
        } else {
            // SAFETY: FTS5 guarantees `text` points at `n_text` readable bytes for this call.
            unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len) }
        };
        let mut rc = ffi::SQLITE_OK;
        tokenizer.tokenize(
            text,
            TokenizeReason::from_flags(flags),
            &mut |token, start, end, colocated| {
                let (Ok(n), Ok(start), Ok(end)) = (
                    c_int::try_from(token.len()),
                    c_int::try_from(start),
                    c_int::try_from(end),
                ) else {
                    rc = ffi::SQLITE_TOOBIG;
                    return ControlFlow::Break(());
                };
                let tflags = if colocated {
                    ffi::FTS5_TOKEN_COLOCATED
                } else {
                    0
                };
                // SAFETY: the callback and `ctx` come from FTS5 for this call; the token bytes
                // outlive the call.
                rc = unsafe {
                    token_callback(ctx, tflags, token.as_ptr().cast::<c_char>(), n, start, end)
                };
                if rc == ffi::SQLITE_OK {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                }
            },
        );
        // unicode61 treats SQLITE_DONE from the callback as a normal stop.
        if rc == ffi::SQLITE_DONE {
            ffi::SQLITE_OK
        } else {
            rc
        }
    })
}
