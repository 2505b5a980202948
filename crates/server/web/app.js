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
    succeeded: 'succeeded', failed: 'failed', pending: 'submitted', unknown: 'result unknown',
    hint_pending: 'Submitted, not finished yet.',
    hint_unknown: 'May or may not have happened; verify before retrying.',
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
    copy: 'Copy', copied: 'Copied', copyCode: 'Copy code', code: 'code',
    plan: 'Plan', planSteps: 'steps done', st_pending: 'pending', st_in_progress: 'in progress',
    st_completed: 'completed', st_blocked: 'blocked',
    arguments: 'Arguments', result: 'Result', details: 'Details', working: 'Working…',
    noModel: 'The model cannot be reached. Set LLM_BASE_URL (and LLM_MODEL) for the host, or check that the model server is running, then retry.',
    retry: 'Retry', regenerate: 'Regenerate', edit: 'Edit', tokens: 'tokens',
    attach: 'Attach files', remove: 'Remove', uploadFailed: 'Upload failed',
    search: 'Search chats', rename: 'Rename', renamePrompt: 'New title for this chat',
    memory: 'Memory', skills: 'Skills', persona: 'Persona', back: 'Back to chat',
    shortcuts: 'Esc stops the reply; Ctrl+Shift+O starts a new chat.',
    mem_user: 'About you (USER.md)', mem_memory: 'Your notes (MEMORY.md)', mem_global: 'Shared notes (everyone)',
    used: 'used', add: 'Add', save: 'Save', cancel: 'Cancel', delete: 'Delete', newEntry: 'New entry',
    proposals: 'Waiting for your approval', noProposals: 'Nothing waiting.', approve: 'Approve', discard: 'Discard',
    noEntries: 'No entries yet.', confirmRemove: 'Delete this entry?', view: 'View', pin: 'Pin', unpin: 'Unpin',
    adopt: 'Adopt', restore: 'Restore', pinned: 'pinned', personal: 'personal', public: 'public', archived: 'Archived',
    noSkills: 'No skills yet.', personas: 'Personas', active: 'active', activate: 'Use this persona',
    newPersona: 'New persona', name: 'Name', style: 'Style', adminOnly: 'Only administrators can switch or edit personas.',
    loadFailed: 'Could not load this view.', editingHint: 'Editing your last message — Send replaces it.',
    int_user: '[The previous turn was stopped by the user. Calls without a result are marked “result unknown”: verify before retrying any write.]',
    int_shutdown: '[The previous turn was stopped because the host was shutting down. Calls without a result are marked “result unknown”: verify before retrying any write.]',
    int_failed: '[The previous turn ended with an error. Calls without a result are marked “result unknown”.]',
    int_recovery: '[The previous turn did not finish: the host stopped before it ended. Calls without a result are marked “result unknown”: verify before retrying any write.]',
  },
  zh: {
    appName: 'MoviePilot 智能助手', loginHint: '登录后即可与智能助手对话。', username: '用户名', password: '密码',
    signIn: '登录', signOut: '退出登录', newChat: '新对话', deleteChat: '删除', emptyTitle: '有什么可以帮你？',
    emptyHint: '可以询问媒体库、订阅或下载相关的问题。', placeholder: '给智能助手发消息…',
    send: '发送', stop: '停止', noSessions: '还没有对话。', untitled: '新对话', confirmDelete: '删除此对话及其历史记录？',
    badLogin: '用户名或密码错误。', tooMany: '尝试次数过多，请稍后再试。', netError: '网络错误，请检查连接后重试。',
    stopped: '已停止。', queueFull: '此对话正忙，请等待当前回复完成。', stillRunning: '此对话仍在处理中…',
    lang: 'English', running: '进行中', done: '完成', error: '失败', admin: '管理员',
    succeeded: '成功', failed: '失败', pending: '已提交', unknown: '结果未知',
    hint_pending: '已提交，尚未完成。', hint_unknown: '可能已生效，也可能没有；重试前请先核实。',
    compacted: '从这里起，模型依据上方消息的摘要继续工作（上方消息仍完整保留在此）。', summary: '摘要',
    steerQueued: '已排队——将在下一步加入当前任务', steerWaiting: '等待中——当前回复结束后处理',
    steerDiscarded: '未加入——任务已先停止',
    ts_blocked: '已被宿主停止：工具重复调用没有进展', ts_waiting: '等待中：操作已提交，尚未完成',
    ts_unknown: '结果未知：操作可能已生效，也可能没有', ts_partial: '回答不完整', ts_iteration_limit: '已达步数上限',
    tsHint: '这是宿主看到的本轮结束状态，不代表任务已经完成。',
    copy: '复制', copied: '已复制', copyCode: '复制代码', code: '代码',
    plan: '任务计划', planSteps: '步已完成', st_pending: '待办', st_in_progress: '进行中', st_completed: '已完成',
    st_blocked: '受阻', arguments: '参数', result: '结果', details: '详情', working: '正在处理…',
    noModel: '无法连接模型。请为宿主设置 LLM_BASE_URL（以及 LLM_MODEL），或确认模型服务正在运行，然后重试。',
    retry: '重试', regenerate: '重新生成', edit: '编辑', tokens: '个 token',
    attach: '添加附件', remove: '移除', uploadFailed: '上传失败',
    search: '搜索对话', rename: '重命名', renamePrompt: '对话的新标题',
    memory: '记忆', skills: '技能', persona: '人设', back: '返回对话',
    shortcuts: 'Esc 停止回复；Ctrl+Shift+O 新建对话。',
    mem_user: '关于你（USER.md）', mem_memory: '你的笔记（MEMORY.md）', mem_global: '共享笔记（所有人）',
    used: '已用', add: '添加', save: '保存', cancel: '取消', delete: '删除', newEntry: '新条目',
    proposals: '等待你确认', noProposals: '没有待确认的内容。', approve: '批准', discard: '丢弃',
    noEntries: '还没有条目。', confirmRemove: '删除这条记录？', view: '查看', pin: '固定', unpin: '取消固定',
    adopt: '采用', restore: '恢复', pinned: '已固定', personal: '个人', public: '公共', archived: '已归档',
    noSkills: '还没有技能。', personas: '人设', active: '使用中', activate: '使用此人设',
    newPersona: '新人设', name: '名称', style: '风格', adminOnly: '只有管理员可以切换或编辑人设。',
    loadFailed: '无法加载此页面。', editingHint: '正在编辑上一条消息——发送后将替换它。',
    int_user: '[上一轮已被用户停止。没有收到结果的调用标记为“结果未知”：重试任何写操作前请先核实。]',
    int_shutdown: '[上一轮因宿主关闭而停止。没有收到结果的调用标记为“结果未知”：重试任何写操作前请先核实。]',
    int_failed: '[上一轮因错误结束。没有收到结果的调用标记为“结果未知”。]',
    int_recovery: '[上一轮没有完成：宿主在结束前停止了。没有收到结果的调用标记为“结果未知”：重试任何写操作前请先核实。]',
  },
};

const $ = (id) => document.getElementById(id);
const state = {
  lang: localStorage.getItem('mpa.lang') || (/^zh/i.test(navigator.language) ? 'zh' : 'en'),
  token: localStorage.getItem('mpa.token'),
  // owner: set when an admin continues another user's chat (the explicit admin continuation).
  me: null, sessionId: null, owner: null, busy: false, sessions: [], poll: null,
  attachments: [], commands: [], commandIndex: 0, search: '', searchResults: null, plan: undefined,
  // Settles when the streaming turn has ended (a message that could not steer it runs next).
  turnDone: Promise.resolve(),
};
const t = (k) => (I18N[state.lang] && I18N[state.lang][k]) || I18N.en[k] || k;

// ---- markdown ----
// Answers are rendered by the server (`POST /api/v1/agent/render`, pulldown-cmark; raw HTML
// becomes text there), the same way while a reply streams and after a reload. Until the HTML
// arrives — or when it cannot — a bubble shows the plain text.
async function renderMarkdown(texts) {
  const r = await api('POST', '/api/v1/agent/render', { texts });
  if (!r.ok) throw new Error('render ' + r.status);
  return (await r.json()).html;
}

function plainText(el, text) {
  el.textContent = text;
  el.classList.add('plain');
}

// Puts rendered HTML into a bubble and adds what needs the page: copy buttons on code blocks,
// links that open in a new tab without handing over this page.
function setMarkdown(el, html) {
  el.classList.remove('plain');
  el.innerHTML = html;
  enhance(el);
}

function enhance(el) {
  el.querySelectorAll('a[href]').forEach((a) => { a.target = '_blank'; a.rel = 'noopener noreferrer'; });
  el.querySelectorAll('.code-block').forEach((block) => {
    const head = block.querySelector('.code-head');
    if (!head || head.querySelector('button')) return;
    const lang = head.querySelector('.code-lang');
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'copy';
    b.dataset.i18n = 'copy';
    b.textContent = t('copy');
    b.title = t('copyCode') + (lang && lang.textContent ? ' (' + lang.textContent + ')' : '');
    head.append(b);
  });
  el.querySelectorAll('pre[tabindex]').forEach((pre) => pre.setAttribute('aria-label', t('code')));
  el.querySelectorAll('.table-wrap').forEach((w) => w.setAttribute('aria-label', 'table'));
}

async function copyCode(button) {
  const code = button.closest('.code-block').querySelector('code');
  const text = code ? code.textContent : '';
  try {
    await navigator.clipboard.writeText(text);
  } catch (_) {
    // Without the clipboard API (plain http on another host): select the text for Ctrl+C.
    const range = document.createRange();
    range.selectNodeContents(code);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
  button.textContent = t('copied');
  button.dataset.copied = 'true';
  setTimeout(() => { button.textContent = t('copy'); delete button.dataset.copied; }, 1500);
}

// The streaming bubble's renderer: at most one request in flight; the newest text wins.
function liveMarkdown(el) {
  let text = '';
  let inflight = null;
  let dirty = false;
  const run = () => {
    dirty = false;
    const sent = text;
    inflight = renderMarkdown([sent]).then(([html]) => {
      if (el.isConnected || el.parentNode) setMarkdown(el, html);
    }).catch(() => { plainText(el, text); }).finally(() => {
      inflight = null;
      if (dirty) run();
    });
  };
  return {
    set(t2) {
      text = t2;
      if (!el.innerHTML || el.classList.contains('plain')) plainText(el, text);
      if (inflight) dirty = true; else run();
    },
    // Settles once the last text is rendered.
    async settle() {
      while (inflight) await inflight;
    },
  };
}

// Renders the bubbles of a reloaded chat in one request.
async function hydrate(pending) {
  if (!pending.length) return;
  try {
    const html = await renderMarkdown(pending.map((p) => p.text));
    pending.forEach((p, i) => setMarkdown(p.el, html[i]));
  } catch (_) { /* the plain text stays */ }
}

// ---- API ----
// The page's language choice wins over the browser's for every message the host writes.
function localeHeaders() {
  const l = state.lang === 'zh' ? 'zh-CN' : 'en';
  return { 'Accept-Language': l, 'X-MoviePilot-Locale': l };
}

async function api(method, path, body) {
  const headers = localeHeaders();
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
  document.querySelectorAll('[data-i18n-label]').forEach((el) => { el.setAttribute('aria-label', t(el.dataset.i18nLabel)); el.title = t(el.dataset.i18nLabel); });
  document.title = t('appName');
  // Lines already shown follow the language too: tool lines, notices, the plan.
  document.querySelectorAll('.tool').forEach((el) => {
    if (el._tool) { const x = el._tool; toolLine(el, x.status, x.name, x.message, x.outcome, x); }
  });
  document.querySelectorAll('.bubble.notice[data-notice]').forEach((el) => { el.textContent = noticeText(el); });
  document.querySelectorAll('.turn-status[data-turn-status]').forEach((el) => {
    el.textContent = el.classList.contains('dotonly') ? '' : t('ts_' + el.dataset.turnStatus);
    el.title = t('tsHint');
  });
  document.querySelectorAll('.code-block button.copy').forEach((b) => { if (!b.dataset.copied) b.textContent = t('copy'); b.title = t('copyCode'); });
  if (state.plan !== undefined) renderPlan(state.plan);
  if (state.view && $('view') && !$('view').hidden) openView(state.view);
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
  state.commandsLoaded = null;
  await loadSessions();
  const m = /^#\/s\/([^?]+)(?:\?user_id=(.+))?$/.exec(location.hash);
  if (m) await openSession(decodeURIComponent(m[1]), m[2] ? decodeURIComponent(m[2]) : null);
  else newChat();
}

function setBusy(busy) {
  state.busy = busy;
  if (busy && document.querySelectorAll) document.querySelectorAll('.turn-actions').forEach((a) => a.remove());
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
  const q = (state.search || '').trim().toLowerCase();
  const shown = state.searchResults || state.sessions.filter((s) => !q || (s.title || '').toLowerCase().includes(q));
  for (const s of shown) {
    const a = document.createElement('a');
    a.className = 'session' + (s.session_id === state.sessionId ? ' active' : '');
    a.href = '#/s/' + encodeURIComponent(s.session_id);
    a.dataset.sessionId = s.session_id;
    const title = document.createElement('span');
    title.className = 'title';
    title.textContent = s.title || t('untitled');
    a.append(title);
    if (s.snippet) { const sn = document.createElement('span'); sn.className = 'snippet'; sn.textContent = s.snippet; a.append(sn); }
    const label = !s.is_processing && statusLabel(s.turn_status);
    if (label) { label.textContent = ''; label.classList.add('dotonly'); label.setAttribute('role', 'img'); label.setAttribute('aria-label', t('ts_' + s.turn_status)); a.append(label); }
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

// A user line; `steeringId` marks a message that joined a running task (kept across reloads);
// `attachments`: what was sent with it (images shown small, files as names).
function addUser(text, steeringId, attachments) {
  const b = bubble('user');
  b.textContent = text;
  if (steeringId) b.parentNode.dataset.steeringId = steeringId;
  if (Array.isArray(attachments) && attachments.length) b.parentNode.append(attachmentList(attachments));
  scrollDown();
  return b.parentNode;
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

// A host notice in the page's language: by its code when the host gave one, else by its text.
function noticeText(b) {
  if (b.dataset.noticeKey) {
    const m = b.dataset.noticeKey === 'int_failed' && /^\[The previous turn ended with an error: (.*?)\. Tool calls/.exec(b.dataset.notice);
    return t(b.dataset.noticeKey) + (m ? ' (' + m[1] + ')' : '');
  }
  return interruptionText(b.dataset.notice);
}

// An interruption note the host stored in English, in the page's language (matched by its
// opening words; anything else is shown as stored).
function interruptionText(text) {
  if (text.startsWith('[The previous turn was stopped by the user')) return t('int_user');
  if (text.startsWith('[The previous turn was stopped because the host was shutting down')) return t('int_shutdown');
  if (text.startsWith('[The previous turn ended with an error')) {
    const m = /^\[The previous turn ended with an error: (.*?)\. Tool calls/.exec(text);
    return t('int_failed') + (m ? ' (' + m[1] + ')' : '');
  }
  if (text.startsWith('[The previous turn did not finish')) return t('int_recovery');
  return text;
}

// An assistant bubble. Rendered markdown arrives later (see `hydrate`); a host notice is text.
const NOTICE_CODES = { turn_stopped_by_user: 'int_user', turn_stopped_by_shutdown: 'int_shutdown',
  turn_failed: 'int_failed', turn_interrupted: 'int_recovery' };

function addAssistant(text, notice, pending, noticeCode) {
  const b = bubble('assistant');
  if (notice) {
    b.classList.add('notice');
    b.dataset.notice = text;
    if (NOTICE_CODES[noticeCode]) b.dataset.noticeKey = NOTICE_CODES[noticeCode];
    b.textContent = noticeText(b);
  } else {
    plainText(b, text);
    if (pending) pending.push({ el: b, text });
  }
  scrollDown();
  return b;
}

// When a message was written and what its turn used, shown on hover, focus or tap.
function addMeta(row, m) {
  if (!row || !(m.created_at || m.usage)) return;
  const meta = document.createElement('div');
  meta.className = 'meta';
  const parts = [];
  if (m.created_at) {
    const d = new Date(m.created_at);
    if (!isNaN(d)) parts.push(d.toLocaleString(state.lang === 'zh' ? 'zh-CN' : 'en'));
  }
  const total = m.usage && (m.usage.total_tokens || ((m.usage.prompt_tokens || 0) + (m.usage.completion_tokens || 0)));
  if (total) parts.push(total.toLocaleString() + ' ' + t('tokens'));
  if (!parts.length) return;
  meta.textContent = parts.join(' · ');
  row.tabIndex = 0;
  row.append(meta);
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

// An error line; `retryText`: the message to send again from its Retry button.
function addError(text, retryText) {
  const b = bubble('error');
  b.textContent = text;
  if (retryText) {
    const r = document.createElement('button');
    r.type = 'button';
    r.className = 'retry';
    r.dataset.i18n = 'retry';
    r.textContent = t('retry');
    // The message is stored with the failed turn: answer it again rather than send it twice.
    r.addEventListener('click', () => { if (!state.busy) send(retryText, [], state.sessionId ? 'regenerate' : null); });
    b.append(' ', r);
  }
  scrollDown();
}

// What an error frame says, in the page's language where the page knows the code.
function errorText(f) {
  if (f.message_i18n) return localised(f.message_i18n);
  if (f.code === 'agent_manager_queue_full') return t('queueFull');
  if (f.code === 'model_unreachable' || f.code === 'model_network_error') return t('noModel');
  return f.message;
}

// A tool line: the operation (`moviepilot_api · subscription.list`), the outcome word in the
// page's language (an unknown write gets its own look, amber "?", never the success check), a
// one-line summary, and the arguments and result preview behind a button (click or keyboard).
const OUTCOMES = ['succeeded', 'failed', 'pending', 'unknown'];
const ICONS = { succeeded: '✓', failed: '!', pending: '…', unknown: '?' };
let toolSeq = 0;

function localised(v) {
  if (v && typeof v === 'object' && !Array.isArray(v)) return v[state.lang] || v.en || v.zh || '';
  return v == null ? '' : String(v);
}

function pretty(v) {
  if (v == null || v === '') return '';
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch (_) { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// `tool`: {status, name, message, outcome, operation, summary, arguments, preview}.
function toolLine(el, status, name, message, outcome, extra) {
  const tool = Object.assign({ status, name, message, outcome }, extra || {});
  el._tool = tool;
  const known = OUTCOMES.includes(outcome) ? outcome : null;
  el.className = 'tool ' + status + (known ? ' outcome-' + known : '');
  el.dataset.status = status;
  if (known) el.dataset.outcome = known; else delete el.dataset.outcome;
  el.textContent = '';
  if (!el.id) el.id = 'tool-' + (++toolSeq);
  const head = document.createElement('button');
  head.type = 'button';
  head.className = 'tool-head';
  const icon = document.createElement('span');
  icon.className = 'icon';
  icon.setAttribute('aria-hidden', 'true');
  icon.textContent = known ? ICONS[known] : status === 'done' ? '✓' : status === 'error' ? '!' : '';
  const n = document.createElement('span');
  n.className = 'name';
  const op = tool.operation || (tool.arguments && typeof tool.arguments === 'object' && tool.arguments.operation);
  n.textContent = (name || 'tool') + (op ? ' · ' + op : '');
  const w = document.createElement('span');
  w.className = 'outcome';
  w.textContent = t(known || status);
  const m = document.createElement('span');
  m.className = 'text';
  m.textContent = localised(tool.summary) || message || '';
  const detailText = [];
  if (known === 'pending' || known === 'unknown') detailText.push(t('hint_' + known));
  // The whole message: the line above is cut to one line.
  if (message) detailText.push(message);
  const args = pretty(tool.arguments);
  const preview = pretty(tool.preview);
  const hasDetail = detailText.length || args || preview;
  head.append(icon, n, w, m);
  el.append(head);
  if (!hasDetail) { head.disabled = true; head.classList.add('bare'); return; }
  const detail = document.createElement('div');
  detail.className = 'tool-detail';
  detail.id = el.id + '-detail';
  detail.hidden = !el.classList.contains('open');
  for (const line of detailText) {
    const p = document.createElement('p');
    p.textContent = line;
    detail.append(p);
  }
  for (const [label, body] of [[t('arguments'), args], [t('result'), preview]]) {
    if (!body) continue;
    const h = document.createElement('div');
    h.className = 'label';
    h.textContent = label;
    const pre = document.createElement('pre');
    pre.tabIndex = 0;
    pre.textContent = body;
    detail.append(h, pre);
  }
  head.setAttribute('aria-expanded', String(!detail.hidden));
  head.setAttribute('aria-controls', detail.id);
  el.append(detail);
}

function toggleTool(head) {
  const el = head.closest('.tool');
  const detail = el.querySelector('.tool-detail');
  if (!detail) return;
  detail.hidden = !detail.hidden;
  el.classList.toggle('open', !detail.hidden);
  head.setAttribute('aria-expanded', String(!detail.hidden));
}

function addTool(status, name, message, outcome, extra) {
  emptyNode.remove();
  const el = document.createElement('div');
  toolLine(el, status, name, message, outcome, extra);
  place(el);
  scrollDown();
  return el;
}

function toolExtra(f) {
  return { operation: f.operation, summary: f.summary_i18n || f.summary, arguments: f.arguments, preview: f.preview };
}

// ---- plan panel ----
// The model's plan (update_plan): objective and steps with their status and evidence, live from
// the stream's `plan` frames and restored with the chat. Step statuses are the model's claims.
const STEP_ICONS = { pending: '○', in_progress: '◐', completed: '●', blocked: '⊘' };

function renderPlan(plan) {
  state.plan = plan || null;
  const box = $('plan');
  if (!box) return;
  box.textContent = '';
  if (!plan || !plan.objective) { box.hidden = true; return; }
  box.hidden = false;
  const details = document.createElement('details');
  details.open = !state.planCollapsed;
  details.addEventListener('toggle', () => { state.planCollapsed = !details.open; });
  const head = document.createElement('summary');
  const steps = Array.isArray(plan.steps) ? plan.steps : [];
  const done = steps.filter((s) => s.status === 'completed').length;
  const title = document.createElement('span');
  title.className = 'plan-title';
  title.textContent = t('plan');
  const objective = document.createElement('span');
  objective.className = 'plan-objective';
  objective.textContent = plan.objective;
  const count = document.createElement('span');
  count.className = 'plan-count';
  count.textContent = done + '/' + steps.length + ' ' + t('planSteps');
  head.append(title, objective, count);
  const list = document.createElement('ol');
  list.className = 'plan-steps';
  for (const s of steps) {
    const li = document.createElement('li');
    const status = STEP_ICONS[s.status] ? s.status : 'pending';
    li.className = 'step step-' + status;
    li.dataset.status = status;
    const icon = document.createElement('span');
    icon.className = 'step-icon';
    icon.setAttribute('aria-hidden', 'true');
    icon.textContent = STEP_ICONS[status];
    const text = document.createElement('span');
    text.className = 'step-text';
    text.textContent = s.step || '';
    const word = document.createElement('span');
    word.className = 'step-status';
    word.textContent = t('st_' + status);
    li.append(icon, text, word);
    if (s.evidence) {
      const ev = document.createElement('div');
      ev.className = 'step-evidence';
      ev.textContent = s.evidence;
      li.append(ev);
    }
    list.append(li);
  }
  details.append(head, list);
  if (plan.explanation) {
    const ex = document.createElement('p');
    ex.className = 'plan-explanation';
    ex.textContent = plan.explanation;
    details.append(ex);
  }
  box.append(details);
}

// The newest plan a saved chat carries: the detail's `plan`, else the last display line with one.
function planOf(detail) {
  if (detail.plan) return detail.plan;
  const lines = detail.display_messages || [];
  for (let i = lines.length - 1; i >= 0; i--) if (lines[i].plan) return lines[i].plan;
  return null;
}

// ---- activity ----
// Shown from the moment a turn is sent until its first text, tool line or end.
function showActivity() {
  hideActivity();
  const el = document.createElement('div');
  el.id = 'activity';
  el.className = 'activity';
  el.setAttribute('role', 'status');
  const dots = document.createElement('span');
  dots.className = 'dots';
  dots.setAttribute('aria-hidden', 'true');
  dots.append(document.createElement('i'), document.createElement('i'), document.createElement('i'));
  const label = document.createElement('span');
  label.dataset.i18n = 'working';
  label.textContent = t('working');
  el.append(dots, label);
  place(el);
  scrollDown();
}

function hideActivity() {
  const el = $('activity');
  if (el && el.remove) el.remove();
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
  const pending = [];
  for (const m of messages || []) {
    if (processing && m.recovery) continue;
    if (m.role === 'user') addMeta(addUser(m.content, m.steering_message_id, Array.isArray(m.images) ? m.images : m.attachments), m);
    else if (m.role === 'assistant') {
      addMeta(addAssistant(m.content, m.notice, pending, m.notice_code).parentNode, m);
      addTurnStatus(m.turn_status);
    } else if (m.role === 'tool') addTool(m.status, m.name, m.message, m.outcome, toolExtra(m));
    else if (m.role === 'context') addContextMarker(m.summary);
  }
  markLastTurn();
  hydrate(pending).catch(() => {});
}

// The last user message can be edited and sent again, and the last answer regenerated.
function markLastTurn() {
  document.querySelectorAll && document.querySelectorAll('.turn-actions').forEach((a) => a.remove());
  if (!document.querySelectorAll) return;
  const users = document.querySelectorAll('#messages > .msg.user');
  const last = users[users.length - 1];
  if (!last || state.busy) return;
  const text = last.querySelector('.bubble').textContent;
  const bar = document.createElement('div');
  bar.className = 'turn-actions';
  const mk = (key, fn) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'link small';
    b.dataset.i18n = key;
    b.textContent = t(key);
    b.addEventListener('click', fn);
    bar.append(b);
  };
  mk('edit', () => {
    const input = $('input');
    input.value = text;
    state.editing = true;
    $('composer').classList.add('editing');
    input.focus();
    input.dispatchEvent(new Event('input'));
  });
  mk('regenerate', () => { if (!state.busy) send(text, [], 'regenerate'); });
  $('messages').append(bar);
}

// The session's address for the routes and the URL: its id, plus its owner when an admin
// continues another user's chat.
function sessionPath(id, owner) {
  return encodeURIComponent(id) + (owner ? '?user_id=' + encodeURIComponent(owner) : '');
}

async function openSession(id, owner = null) {
  stopPolling();
  if (state.view) closeView();
  const r = await api('GET', '/api/v1/agent/sessions/' + sessionPath(id, owner));
  if (!r.ok) { newChat(); return; }
  const s = await r.json();
  state.sessionId = id;
  state.owner = owner && owner !== state.me.id ? owner : null;
  location.hash = '#/s/' + sessionPath(id, state.owner);
  $('chat-title').textContent = s.title || t('untitled');
  $('delete-chat').hidden = false;
  $('rename-chat').hidden = false;
  renderHistory(s.display_messages, s.is_processing);
  renderPlan(planOf(s));
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
  if (state.view) closeView();
  state.sessionId = null;
  state.owner = null;
  history.replaceState(null, '', location.pathname);
  $('chat-title').textContent = t('newChat');
  $('delete-chat').hidden = true;
  $('rename-chat').hidden = true;
  clearMessages();
  renderPlan(null);
  renderSessions();
  $('input').focus();
}

function dropEmpty(o) {
  const out = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null && v !== '') out[k] = v;
  return out;
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

function streamBody(text, attachments, redo) {
  const body = { text };
  if (attachments && attachments.length) {
    const images = attachments.filter((a) => a.kind === 'image');
    const files = attachments.filter((a) => a.kind !== 'image');
    if (images.length) body.images = images;
    if (files.length) body.files = files;
  }
  if (redo === 'regenerate') body.regenerate = true;
  if (redo === 'edit') body.edit_last = true;
  if (state.sessionId) body.session_id = state.sessionId;
  if (state.owner) body.user_id = state.owner;
  return body;
}

// `redo`: 'regenerate' (answer the last message again) or 'edit' (replace it with `text`); the
// host drops the old answer, so the chat is read again when the turn ends.
async function send(text, attachments, redo) {
  setBusy(true);
  if (redo) dropLastTurn();
  addUser(text, null, attachments);
  showActivity();
  let r;
  try {
    r = await api('POST', '/api/v1/agent/stream', streamBody(text, attachments, redo));
  } catch (e) {
    hideActivity();
    if (e.message !== 'unauthorized') addError(t('netError'), text);
    setBusy(false);
    return;
  }
  await stream(r, text, null, null, !!redo);
}

// The last user message and what followed it, removed before it is sent again.
function dropLastTurn() {
  const box = $('messages');
  const users = box.querySelectorAll(':scope > .msg.user');
  const last = users[users.length - 1];
  if (!last) return;
  while (last.nextSibling) last.nextSibling.remove();
  last.remove();
}

// Renders one turn's stream (`first`: a frame already read from `it`).
async function stream(r, text, it = null, first = null, reread = false) {
  let finish;
  state.turnDone = new Promise((resolve) => { finish = resolve; });
  let segment = null; // the assistant bubble being streamed
  let live = null; // its renderer
  let segmentText = '';
  const tools = new Map();
  let compacted = false; // the context was summarised during this turn
  const settling = [];
  const endSegment = () => {
    if (segment) { segment.classList.remove('cursor'); settling.push(live.settle()); }
    segment = null;
    live = null;
    segmentText = '';
  };
  const waiting = (id) => document.querySelector('#steering-waiting [data-steering-id="' + id + '"]');
  const handle = (f) => {
    if (f.type === 'start') {
      const fresh = state.sessionId !== f.session_id;
      state.sessionId = f.session_id;
      history.replaceState(null, '', '#/s/' + sessionPath(f.session_id, state.owner));
      $('delete-chat').hidden = false;
      $('rename-chat').hidden = false;
      if (fresh) { $('chat-title').textContent = text.slice(0, 36); loadSessions(); }
    } else if (f.type === 'delta') {
      hideActivity();
      if (!segment) { segment = addAssistant(''); segment.classList.add('cursor'); live = liveMarkdown(segment); }
      segmentText += f.content;
      live.set(segmentText);
      scrollDown();
    } else if (f.type === 'tool') {
      hideActivity();
      endSegment();
      const el = tools.get(f.tool_id);
      const extra = toolExtra(f);
      if (el) toolLine(el, f.status, f.name, f.message, f.outcome, Object.assign({}, el._tool, dropEmpty(extra)));
      else tools.set(f.tool_id, addTool(f.status, f.name, f.message, f.outcome, extra));
    } else if (f.type === 'plan') {
      renderPlan(f.plan);
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
      hideActivity();
      endSegment();
      addError(errorText(f), f.retryable || (f.code || '').startsWith('model_') ? text : null);
    } else if (f.type === 'done') {
      hideActivity();
      endSegment();
      if (f.status === 'stopped') addAssistant(t('stopped'), true);
      else addTurnStatus(f.status);
      if (f.usage) {
        const rows = document.querySelectorAll('#messages > .msg.assistant');
        addMeta(rows[rows.length - 1], { usage: f.usage, created_at: new Date().toISOString() });
      }
    }
  };
  try {
    if (!r.ok) {
      hideActivity();
      const e = await r.json().catch(() => ({}));
      addError((e.error && e.error.message) || r.statusText, text);
      return;
    }
    if (first) handle(first);
    for await (const f of it || frames(r)) handle(f);
  } catch (e) {
    if (e.message !== 'unauthorized') addError(t('netError'), text);
  } finally {
    hideActivity();
    endSegment();
    await Promise.all(settling).catch(() => {});
    // Re-read before the input is free again, so a next message never races the re-render.
    if ((compacted || reread) && state.sessionId) await openSession(state.sessionId, state.owner).catch(() => {});
    setBusy(false);
    markLastTurn();
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
    addError(errorText(f));
    return;
  }
  // An ordinary turn, queued behind the running one: shown as it starts.
  row.querySelector('.tag').textContent = t('steerWaiting');
  while (state.busy) await state.turnDone;
  row.remove();
  setBusy(true);
  addUser(text);
  showActivity();
  await stream(r, text, it, first.done ? null : f);
}

let emptyNode;
function init() {
  $('boot').remove();
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
    if ((!text && !state.attachments.length) || (state.busy && !state.sessionId)) return;
    if (state.attachments.some((a) => !a.ready)) return;
    input.value = '';
    input.style.height = '';
    closeCommands();
    const files = state.attachments.map((a) => a.ready);
    state.attachments = [];
    renderAttachments();
    const editing = state.editing;
    state.editing = false;
    $('composer').classList.remove('editing');
    if (state.busy) steer(text);
    else send(text, files, editing ? 'edit' : null);
  });
  $('input').addEventListener('keydown', (ev) => {
    if (commandKey(ev)) return;
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('input').addEventListener('input', (ev) => {
    ev.target.style.height = '';
    ev.target.style.height = Math.min(ev.target.scrollHeight + 2, window.innerHeight * 0.4) + 'px';
    suggestCommands(ev.target.value);
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
  // Buttons inside rendered lines: one listener for all of them.
  $('messages').addEventListener('click', (ev) => {
    const copy = ev.target.closest('button.copy');
    if (copy) { copyCode(copy); return; }
    const head = ev.target.closest('.tool-head');
    if (head) toggleTool(head);
  });
  $('rename-chat').addEventListener('click', renameChat);
  document.querySelectorAll('[data-view]').forEach((b) => b.addEventListener('click', () => openView(b.dataset.view)));
  $('session-search').addEventListener('input', (ev) => searchSessions(ev.target.value));
  // Attachments: the picker, paste and drag-and-drop.
  $('attach').addEventListener('click', () => $('file-input').click());
  $('file-input').addEventListener('change', (ev) => { addFiles(ev.target.files); ev.target.value = ''; });
  $('input').addEventListener('paste', (ev) => {
    const files = [...(ev.clipboardData ? ev.clipboardData.files : [])];
    if (files.length) { ev.preventDefault(); addFiles(files); }
  });
  const main = document.querySelector('.main');
  main.addEventListener('dragover', (ev) => { if (ev.dataTransfer && [...ev.dataTransfer.types].includes('Files')) { ev.preventDefault(); main.classList.add('dropping'); } });
  main.addEventListener('dragleave', (ev) => { if (ev.target === main || !main.contains(ev.relatedTarget)) main.classList.remove('dropping'); });
  main.addEventListener('drop', (ev) => {
    main.classList.remove('dropping');
    if (ev.dataTransfer && ev.dataTransfer.files.length) { ev.preventDefault(); addFiles(ev.dataTransfer.files); }
  });
  // Esc stops the running reply; Ctrl/⌘+Shift+O starts a new chat.
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && state.busy && !$('commands').childElementCount) { ev.preventDefault(); $('stop').click(); }
    if ((ev.ctrlKey || ev.metaKey) && ev.shiftKey && (ev.key === 'O' || ev.key === 'o')) {
      ev.preventDefault();
      if (!state.busy) newChat();
    }
  });
  if (state.token) signedIn().catch(() => signedOut());
  else signedOut();
}

// ---- memory, skills and persona views ----
// Each replaces the chat in the main area until "Back to chat"; every action is the host's own
// `/memory`, `/skills` or `/persona` logic through its endpoint, and the view is read again after.
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function button(key, fn, cls) {
  const b = el('button', cls || 'secondary', t(key));
  b.type = 'button';
  b.addEventListener('click', fn);
  return b;
}

async function openView(name) {
  state.view = name;
  document.querySelector('.app').classList.remove('menu-open');
  document.querySelector('.main').classList.add('in-view');
  const panel = $('view');
  panel.hidden = false;
  panel.textContent = '';
  const head = el('div', 'view-head');
  const h = el('h2', null, t(name === 'persona' ? 'personas' : name));
  h.id = 'view-title';
  head.append(h, button('back', closeView, 'link'));
  panel.append(head);
  const body = el('div', 'view-body');
  panel.append(body);
  try {
    if (name === 'memory') await memoryView(body);
    else if (name === 'skills') await skillsView(body);
    else await personaView(body);
  } catch (e) {
    if (e.message !== 'unauthorized') body.append(el('p', 'form-error', t('loadFailed') + ' ' + (e.message || '')));
  }
  h.tabIndex = -1;
  h.focus();
}

function closeView() {
  state.view = null;
  $('view').hidden = true;
  document.querySelector('.main').classList.remove('in-view');
  $('input').focus();
}

async function getJson(path) {
  const r = await api('GET', path);
  const v = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((v.error && v.error.message) || r.statusText);
  return v;
}

// Runs an action, shows its answer, and reads the view again.
async function act(method, path, body, status) {
  const r = await api(method, path, body);
  const v = await r.json().catch(() => ({}));
  const msg = !r.ok ? (v.error && v.error.message) || r.statusText : v.message || '';
  if (status) { status.textContent = msg; status.className = 'view-status' + (r.ok && v.ok !== false ? '' : ' form-error'); }
  if (r.ok) setTimeout(() => openView(state.view).then(() => { const s = document.querySelector('#view .view-status'); if (s) s.textContent = msg; }), 0);
  return r.ok;
}

const entryText = (e) => (typeof e === 'string' ? e : e.content || e.text || '');

async function memoryView(body) {
  const v = await getJson('/api/v1/agent/memory');
  const status = el('p', 'view-status');
  status.setAttribute('role', 'status');
  body.append(status);
  // Proposals first: they wait for the user.
  const props = el('section', 'card');
  props.append(el('h3', null, t('proposals')));
  const list = v.proposals || [];
  if (!list.length) props.append(el('p', 'muted', t('noProposals')));
  for (const p of list) {
    const item = el('div', 'proposal');
    item.dataset.proposalId = p.id;
    item.append(el('div', 'proposal-summary', (p.target ? t('mem_' + p.target) + ' · ' : '') + (p.summary || p.preview || '')));
    if (Array.isArray(p.operations)) {
      for (const op of p.operations) item.append(el('div', 'proposal-op', op.action + ': ' + (op.content || op.previous || '')));
    }
    const row = el('div', 'actions');
    row.append(
      button('approve', () => act('POST', '/api/v1/agent/memory/proposals/' + encodeURIComponent(p.id) + '/approve', undefined, status), 'primary small-btn'),
      button('discard', () => act('POST', '/api/v1/agent/memory/proposals/' + encodeURIComponent(p.id) + '/discard', undefined, status)),
    );
    item.append(row);
    props.append(item);
  }
  body.append(props);
  for (const target of ['user', 'memory', 'global']) {
    const store = v[target];
    if (!store) continue;
    const editable = target !== 'global' || store.editable;
    const card = el('section', 'card');
    card.dataset.store = target;
    card.append(el('h3', null, t('mem_' + target)));
    const used = store.used || 0;
    const limit = store.limit || 0;
    const budget = el('div', 'budget');
    const bar = el('progress');
    bar.max = limit || 1;
    bar.value = Math.min(used, limit || used);
    bar.setAttribute('aria-label', t('mem_' + target) + ' ' + t('used'));
    budget.append(bar, el('span', 'muted', used + ' / ' + limit + ' ' + t('used')));
    card.append(budget);
    const entries = store.entries || [];
    if (!entries.length) card.append(el('p', 'muted', t('noEntries')));
    const path = '/api/v1/agent/memory/' + target;
    for (const e of entries) {
      const text = entryText(e);
      const row = el('div', 'entry');
      row.append(el('div', 'entry-text', text));
      if (editable) {
        const actions = el('div', 'actions');
        actions.append(
          button('edit', () => {
            const next = prompt(t('edit'), text);
            if (next !== null && next.trim() && next !== text) act('POST', path, { action: 'replace', old_text: text, content: next.trim() }, status);
          }, 'link small'),
          button('delete', () => { if (confirm(t('confirmRemove'))) act('POST', path, { action: 'remove', old_text: text }, status); }, 'link small danger'),
        );
        row.append(actions);
      }
      card.append(row);
    }
    if (editable) {
      const form = el('form', 'add-entry');
      const input = el('textarea');
      input.rows = 2;
      input.setAttribute('aria-label', t('newEntry') + ' — ' + t('mem_' + target));
      input.placeholder = t('newEntry');
      const add = el('button', 'secondary', t('add'));
      add.type = 'submit';
      form.append(input, add);
      form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        if (input.value.trim()) act('POST', path, { action: 'add', content: input.value.trim() }, status);
      });
      card.append(form);
    }
    body.append(card);
  }
}

async function skillsView(body) {
  const v = await getJson('/api/v1/agent/skills');
  const status = el('p', 'view-status');
  status.setAttribute('role', 'status');
  body.append(status);
  const card = el('section', 'card');
  const skills = v.skills || [];
  if (!skills.length) card.append(el('p', 'muted', t('noSkills')));
  const path = (name, action) => '/api/v1/agent/skills/' + encodeURIComponent(name) + (action ? '/' + action : '');
  for (const sk of skills) {
    const row = el('div', 'skill');
    row.dataset.skill = sk.name;
    const head = el('div', 'skill-head');
    head.append(el('strong', null, sk.name));
    head.append(el('span', 'badge', t(sk.source === 'public' ? 'public' : 'personal')));
    if (sk.pinned) head.append(el('span', 'badge pinned', t('pinned')));
    row.append(head);
    if (sk.description) row.append(el('div', 'muted', (sk.category ? sk.category + ' · ' : '') + sk.description));
    const actions = el('div', 'actions');
    const content = el('pre', 'skill-content');
    content.hidden = true;
    content.tabIndex = 0;
    actions.append(button('view', async () => {
      if (content.hidden && !content.textContent) {
        try { content.textContent = (await getJson(path(sk.name))).content || ''; } catch (e) { content.textContent = e.message; }
      }
      content.hidden = !content.hidden;
    }, 'link small'));
    if (sk.source === 'public') actions.append(button('adopt', () => act('POST', path(sk.name, 'adopt'), undefined, status), 'link small'));
    else if (sk.pinned !== undefined) actions.append(button(sk.pinned ? 'unpin' : 'pin', () => act('POST', path(sk.name, sk.pinned ? 'unpin' : 'pin'), undefined, status), 'link small'));
    // The host does not list the pinned state yet: both actions are offered.
    else actions.append(button('pin', () => act('POST', path(sk.name, 'pin'), undefined, status), 'link small'),
      button('unpin', () => act('POST', path(sk.name, 'unpin'), undefined, status), 'link small'));
    row.append(actions, content);
    card.append(row);
  }
  body.append(card);
  const archived = v.archived || [];
  if (archived.length) {
    const arch = el('section', 'card');
    arch.append(el('h3', null, t('archived')));
    for (const name of archived) {
      const row = el('div', 'skill');
      const n = typeof name === 'string' ? name : name.name;
      row.append(el('strong', null, n), ' ', button('restore', () => act('POST', path(n, 'restore'), undefined, status), 'link small'));
      arch.append(row);
    }
    body.append(arch);
  }
}

async function personaView(body) {
  const v = await getJson('/api/v1/agent/personas');
  const admin = state.me && state.me.is_admin;
  const status = el('p', 'view-status');
  status.setAttribute('role', 'status');
  body.append(status);
  if (!admin) body.append(el('p', 'muted', t('adminOnly')));
  const card = el('section', 'card');
  for (const p of v.personas || []) {
    const row = el('div', 'persona' + (p.active ? ' active' : ''));
    row.dataset.persona = p.id;
    const head = el('div', 'skill-head');
    head.append(el('strong', null, p.name));
    if (p.active) head.append(el('span', 'badge pinned', t('active')));
    row.append(head, el('div', 'muted persona-style', p.style || ''));
    if (admin && !p.active) {
      const actions = el('div', 'actions');
      actions.append(button('activate', () => act('PUT', '/api/v1/agent/personas/' + encodeURIComponent(p.id), { active: true }, status), 'link small'));
      row.append(actions);
    }
    card.append(row);
  }
  body.append(card);
  if (admin) {
    const form = el('form', 'card add-persona');
    form.append(el('h3', null, t('newPersona')));
    const name = el('input');
    name.setAttribute('aria-label', t('name'));
    name.placeholder = t('name');
    const style = el('textarea');
    style.rows = 3;
    style.setAttribute('aria-label', t('style'));
    style.placeholder = t('style');
    const save = el('button', 'primary', t('save'));
    save.type = 'submit';
    form.append(name, style, save);
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      if (name.value.trim()) act('POST', '/api/v1/agent/personas', { name: name.value.trim(), style: style.value.trim() }, status);
    });
    body.append(form);
  }
}

// ---- rename and search ----
async function renameChat() {
  if (!state.sessionId) return;
  const title = prompt(t('renamePrompt'), $('chat-title').textContent);
  if (title === null || !title.trim()) return;
  const r = await api('PATCH', '/api/v1/agent/sessions/' + sessionPath(state.sessionId, state.owner), { title: title.trim() }).catch(() => null);
  if (r && r.ok) { $('chat-title').textContent = title.trim(); loadSessions(); }
  else if (r) { const e = await r.json().catch(() => ({})); addError((e.error && e.error.message) || r.statusText); }
}

// Titles are filtered at once; from two characters the server also searches the chats' content.
let searchTimer = null;
function searchSessions(q) {
  state.search = q;
  state.searchResults = null;
  renderSessions();
  clearTimeout(searchTimer);
  if (q.trim().length < 2) return;
  searchTimer = setTimeout(async () => {
    try {
      const r = await api('GET', '/api/v1/agent/sessions?page=1&count=50&q=' + encodeURIComponent(q.trim()));
      if (r.ok && state.search === q) { state.searchResults = (await r.json()).sessions; renderSessions(); }
    } catch (_) { /* keep the title filter */ }
  }, 250);
}

// ---- slash commands ----
// The commands this user may run (GET /api/v1/agent/commands), offered while the message
// starts with "/": arrows move, Enter or Tab takes one, Esc closes the list.
async function loadCommands() {
  try {
    const r = await api('GET', '/api/v1/agent/commands');
    if (!r.ok) return;
    const v = await r.json();
    state.commands = (Array.isArray(v) ? v : v.commands || []).map((c) => ({
      name: (c.name || c.command || '').replace(/^\/?/, '/'), description: localised(c.description_i18n || c.description),
    })).filter((c) => c.name.length > 1);
  } catch (_) { /* no completion */ }
}

function suggestCommands(value) {
  // Asked for the first time a message starts with "/".
  if (value.startsWith('/') && !state.commandsLoaded) {
    state.commandsLoaded = loadCommands().then(() => suggestCommands($('input').value));
    return;
  }
  const box = $('commands');
  const m = /^\/(\S*)$/.exec(value);
  const list = m ? state.commands.filter((c) => c.name.slice(1).startsWith(m[1])) : [];
  box.textContent = '';
  state.commandIndex = 0;
  if (!list.length) { closeCommands(); return; }
  list.slice(0, 8).forEach((c, i) => {
    const li = document.createElement('li');
    li.id = 'cmd-' + i;
    li.setAttribute('role', 'option');
    li.dataset.name = c.name;
    const n = document.createElement('strong');
    n.textContent = c.name;
    const d = document.createElement('span');
    d.textContent = c.description || '';
    li.append(n, ' ', d);
    li.addEventListener('mousedown', (ev) => { ev.preventDefault(); takeCommand(c.name); });
    box.append(li);
  });
  box.hidden = false;
  $('input').setAttribute('aria-expanded', 'true');
  highlightCommand();
}

function highlightCommand() {
  const items = [...$('commands').children];
  items.forEach((li, i) => li.setAttribute('aria-selected', String(i === state.commandIndex)));
  if (items[state.commandIndex]) $('input').setAttribute('aria-activedescendant', items[state.commandIndex].id);
}

function closeCommands() {
  const box = $('commands');
  box.textContent = '';
  box.hidden = true;
  $('input').setAttribute('aria-expanded', 'false');
  $('input').removeAttribute('aria-activedescendant');
}

function takeCommand(name) {
  const input = $('input');
  input.value = name + ' ';
  closeCommands();
  input.focus();
}

function commandKey(ev) {
  const items = [...$('commands').children];
  if (!items.length) return false;
  if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
    ev.preventDefault();
    state.commandIndex = (state.commandIndex + (ev.key === 'ArrowDown' ? 1 : items.length - 1)) % items.length;
    highlightCommand();
    return true;
  }
  if (ev.key === 'Enter' || ev.key === 'Tab') {
    ev.preventDefault();
    takeCommand(items[state.commandIndex].dataset.name);
    return true;
  }
  if (ev.key === 'Escape') { ev.preventDefault(); closeCommands(); return true; }
  return false;
}

// ---- attachments ----
// Files picked, pasted or dropped are uploaded at once (POST /api/v1/agent/upload) and shown
// above the composer; the next message carries them.
function addFiles(files) {
  for (const file of files) {
    const item = { file, name: file.name, ready: null, failed: false,
      preview: /^image\//.test(file.type) ? URL.createObjectURL(file) : null };
    state.attachments.push(item);
    upload(item);
  }
  renderAttachments();
}

async function upload(item) {
  const form = new FormData();
  form.append('file', item.file, item.name);
  if (state.sessionId) form.append('session_id', state.sessionId);
  const headers = localeHeaders();
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  try {
    const r = await fetch('/api/v1/agent/upload', { method: 'POST', headers, body: form });
    const v = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error((v.error && v.error.message) || r.statusText);
    item.ready = v.attachment || v;
  } catch (e) {
    item.failed = true;
    item.error = e.message;
  }
  renderAttachments();
}

function renderAttachments() {
  const box = $('attachments');
  box.textContent = '';
  box.hidden = !state.attachments.length;
  state.attachments.forEach((a, i) => {
    const chip = document.createElement('div');
    chip.className = 'chip' + (a.failed ? ' failed' : a.ready ? '' : ' uploading');
    if (a.preview) {
      const img = document.createElement('img');
      img.src = a.preview;
      img.alt = a.name;
      chip.append(img);
    }
    const name = document.createElement('span');
    name.className = 'chip-name';
    name.textContent = a.failed ? a.name + ' — ' + t('uploadFailed') + (a.error ? ': ' + a.error : '') : a.name;
    const x = document.createElement('button');
    x.type = 'button';
    x.className = 'chip-remove';
    x.textContent = '×';
    x.setAttribute('aria-label', t('remove') + ' ' + a.name);
    x.addEventListener('click', () => {
      if (a.preview) URL.revokeObjectURL(a.preview);
      state.attachments.splice(i, 1);
      renderAttachments();
    });
    chip.append(name, x);
    box.append(chip);
  });
}

// Attachments as a sent message shows them: images small, files by name (text only).
function attachmentList(list) {
  const box = document.createElement('div');
  box.className = 'sent-attachments';
  for (const a of list) {
    const chip = document.createElement('div');
    chip.className = 'chip';
    const isImage = (a.kind === 'image' || /^image\//.test(a.mime_type || '')) && typeof a.url === 'string' && a.url.startsWith('/');
    if (isImage) {
      // The file route wants the bearer token, which an <img> cannot send: fetched, then shown.
      const img = document.createElement('img');
      img.alt = a.name || '';
      chip.append(img);
      api('GET', a.url).then((r) => (r.ok ? r.blob() : null)).then((b) => { if (b) img.src = URL.createObjectURL(b); }).catch(() => {});
    }
    const name = document.createElement('span');
    name.className = 'chip-name';
    name.textContent = a.name || '';
    chip.append(name);
    box.append(chip);
  }
  return box;
}

document.addEventListener('DOMContentLoaded', init);
