// Steering on the real page in headless Chromium (issue 28): while a command runs, the user types
// a second message and presses Enter; it is shown last, marked queued, until the agent takes it
// in; then it stands where it joined (after the tool line) and the reply continues in a new
// bubble below it. A reload shows the same order. The command waits on a FIFO this script opens.
//
// Env (besides harness.mjs's): MPA_FIFO (the FIFO the running command reads).
import { writeFileSync } from 'node:fs';
import { env, login, run } from './harness.mjs';

const shot = env('MPA_SCREENSHOT');

// The conversation as the page shows it: one entry per line, in order.
const lines = (page) => page.$$eval('#messages > .msg, #messages > .tool, #steering-waiting > .msg', (els) => els.map((e) => {
  if (e.classList.contains('tool')) return 'tool:' + (e.dataset.status || '');
  const kind = e.classList.contains('user') ? 'user' : e.classList.contains('assistant') ? 'assistant' : 'other';
  const mark = e.classList.contains('queued') ? '(queued)' : e.dataset.steeringId ? '(steering)' : '';
  return kind + mark + ':' + e.querySelector('.bubble').textContent.trim();
}));

await run(async (page, expect, _consoleErrors, result) => {
  await login(page, expect);
  await page.fill('#input', 'List the new releases');
  await page.press('#input', 'Enter');
  await page.waitForSelector('.tool.running');
  expect(await page.isVisible('#stop'), 'the stop button shows while the agent runs');

  // The composer stays usable: Enter steers the running task.
  await page.fill('#input', '只要 4K 的');
  await page.press('#input', 'Enter');
  await page.waitForSelector('#steering-waiting .msg.user.queued[data-steering-id]');
  expect((await page.inputValue('#input')) === '', 'the composer is cleared and free again');
  const queued = await lines(page);
  expect(queued[queued.length - 1] === 'user(queued):只要 4K 的',
    'the message waits last, marked queued: ' + JSON.stringify(queued));
  expect((await page.textContent('#steering-waiting .tag')).startsWith('Queued'), 'the mark says queued');
  await page.screenshot({ path: shot.replace(/\.png$/, '-queued.png'), fullPage: false });

  // The command ends; at the next model call the message joins the task.
  writeFileSync(env('MPA_FIFO'), 'go\n');
  await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant .bubble')]
    .some((b) => b.textContent.includes('Only the 4K releases')));
  await page.waitForSelector('#send:not([hidden])');
  const live = await lines(page);
  result.live = live;
  const want = [
    'user:List the new releases',
    'assistant:Looking at the new releases.',
    'tool:done',
    'user(steering):只要 4K 的',
    'assistant:Only the 4K releases are left: two titles.',
  ];
  expect(JSON.stringify(live) === JSON.stringify(want),
    'the user bubble stands at the boundary and the reply continues below it: ' + JSON.stringify(live));
  expect(!(await page.isVisible('.msg.user.queued')), 'no message is left marked queued');
  await page.screenshot({ path: shot, fullPage: false });

  // After a reload the chat shows the same order.
  await page.reload();
  await page.waitForSelector('#app-view:not([hidden])');
  await page.waitForFunction(() => document.querySelectorAll('.msg.user').length === 2);
  const reloaded = await lines(page);
  result.reloaded = reloaded;
  expect(JSON.stringify(reloaded) === JSON.stringify(want),
    'a reload shows the same order: ' + JSON.stringify(reloaded));
  await page.screenshot({ path: shot.replace(/\.png$/, '-reloaded.png'), fullPage: false });
});
