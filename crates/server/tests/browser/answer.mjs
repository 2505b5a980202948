// The answer as people read it (issue 29), in headless Chromium: a scripted turn that updates the
// plan, runs a tool whose result carries an XSS payload, and answers in markdown (a table, a
// nested and a task list, code, a bare URL before a colon, raw HTML and a script). Checks the
// plan panel, the table, the nesting, the copy button (by keyboard), that no payload became
// markup, the tool line's detail, the same after a reload, Chinese, dark mode, 390 px, and axe-core
// (no serious or critical violation) on the login and chat views in light and dark mode. Records
// first contentful paint and the bytes the page transferred.
//
// Env (besides harness.mjs): MPA_AXE (axe.min.js; default MPA_NODE_MODULES/axe-core/axe.min.js).
import { axe as axeCheck, env, login, run } from './harness.mjs';

const shot = env('MPA_SCREENSHOT');
const shotAs = (name) => shot.replace(/\.png$/, '-' + name + '.png');

await run(async (page, expect, consoleErrors, result) => {
  const axe = (what) => axeCheck(page, expect, consoleErrors, result, what);
  const noHorizontalScroll = async (what) => {
    const overflow = await page.evaluate(() => {
      const wide = [document.documentElement, document.body, ...document.querySelectorAll('.messages, .main, .composer, .plan')]
        .filter((e) => e.scrollWidth > e.clientWidth + 1);
      return wide.map((e) => (e.id || e.className || e.tagName) + ' ' + e.scrollWidth + '>' + e.clientWidth);
    });
    expect(overflow.length === 0, `no horizontal scroll at ${what}: ${overflow.join(', ')}`);
  };

  // First contentful paint and what the first load transferred (the harness opened the page).
  const load = await page.evaluate(() => {
    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
    const nav = performance.getEntriesByType('navigation')[0];
    const res = performance.getEntriesByType('resource');
    return { fcp_ms: fcp ? Math.round(fcp.startTime) : null,
      transferred_bytes: (nav ? nav.transferSize : 0) + res.reduce((n, r) => n + r.transferSize, 0),
      decoded_bytes: (nav ? nav.decodedBodySize : 0) + res.reduce((n, r) => n + r.decodedBodySize, 0) };
  });
  result.load = load;
  expect(load.fcp_ms !== null, `first contentful paint recorded: ${load.fcp_ms} ms`);

  await axe('login (light)');
  await page.emulateMedia({ colorScheme: 'dark' });
  await axe('login (dark)');
  await page.emulateMedia({ colorScheme: 'light' });

  await login(page, expect);
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(env('MPA_URL')).origin });
  // Whether a payload ever ran, and whether the activity indicator came before any text.
  await page.evaluate(() => {
    window.__seen = { activity: false, textBeforeActivity: false };
    new MutationObserver(() => {
      if (document.getElementById('activity')) window.__seen.activity = true;
      const b = document.querySelector('.msg.assistant .bubble');
      if (b && b.textContent && !window.__seen.activity) window.__seen.textBeforeActivity = true;
    }).observe(document.getElementById('messages'), { subtree: true, childList: true, characterData: true });
  });
  await page.fill('#input', 'Which subscriptions do I have?');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => document.querySelector('.msg.assistant .bubble table'));
  await page.waitForSelector('#send:not([hidden])');
  const seen = await page.evaluate(() => window.__seen);
  expect(seen.activity && !seen.textBeforeActivity, 'an activity indicator shows before the first text');
  expect(!(await page.$('#activity')), 'the activity indicator is gone when the turn ended');

  const checkAnswer = async (when) => {
    await page.waitForFunction(() => document.querySelector('.msg.assistant .bubble table'));
    const a = await page.evaluate(() => {
      const b = [...document.querySelectorAll('.msg.assistant .bubble')].find((x) => x.querySelector('table'));
      const after = (el) => (el && el.nextSibling ? el.nextSibling.textContent : '');
      const link = b.querySelector('a[href="https://example.org/docs"]');
      return {
        headers: [...b.querySelectorAll('table th')].map((th) => th.textContent),
        rows: b.querySelectorAll('table tbody tr').length,
        nested: !!b.querySelector('li > ul > li'),
        tasks: b.querySelectorAll('.task').length,
        del: !!b.querySelector('del'),
        lang: (b.querySelector('.code-block .code-lang') || {}).textContent,
        copy: !!b.querySelector('.code-block button.copy'),
        link: !!link, linkText: link && link.textContent, afterLink: after(link),
        linkTarget: link && link.target, linkRel: link && link.rel,
        imgs: document.querySelectorAll('#messages img').length,
        scripts: document.querySelectorAll('#messages script, #messages iframe, #messages [onerror], #messages [onclick]').length,
        text: b.textContent,
        pwned: window.__pwned === true,
      };
    });
    result['answer_' + when] = a;
    expect(a.headers.join('|') === 'Title|Year|Status' && a.rows === 2, `${when}: the table is a <table> with its header and rows`);
    expect(a.nested, `${when}: a nested list nests`);
    expect(a.tasks === 2 && a.del, `${when}: task list boxes and strikethrough`);
    expect(a.lang === 'json' && a.copy, `${when}: the code block has its language label and a copy button`);
    expect(a.link && a.linkText === 'https://example.org/docs' && a.afterLink.startsWith(':'),
      `${when}: a bare URL is linked and the colon after it stays text`);
    expect(a.linkTarget === '_blank' && a.linkRel.includes('noopener'), `${when}: links open in a new tab without an opener`);
    expect(a.imgs === 0 && a.scripts === 0 && !a.pwned, `${when}: no payload became markup or ran`);
    expect(a.text.includes('<img src=x onerror=') && a.text.includes('<script>'), `${when}: the payloads are shown as text`);
  };
  const checkPlan = async (when) => {
    await page.waitForSelector('#plan:not([hidden])');
    const p = await page.evaluate(() => ({
      objective: document.querySelector('#plan .plan-objective').textContent,
      steps: [...document.querySelectorAll('#plan .step')].map((s) => s.dataset.status + ':' + s.querySelector('.step-text').textContent),
      evidence: [...document.querySelectorAll('#plan .step-evidence')].map((e) => e.textContent),
    }));
    result['plan_' + when] = p;
    expect(p.objective === 'List the subscriptions <b>now</b>', `${when}: the plan panel shows the objective (as text)`);
    expect(p.steps.join(',') === 'completed:Read the subscription list,in_progress:Summarise them',
      `${when}: the plan panel shows the steps with their status`);
    expect(p.evidence[0] === '2 subscriptions returned', `${when}: a completed step shows its evidence`);
  };
  const checkTool = async (when) => {
    const t = await page.evaluate(() => {
      const line = [...document.querySelectorAll('.tool')].find((l) => l.textContent.includes('test_result'));
      return line ? { text: line.textContent, outcome: line.dataset.outcome, html: line.innerHTML } : null;
    });
    result['tool_' + when] = t;
    expect(t && t.outcome === 'succeeded', `${when}: the tool line says succeeded`);
    expect(!t.html.includes('<img') && !t.html.includes('<script'), `${when}: the tool result's payload is text`);
  };
  await checkAnswer('streamed');
  await checkPlan('streamed');
  await checkTool('streamed');

  // The copy button, by keyboard.
  await page.focus('.code-block button.copy');
  await page.keyboard.press('Enter');
  await page.waitForSelector('.code-block button.copy[data-copied]');
  const copied = await page.evaluate(() => navigator.clipboard.readText().catch(() => null));
  result.copied = copied;
  expect(copied === null || copied.includes('"subscriptions": 2'), 'the copy button copies the code');

  // The tool line's detail opens by keyboard (Tab to it, Enter), not by hovering.
  await page.focus('.tool.outcome-succeeded .tool-head');
  expect(!(await page.isVisible('.tool.outcome-succeeded .tool-detail')), 'the detail starts closed');
  await page.keyboard.press('Enter');
  expect(await page.$eval('.tool.outcome-succeeded .tool-head', (h) => h.getAttribute('aria-expanded')) === 'true',
    'Enter on a tool line opens its detail');
  expect(await page.isVisible('.tool.outcome-succeeded .tool-detail'), 'the detail is visible');
  const detail = await page.textContent('.tool.outcome-succeeded .tool-detail');
  expect(!(await page.$('.tool-detail img')), 'the detail shows a payload as text: ' + detail.slice(0, 80));
  await page.screenshot({ path: shot, fullPage: false });
  await axe('chat (light)');
  await page.emulateMedia({ colorScheme: 'dark' });
  await axe('chat (dark)');
  await page.screenshot({ path: shotAs('dark'), fullPage: false });
  await page.emulateMedia({ colorScheme: 'light' });

  // The same after a reload.
  await page.reload();
  await page.waitForSelector('#app-view:not([hidden])');
  await checkAnswer('reloaded');
  await checkPlan('reloaded');
  await checkTool('reloaded');

  // Chinese: switching re-translates what is shown, the plan and tool lines included.
  await page.click('.sidebar [data-action=lang]');
  const zh = await page.evaluate(() => ({
    outcome: document.querySelector('.tool.outcome-succeeded .outcome').textContent,
    copy: document.querySelector('.code-block button.copy').textContent,
    plan: document.querySelector('#plan .plan-title').textContent,
    step: document.querySelector('#plan .step-status').textContent,
    lang: document.documentElement.lang,
  }));
  result.zh = zh;
  expect(zh.outcome === '成功' && zh.copy === '复制' && zh.plan === '任务计划' && zh.step === '已完成' && zh.lang === 'zh-CN',
    'switching to Chinese re-translates tool lines, copy buttons and the plan');
  await page.reload();
  await page.waitForSelector('#app-view:not([hidden])');
  await checkAnswer('zh');
  await page.screenshot({ path: shotAs('zh'), fullPage: false });

  // 390 px wide (a phone): nothing scrolls sideways; the table scrolls inside its own frame.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction(() => window.innerWidth === 390);
  await noHorizontalScroll('390 px (chat)');
  await axe('chat at 390 px');
  await page.screenshot({ path: shotAs('390'), fullPage: false });
  await page.setViewportSize({ width: 1200, height: 800 });

  // Esc stops a running reply.
  await page.fill('#input', 'Run the long task');
  await page.press('#input', 'Enter');
  await page.waitForSelector('.tool.running');
  await page.keyboard.press('Escape');
  await page.waitForSelector('#send:not([hidden])');
  expect(!(await page.isVisible('.tool.running')), 'Esc stopped the running reply');
  // Ctrl+Shift+O starts a new chat.
  await page.keyboard.press('Control+Shift+O');
  await page.waitForFunction(() => !location.hash && !document.querySelector('.msg'));
  expect(true, 'Ctrl+Shift+O starts a new chat');
});
