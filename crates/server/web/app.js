// The MoviePilot Agent web page: login, session list, streaming chat over SSE (fetch + reader),
// tool activity lines, stop / new / delete, English and Chinese. No dependencies. While the agent
// runs, the composer stays usable: Enter steers the running task (its message is marked queued
// until the agent takes it in, then shown where it joined, and the reply continues below it).
'use strict';

const I18N = {
  en: {
    appName: 'MoviePilot Agent', loginHint: 'Sign in to chat with your agent.', username: 'User name',
    password: 'Password', signIn: 'Sign in', signOut: 'Sign out', newChat: 'New chat', deleteChat: 'Delete',
    emptyTitle: 'What can I do for you?', emptyHint: 'Ask about your media library, subscriptions or downloads.',
    placeholder: 'Message the agent…', send: 'Send', stop: 'Stop',
    noSessions: 'No chats yet.', untitled: 'New chat', confirmDelete: 'Delete this chat and its history?',
    badLogin: 'Wrong user name or password.', tooMany: 'Too many attempts. Try again later.',
    netError: 'Network error. Check the connection and try again.', stopped: 'Stopped.',
    queueFull: 'This chat is busy; wait for the current reply to finish.', stillRunning: 'Still working on this chat…',
    lang: '中文', running: 'running', done: 'done', error: 'failed', admin: 'admin',
    succeeded: 'succeeded', failed: 'failed', pending: 'pending — submitted, not finished yet',
    unknown: 'unknown — may or may not have happened; verify before retrying',
    compacted: 'From here on the model works from a summary of the messages above (they stay listed here).',
    summary: 'Summary',
    steerQueued: 'Queued — joins the running task at its next step',
    steerWaiting: 'Waiting — runs after the current reply',
    steerDiscarded: 'Not added — the task was stopped first',
    ts_blocked: 'Stopped by the host: repeated tool calls without progress',
    ts_waiting: 'Waiting: an operation was submitted and has not finished',
    ts_unknown: 'Result unknown: an operation may or may not have happened',
    ts_partial: 'Incomplete answer',
    ts_iteration_limit: 'Stopped at the step limit',
    tsHint: 'How the host saw this turn end — not proof that the task is done.',
  },
  zh: {
    appName: 'MoviePilot 智能助手', loginHint: '登录后即可与智能助手对话。', username: '用户名', password: '密码',
    signIn: '登录', signOut: '退出登录', newChat: '新对话', deleteChat: '删除', emptyTitle: '有什么可以帮你？',
    emptyHint: '可以询问媒体库、订阅或下载相关的问题。', placeholder: '给智能助手发消息…',
    send: '发送', stop: '停止', noSessions: '还没有对话。', untitled: '新对话', confirmDelete: '删除此对话及其历史记录？',
    badLogin: '用户名或密码错误。', tooMany: '尝试次数过多，请稍后再试。', netError: '网络错误，请检查连接后重试。',
    stopped: '已停止。', queueFull: '此对话正忙，请等待当前回复完成。', stillRunning: '此对话仍在处理中…',
    lang: 'English', running: '进行中', done: '完成', error: '失败', admin: '管理员',
    succeeded: '成功', failed: '失败', pending: '已提交，尚未完成', unknown: '结果未知——可能已生效，重试前请先核实',
    compacted: '从这里起，模型依据上方消息的摘要继续工作（上方消息仍完整保留在此）。', summary: '摘要',
    steerQueued: '已排队——将在下一步加入当前任务', steerWaiting: '等待中——当前回复结束后处理',
    steerDiscarded: '未加入——任务已先停止',
    ts_blocked: '已被宿主停止：工具重复调用没有进展', ts_waiting: '等待中：操作已提交，尚未完成',
    ts_unknown: '结果未知：操作可能已生效，也可能没有', ts_partial: '回答不完整', ts_iteration_limit: '已达步数上限',
    tsHint: '这是宿主看到的本轮结束状态，不代表任务已经完成。',
  },
};

const $ = (id) => document.getElementById(id);
const state = {
  lang: localStorage.getItem('mpa.lang') || (/^zh/i.test(navigator.language) ? 'zh' : 'en'),
  token: localStorage.getItem('mpa.token'),
  // owner: set when an admin continues another user's chat (the explicit admin continuation).
  me: null, sessionId: null, owner: null, busy: false, sessions: [], poll: null,
  // Settles when the streaming turn has ended (a message that could not steer it runs next).
  turnDone: Promise.resolve(),
};
const t = (k) => (I18N[state.lang] && I18N[state.lang][k]) || I18N.en[k] || k;

// ---- markdown (escape first, then a small safe subset) ----
function esc(s) {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function inline(s) {
  return s.split(/(`[^`\n]+`)/).map((part, i) => {
    if (i % 2 === 1) return '<code>' + esc(part.slice(1, -1)) + '</code>';
    let h = esc(part);
    h = h.replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>');
    h = h.replace(/(^|[\s(])(https?:\/\/[^\s<)]+)/g, '$1<a href="$2" target="_blank" rel="noopener noreferrer">$2</a>');
    h = h.replace(/\*\*([^*\n]+)\*\*/g, '<strong>$1</strong>').replace(/__([^_\n]+)__/g, '<strong>$1</strong>');
    h = h.replace(/(^|[^*\w])\*([^*\n]+)\*(?!\*)/g, '$1<em>$2</em>').replace(/(^|[^_\w])_([^_\n]+)_(?!\w)/g, '$1<em>$2</em>');
    h = h.replace(/~~([^~\n]+)~~/g, '<del>$1</del>');
    return h;
  }).join('');
}
const BLOCK = /^(```|#{1,6}\s|>|\s*[-*+]\s+|\s*\d+[.)]\s+|(-{3,}|\*{3,})\s*$)/;
function markdown(src) {
  const lines = src.replace(/\r\n?/g, '\n').split('\n');
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (/^```/.test(line)) {
      const body = [];
      i++;
      while (i < lines.length && !/^```/.test(lines[i])) body.push(lines[i++]);
      i++;
      out.push('<pre><code>' + esc(body.join('\n')) + '</code></pre>');
    } else if ((m = /^(#{1,6})\s+(.*)$/.exec(line))) {
      const n = Math.min(m[1].length + 1, 4);
      out.push(`<h${n}>${inline(m[2])}</h${n}>`);
      i++;
    } else if (/^>/.test(line)) {
      const body = [];
      while (i < lines.length && /^>/.test(lines[i])) body.push(lines[i++].replace(/^>\s?/, ''));
      out.push('<blockquote>' + markdown(body.join('\n')) + '</blockquote>');
    } else if (/^\s*[-*+]\s+/.test(line) || /^\s*\d+[.)]\s+/.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const re = ordered ? /^\s*\d+[.)]\s+/ : /^\s*[-*+]\s+/;
      const items = [];
      while (i < lines.length && re.test(lines[i])) {
        let item = lines[i++].replace(re, '');
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !re.test(lines[i])) item += '\n' + lines[i++].trim();
        items.push('<li>' + inline(item).replace(/\n/g, '<br>') + '</li>');
      }
      out.push((ordered ? '<ol>' : '<ul>') + items.join('') + (ordered ? '</ol>' : '</ul>'));
    } else if (/^(-{3,}|\*{3,})\s*$/.test(line)) {
      out.push('<hr>');
      i++;
    } else if (!line.trim()) {
      i++;
    } else {
      const para = [];
      while (i < lines.length && lines[i].trim() && !BLOCK.test(lines[i])) para.push(lines[i++]);
      if (!para.length) para.push(lines[i++]);
      out.push('<p>' + inline(para.join('\n')).replace(/\n/g, '<br>') + '</p>');
    }
  }
  return out.join('');
}

// ---- API ----
async function api(method, path, body) {
  const headers = { 'Accept-Language': state.lang === 'zh' ? 'zh-CN' : 'en' };
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 401 && path !== '/api/v1/login') {
    signedOut();
    throw new Error('unauthorized');
  }
  return r;
}

// ---- views ----
function applyI18n() {
  document.documentElement.lang = state.lang === 'zh' ? 'zh-CN' : 'en';
  document.querySelectorAll('[data-i18n]').forEach((el) => { el.textContent = t(el.dataset.i18n); });
  document.querySelectorAll('[data-i18n-placeholder]').forEach((el) => { el.placeholder = t(el.dataset.i18nPlaceholder); });
  document.querySelectorAll('[data-action=lang]').forEach((el) => { el.textContent = t('lang'); });
  document.title = t('appName');
  renderSessions();
}

function signedOut() {
  state.token = null;
  state.me = null;
  localStorage.removeItem('mpa.token');
  $('app-view').hidden = true;
  $('login-view').hidden = false;
  $('login-user').focus();
}

async function signedIn() {
  const r = await api('GET', '/api/v1/me');
  state.me = await r.json();
  $('login-view').hidden = true;
  $('app-view').hidden = false;
  $('who').textContent = state.me.name + (state.me.is_admin ? ' · ' + t('admin') : '');
  await loadSessions();
  const m = /^#\/s\/([^?]+)(?:\?user_id=(.+))?$/.exec(location.hash);
  if (m) await openSession(decodeURIComponent(m[1]), m[2] ? decodeURIComponent(m[2]) : null);
  else newChat();
}

function setBusy(busy) {
  state.busy = busy;
  $('send').hidden = busy;
  $('stop').hidden = !busy;
  $('send').disabled = busy;
}

async function loadSessions() {
  try {
    const r = await api('GET', '/api/v1/agent/sessions?page=1&count=100');
    if (r.ok) state.sessions = (await r.json()).sessions;
  } catch (_) { /* signed out or offline: keep the old list */ }
  renderSessions();
}

function renderSessions() {
  const list = $('session-list');
  list.textContent = '';
  if (!state.sessions.length) {
    const e = document.createElement('div');
    e.className = 'session-empty';
    e.textContent = t('noSessions');
    list.append(e);
    return;
  }
  for (const s of state.sessions) {
    const a = document.createElement('a');
    a.className = 'session' + (s.session_id === state.sessionId ? ' active' : '');
    a.href = '#/s/' + encodeURIComponent(s.session_id);
    a.dataset.sessionId = s.session_id;
    const title = document.createElement('span');
    title.className = 'title';
    title.textContent = s.title || t('untitled');
    a.append(title);
    const label = !s.is_processing && statusLabel(s.turn_status);
    if (label) { label.textContent = ''; a.append(label); }
    if (s.is_processing) {
      const dot = document.createElement('span');
      dot.className = 'dot';
      a.append(dot);
    }
    a.addEventListener('click', (ev) => {
      ev.preventDefault();
      if (!state.busy) openSession(s.session_id);
      document.querySelector('.app').classList.remove('menu-open');
    });
    list.append(a);
  }
}

function clearMessages() {
  const box = $('messages');
  box.textContent = '';
  box.append(emptyNode);
}

function scrollDown() {
  const box = $('messages');
  if (box.scrollHeight - box.scrollTop - box.clientHeight < 200 || state.busy) box.scrollTop = box.scrollHeight;
}

// Adds a line to the conversation: at its end, but above the messages still waiting to steer
// the running task (they stay last until the agent takes them in).
function place(el) {
  const box = $('messages');
  const waiting = $('steering-waiting');
  if (waiting && waiting.parentNode === box) box.insertBefore(el, waiting);
  else box.append(el);
}

// Appends an empty message bubble of `kind` (user, assistant, error) and returns it.
function bubble(kind) {
  if (kind !== 'error') emptyNode.remove();
  const row = document.createElement('div');
  row.className = 'msg ' + kind;
  const b = document.createElement('div');
  b.className = 'bubble';
  row.append(b);
  place(row);
  return b;
}

// A user line; `steeringId` marks a message that joined a running task (kept across reloads).
function addUser(text, steeringId) {
  const b = bubble('user');
  b.textContent = text;
  if (steeringId) b.parentNode.dataset.steeringId = steeringId;
  scrollDown();
}

// A message sent while the agent runs, shown last and marked until it is taken in.
function addWaiting(text) {
  let box = $('steering-waiting');
  if (!box) {
    box = document.createElement('div');
    box.id = 'steering-waiting';
    $('messages').append(box);
  }
  const row = document.createElement('div');
  row.className = 'msg user queued';
  const b = document.createElement('div');
  b.className = 'bubble';
  b.textContent = text;
  const tag = document.createElement('span');
  tag.className = 'tag';
  tag.textContent = t('steerQueued');
  row.append(b, tag);
  box.append(row);
  scrollDown();
  return row;
}

function addAssistant(text, notice) {
  const b = bubble('assistant');
  b.innerHTML = markdown(text);
  if (notice) b.classList.add('notice');
  scrollDown();
  return b;
}

// How a turn ended when it did not simply complete: a host stop state (blocked, waiting,
// unknown, partial), shown as a small label — never as proof that the task is done.
const STOP_STATES = ['blocked', 'waiting', 'unknown', 'partial', 'iteration_limit'];

function statusLabel(status) {
  if (!STOP_STATES.includes(status)) return null;
  const el = document.createElement('span');
  el.className = 'turn-status status-' + status;
  el.dataset.turnStatus = status;
  el.textContent = t('ts_' + status);
  el.title = t('tsHint');
  return el;
}

function addTurnStatus(status) {
  const el = statusLabel(status);
  if (!el) return;
  emptyNode.remove();
  const row = document.createElement('div');
  row.className = 'turn-status-row';
  row.append(el);
  $('messages').append(row);
  scrollDown();
}

function addError(text) {
  bubble('error').textContent = text;
  scrollDown();
}

// The outcome word (succeeded / failed / pending / unknown) in the page's language; an unknown
// write gets its own look (amber "?"), never the success check mark.
const OUTCOMES = ['succeeded', 'failed', 'pending', 'unknown'];
const ICONS = { succeeded: '✓', failed: '!', pending: '…', unknown: '?' };

function toolLine(el, status, name, message, outcome) {
  const known = OUTCOMES.includes(outcome) ? outcome : null;
  el.className = 'tool ' + status + (known ? ' outcome-' + known : '');
  el.dataset.status = status;
  if (known) el.dataset.outcome = known; else delete el.dataset.outcome;
  el.textContent = '';
  const icon = document.createElement('span');
  icon.className = 'icon';
  icon.textContent = known ? ICONS[known] : status === 'done' ? '✓' : status === 'error' ? '!' : '';
  const n = document.createElement('span');
  n.className = 'name';
  n.textContent = name || 'tool';
  const w = document.createElement('span');
  w.className = 'outcome';
  w.textContent = t(known || status);
  const m = document.createElement('span');
  m.className = 'text';
  m.textContent = message || '';
  el.title = (message || '') + ' · ' + t(known || status);
  el.append(icon, n, w, m);
}

function addTool(status, name, message, outcome) {
  emptyNode.remove();
  const el = document.createElement('div');
  toolLine(el, status, name, message, outcome);
  place(el);
  scrollDown();
  return el;
}

// Where the model's context was summarised (a compaction): the lines above stay as the user saw
// them; the summary the model now works from can be opened.
function addContextMarker(summary) {
  emptyNode.remove();
  const el = document.createElement('details');
  el.className = 'context-marker';
  const head = document.createElement('summary');
  head.textContent = t('compacted');
  const body = document.createElement('div');
  body.className = 'text';
  body.textContent = t('summary') + ': ' + (summary || '');
  el.append(head, body);
  place(el);
  scrollDown();
  return el;
}

// While the turn still runs, the saved chat is its recovery form (written after every step in
// case the process dies): its "result unknown" lines and notice are not shown then.
function renderHistory(messages, processing) {
  clearMessages();
  for (const m of messages || []) {
    if (processing && m.recovery) continue;
    if (m.role === 'user') addUser(m.content, m.steering_message_id);
    else if (m.role === 'assistant') { addAssistant(m.content, m.notice); addTurnStatus(m.turn_status); }
    else if (m.role === 'tool') addTool(m.status, m.name, m.message, m.outcome);
    else if (m.role === 'context') addContextMarker(m.summary);
  }
}

// The session's address for the routes and the URL: its id, plus its owner when an admin
// continues another user's chat.
function sessionPath(id, owner) {
  return encodeURIComponent(id) + (owner ? '?user_id=' + encodeURIComponent(owner) : '');
}

async function openSession(id, owner = null) {
  stopPolling();
  const r = await api('GET', '/api/v1/agent/sessions/' + sessionPath(id, owner));
  if (!r.ok) { newChat(); return; }
  const s = await r.json();
  state.sessionId = id;
  state.owner = owner && owner !== state.me.id ? owner : null;
  location.hash = '#/s/' + sessionPath(id, state.owner);
  $('chat-title').textContent = s.title || t('untitled');
  $('delete-chat').hidden = false;
  renderHistory(s.display_messages, s.is_processing);
  if (s.is_processing) {
    addTool('running', t('appName'), t('stillRunning'));
    state.poll = setTimeout(() => openSession(id, state.owner), 1500);
  }
  renderSessions();
}

function stopPolling() {
  if (state.poll) clearTimeout(state.poll);
  state.poll = null;
}

function newChat() {
  stopPolling();
  state.sessionId = null;
  state.owner = null;
  history.replaceState(null, '', location.pathname);
  $('chat-title').textContent = t('newChat');
  $('delete-chat').hidden = true;
  clearMessages();
  renderSessions();
  $('input').focus();
}

// ---- streaming ----
// The frames of an SSE response, parsed, in order.
async function* frames(r) {
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const raw = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const data = raw.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
      if (!data) continue;
      try { yield JSON.parse(data); } catch (_) { /* not a frame */ }
    }
  }
}

function streamBody(text) {
  const body = { text };
  if (state.sessionId) body.session_id = state.sessionId;
  if (state.owner) body.user_id = state.owner;
  return body;
}

async function send(text) {
  setBusy(true);
  addUser(text);
  let r;
  try {
    r = await api('POST', '/api/v1/agent/stream', streamBody(text));
  } catch (e) {
    if (e.message !== 'unauthorized') addError(t('netError'));
    setBusy(false);
    return;
  }
  await stream(r, text);
}

// Renders one turn's stream (`first`: a frame already read from `it`).
async function stream(r, text, it = null, first = null) {
  let finish;
  state.turnDone = new Promise((resolve) => { finish = resolve; });
  let segment = null; // the assistant bubble being streamed
  let segmentText = '';
  const tools = new Map();
  let compacted = false; // the context was summarised during this turn
  let frame = 0;
  const paint = () => {
    frame = 0;
    if (segment) { segment.innerHTML = markdown(segmentText); segment.classList.add('cursor'); }
    scrollDown();
  };
  const endSegment = () => {
    if (segment) { segment.innerHTML = markdown(segmentText); segment.classList.remove('cursor'); }
    segment = null;
    segmentText = '';
  };
  const waiting = (id) => document.querySelector('#steering-waiting [data-steering-id="' + id + '"]');
  const handle = (f) => {
    if (f.type === 'start') {
      const fresh = state.sessionId !== f.session_id;
      state.sessionId = f.session_id;
      history.replaceState(null, '', '#/s/' + sessionPath(f.session_id, state.owner));
      $('delete-chat').hidden = false;
      if (fresh) { $('chat-title').textContent = text.slice(0, 36); loadSessions(); }
    } else if (f.type === 'delta') {
      if (!segment) { segment = addAssistant(''); }
      segmentText += f.content;
      if (!frame) frame = requestAnimationFrame(paint);
    } else if (f.type === 'tool') {
      endSegment();
      const el = tools.get(f.tool_id);
      if (el) toolLine(el, f.status, f.name, f.message, f.outcome);
      else tools.set(f.tool_id, addTool(f.status, f.name, f.message, f.outcome));
    } else if (f.type === 'steering' && f.status === 'applied') {
      // The boundary: the segment so far is closed, the user's message stands here, and the
      // reply continues in a new bubble below it.
      endSegment();
      const el = waiting(f.message_id);
      if (el) el.remove();
      addUser(f.content, f.message_id);
    } else if (f.type === 'steering' && f.status === 'discarded') {
      const el = waiting(f.message_id);
      if (el) { el.classList.add('discarded'); el.querySelector('.tag').textContent = t('steerDiscarded'); }
    } else if (f.type === 'interaction-protected') {
      // A confirmed secret read: shown here only, never stored in the chat history.
      endSegment();
      const b = bubble('assistant');
      b.classList.add('notice');
      b.textContent = f.content;
      scrollDown();
    } else if (f.type === 'context') {
      // Shown now, where the stream is; the reload after the turn puts it where the chat
      // keeps it (before the recent messages the model still sees in full).
      endSegment();
      addContextMarker(f.summary);
      compacted = true;
    } else if (f.type === 'error') {
      endSegment();
      addError(f.code === 'agent_manager_queue_full' ? t('queueFull') : f.message);
    } else if (f.type === 'done') {
      endSegment();
      if (f.status === 'stopped') addAssistant(t('stopped'), true);
      else addTurnStatus(f.status);
    }
  };
  try {
    if (!r.ok) {
      const e = await r.json().catch(() => ({}));
      addError((e.error && e.error.message) || r.statusText);
      return;
    }
    if (first) handle(first);
    for await (const f of it || frames(r)) handle(f);
  } catch (e) {
    if (e.message !== 'unauthorized') addError(t('netError'));
  } finally {
    endSegment();
    // Re-read before the input is free again, so a next message never races the re-render.
    if (compacted && state.sessionId) await openSession(state.sessionId, state.owner).catch(() => {});
    setBusy(false);
    loadSessions();
    finish();
  }
}

// A message typed while the agent runs: it joins the running task (queued, then applied on the
// task's own stream), or — when the task cannot take it — runs as the next turn.
async function steer(text) {
  const row = addWaiting(text);
  let r;
  try {
    r = await api('POST', '/api/v1/agent/stream', streamBody(text));
  } catch (e) {
    row.remove();
    if (e.message !== 'unauthorized') addError(t('netError'));
    return;
  }
  if (!r.ok) {
    row.remove();
    const e = await r.json().catch(() => ({}));
    addError((e.error && e.error.message) || r.statusText);
    return;
  }
  const it = frames(r);
  let first = await it.next();
  if (!first.done && first.value.type === 'start' && first.value.assistant_message_id === undefined) {
    first = await it.next();
  }
  const f = first.value;
  if (!first.done && f.type === 'steering' && f.status === 'queued') {
    row.dataset.steeringId = f.message_id;
    for await (const _ of it) { /* the acknowledgement's `done` */ }
    return;
  }
  if (!first.done && f.type === 'error') {
    row.remove();
    addError(f.code === 'agent_manager_queue_full' ? t('queueFull') : f.message);
    return;
  }
  // An ordinary turn, queued behind the running one: shown as it starts.
  row.querySelector('.tag').textContent = t('steerWaiting');
  while (state.busy) await state.turnDone;
  row.remove();
  setBusy(true);
  addUser(text);
  await stream(r, text, it, first.done ? null : f);
}

let emptyNode;
function init() {
  emptyNode = $('empty');
  applyI18n();
  $('login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const err = $('login-error');
    err.hidden = true;
    $('login-submit').disabled = true;
    try {
      const r = await api('POST', '/api/v1/login', { username: $('login-user').value, password: $('login-pass').value });
      if (!r.ok) {
        err.textContent = r.status === 429 ? t('tooMany') : t('badLogin');
        err.hidden = false;
        return;
      }
      const v = await r.json();
      state.token = v.token;
      localStorage.setItem('mpa.token', v.token);
      $('login-pass').value = '';
      await signedIn();
    } catch (_) {
      err.textContent = t('netError');
      err.hidden = false;
    } finally {
      $('login-submit').disabled = false;
    }
  });
  $('composer').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = $('input');
    const text = input.value.trim();
    // While a new chat's first reply has not named the session yet, the message stays typed.
    if (!text || (state.busy && !state.sessionId)) return;
    input.value = '';
    input.style.height = '';
    if (state.busy) steer(text);
    else send(text);
  });
  $('input').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('input').addEventListener('input', (ev) => {
    ev.target.style.height = '';
    ev.target.style.height = Math.min(ev.target.scrollHeight + 2, window.innerHeight * 0.4) + 'px';
  });
  $('stop').addEventListener('click', () => {
    if (state.sessionId) api('POST', '/api/v1/agent/sessions/' + encodeURIComponent(state.sessionId) + '/stop' + (state.owner ? '?user_id=' + encodeURIComponent(state.owner) : '')).catch(() => {});
  });
  $('new-chat').addEventListener('click', () => {
    if (!state.busy) newChat();
    document.querySelector('.app').classList.remove('menu-open');
  });
  $('delete-chat').addEventListener('click', async () => {
    if (!state.sessionId || !confirm(t('confirmDelete'))) return;
    await api('DELETE', '/api/v1/agent/sessions/' + sessionPath(state.sessionId, state.owner)).catch(() => {});
    newChat();
    loadSessions();
  });
  $('logout').addEventListener('click', async () => {
    await api('POST', '/api/v1/logout').catch(() => {});
    signedOut();
  });
  $('menu').addEventListener('click', () => document.querySelector('.app').classList.toggle('menu-open'));
  $('scrim').addEventListener('click', () => document.querySelector('.app').classList.remove('menu-open'));
  document.querySelectorAll('[data-action=lang]').forEach((el) => el.addEventListener('click', () => {
    state.lang = state.lang === 'zh' ? 'en' : 'zh';
    localStorage.setItem('mpa.lang', state.lang);
    applyI18n();
    if (!state.sessionId) $('chat-title').textContent = t('newChat');
  }));
  if (state.token) signedIn().catch(() => signedOut());
  else signedOut();
}

document.addEventListener('DOMContentLoaded', init);
