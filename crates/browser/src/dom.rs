//! The page-side scripts: element lookup by selector or `ref`, the snapshot that hands out refs,
//! the text of the page. Arguments are passed as JSON literals (never spliced into code).
//!
//! A ref is a `data-mpa-ref` attribute the snapshot puts on an element the first time it lists
//! it: the same element keeps its ref across snapshots of the same document, so a ref the model
//! read stays valid while the page changes around it; a new document starts over.

use serde_json::Value;

/// `(function(args){ BODY })(ARGS)`: one script with its arguments as a JSON value.
pub(crate) fn script(body: &str, args: &Value) -> String {
    format!("(function(args){{'use strict';{PRELUDE}{body}}})({args})")
}

/// Element lookup shared by every action: `find(args)` with `args.selector` (must match
/// exactly one element) or `args.ref`. Throws `MPA:<code>:<detail>` errors the host maps back.
const PRELUDE: &str = r#"
function find(a){
  if (a.ref !== undefined && a.ref !== null) {
    const el = document.querySelector('[data-mpa-ref="' + String(a.ref).replace(/["\\]/g, '') + '"]');
    if (!el) throw new Error('MPA:unknown_ref:' + a.ref);
    return el;
  }
  let list;
  try { list = document.querySelectorAll(a.selector); }
  catch (e) { throw new Error('MPA:invalid_selector:' + a.selector); }
  if (list.length === 0) throw new Error('MPA:not_found:' + a.selector);
  if (list.length > 1) throw new Error('MPA:ambiguous:' + list.length);
  return list[0];
}
"#;

/// Lists the visible interactive and landmark elements with refs, capped by `args.max`.
pub(crate) const SNAPSHOT: &str = r#"
const sel = 'a[href],button,input,select,textarea,summary,[role=button],[role=link],[role=checkbox],'
  + '[role=tab],[role=menuitem],[onclick],[contenteditable=""],[contenteditable=true],h1,h2,h3,img[alt],label';
if (window.__mpaRefSeq === undefined) window.__mpaRefSeq = 0;
const out = [];
for (const el of document.querySelectorAll(sel)) {
  const r = el.getBoundingClientRect();
  const st = getComputedStyle(el);
  if (r.width === 0 && r.height === 0) continue;
  if (st.visibility === 'hidden' || st.display === 'none') continue;
  let ref = el.getAttribute('data-mpa-ref');
  if (!ref) { ref = 'e' + (++window.__mpaRefSeq); el.setAttribute('data-mpa-ref', ref); }
  const tag = el.tagName.toLowerCase();
  const name = (el.getAttribute('aria-label') || el.getAttribute('alt') || el.getAttribute('title')
    || el.innerText || el.getAttribute('placeholder') || el.getAttribute('name') || '').trim()
    .replace(/\s+/g, ' ').slice(0, 120);
  const item = {ref, tag, name};
  const role = el.getAttribute('role'); if (role) item.role = role;
  if (tag === 'input') { item.type = el.type; if (el.type !== 'password') item.value = String(el.value).slice(0, 120); }
  if (tag === 'textarea' || tag === 'select') item.value = String(el.value).slice(0, 120);
  if (tag === 'select') item.options = Array.from(el.options).slice(0, 30).map(o => o.label || o.value);
  if (tag === 'a') item.href = el.getAttribute('href').slice(0, 200);
  if (el.disabled) item.disabled = true;
  out.push(item);
  if (out.length >= args.max) break;
}
return {url: location.href, title: document.title, elements: out,
  text: (document.body ? document.body.innerText : '').slice(0, args.text_chars)};
"#;

/// Scrolls the element into view and answers its centre, and whether a click there hits it.
pub(crate) const CLICK_POINT: &str = r#"
const el = find(args);
el.scrollIntoView({block: 'center', inline: 'center'});
const r = el.getBoundingClientRect();
const x = r.left + r.width / 2, y = r.top + r.height / 2;
const hit = document.elementFromPoint(x, y);
return {x, y, hit: !!hit && (hit === el || el.contains(hit))};
"#;

/// A click by script, when something covers the element's centre.
pub(crate) const CLICK_SCRIPT: &str = "find(args).click(); return true;";

/// Focuses an editable element and selects its content, so typed text replaces it.
pub(crate) const FOCUS_FOR_FILL: &str = r#"
const el = find(args);
el.scrollIntoView({block: 'center'});
el.focus();
if (typeof el.select === 'function') el.select();
else if (el.isContentEditable) { const r = document.createRange(); r.selectNodeContents(el);
  const s = getSelection(); s.removeAllRanges(); s.addRange(r); }
else throw new Error('MPA:not_editable:' + el.tagName.toLowerCase());
if ('value' in el) { el.value = ''; el.dispatchEvent(new Event('input', {bubbles: true})); }
return true;
"#;

/// Fires `change` after typing, as a user's leaving the field would.
pub(crate) const AFTER_FILL: &str = r#"
const el = find(args);
el.dispatchEvent(new Event('change', {bubbles: true}));
return 'value' in el ? String(el.value).length : el.innerText.length;
"#;

/// Chooses an option by value or by label.
pub(crate) const SELECT: &str = r#"
const el = find(args);
if (el.tagName.toLowerCase() !== 'select') throw new Error('MPA:not_select:' + el.tagName.toLowerCase());
const opt = Array.from(el.options).find(o => o.value === args.value)
  || Array.from(el.options).find(o => (o.label || o.text).trim() === args.value);
if (!opt) throw new Error('MPA:no_option:' + args.value);
el.value = opt.value;
el.dispatchEvent(new Event('input', {bubbles: true}));
el.dispatchEvent(new Event('change', {bubbles: true}));
return {value: opt.value, label: opt.label || opt.text};
"#;

/// The element's box in page coordinates (what a screenshot clip takes).
pub(crate) const ELEMENT_BOX: &str = r#"
const el = find(args);
el.scrollIntoView({block: 'center', inline: 'center'});
const r = el.getBoundingClientRect();
return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height};
"#;

/// The page's text or HTML.
pub(crate) const CONTENT: &str = r#"
const html = args.kind === 'html';
const body = html ? document.documentElement.outerHTML : (document.body ? document.body.innerText : '');
return {url: location.href, title: document.title, content: body};
"#;

/// Whether the wait is over: an element matching `args.selector` or `args.text` in the page.
pub(crate) const WAIT_PROBE: &str = r#"
if (args.selector) { try { return document.querySelector(args.selector) !== null; }
  catch (e) { throw new Error('MPA:invalid_selector:' + args.selector); } }
if (args.text) return !!document.body && document.body.innerText.includes(args.text);
return document.readyState === 'complete';
"#;

/// The URL, title and load state of the current document.
pub(crate) const PAGE_STATE: &str =
    "return {url: location.href, title: document.title, ready: document.readyState};";
