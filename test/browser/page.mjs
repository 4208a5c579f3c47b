// The SRE page in headless chromium (test/tiers/browser.sh sets the stack up first: shard 2
// paused by sre with work waiting, mysql-b down with work for shard 5, a finished job on
// shard 1; tokens
// admin-token and read-token). One "ok - NAME" or "not ok - NAME" line per check, then
// "page: done". Screenshots of each view go to BW_UI_SHOTS.
import { createRequire } from 'module';
import path from 'path';
import { check, expect } from './checks.mjs';

const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core'); // NODE_PATH: scripts/install-browser.sh

const url = process.env.BW_UI_URL;
const shots = process.env.BW_UI_SHOTS;
const api = new URL('/', url).href;

async function signIn(page, token) {
  await page.goto(url);
  await page.waitForSelector('[data-testid="token-form"]:not(.hidden)', { timeout: 15000 });
  await page.fill('[data-testid="token-input"]', token);
  await page.click('[data-testid="btn-token"]');
  await page.waitForSelector('[data-testid="shard-cell"]', { timeout: 15000 });
}

// Waits until the cell of `shard` shows `want`, as the page polls (every 3 s).
async function cellState(page, shard, want) {
  await page.waitForFunction(([n, s]) => {
    const c = document.querySelector(`[data-testid="shard-cell"][data-shard="${n}"]`);
    return c && c.dataset.state === s;
  }, [shard, want], { timeout: 30000 });
}

async function apiGet(p, token) {
  const res = await fetch(api + p.replace(/^\//, ''), { headers: { Authorization: 'Bearer ' + token } });
  return res.json();
}

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
const page = await context.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(e.message));
// a failed request is named by its response (the console's line has no address); a proxy
// without GET /v1/shards/{n}/history answers it 404 or 405, which the page says
const historyStatus = (await fetch(api + 'v1/shards/0/history', { headers: { Authorization: 'Bearer admin-token' } })).status;
const historyAbsent = historyStatus === 404 || historyStatus === 405;
page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text()); });
page.on('response', (r) => {
  const u = r.url();
  if (r.status() >= 400 && r.status() !== 401 && !(historyAbsent && u.endsWith('/history'))) errors.push(r.status() + ' ' + u);
});

await check('the page loads from the proxy and asks for a token (a clients file is set)', async () => {
  await signIn(page, 'admin-token');
});

await check('the grid shows every shard once: 8 cells, grouped by server (4 and 4)', async () => {
  expect(await page.locator('[data-testid="shard-cell"]').count() === 8, 'not 8 cells');
  const servers = await page.locator('[data-testid="server"]').evaluateAll((els) =>
    els.map((e) => e.dataset.server + ':' + e.querySelectorAll('[data-testid="shard-cell"]').length));
  expect(servers.join(',') === 'mysql-a:4,mysql-b:4', 'servers ' + servers.join(','));
});

await check('colours: shard 2 paused, shard 5 unhealthy (its server down), shard 1 running', async () => {
  await cellState(page, 2, 'paused');
  await cellState(page, 5, 'unhealthy');
  await cellState(page, 1, 'running');
});

await check('the alerts group shard 5 under its server down ("mysql-b down: N shards"), and the group opens to shard 5', async () => {
  const group = '[data-testid="alert"][data-server="mysql-b"][data-reason="server_down"]';
  await page.waitForSelector(group, { timeout: 15000 });
  const text = await page.textContent(group + ' summary');
  expect(/^mysql-b down: [1-4] shards?$/.test(text), text);
  await page.click(group + ' summary');
  await page.waitForSelector(group + ' [data-testid="alert-shard"][data-shard="5"]');
  expect(await page.locator('[data-testid="alert"][data-reason="server_down"]').count() === 1, 'more than one server-down group');
  const line = await page.textContent('[data-testid="server"][data-server="mysql-b"] [data-testid="server-down"]');
  expect(line === 'server down' || / find the server down$/.test(line), "mysql-b's line: " + line);
});

await check('the shard table: 8 rows, sorted by lag (the top row the laggiest as GET /v1/shards says), filtered by state', async () => {
  const shards = (await apiGet('/v1/shards', 'admin-token')).shards;
  const lags = shards.map((s) => (s.consumer ? s.consumer.lag : -1));
  const top = await page.$eval('[data-testid="table-row"]', (r) => Number(r.dataset.shard));
  expect(await page.locator('[data-testid="table-row"]').count() === 8, 'rows');
  expect(lags[top] === Math.max(...lags), `top row shard ${top} (lag ${lags[top]}), lags ${lags.join(',')}`);
  await page.selectOption('[data-testid="table-state"]', 'paused');
  const rows = await page.$$eval('[data-testid="table-row"]', (r) => r.map((x) => Number(x.dataset.shard)));
  expect(rows.join(',') === '2', 'paused rows: ' + rows.join(','));
  await page.selectOption('[data-testid="table-state"]', '');
});

await check('the fleet lists the proxy and both consumers alive', async () => {
  const members = await page.locator('[data-testid="member"]').evaluateAll((rows) =>
    rows.map((r) => r.dataset.role + ':' + r.textContent.includes('alive')));
  expect(members.filter((m) => m === 'consumer:true').length === 2 && members.includes('proxy:true'), members.join(','));
});
if (shots) await page.screenshot({ path: path.join(shots, 'ui-fleet.png'), fullPage: true });

await check('the shard view of shard 2 shows its pause, who set it and why', async () => {
  await page.click('[data-testid="shard-cell"][data-shard="2"]');
  await page.waitForSelector('[data-testid="shard-view"]:not(.hidden)');
  // the panel is drawn from the summary at once, then again from the shard's own reply
  await page.waitForFunction(() => document.querySelector('[data-testid="pause-reason"]')?.textContent.includes('disk swap'),
    null, { timeout: 10000 }).catch(() => {});
  const text = await page.textContent('[data-testid="pause-reason"]');
  expect(text.includes('by sre') && text.includes('browser test: disk swap'), 'pause reason: ' + text);
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="history-row"]')]
    .some((h) => h.textContent.includes('pause') && h.textContent.includes('sre')), null, { timeout: 10000 }).catch(() => {});
  const hist = await page.locator('[data-testid="history-row"]').allTextContents();
  expect(hist.some((h) => h.includes('pause') && h.includes('sre')), 'history: ' + hist.join(' | '));
});

await check('a rate set on the page (with a reason, confirmed) reaches the API and its history at once', async () => {
  await page.click('[data-testid="shard-cell"][data-shard="3"]');
  await page.waitForSelector('[data-testid="shard-controls"]');
  await page.fill('[data-testid="rate-input"]', '7');
  await page.click('[data-testid="btn-rate"]');
  await page.waitForSelector('[data-testid="confirm-dialog"][open]');
  await page.fill('[data-testid="reason-input"]', 'browser test: slow down');
  await page.click('[data-testid="btn-confirm"]');
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="history-row"]')]
    .some((r) => r.textContent.includes('browser test: slow down')), null, { timeout: 15000 });
  const shards = await apiGet('/v1/shards', 'admin-token');
  expect(shards.shards[3].operator_rate === 7, 'operator_rate ' + shards.shards[3].operator_rate);
  const rate = await page.textContent('[data-testid="shard-rate"]');
  expect(rate.includes('effective 7/s'), 'rate line: ' + rate);
});

await check('the shard view of shard 1: statement latency, its dead letter (1062), which opens the job\'s failures', async () => {
  await page.click('[data-testid="shard-cell"][data-shard="1"]');
  await page.waitForFunction(() => {
    const l = document.querySelector('[data-testid="shard-latency"]');
    return l && l.textContent.startsWith('p99 ');
  }, null, { timeout: 15000 });
  // rows/s from the consumers' counters, with its window (or said absent by a proxy without it)
  const through = await page.textContent('[data-testid="shard-throughput"]');
  expect(/^[0-9,]+ rows\/s, last \d+ s$|^rows\/s not reported by this proxy$/.test(through), 'rows/s: ' + through);
  expect((await page.textContent('[data-testid="shard-dead-letters"]')) === '1', 'dead letters: ' + await page.textContent('[data-testid="shard-dead-letters"]'));
  const item = await page.textContent('[data-testid="dead-letter"]');
  expect(item.includes('MySQL error 1062') && item.includes('Duplicate entry'), 'dead letter: ' + item);
  await page.click('[data-testid="dead-letter"] a');
  await page.waitForFunction(() => {
    const f = document.querySelector('[data-testid="failures"]:not(.hidden)');
    return f && f.textContent.includes('Duplicate entry');
  }, null, { timeout: 15000 });
  await page.click('.tab[data-view="fleet"]');
});

await check('the keyboard: Home on a server\'s grid opens its first shard, arrows move, Escape closes', async () => {
  await page.focus('[data-testid="server"][data-server="mysql-a"] [data-testid="grid"]');
  await page.keyboard.press('Home');
  await page.waitForFunction(() => document.querySelector('[data-testid="shard-view"] h2.title')?.textContent.startsWith('shard 0 '));
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  await page.waitForFunction(() => document.querySelector('[data-testid="shard-view"] h2.title')?.textContent.startsWith('shard 2 '));
  await page.waitForFunction(() => document.querySelector('[data-testid="pause-reason"]')?.textContent.includes('disk swap'),
    null, { timeout: 10000 }).catch(() => {});
  expect((await page.textContent('[data-testid="pause-reason"]')).includes('disk swap'), 'shard 2 not shown');
  await page.keyboard.press('Escape');
  await page.waitForSelector('[data-testid="shard-view"].hidden', { state: 'attached' });
});

await check("a budget for server mysql-a set on the page reaches the API and the server's summary", async () => {
  await page.click('[data-testid="shard-cell"][data-shard="0"]');
  await page.waitForSelector('[data-testid="budget-rate-input"]');
  await page.fill('[data-testid="budget-rate-input"]', '400');
  await page.fill('[data-testid="budget-rows-input"]', '');
  await page.click('[data-testid="btn-budget"]');
  await page.waitForSelector('[data-testid="confirm-dialog"][open]');
  expect((await page.textContent('#confirm-what')).includes('400 statements/s and no row budget'), await page.textContent('#confirm-what'));
  await page.fill('[data-testid="reason-input"]', 'browser test: share the box');
  await page.click('[data-testid="btn-confirm"]');
  await page.waitForFunction(() => document.getElementById('sum-mysql-a')?.textContent.includes('budget 400 stmt/s, no row budget'),
    null, { timeout: 15000 });
  const shards = await apiGet('/v1/shards', 'admin-token');
  const b = shards.servers.find((v) => v.name === 'mysql-a').budget;
  expect(b && b.rate === 400 && b.row_rate === 0 && b.reason === 'browser test: share the box' && b.changed_by === 'sre', JSON.stringify(b));
  expect((await page.textContent('[data-testid="server-budget"]')).includes('browser test: share the box'), 'shard view budget line');
});
await check("a fresh load shows mysql-a's budget in its server's summary before any shard is opened (the polled summary carries it)", async () => {
  await page.goto(url);
  await page.waitForFunction(() => document.getElementById('sum-mysql-a')?.textContent.includes('budget 400 stmt/s, no row budget'),
    null, { timeout: 15000 });
  expect(await page.isHidden('[data-testid="shard-view"]'), 'a shard view is open');
});
await check("shard 2's last hour: drawn from GET /v1/shards/2/history with its pause marked (or, from a proxy without it, said missing)", async () => {
  await page.click('[data-testid="shard-cell"][data-shard="2"]');
  console.log(`note: GET /v1/shards/{n}/history answers ${historyStatus === 200 ? '200: the chart is checked' : historyStatus + ': the panel must say it is missing'}`);
  if (historyAbsent) {
    await page.waitForSelector('[data-testid="history-missing"]', { timeout: 15000 });
    return;
  }
  const h = await apiGet('/v1/shards/2/history', 'admin-token');
  expect(h.points.length > 0 && h.events.some((e) => e.kind === 'pause'), 'history: ' + JSON.stringify(h).slice(0, 300));
  await page.waitForSelector('[data-testid="history-chart"][data-series="lag"] [data-testid="history-marker"][data-kind="pause"]', { timeout: 15000 });
  await page.reload();
  await page.waitForSelector('[data-testid="history-chart"][data-series="lag"] [data-testid="history-marker"][data-kind="pause"]', { timeout: 15000 });
});

if (shots) {
  await page.click('[data-testid="shard-cell"][data-shard="1"]');
  await page.waitForFunction(() => document.querySelector('[data-testid="shard-view"] h2.title')?.textContent.startsWith('shard 1 '));
  await page.screenshot({ path: path.join(shots, 'ui-shard.png'), fullPage: true });
}

await check("the jobs view: the finished job's progress bar reaches 100 %", async () => {
  await page.click('.tab[data-view="jobs"]');
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="job-progress"]')]
    .some((p) => p.dataset.percent === '100'), null, { timeout: 30000 });
});
await check("the jobs view says why the jobs wait: shard 2's job names the pause, who and why; shard 5's its server", async () => {
  const wait = '[data-testid="job-wait"][data-shard="2"][data-kind="paused"]';
  await page.waitForSelector(wait, { timeout: 30000 });
  const text = await page.textContent(wait);
  expect(text === 'shard 2 is paused by sre: browser test: disk swap', text);
  await page.waitForSelector('[data-testid="job-wait"][data-shard="5"][data-kind="error"]', { timeout: 30000 });
  const down = await page.textContent('[data-testid="job-wait"][data-shard="5"]');
  expect(down.includes('shard 5 waits for its server'), down);
});
await check('the jobs view: no cancel button on a finished job', async () => {
  const finished = await page.$$eval('[data-testid="job-row"][data-finished="true"]', (rows) => rows.map((r) => !!r.querySelector('[data-testid="btn-cancel-job"]')));
  expect(finished.length >= 1 && finished.every((c) => !c), 'finished rows with a cancel button: ' + JSON.stringify(finished));
});
await check('the jobs view shows the 40 held one-op jobs as one delay queue', async () => {
  await page.waitForSelector('[data-testid="delay-queue-held"][data-held="40"]', { timeout: 15000 });
  const text = await page.textContent('[data-testid="delay-queue"]');
  expect(text.includes('40 jobs held (40 ops)') && text.includes('feed 40'), text);
});
if (shots) await page.screenshot({ path: path.join(shots, 'ui-jobs.png'), fullPage: true });

await check('no error in the page (console or script)', async () => {
  expect(errors.length === 0, errors.join(' | '));
});

await check('a read-only token sees the page without any control', async () => {
  const ro = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const p = await ro.newPage();
  await signIn(p, 'read-token');
  await cellState(p, 2, 'paused');
  await p.click('[data-testid="shard-cell"][data-shard="2"]');
  await p.waitForSelector('[data-testid="shard-view"]:not(.hidden)');
  expect(await p.locator('[data-testid="shard-controls"]').count() === 0, 'shard controls shown');
  await p.click('.tab[data-view="jobs"]');
  await p.waitForSelector('[data-testid="job-row"]', { timeout: 15000 }).catch(() => {});
  expect(await p.locator('[data-testid="btn-cancel-job"]').count() === 0, 'cancel buttons shown');
  await ro.close();
});

await check("the job's owner (submit role) sees a cancel button on its job still waiting, and no shard control", async () => {
  const own = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const p = await own.newPage();
  await signIn(p, 'feed-token');
  await p.click('.tab[data-view="jobs"]');
  // feed:500:5 waits for mysql-b, which is down: not finished
  await p.waitForSelector('[data-testid="btn-cancel-job"]', { timeout: 20000 });
  await p.click('.tab[data-view="fleet"]');
  await p.click('[data-testid="shard-cell"][data-shard="1"]');
  await p.waitForSelector('[data-testid="shard-view"]:not(.hidden)');
  expect(await p.locator('[data-testid="shard-controls"]').count() === 0, 'shard controls shown');
  await own.close();
});

await check('the proxy gone: the page says its data is stale', async () => {
  await page.route('**/v1/**', (route) => route.abort());
  await page.waitForSelector('[data-testid="stale-banner"]:not(.hidden)', { timeout: 15000 });
  const text = await page.textContent('[data-testid="stale-banner"]');
  expect(text.includes('unreachable') && text.includes('stale'), text);
  await page.unroute('**/v1/**');
});

await browser.close();
console.log('page: done');
