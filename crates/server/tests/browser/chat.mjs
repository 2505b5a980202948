// Drives the real web page in headless Chromium (playwright-core): log in, send a message, watch
// the streamed text and a tool line, stop a long turn, reload and find the history. Prints one JSON
// line with what it observed; exits 1 on the first failed expectation (see harness.mjs).
import { env, login, run } from './harness.mjs';

const shot = env('MPA_SCREENSHOT');

await run(async (page, expect, consoleErrors) => {
  // A wrong password shows an error and keeps the login form.
  await page.fill('#login-user', env('MPA_USER'));
  await page.fill('#login-pass', 'definitely-wrong');
  await page.click('#login-submit');
  await page.waitForSelector('#login-error:not([hidden])');
  expect(await page.isVisible('#login-view'), 'wrong password keeps the login form');
  // Chromium logs the deliberate 401 as a failed resource load; only later errors count.
  consoleErrors.length = 0;

  await login(page, expect);

  // Record every distinct text the streaming bubble shows, to prove it grows in steps.
  await page.evaluate(() => {
    window.__partials = [];
    new MutationObserver(() => {
      const b = [...document.querySelectorAll('.msg.assistant .bubble')].pop();
      if (b && window.__partials[window.__partials.length - 1] !== b.textContent) window.__partials.push(b.textContent);
    }).observe(document.getElementById('messages'), { subtree: true, childList: true, characterData: true });
  });
  await page.fill('#input', 'Please echo hello');
  await page.press('#input', 'Enter');
  await page.waitForSelector('.tool.done');
  expect((await page.textContent('.tool.done')).includes('test_echo'), 'tool line shows test_echo done');
  await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant .bubble')]
    .some((b) => b.textContent.includes('The echo tool answered hello')));
  await page.waitForSelector('#send:not([hidden])');
  const partials = await page.evaluate(() => window.__partials.filter((p) => p.length > 0));
  expect(partials.length >= 2, `text streamed in ${partials.length} visible steps`);
  expect(await page.isVisible('.msg.assistant .bubble strong'), 'markdown bold rendered');
  expect(await page.isVisible('.session.active'), 'the new chat is listed and selected');
  await page.screenshot({ path: shot, fullPage: false });

  // A long turn, stopped from the page.
  await page.fill('#input', 'Run the long task');
  await page.press('#input', 'Enter');
  await page.waitForSelector('.tool.running');
  await page.waitForSelector('#stop:not([hidden])');
  await page.click('#stop');
  await page.waitForSelector('#send:not([hidden])');
  expect(await page.isVisible('.tool.error'), 'stopped tool shows the error state');
  expect((await page.textContent('.tool.outcome-unknown .outcome')) === 'result unknown',
    'the stopped call says unknown, not succeeded');
  expect((await page.textContent('.tool.outcome-unknown .icon')) === '?', 'an unknown call has its own mark');
  expect((await page.textContent('.tool.outcome-succeeded .outcome')) === 'succeeded', 'the echo call says succeeded');
  expect(!(await page.isVisible('.tool.running')), 'no tool is left running');

  // Reload: the history comes back from the server.
  await page.reload();
  await page.waitForSelector('#app-view:not([hidden])');
  await page.waitForFunction(() => document.querySelectorAll('.msg.user').length === 2);
  const texts = await page.$$eval('.msg .bubble', (els) => els.map((e) => e.textContent));
  expect(texts.some((x) => x.includes('The echo tool answered hello')), 'history shows the answer after reload');
  expect(texts.some((x) => x.includes('Run the long task')), 'history shows the stopped request');
  expect(await page.$$eval('.tool', (els) => els.length) >= 2, 'history shows the tool lines');
  expect(await page.$$eval('.session', (els) => els.length) === 1, 'one chat in the list');

  // The Chinese UI.
  await page.click('.sidebar [data-action=lang]');
  expect((await page.textContent('#new-chat')) === '新对话', 'UI switches to Chinese');
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll('.msg.user').length === 2);
  expect((await page.textContent('.tool.outcome-succeeded .outcome')) === '成功', 'tool lines say 成功 in Chinese');
  expect((await page.textContent('.tool.outcome-unknown .outcome')).startsWith('结果未知'),
    'an unknown call says 结果未知 in Chinese');
  await page.screenshot({ path: shot.replace(/\.png$/, '-outcomes-zh.png'), fullPage: false });
});
