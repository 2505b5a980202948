// What every page script shares: headless Chromium (playwright-core) in a throwaway profile, an
// `expect` that records each passed step, console errors collected, a screenshot on failure, and
// one JSON line with what was observed (exit 1 on the first failed expectation).
//
// Env: MPA_URL, MPA_USER, MPA_PASS, MPA_SCREENSHOT (png path), MPA_NODE_MODULES (playwright-core
// location), CHROMIUM (executable).
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const env = (k, d) => process.env[k] || d;

// Runs `body(page, expect, consoleErrors)` against the page at MPA_URL and exits with its verdict.
export async function run(body) {
  const require = createRequire(path.join(env('MPA_NODE_MODULES', '/var/cache/mpa-node/node_modules'), 'x.js'));
  const { chromium } = require('playwright-core');
  const shot = env('MPA_SCREENSHOT');
  const profile = mkdtempSync(path.join(tmpdir(), 'mpa-chromium-'));
  const result = { ok: false, steps: [] };
  const expect = (cond, what) => {
    if (!cond) throw new Error('expectation failed: ' + what);
    result.steps.push(what);
  };
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: env('CHROMIUM', '/usr/bin/chromium'),
      headless: true,
      viewport: { width: 1200, height: 800 },
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(30000);
    const consoleErrors = [];
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    // Which requests failed, for the report (Chromium's console line does not name them).
    result.failedRequests = [];
    page.on('response', (r) => { if (r.status() >= 400) result.failedRequests.push(r.status() + ' ' + r.request().method() + ' ' + r.url()); });
    await page.goto(env('MPA_URL'));
    await page.waitForSelector('#login-view:not([hidden])');
    await body(page, expect, consoleErrors, result);
    expect(consoleErrors.length === 0, 'no console errors: ' + consoleErrors.join(' | '));
    result.ok = true;
  } catch (e) {
    result.error = String(e && e.stack || e);
    try {
      const p = context && context.pages()[0];
      if (p && shot) await p.screenshot({ path: shot.replace(/\.png$/, '-failure.png') });
    } catch (_) { /* best effort */ }
  } finally {
    if (context) await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
  console.log(JSON.stringify(result));
  process.exit(result.ok ? 0 : 1);
}

// Signs in as MPA_USER and waits for the chat view.
export async function login(page, expect) {
  await page.fill('#login-user', env('MPA_USER'));
  await page.fill('#login-pass', env('MPA_PASS'));
  await page.click('#login-submit');
  await page.waitForSelector('#app-view:not([hidden])');
  expect((await page.textContent('#who')).includes(env('MPA_USER')), 'logged in as the user');
}

// Runs axe-core on the page as it is and expects no serious or critical violation; every
// violation found is recorded under `result.axe[what]`. axe.min.js comes from MPA_AXE, else
// MPA_NODE_MODULES/axe-core (installed outside the repository, like playwright-core).
let axeSrc = null;
export async function axe(page, expect, consoleErrors, result, what) {
  if (axeSrc === null) {
    axeSrc = readFileSync(env('MPA_AXE', path.join(env('MPA_NODE_MODULES', '/var/cache/mpa-node/node_modules'), 'axe-core/axe.min.js')), 'utf8');
  }
  // evaluate() is not subject to the page's CSP, which forbids inline scripts.
  if (!(await page.evaluate(() => !!window.axe))) await page.evaluate(axeSrc);
  const violations = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact,
      nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ' — ' + (n.failureSummary || '').replace(/\s+/g, ' ')) }));
  });
  // axe-core measures with inline styles of its own, which the page's CSP refuses (and logs).
  for (let i = consoleErrors.length - 1; i >= 0; i--) {
    if (consoleErrors[i].startsWith('Applying inline style violates')) consoleErrors.splice(i, 1);
  }
  result.axe = result.axe || {};
  result.axe[what] = violations.map((v) => v.id + ':' + v.impact);
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad.length === 0, `axe: no serious or critical violation on ${what} ${JSON.stringify(bad)}`);
}
