// The web page's tool lines without a browser: app.js is loaded into a Node `vm` context with a
// minimal DOM stand-in, and `toolLine` renders every outcome in English and Chinese. Checks the
// outcome word, the class the stylesheet keys on, and that an unknown write never looks like a
// success; and `renderHistory` of a saved chat (a turn's recovery form, a compacted chat). Prints
// one JSON line with what it observed; exits 1 on the first failed expectation.
//
// Env: MPA_WEB_DIR (the directory holding app.js and app.css).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';

const dir = process.env.MPA_WEB_DIR;
const js = readFileSync(path.join(dir, 'app.js'), 'utf8');
const css = readFileSync(path.join(dir, 'app.css'), 'utf8');
const result = { ok: false, steps: [], lines: {} };

function expect(cond, what) {
  if (!cond) throw new Error('expectation failed: ' + what);
  result.steps.push(what);
}

class El {
  constructor(tag) {
    this.tagName = tag; this.children = []; this.dataset = {}; this.className = ''; this.title = ''; this._text = '';
    this.attributes = {};
    const cls = () => this.className.split(' ').filter(Boolean);
    this.classList = {
      add: (c) => { if (!cls().includes(c)) this.className = [...cls(), c].join(' '); },
      remove: (c) => { this.className = cls().filter((x) => x !== c).join(' '); },
      contains: (c) => cls().includes(c),
      toggle: (c, on) => { if (on ?? !cls().includes(c)) this.classList.add(c); else this.classList.remove(c); },
    };
  }
  setAttribute(k, v) { this.attributes[k] = String(v); }
  getAttribute(k) { return this.attributes[k] ?? null; }
  removeAttribute(k) { delete this.attributes[k]; }
  set textContent(v) { this._text = String(v); this.children = []; }
  get textContent() { return this._text + this.children.map((c) => c.textContent).join(''); }
  append(...cs) { this.children.push(...cs); }
  remove() {}
}

const storage = new Map();
const byId = new Map();
const context = vm.createContext({
  console,
  localStorage: { getItem: (k) => storage.get(k) ?? null, setItem: (k, v) => storage.set(k, v) },
  navigator: { language: 'en-US' },
  location: { hash: '', pathname: '/' },
  history: { replaceState() {} },
  document: {
    addEventListener() {},
    createElement: (tag) => new El(tag),
    getElementById: (id) => byId.get(id) || byId.set(id, new El('div')).get(id),
    querySelectorAll: () => [],
    documentElement: {},
  },
});

try {
  vm.runInContext(js, context, { filename: 'app.js' });
  // The page's own lexical scope: `state` and `toolLine` as app.js declared them.
  vm.runInContext('emptyNode = document.createElement("div");', context);
  const render = (lang, status, outcome) => {
    context.__args = { lang, status, outcome };
    return vm.runInContext(`(() => {
      state.lang = __args.lang;
      const el = document.createElement('div');
      toolLine(el, __args.status, 'moviepilot_api', 'download.add', __args.outcome,
        { operation: 'download.add', summary: { en: '1 row', zh: '1 行' }, arguments: { operation: 'download.add', torrent: '<b>x</b>' },
          preview: '{"success": true}' });
      const [head, detail] = el.children;
      const [icon, name, word, text] = head.children;
      return { className: el.className, outcome: el.dataset.outcome, icon: icon.textContent,
        name: name.textContent, word: word.textContent, text: text.textContent,
        head: head.tagName, expanded: head.getAttribute('aria-expanded'),
        detailHidden: detail ? detail.hidden : null, detail: detail ? detail.textContent : '' };
    })()`, context);
  };
  const words = {
    en: { succeeded: 'succeeded', failed: 'failed', pending: 'submitted', unknown: 'result unknown' },
    zh: { succeeded: '成功', failed: '失败', pending: '已提交', unknown: '结果未知' },
  };
  const status = { succeeded: 'done', failed: 'error', pending: 'done', unknown: 'error' };
  for (const lang of ['en', 'zh']) {
    for (const outcome of ['succeeded', 'failed', 'pending', 'unknown']) {
      const line = render(lang, status[outcome], outcome);
      result.lines[`${lang}/${outcome}`] = line;
      expect(line.word.startsWith(words[lang][outcome]), `${lang} ${outcome} line says ${words[lang][outcome]}`);
      expect(line.className.split(' ').includes('outcome-' + outcome), `${lang} ${outcome} line has class outcome-${outcome}`);
      expect(line.outcome === outcome, `${lang} ${outcome} line carries data-outcome`);
      expect(line.name === 'moviepilot_api · download.add', `${lang} ${outcome} line names the operation`);
      expect(line.text === (lang === 'zh' ? '1 行' : '1 row'), `${lang} ${outcome} line shows the summary in its language`);
      expect(line.head === 'button' && line.expanded === 'false' && line.detailHidden === true,
        `${lang} ${outcome} line's detail is behind a button, closed`);
      expect(line.detail.includes('"torrent": "<b>x</b>"') && line.detail.includes('"success": true'),
        `${lang} ${outcome} detail holds the arguments and the result preview as text`);
    }
    const ok = result.lines[`${lang}/succeeded`];
    const unknown = result.lines[`${lang}/unknown`];
    expect(unknown.icon !== ok.icon && unknown.icon === '?', `${lang}: an unknown write has its own mark, not the check mark`);
    expect(!unknown.word.includes(ok.word), `${lang}: the unknown word does not contain the success word`);
    expect(result.lines[`${lang}/pending`].icon !== ok.icon, `${lang}: pending does not show the check mark`);
  }
  expect(render('en', 'running', undefined).word === 'running', 'a running line says running');
  expect(render('zh', 'running', undefined).word === '进行中', 'a running line says 进行中 in Chinese');
  // History: while the turn still runs, the recovery form of its snapshot is not shown.
  const history = [
    { role: 'user', content: 'download it' },
    { role: 'tool', name: 'moviepilot_api', status: 'done', outcome: 'succeeded', message: 'plan saved' },
    { role: 'tool', name: 'moviepilot_api', status: 'error', outcome: 'unknown', message: 'result unknown', recovery: true },
    { role: 'assistant', content: '[The previous turn did not finish…]', notice: true, recovery: true },
  ];
  const shown = (processing) => {
    context.__history = { history, processing };
    return vm.runInContext(`(() => {
      renderHistory(__history.history, __history.processing);
      return $('messages').children.filter((c) => c !== emptyNode).map((c) => c.className);
    })()`, context);
  };
  const running = shown(true);
  const after = shown(false);
  result.history = { running, after };
  expect(running.length === 2 && !running.some((c) => c.includes('outcome-unknown')),
    'a running turn hides its recovery form');
  expect(after.length === 4 && after.some((c) => c.includes('outcome-unknown')),
    'a turn that died shows its result unknown line and notice');
  // History after a compaction: the lines the model no longer reads (marked compacted) are all
  // shown, in order, then the marker where its context was summarised — a marker, not a message
  // the user typed — with the summary inside.
  const compacted = [
    { role: 'user', content: 'question 0', compacted: true },
    { role: 'assistant', content: 'answer 0', compacted: true },
    { role: 'tool', name: 'moviepilot_api', status: 'done', outcome: 'succeeded', message: 'page 1', compacted: true },
    { role: 'context', event: 'compacted', summary: 'pages 1-4 read' },
    { role: 'user', content: 'question 1' },
    { role: 'assistant', content: 'answer 1' },
  ];
  for (const lang of ['en', 'zh']) {
    context.__compacted = { compacted, lang };
    const rows = vm.runInContext(`(() => {
      state.lang = __compacted.lang;
      renderHistory(__compacted.compacted, false);
      return $('messages').children.filter((c) => c !== emptyNode).map((c) => ({
        tag: c.tagName, className: c.className,
        text: c.children.length ? c.children.map((x) => x.textContent + (x.innerHTML || '')).join(' | ') : c.textContent,
      }));
    })()`, context);
    result.compacted = result.compacted || {};
    result.compacted[lang] = rows;
    expect(rows.length === 6, `${lang}: every line of a compacted chat is shown`);
    expect(rows[0].className === 'msg user' && rows[0].text.includes('question 0'), `${lang}: the first question is still there`);
    expect(rows[1].className === 'msg assistant' && rows[1].text.includes('answer 0'), `${lang}: the first answer is still there`);
    expect(rows[3].tag === 'details' && rows[3].className === 'context-marker', `${lang}: the summary is a marker, not a message`);
    expect(rows[3].text.includes('pages 1-4 read'), `${lang}: the marker holds the summary`);
    expect(rows[4].text.includes('question 1') && rows[5].text.includes('answer 1'), `${lang}: the later lines follow in order`);
  }
  expect(result.compacted.en[3].text.includes('summary of the messages above'), 'en: the marker says the model works from a summary');
  expect(result.compacted.zh[3].text.includes('摘要'), 'zh: the marker says 摘要');
  const rule = (sel) => (css.match(new RegExp(sel.replace(/[.]/g, '\\.') + '\\s*\\{([^}]*)\\}')) || [])[1] || '';
  // A turn that ended in a host stop state shows it as a small label after its answer, in the
  // page's language, with a hint that it is not proof the task is done; a completed one shows
  // nothing.
  result.turnStatus = {};
  for (const lang of ['en', 'zh']) {
    context.__status = { lang };
    const rows = vm.runInContext(`(() => {
      state.lang = __status.lang;
      renderHistory([
        { role: 'user', content: 'clean up' },
        { role: 'assistant', content: 'done', turn_status: 'unknown' },
        { role: 'user', content: 'and now?' },
        { role: 'assistant', content: 'all good' },
        { role: 'user', content: 'loop' },
        { role: 'assistant', content: 'stopped', turn_status: 'blocked' },
      ], false);
      return $('messages').children.filter((c) => c !== emptyNode).map((c) => ({
        className: c.className,
        labels: c.children.filter((x) => x.dataset && x.dataset.turnStatus).map((x) => ({
          status: x.dataset.turnStatus, className: x.className, text: x.textContent, title: x.title })),
      }));
    })()`, context);
    result.turnStatus[lang] = rows;
    const labels = rows.filter((r) => r.className === 'turn-status-row').map((r) => r.labels[0]);
    expect(rows.length === 8 && labels.length === 2, `${lang}: only the two stop states get a label`);
    expect(labels[0].status === 'unknown' && labels[0].className === 'turn-status status-unknown',
      `${lang}: the unknown turn is labelled unknown`);
    expect(labels[1].status === 'blocked', `${lang}: the blocked turn is labelled blocked`);
  }
  const [enUnknown, enBlocked] = result.turnStatus.en.filter((r) => r.labels.length).map((r) => r.labels[0]);
  const [zhUnknown] = result.turnStatus.zh.filter((r) => r.labels.length).map((r) => r.labels[0]);
  expect(enUnknown.text.startsWith('Result unknown') && zhUnknown.text.startsWith('结果未知'),
    'the unknown label reads in English and Chinese');
  expect(enBlocked.text.startsWith('Stopped by the host'), 'the blocked label says the host stopped it');
  expect(enUnknown.title.includes('not proof') && zhUnknown.title.includes('不代表任务已经完成'),
    'the label says it is a host stop state, not proof');
  expect(rule('.turn-status.status-unknown').includes('dashed'), 'an unknown turn label is dashed like an unknown line');
  // The stylesheet gives unknown its own colour and border, different from success.
  const unknownIcon = rule('.tool.outcome-unknown .icon');
  const okIcon = rule('.tool.outcome-succeeded .icon');
  expect(unknownIcon.includes('var(--run)') && okIcon.includes('var(--ok)'), 'unknown and succeeded icons have different colours');
  expect(rule('.tool.outcome-unknown').includes('dashed'), 'an unknown line has a dashed border');
  expect(rule('.context-marker').includes('dashed'), 'the compaction marker is drawn as a dashed divider');
  result.ok = true;
} catch (e) {
  result.error = String(e && e.stack || e);
}
console.log(JSON.stringify(result));
process.exit(result.ok ? 0 : 1);
