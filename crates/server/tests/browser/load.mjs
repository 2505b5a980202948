// First contentful paint and transferred bytes of the page at MPA_URL (issue 29 benchmark):
// MPA_LOADS (5) cold loads, each in a fresh Chromium profile (nothing cached), then one warm
// reload in the last profile. Prints one JSON line: the median and every FCP, the bytes
// transferred (compressed, headers included) and decoded, cold and warm.
//
// Env: MPA_URL, MPA_NODE_MODULES, CHROMIUM, MPA_LOADS.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const env = (k, d) => process.env[k] || d;
const require = createRequire(path.join(env('MPA_NODE_MODULES', '/var/cache/mpa-node/node_modules'), 'x.js'));
const { chromium } = require('playwright-core');

const measure = (page) => page.evaluate(async () => {
  // FCP is reported once the login card has painted.
  for (let i = 0; i < 100 && !performance.getEntriesByName('first-contentful-paint').length; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  return { fcp_ms: fcp ? fcp.startTime : null,
    transferred: nav.transferSize + res.reduce((n, r) => n + r.transferSize, 0),
    decoded: nav.decodedBodySize + res.reduce((n, r) => n + r.decodedBodySize, 0) };
});

const loads = Number(env('MPA_LOADS', '5'));
const runs = [];
let warm = null;
for (let i = 0; i < loads; i++) {
  const profile = mkdtempSync(path.join(tmpdir(), 'mpa-load-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: env('CHROMIUM', '/usr/bin/chromium'), headless: true, viewport: { width: 1200, height: 800 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  await page.goto(env('MPA_URL'), { waitUntil: 'load' });
  runs.push(await measure(page));
  if (i === loads - 1) {
    await page.reload({ waitUntil: 'load' });
    warm = await measure(page);
  }
  await ctx.close();
  rmSync(profile, { recursive: true, force: true });
}
const fcps = runs.map((r) => r.fcp_ms).sort((a, b) => a - b);
console.log(JSON.stringify({ url: env('MPA_URL'), fcp_median_ms: Math.round(fcps[Math.floor(fcps.length / 2)]),
  fcp_ms: fcps.map(Math.round), cold_transferred_bytes: runs[0].transferred, decoded_bytes: runs[0].decoded,
  warm_transferred_bytes: warm && warm.transferred }));
