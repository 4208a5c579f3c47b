// The SRE page at 4,096 shards, in headless chromium, against a synthetic API of that
// size served here (the shapes of docs/api.md: GET /v1/shards with consumer.rows_per_s,
// gzip and an ETag; /v1/fleet; /v1/shards/{n}/history; /v1/jobs with each job's numbers;
// /v1/jobs/{id} with shards[].waits; the controls). Eight servers of 512 shards, mysql-f
// down; shard 97 paused with a job stuck behind it. One "ok - …" or "not ok - …" line per
// check, measurements on "measured: …" lines, then "scale: done". Run by
// test/tiers/browser.sh, or alone:
//   NODE_PATH=$(scripts/install-browser.sh) BW_UI_SHOTS=/tmp/shots node test/browser/scale.mjs [SHARDS]
import { createRequire } from 'module';
import crypto from 'crypto';
import fs from 'fs';
import http from 'http';
import path from 'path';
import zlib from 'zlib';
import { check, expect } from './checks.mjs';

const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core'); // NODE_PATH: scripts/install-browser.sh
const SHARDS = Number(process.argv[2] || 4096);
const PER_SERVER = SHARDS / 8;
const shots = process.env.BW_UI_SHOTS;
const ui = path.join(path.dirname(new URL(import.meta.url).pathname), '../../ui');
const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

// ---- the synthetic fleet ----------------------------------------------------------------
const SERVERS = 'abcdefgh'.split('').map((c, i) => ({ name: 'mysql-' + c, first_shard: i * PER_SERVER, last_shard: (i + 1) * PER_SERVER - 1 }));
const DOWN = 'mysql-f';
const LAGGIEST = Math.floor(SHARDS * 0.667); // the one shard furthest behind
const OLDEST = 1234; // the shard whose oldest unapplied message is the oldest (not the laggiest)
const PAUSED = 97; // paused by sre, with a job stuck behind it
const now0 = Date.now();
const serverOf = (n) => SERVERS[Math.floor(n / PER_SERVER)].name;
const down = (n) => serverOf(n) === DOWN;
const paused = (n) => n % 97 === 0 && !down(n);
const throttled = (n) => n % 89 === 1 && !down(n) && !paused(n);
const lagOf = (n) => (n === LAGGIEST ? 987654 : (n * 7919) % 40000);
const rowsOf = (n) => (down(n) || paused(n) ? 0 : throttled(n) ? 40 : 150);

function shard(n) {
  const lag = lagOf(n);
  const reasons = down(n) ? ['server_down'] : paused(n) ? ['paused'] : [];
  return {
    shard: n, database: 'db' + String(n).padStart(5, '0'), server: serverOf(n),
    configured_rate: 200, operator_rate: null, effective_rate: 200, configured_row_rate: 0, effective_row_rate: 0,
    paused: paused(n), history: paused(n) ? [{ at_ms: now0 - 600000, action: 'pause', by: 'sre', from: '10.0.0.12', reason: 'disk swap', setting: 'paused; 200 stmt/s' }] : [],
    ...(paused(n) ? { changed_at_ms: now0 - 600000, changed_by: 'sre', changed_from: '10.0.0.12', reason: 'disk swap' } : {}),
    backlog: { messages: lag, bytes: lag * 480, max_messages: 50000, max_bytes: 268435456, applied_offset: 100000 + n, high_watermark: 100000 + n + lag, log_start_offset: 90000, full: false },
    consumer: {
      instance: '127.0.0.1:' + (18081 + (n % 4)), age_ms: 800 + (n % 1500), lag, rate: 200, row_rate: 0, paused: paused(n), unhealthy: false, reasons,
      rows_applied: n * 1000, rows_failed: n % 13 === 0 ? 2 : 0, rows_per_s: rowsOf(n),
      oldest_unapplied_ms: lag ? now0 - (n === OLDEST ? 86400000 : lag * 20) : 0,
      recent_errors: down(n) ? [{ at_ms: now0 - 5000, kind: 'connection', message: "Can't connect to server on '10.0.0.16' (111)" }] : [],
      statements: n * 20, statement_p50_ms: 0.4, statement_p99_ms: 3.1, dead_letters: 0, recent_dead_letters: [],
      throttle: throttled(n) ? { state: 'throttled', throttled: true, rate: 40, cap: 200, since_ms: now0 - 60000, dry_run: false,
        reason: 'replication_lag_ms 2518.5 over its threshold 1000', signal: { name: 'replication_lag_ms', value: 2518.5, level: 1000 } } : null,
    },
  };
}
const SERVERS_LISTED = SERVERS.map((s) => ({ ...s, budget: null })); // GET /v1/shards' servers, either view
const full = (list) => JSON.stringify({ rate_window_s: 60, now_ms: Date.now(), shards: list, servers: SERVERS_LISTED });
const shardsBody = full(Array.from({ length: SHARDS }, (_, n) => shard(n)));
// ?view=summary, as page-contract's GET /v1/shards?view=summary: what the page polls
function summary(n) {
  const s = shard(n), c = s.consumer;
  return { shard: n, database: s.database, server: s.server, paused: s.paused, effective_rate: s.effective_rate,
    effective_row_rate: s.effective_row_rate, backlog_full: false,
    consumer: { age_ms: c.age_ms, lag: c.lag, oldest_unapplied_age_ms: c.oldest_unapplied_ms ? now0 - c.oldest_unapplied_ms : null,
      rows_per_s: c.rows_per_s, rate: c.rate, row_rate: c.row_rate, paused: c.paused, unhealthy: c.unhealthy, reasons: c.reasons,
      throttled: !!(c.throttle && c.throttle.throttled), errors: c.recent_errors.length,
      ...(c.recent_errors.length ? { last_error: c.recent_errors[0] } : {}), dead_letters: c.dead_letters } };
}
const summaryBody = JSON.stringify({ view: 'summary', now_ms: now0, rate_window_s: 60, servers: SERVERS_LISTED,
  shards: Array.from({ length: SHARDS }, (_, n) => summary(n)) });
const expectedRows = (server) => SERVERS.filter((s) => s.name === server)
  .reduce((sum, s) => { for (let n = s.first_shard; n <= s.last_shard; n++) sum += rowsOf(n); return sum; }, 0);

const fleet = () => ({
  now_ms: Date.now(), proxy: '127.0.0.1:18080', shards: SHARDS,
  kafka: { brokers: [1, 2, 3].map((id) => ({ id, host: '10.0.1.' + id, port: 9092 })),
    topics: [{ name: 'bulkwrite.batches', partitions: SHARDS, replicas: 3, under_replicated: 0, offline: 0 }] },
  members: [{ role: 'proxy', instance: '127.0.0.1:18080', age_ms: 100, alive: true, agrees: true, fingerprint: '3f0c9a51d2e87b64' },
    ...[0, 1, 2, 3].map((i) => ({ role: 'consumer', instance: '127.0.0.1:' + (18081 + i), age_ms: 900, alive: true, agrees: true, fingerprint: '3f0c9a51d2e87b64' }))],
  servers: SERVERS,
});

// A shard's last hour, every 10 s: paused from 40 to 30 minutes ago, a rate change 20
// minutes ago, an alert 10 minutes ago, resolved 5 minutes ago.
const STEP = 10000, WINDOW = 3600000;
const EVENTS = [
  { ago: 40, kind: 'pause', by: 'sre', detail: 'disk swap' }, { ago: 30, kind: 'resume', by: 'sre', detail: 'disk swapped' },
  { ago: 20, kind: 'rate', by: 'sre', detail: '200 -> 100 stmt/s: hot partner' },
  { ago: 10, kind: 'alert', by: 'consumer', detail: 'BulkwriteShardUnhealthy: 2 consecutive timeouts' },
  { ago: 5, kind: 'alert_resolved', by: 'consumer', detail: 'BulkwriteShardUnhealthy resolved' }];
function history(n) {
  const end = Math.floor(Date.now() / STEP) * STEP;
  const points = [];
  for (let t = end - WINDOW + STEP; t <= end; t += STEP) {
    const ago = (end - t) / 60000;
    const isPaused = ago <= 40 && ago > 30;
    const lag = Math.round(lagOf(n) / 2 + 4000 * (1 + Math.sin(t / 400000)) + (isPaused ? (40 - ago) * 3000 : 0));
    points.push({ at_ms: t, lag, oldest_unapplied_ms: lag * 20, rows_per_s: isPaused ? 0 : ago <= 20 ? 100 : 150, rate: ago <= 20 ? 100 : 200, row_rate: 0, paused: isPaused });
  }
  return { shard: n, step_s: STEP / 1000, window_s: WINDOW / 1000, points, events: EVENTS.map((e) => ({ at_ms: end - e.ago * 60000, kind: e.kind, by: e.by, detail: e.detail })) };
}

const JOBS = [
  { job_id: 'a'.repeat(32), client: 'feed', created_at_ms: now0 - 900000, submitted: 5000, applied: 5000, failed: 0, pending: 0, cancelled: 0,
    finished: true, lane: 'default', shards: [3], cancelled_job: false, request_id: 'done-feed' },
  { job_id: 'b'.repeat(32), client: 'feed', created_at_ms: now0 - 600000, submitted: 10000, applied: 9600, failed: 0, pending: 400, cancelled: 0,
    finished: false, lane: 'default', shards: [5, PAUSED], request_id: 'stuck-feed' },
  { job_id: 'c'.repeat(32), client: 'spam', created_at_ms: now0 - 300000, unknown: `shard ${SERVERS[5].first_shard}'s server ${DOWN} cannot be read`,
    lane: 'default', shards: [SERVERS[5].first_shard], request_id: 'cleanup-f' },
  { job_id: 'd'.repeat(32), client: 'spam', created_at_ms: now0 - 1200000, submitted: 300, applied: 290, failed: 10, pending: 0, cancelled: 0,
    finished: true, lane: 'default', shards: [0, 1, 2], job: 'spam-sweep', sealed: true, parts: 3 },
].map(({ cancelled_job, cancelled, ...j }) => ({ ...j, cancelled: false, ...(j.unknown ? {} : { cancelled_ops: cancelled, lost: 0 }) }));
const jobDetail = {
  ['b'.repeat(32)]: { job_id: 'b'.repeat(32), request_id: 'stuck-feed', submitted: 10000, applied: 9600, failed: 0, pending: 400, finished: false,
    shards: [{ shard: 5, submitted: 5000, applied: 5000, failed: 0, pending: 0 },
      { shard: PAUSED, submitted: 5000, applied: 4600, failed: 0, pending: 400,
        waits: { kind: 'paused', detail: `shard ${PAUSED} is paused by sre: disk swap`, by: 'sre', reason: 'disk swap' } }], failures: [] },
  ['c'.repeat(32)]: { job_id: 'c'.repeat(32), request_id: 'cleanup-f', submitted: 200, applied: 0, failed: 0, pending: 200, finished: false,
    shards: [{ shard: SERVERS[5].first_shard, submitted: 200, applied: 0, failed: 0, pending: 200, error: `server ${DOWN} cannot be read`,
      waits: { kind: 'error', detail: `shard ${SERVERS[5].first_shard} waits for its server (server_down)`, reason: 'server_down' } }], failures: [] },
};

// ---- the server, with what it counts --------------------------------------------------
const stats = { shardsPolls: 0, shards304: 0, shardsWire: [], conditional: 0, history: 0, detail: 0, fullPolls: 0, posts: [], apiDown: false };
const etag = 'W/"' + crypto.createHash('sha1').update(summaryBody).digest('hex').slice(0, 16) + '"';
const gz = zlib.gzipSync(summaryBody);
const gzFull = zlib.gzipSync(shardsBody);
function send(req, res, status, body, headers = {}) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const zip = /\bgzip\b/.test(req.headers['accept-encoding'] || '') && text.length > 1024;
  const out = zip ? (text === summaryBody ? gz : zlib.gzipSync(text)) : Buffer.from(text);
  res.writeHead(status, Object.assign({ 'Content-Type': 'application/json', 'Content-Length': out.length, 'Cache-Control': 'no-cache' },
    zip ? { 'Content-Encoding': 'gzip', Vary: 'Accept-Encoding' } : {}, headers));
  res.end(out);
  return out.length;
}
const server = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  const p = u.pathname;
  if (p.startsWith('/ui/')) {
    const file = path.join(ui, p.slice(4) || 'index.html');
    res.writeHead(200, { 'Content-Type': types[path.extname(file)] || 'application/octet-stream' });
    return res.end(fs.readFileSync(file));
  }
  if (stats.apiDown) return req.socket.destroy(); // the proxy gone
  let m;
  if (p === '/v1/shards' && u.searchParams.get('shard')) {
    stats.detail++;
    const n = Number(u.searchParams.get('shard'));
    if (!(n >= 0 && n < SHARDS)) return send(req, res, 404, { error: `shard ${n} is out of range` });
    return send(req, res, 200, full([shard(n)]));
  }
  if (p === '/v1/shards' && u.searchParams.get('view') !== 'summary') {
    stats.fullPolls++;
    return send(req, res, 200, shardsBody);
  }
  if (p === '/v1/shards') {
    stats.shardsPolls++;
    if (req.headers['if-none-match']) stats.conditional++;
    if (req.headers['if-none-match'] === etag) {
      stats.shards304++;
      res.writeHead(304, { ETag: etag, 'Cache-Control': 'no-cache' });
      return res.end();
    }
    stats.shardsWire.push(send(req, res, 200, summaryBody, { ETag: etag }));
    return;
  }
  if (p === '/v1/fleet') return send(req, res, 200, fleet());
  if (p === '/v1/whoami') return send(req, res, 200, { client: '(open)', roles: ['admin', 'read', 'submit'], admin: true, open: true });
  if ((m = /^\/v1\/shards\/(\d+)\/history$/.exec(p))) {
    stats.history++;
    return send(req, res, 200, history(Number(m[1])));
  }
  if (p === '/v1/jobs') return send(req, res, 200, { jobs: JOBS, delay_queue: { held_jobs: 0, held_ops: 0, clients: [] } });
  if ((m = /^\/v1\/jobs\/([0-9a-f]{32})$/.exec(p)) && jobDetail[m[1]]) return send(req, res, 200, jobDetail[m[1]]);
  if (req.method === 'POST') {
    stats.posts.push(p);
    // a server's controls fail here (the control topic away): the page must keep the error
    if (p.startsWith('/v1/servers/')) return send(req, res, 503, { error: 'the control topic cannot be written now; try again' });
    return send(req, res, 200, { ok: true });
  }
  send(req, res, 404, { error: 'not found: ' + p });
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const url = `http://127.0.0.1:${server.address().port}/ui/`;

// ---- the checks -------------------------------------------------------------------------
const shot = async (page, name, full = false) => { if (shots) await page.screenshot({ path: path.join(shots, name), fullPage: full }); };
const allDrawn = (page) => page.waitForFunction((n) => document.querySelectorAll('[data-testid="shard-cell"]:not([data-state="unknown"])').length === n,
  SHARDS, { timeout: 60000, polling: 20 });
const topRow = (page) => page.$eval('[data-testid="table-row"]', (r) => Number(r.dataset.shard));
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
const page = await context.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(e.message));
// the one failure the page is sent on purpose (a server's control) is not an error of the page
page.on('response', (r) => { if (r.status() >= 400 && !r.url().includes('/v1/servers/')) errors.push(r.status() + ' ' + r.url()); });

const t0 = Date.now();
await page.goto(url);
await check(`${SHARDS} shards drawn, each in its state`, () => allDrawn(page));
const firstDraw = Date.now() - t0;

await check(`one server down: one grouped alert "${DOWN} down: ${PER_SERVER} shards", nothing else, and it opens to its shards`, async () => {
  await page.waitForSelector('[data-testid="alert"][data-reason="server_down"]');
  const alerts = await page.$$eval('[data-testid="alert"]', (a) => a.map((d) => [d.dataset.server, d.dataset.reason, d.dataset.count, d.querySelector('summary')?.textContent]));
  expect(alerts.length === 1, 'alerts: ' + JSON.stringify(alerts));
  expect(alerts[0][0] === DOWN && alerts[0][2] === String(PER_SERVER) && alerts[0][3] === `${DOWN} down: ${PER_SERVER} shards`, JSON.stringify(alerts[0]));
  await page.click('[data-testid="alert"] summary');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="alert-shard"]').length === n, PER_SERVER, { timeout: 10000 });
  const listed = await page.$$eval('[data-testid="alert-shard"]', (b) => b.map((x) => Number(x.dataset.shard)));
  const f = SERVERS.find((s) => s.name === DOWN);
  expect(listed.length === PER_SERVER && listed[0] === f.first_shard && listed.at(-1) === f.last_shard, `listed ${listed.length}: ${listed[0]}…${listed.at(-1)}`);
  await sleep(3500); // a poll redraws the alerts: the group stays open
  expect(await page.locator('[data-testid="alert-shard"]').count() === PER_SERVER, 'the open group closed at the next poll');
});

await check(`the server's own line says "server down" (${DOWN}), and no other server's`, async () => {
  const lines = await page.$$eval('[data-testid="server"]', (s) => s.map((b) => [b.dataset.server, b.querySelector('[data-testid="server-down"]').textContent]));
  const said = lines.filter(([, t]) => t);
  expect(said.length === 1 && said[0][0] === DOWN && said[0][1] === 'server down', JSON.stringify(said));
});

await check('rates from consumer.rows_per_s, labelled with the window: mysql-a\'s line sums its shards\' rows/s', async () => {
  const sum = await page.textContent('#sum-mysql-a');
  const want = `${expectedRows('mysql-a').toLocaleString('en')} rows/s, last 60 s`;
  expect(sum.includes(want), `"${sum}" lacks "${want}"`);
  const head = await page.textContent('[data-testid="table-sort"][data-key="rows"]');
  expect(head.includes('rows/s, last 60 s'), 'table header: ' + head);
});

await check('the table, sorted by lag (the default): the top row is the laggiest shard; the other way, the least', async () => {
  expect(await topRow(page) === LAGGIEST, 'top row ' + await topRow(page));
  expect(await page.locator('[data-testid="table-row"]').count() === 20, 'not the top 20');
  await page.click('[data-testid="table-sort"][data-key="lag"]');
  const least = await topRow(page);
  expect(lagOf(least) === Math.min(...Array.from({ length: SHARDS }, (_, n) => lagOf(n))), 'ascending top row ' + least + ' lag ' + lagOf(least));
  await page.click('[data-testid="table-sort"][data-key="lag"]');
  expect(await topRow(page) === LAGGIEST, 'back to the laggiest');
});
await shot(page, 'ui-fleet-4096.png');

await check('the table sorts by oldest unapplied and by errors; filters by server, state and reason; finds a shard or a database', async () => {
  await page.click('[data-testid="table-sort"][data-key="oldest"]');
  expect(await topRow(page) === OLDEST, 'oldest: top row ' + await topRow(page));
  await page.click('[data-testid="table-sort"][data-key="errors"]');
  expect(down(await topRow(page)), 'errors: top row ' + await topRow(page));
  await page.click('[data-testid="table-sort"][data-key="lag"]');
  const count = () => page.$eval('[data-testid="table-count"]', (c) => Number(c.dataset.matching));
  await page.selectOption('[data-testid="table-server"]', DOWN);
  await page.selectOption('[data-testid="table-reason"]', 'server_down');
  expect(await count() === PER_SERVER, `${DOWN}, server_down: ${await count()}`);
  await page.selectOption('[data-testid="table-server"]', '');
  await page.selectOption('[data-testid="table-reason"]', '');
  await page.selectOption('[data-testid="table-state"]', 'paused');
  const pausedCount = Array.from({ length: SHARDS }, (_, n) => n).filter(paused).length;
  expect(await count() === pausedCount, `paused: ${await count()} of ${pausedCount}`);
  await page.selectOption('[data-testid="table-state"]', '');
  await page.fill('[data-testid="table-search"]', String(LAGGIEST));
  expect(await count() === 1 && await topRow(page) === LAGGIEST, 'search by number');
  await page.fill('[data-testid="table-search"]', 'db00042');
  expect(await count() === 1 && await topRow(page) === 42, 'search by database');
  await page.fill('[data-testid="table-search"]', '');
});

const contrast = (a, b) => {
  const lum = ([r, g, b2]) => [r, g, b2].map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
};
await check('every state\'s colour (no lag: the lightest drawn) is 3:1 or more against the grid\'s background, and unhealthy is the strongest', async () => {
  const colours = await page.evaluate(() => {
    const parse = (c) => {
      const m = /color\(srgb ([\d.]+) ([\d.]+) ([\d.]+)/.exec(c);
      if (m) return m.slice(1, 4).map(Number);
      return c.match(/[\d.]+/g).slice(0, 3).map((v) => Number(v) / 255);
    };
    const bg = parse(getComputedStyle(document.querySelector('[data-testid="server"]')).backgroundColor);
    const out = {};
    for (const cell of document.querySelectorAll('[data-testid="legend"] .cell')) out[cell.className.replace('cell s-', '')] = parse(getComputedStyle(cell).color);
    return { bg, out };
  });
  const ratios = Object.fromEntries(Object.entries(colours.out).map(([k, c]) => [k, contrast(c, colours.bg)]));
  console.log('measured: contrast against the grid: ' + Object.entries(ratios).map(([k, r]) => `${k} ${r.toFixed(2)}:1`).join(', '));
  expect(Object.keys(ratios).length === 5 && Object.values(ratios).every((r) => r >= 3), JSON.stringify(ratios));
  expect(Object.values(ratios).every((r) => r <= ratios.unhealthy), 'unhealthy is not the strongest');
  const shapes = await page.$$eval('[data-testid="legend"] .cell', (cells) => cells.map((c) => getComputedStyle(c).backgroundImage + getComputedStyle(c).borderStyle));
  expect(new Set(shapes).size === 5, 'two states share a shape: ' + shapes.join(' | '));
});

await check('history from the API: the laggiest shard\'s last hour with axes, values and a marker per pause, resume, rate change and alert', async () => {
  await page.click(`[data-testid="table-row"][data-shard="${LAGGIEST}"]`);
  await page.waitForSelector('[data-testid="history-chart"][data-series="lag"]');
  const drawn = await page.$$eval('[data-testid="history-chart"]', (c) => c.map((s) => [s.dataset.series, Number(s.dataset.points), s.querySelectorAll('text.axis').length,
    [...s.querySelectorAll('[data-testid="history-marker"]')].map((m) => m.dataset.kind).join(',')]));
  expect(drawn.length === 2, 'charts ' + drawn.length);
  for (const [series, points, axis, marks] of drawn) {
    expect(points >= 350, `${series}: ${points} points`);
    expect(axis >= 8, `${series}: ${axis} axis labels`);
    expect(marks === 'pause,resume,rate,alert,alert_resolved', `${series}: markers ${marks}`);
  }
  const value = await page.textContent('[data-testid="history-value"][data-series="lag"]');
  expect(/^now [\d,]+ msgs · max [\d,]+/.test(value), 'lag value: ' + value);
  expect((await page.textContent('[data-testid="shard-throughput"]')).includes('rows/s, last 60 s'), 'shard rate label');
});
await shot(page, 'ui-history.png');

await check('history after a reload: the address keeps the shard, and its chart is read again from the API', async () => {
  const before = stats.history;
  await page.reload();
  await page.waitForSelector('[data-testid="history-chart"][data-series="lag"]', { timeout: 20000 });
  expect(await page.textContent('[data-testid="shard-view"] h2.title').then((t) => t.startsWith(`shard ${LAGGIEST} `)), 'another shard open');
  expect(stats.history > before, 'no history request after the reload');
  expect(await page.$eval('[data-testid="history-chart"]', (s) => Number(s.dataset.points)) >= 350, 'points');
  expect(await page.locator('[data-testid="history-marker"]').count() === 10, 'markers');
});

await check(`server and shard controls apart; the server's confirmation names its ${PER_SERVER} shards; its failure stays until dismissed`, async () => {
  await page.click('[data-testid="table-row"]:nth-child(2)');
  await page.waitForSelector('[data-testid="server-controls"]');
  expect(await page.locator('[data-testid="shard-controls"] input').count() === 1, 'the shard\'s own input');
  expect(await page.locator('[data-testid="server-controls"] [data-testid="server-rate-input"]').count() === 1, 'the server\'s own rate input');
  await page.click('[data-testid="btn-pause-server"]');
  await page.waitForSelector('[data-testid="confirm-dialog"][open]');
  const what = await page.textContent('#confirm-what');
  expect(what.includes(`(${PER_SERVER} shards)`), 'confirmation: ' + what);
  await page.fill('[data-testid="reason-input"]', 'scale test: kernel upgrade');
  await page.click('[data-testid="btn-confirm"]');
  await page.waitForSelector('[data-testid="notice"][data-kind="error"]');
  await sleep(3500); // a poll or more
  const note = await page.textContent('[data-testid="notice"][data-kind="error"]');
  expect(note.includes('control topic cannot be written'), 'error notice: ' + note);
  await page.locator('[data-testid="server-controls"]').scrollIntoViewIfNeeded();
  await shot(page, 'ui-controls.png');
  await page.click('[data-testid="notice"][data-kind="error"] [data-testid="notice-dismiss"]');
  expect(await page.locator('[data-testid="notice"][data-kind="error"]').count() === 0, 'not dismissed');
});

await check('a shard\'s control confirmed on success', async () => {
  await page.click('[data-testid="btn-pause"]');
  await page.fill('[data-testid="reason-input"]', 'scale test');
  await page.click('[data-testid="btn-confirm"]');
  await page.waitForSelector('[data-testid="notice"][data-kind="ok"]');
  expect(stats.posts.at(-1).endsWith('/pause') && stats.posts.at(-1).startsWith('/v1/shards/'), stats.posts.join(','));
});

await check('polls let the ETag work: GET /v1/shards revalidated (304) when unchanged, gzip when sent', async () => {
  expect(stats.conditional > 0 && stats.shards304 > 0, `${stats.shardsPolls} polls, ${stats.conditional} conditional, ${stats.shards304} answered 304`);
  expect(stats.fullPolls === 0 && stats.detail > 0, `${stats.fullPolls} reads of every shard in full (the summary is polled; an open shard alone in full: ${stats.detail})`);
});
console.log(`measured: GET /v1/shards at ${SHARDS} shards (synthetic): the full form ${(shardsBody.length / 1024).toFixed(0)} KiB of JSON, ` +
  `${(gzFull.length / 1024).toFixed(0)} KiB gzipped; ?view=summary (what the page polls) ${(summaryBody.length / 1024).toFixed(0)} KiB, ` +
  `${(gz.length / 1024).toFixed(0)} KiB gzipped; ${stats.shardsPolls} polls, ${stats.shards304} answered 304 (no body), ` +
  `${stats.shardsWire.length} sent (${(stats.shardsWire.reduce((a, b) => a + b, 0) / Math.max(1, stats.shardsWire.length) / 1024).toFixed(0)} KiB each on the wire)`);
console.log(`measured: first draw of ${SHARDS} shards: ${firstDraw} ms (navigation to every cell drawn)`);

await check('a hidden tab does not poll; shown again, it reads at once', async () => {
  await page.evaluate(() => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
    document.dispatchEvent(new Event('visibilitychange'));
  });
  await sleep(1000);
  const before = stats.shardsPolls;
  await sleep(4000);
  expect(stats.shardsPolls === before, `${stats.shardsPolls - before} polls while hidden`);
  await page.evaluate(() => {
    delete document.visibilityState;
    document.dispatchEvent(new Event('visibilitychange'));
  });
  await sleep(500);
  expect(stats.shardsPolls > before, 'no poll once shown');
});

await check('jobs: every listed job\'s numbers, "unknown" where unknown, no cancel on a finished job', async () => {
  await page.click('.tab[data-view="jobs"]');
  await page.waitForSelector('[data-testid="job-row"]');
  const rows = await page.$$eval('[data-testid="job-row"]', (r) => r.map((x) => ({ id: x.dataset.job[0], finished: x.dataset.finished,
    pct: x.querySelector('[data-testid="job-progress"]').dataset.percent, text: x.querySelector('[data-testid="job-progress"]').textContent,
    numbers: x.querySelector('[data-testid="job-numbers"]')?.textContent || '', cancel: !!x.querySelector('[data-testid="btn-cancel-job"]') })));
  const by = Object.fromEntries(rows.map((r) => [r.id, r]));
  expect(rows.length === JOBS.length, 'rows ' + rows.length);
  expect(by.a.pct === '100' && by.a.finished === 'true' && !by.a.cancel, 'finished job: ' + JSON.stringify(by.a));
  expect(by.d.pct === '100' && by.d.numbers.includes('290 applied · 10 failed · 0 pending') && !by.d.cancel, 'named job: ' + JSON.stringify(by.d));
  expect(by.c.text.startsWith('unknown: ') && by.c.text.includes(DOWN), 'unknown job: ' + JSON.stringify(by.c));
  expect(by.b.pct === '96' && by.b.cancel, 'stuck job: ' + JSON.stringify(by.b));
});

await check(`a stuck job shows its paused shard (${PAUSED}) and the cause, per shard`, async () => {
  const wait = `[data-testid="job-row"][data-job="${'b'.repeat(32)}"] [data-testid="job-wait"][data-shard="${PAUSED}"][data-kind="paused"]`;
  await page.waitForSelector(wait);
  await page.click(`[data-testid="job-row"][data-job="${'b'.repeat(32)}"] [data-testid="job-expand"]`);
  const line = await page.waitForSelector(`[data-testid="job-shard"][data-shard="${PAUSED}"][data-kind="paused"]`);
  const text = await line.textContent();
  expect(text.includes('92%') && text.includes('400 pending') && text.includes(`shard ${PAUSED} is paused by sre: disk swap`), text);
  const first = await page.$eval('[data-testid="job-shard"]', (r) => Number(r.dataset.shard));
  expect(first === PAUSED, 'the waiting shard is not listed first: ' + first);
});
await shot(page, 'ui-jobs-stuck.png');

await check('no error in the page (console or script)', async () => {
  expect(errors.length === 0, errors.join(' | '));
});

await check('the proxy gone: the page greys its data and says how old it is', async () => {
  await page.click('.tab[data-view="fleet"]');
  stats.apiDown = true;
  await page.waitForSelector('[data-testid="stale-banner"]:not(.hidden)', { timeout: 15000 });
  await sleep(2200);
  const text = await page.textContent('[data-testid="stale-banner"]');
  expect(/proxy unreachable: no answer for \d+ s\. The data shown is stale \(from [\d:]+, \d+ s old\) and greyed\./.test(text), text);
  const filter = await page.$eval('main', (m) => getComputedStyle(m).filter);
  expect(filter.includes('grayscale'), 'main filter: ' + filter);
  await shot(page, 'ui-stale.png');
  stats.apiDown = false;
  await page.waitForSelector('[data-testid="stale-banner"].hidden', { state: 'attached', timeout: 15000 });
  expect(!(await page.$eval('body', (b) => b.classList.contains('stale'))), 'still greyed');
});

await check('a phone (390x844): no horizontal overflow on the fleet, a shard or the jobs; the panel does not squeeze the grid; the jobs table scrolls inside itself', async () => {
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
  const p = await phone.newPage();
  const overflow = () => p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await p.goto(url);
  await allDrawn(p);
  expect(await overflow() <= 0, 'fleet overflows by ' + await overflow());
  await shot(p, 'ui-phone.png');
  await p.goto(url + '#shard=' + PAUSED);
  await p.waitForSelector('[data-testid="history-chart"]');
  expect(await overflow() <= 0, 'shard view overflows by ' + await overflow());
  const grid = await p.$eval('[data-testid="grid"]', (g) => g.clientWidth);
  expect(grid >= 300, 'grid ' + grid + ' px wide');
  const controls = await p.$eval('[data-testid="server-controls"]', (c) => c.getBoundingClientRect().right);
  expect(controls <= 390, 'server controls cut off at ' + controls);
  await p.evaluate(() => window.scrollTo(0, 0));
  await shot(p, 'ui-phone-shard.png');
  await p.click('.tab[data-view="jobs"]');
  await p.waitForSelector('[data-testid="job-row"]');
  expect(await overflow() <= 0, 'jobs view overflows by ' + await overflow());
  const inner = await p.$eval('[data-testid="jobs-scroll"]', (s) => [s.scrollWidth, s.clientWidth]);
  expect(inner[1] <= 390 && inner[0] > inner[1], 'jobs table: ' + inner.join(' in '));
  await phone.close();
});

await browser.close();
server.close();
console.log('scale: done');
