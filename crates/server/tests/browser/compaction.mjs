// A conversation that outgrows a small window, in headless Chromium: the page marks the compaction
// while the turn still streams (the `context` frame), then shows it where the chat keeps it, with
// every earlier line still listed in order — also after a reload, and in Chinese.
//
// Env (besides harness.mjs's): MPA_TURNS (how many "question N" to send), MPA_SUMMARY (the
// summary the mock model gives).
import { env, login, run } from './harness.mjs';

const turns = Number(env('MPA_TURNS', '6'));
const summary = env('MPA_SUMMARY');
const questions = [...Array(turns).keys()].map((n) => `question ${n}`);

// The page's lines as "user: question N", "assistant: answer N" and "marker".
const lines = (page) => page.$$eval('#messages > *', (els) => els.map((e) => {
  if (e.classList.contains('context-marker')) return 'marker';
  const b = e.querySelector('.bubble');
  const role = e.classList.contains('user') ? 'user' : e.classList.contains('assistant') ? 'assistant' : 'other';
  return role + ': ' + (b ? b.textContent.split(':')[0] : '');
}).filter((l) => l === 'marker' || l.startsWith('user:') || l.startsWith('assistant:')));

const conversationOf = (ls) => ls.filter((l) => l !== 'marker');
const expected = questions.flatMap((q) => ['user: ' + q, 'assistant: ' + q.replace('question', 'answer')]);

await run(async (page, expect, _consoleErrors, result) => {
  await login(page, expect);
  // Every marker the page adds: whether the turn was still running, and the line before it. A
  // marker from the stream follows the answer being streamed; the re-read after the turn puts it
  // after the last compacted line, which is never the current answer.
  await page.evaluate(() => {
    window.__markers = [];
    new MutationObserver((records) => {
      for (const r of records) for (const n of r.addedNodes) {
        if (n.classList && n.classList.contains('context-marker')) {
          const prev = n.previousElementSibling && n.previousElementSibling.querySelector('.bubble');
          window.__markers.push({
            busy: !document.getElementById('stop').hidden,
            prev: prev ? prev.textContent.slice(0, 16) : '',
            current: window.__current,
          });
        }
      }
    }).observe(document.getElementById('messages'), { childList: true });
  });
  for (const [n, q] of questions.entries()) {
    await page.evaluate((i) => { window.__current = i; }, n);
    await page.fill('#input', q);
    await page.press('#input', 'Enter');
    const answer = q.replace('question', 'answer') + ':';
    await page.waitForFunction((a) => [...document.querySelectorAll('.msg.assistant .bubble')]
      .some((b) => b.textContent.startsWith(a)), answer);
    await page.waitForSelector('#send:not([hidden])');
  }
  const seen = await page.evaluate(() => window.__markers);
  result.markers_added = seen.length;
  result.markers_seen = seen;
  expect(seen.some((m) => m.busy && m.prev.startsWith(`answer ${m.current}:`)),
    'a marker appeared after the streamed answer while the turn was still running');

  const shown = await lines(page);
  result.after_turns = shown;
  const markers = shown.filter((l) => l === 'marker').length;
  result.markers_shown = markers;
  expect(markers >= 1, 'the compaction is marked');
  expect(JSON.stringify(conversationOf(shown)) === JSON.stringify(expected),
    'every line is still listed, in order, once');
  expect(shown.indexOf('marker') > shown.indexOf('user: question 0'), 'the marker follows the compacted lines');
  const details = await page.textContent('.context-marker');
  expect(details.includes(summary), 'the marker carries the summary');

  await page.reload();
  await page.waitForFunction((n) => document.querySelectorAll('.msg.user').length === n, turns);
  const reloaded = await lines(page);
  expect(JSON.stringify(reloaded) === JSON.stringify(shown), 'a reload shows the same lines and markers');

  await page.click('.sidebar [data-action=lang]');
  await page.waitForFunction(() => document.querySelectorAll('.context-marker').length > 0);
  await page.reload();
  await page.waitForFunction((n) => document.querySelectorAll('.msg.user').length === n, turns);
  const heading = await page.textContent('.context-marker summary');
  expect(heading.includes('摘要'), 'the marker speaks Chinese: ' + heading);
  const shot = env('MPA_SCREENSHOT');
  await page.locator('.context-marker').first().scrollIntoViewIfNeeded();
  await page.click('.context-marker summary');
  if (shot) await page.screenshot({ path: shot, fullPage: false });
});
