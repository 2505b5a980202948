// Attachments, memory, skills and persona on the page (issue 29), in headless Chromium.
//
// MPA_ROLE=user: attach an image and a text file whose name is an XSS payload (picker), see both
// previews, send them; open Memory, approve the pending proposal the test staged and see the
// entry change; axe on the memory and skills views in light and dark mode; pin the personal
// skill MPA_SKILL the test staged (its badge shows it); the persona view
// lists personas but offers this user no switch.
// MPA_ROLE=admin: create a persona and switch to it.
//
// Env (besides harness.mjs): MPA_ROLE, MPA_AXE, MPA_PROPOSAL_OLD, MPA_PROPOSAL_NEW,
// MPA_PERSONA_NAME, MPA_PERSONA_STYLE, MPA_SKILL.
import { axe as axeCheck, env, login, run } from './harness.mjs';

const shot = env('MPA_SCREENSHOT');
const shotAs = (name) => shot.replace(/\.png$/, '-' + name + '.png');
// A 1×1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
const XSS_NAME = '<img src=x onerror=window.__pwned=true>.txt';

await run(async (page, expect, consoleErrors, result) => {
  const axe = (what) => axeCheck(page, expect, consoleErrors, result, what);
  const inBothModes = async (what) => {
    await axe(what + ' (light)');
    await page.emulateMedia({ colorScheme: 'dark' });
    await axe(what + ' (dark)');
    await page.screenshot({ path: shotAs(what.replace(/\W+/g, '-') + '-dark'), fullPage: false });
    await page.emulateMedia({ colorScheme: 'light' });
  };
  await login(page, expect);

  if (env('MPA_ROLE') === 'admin') {
    await page.click('[data-view=persona]');
    await page.waitForSelector('#view .add-persona');
    await page.fill('#view .add-persona input', env('MPA_PERSONA_NAME'));
    await page.fill('#view .add-persona textarea', env('MPA_PERSONA_STYLE'));
    await page.click('#view .add-persona button[type=submit]');
    await page.waitForFunction((name) => [...document.querySelectorAll('#view .persona strong')].some((s) => s.textContent === name),
      env('MPA_PERSONA_NAME'));
    expect(true, 'an admin creates a persona on the page');
    await page.click('#view .persona:not(.active) .actions button');
    await page.waitForSelector('#view .persona.active');
    const active = await page.textContent('#view .persona.active strong');
    expect(active === env('MPA_PERSONA_NAME'), 'an admin switches the active persona on the page');
    await page.screenshot({ path: shot, fullPage: false });
    return;
  }

  // Attachments: an image and a text file through the picker, with previews.
  await page.setInputFiles('#file-input', [
    { name: 'poster.png', mimeType: 'image/png', buffer: PNG },
    { name: XSS_NAME, mimeType: 'text/plain', buffer: Buffer.from('notes about the poster\n') },
  ]);
  await page.waitForFunction(() => document.querySelectorAll('#attachments .chip').length === 2
    && !document.querySelector('#attachments .chip.uploading'));
  const chips = await page.evaluate(() => ({
    names: [...document.querySelectorAll('#attachments .chip-name')].map((n) => n.textContent),
    thumbs: document.querySelectorAll('#attachments .chip img').length,
    failed: document.querySelectorAll('#attachments .chip.failed').length,
  }));
  result.chips = chips;
  expect(chips.failed === 0, 'both files uploaded');
  expect(chips.thumbs === 1 && chips.names.includes('poster.png'), 'the image shows as a thumbnail');
  expect(chips.names.includes(XSS_NAME), 'the file name with a payload is shown as text');
  await page.fill('#input', 'What is in these files?');
  await page.press('#input', 'Enter');
  await page.waitForSelector('#send:not([hidden])');
  await page.waitForFunction(() => document.querySelector('.msg.assistant .bubble'));
  const sent = await page.evaluate(() => ({
    names: [...document.querySelectorAll('.msg.user .sent-attachments .chip-name')].map((n) => n.textContent),
    pwned: window.__pwned === true,
    imgs: [...document.querySelectorAll('#messages img')].map((i) => i.getAttribute('src') || ''),
  }));
  result.sent = sent;
  expect(sent.names.length === 2 && sent.names.includes(XSS_NAME), 'the sent message lists both files, names as text');
  expect(!sent.pwned && sent.imgs.every((s) => s === '' || s.startsWith('blob:')), 'no payload ran; images only from blob: URLs');
  expect(await page.$('#attachments:not([hidden])') === null, 'the composer is clear after sending');
  await page.screenshot({ path: shotAs('attachments'), fullPage: false });

  // Memory: the staged proposal, approved on the page.
  await page.click('[data-view=memory]');
  await page.waitForSelector('#view .proposal');
  const before = await page.evaluate(() => ({
    proposal: document.querySelector('#view .proposal').textContent,
    entries: [...document.querySelectorAll('#view [data-store=user] .entry-text')].map((e) => e.textContent),
    budget: document.querySelector('#view [data-store=user] .budget').textContent,
  }));
  result.memoryBefore = before;
  expect(before.entries.includes(env('MPA_PROPOSAL_OLD')), 'the memory view lists the entry');
  expect(before.proposal.includes(env('MPA_PROPOSAL_NEW')), 'the memory view shows the pending proposal');
  expect(/\d+ \/ 1375/.test(before.budget), 'the budget is shown with its limit');
  await inBothModes('memory view');
  await page.click('#view .proposal button.primary');
  await page.waitForFunction((want) => [...document.querySelectorAll('#view [data-store=user] .entry-text')]
    .some((e) => e.textContent === want), env('MPA_PROPOSAL_NEW'));
  const after = await page.evaluate(() => ({
    proposals: document.querySelectorAll('#view .proposal').length,
    entries: [...document.querySelectorAll('#view [data-store=user] .entry-text')].map((e) => e.textContent),
  }));
  result.memoryAfter = after;
  expect(after.proposals === 0 && !after.entries.includes(env('MPA_PROPOSAL_OLD')), 'approving applied the proposal and cleared it');
  await page.screenshot({ path: shotAs('memory'), fullPage: false });

  await page.click('[data-view=skills]');
  await page.waitForSelector('#view .card');
  await inBothModes('skills view');
  // Pin the personal skill the test staged: its pin button (after View), then the badge.
  const skill = env('MPA_SKILL', '');
  if (skill) {
    const row = `#view .skill[data-skill="${skill}"]`;
    await page.click(`${row} .actions button:nth-child(2)`);
    await page.waitForSelector(`${row} .badge.pinned`);
    result.pinStatus = await page.textContent('#view .view-status');
    await page.screenshot({ path: shotAs('skill-pinned'), fullPage: false });
    expect(true, 'the pin button pins the personal skill');
  }

  // Persona: listed for everyone, switched only by admins.
  await page.click('[data-view=persona]');
  await page.waitForSelector('#view .card');
  const persona = await page.evaluate(() => ({
    switches: document.querySelectorAll('#view .persona .actions button').length,
    form: !!document.querySelector('#view .add-persona'),
    text: document.querySelector('#view .view-body').textContent,
  }));
  result.persona = persona;
  expect(persona.switches === 0 && !persona.form, 'a user who is not an admin gets no persona switch or form');
  await axe('persona view (light)');
  await page.click('#view .view-head button');
  await page.waitForSelector('#view', { state: 'hidden' });
  expect(await page.isVisible('#composer'), 'Back returns to the chat');
});
