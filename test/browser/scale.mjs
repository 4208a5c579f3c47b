// How long the page takes to show 4,096 shards (issue: "loads in under a second"), in
// headless chromium, with the API answered by synthetic data of that size (the
// proxy's own cost to build GET /v1/shards is measured apart). A measurement, not a test:
//   NODE_PATH=$(scripts/install-browser.sh) node test/browser/scale.mjs [SHARDS]
// prints the median of 5 loads, from navigation to every cell drawn.
import { createRequire } from 'module';
import fs from 'fs';
import path from 'path';

const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core');
const shards = Number(process.argv[2] || 4096);
const ui = path.join(path.dirname(new URL(import.meta.url).pathname), '../../ui');
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' };

const states = ['running', 'paused', 'unhealthy', 'throttled'];
const body = {
  shards: Array.from({ length: shards }, (_, n) => ({
    shard: n, database: 'db' + String(n).padStart(5, '0'), server: n < shards / 2 ? 'mysql-a' : 'mysql-b',
    configured_rate: 0, operator_rate: null, effective_rate: 0, configured_row_rate: 0, effective_row_rate: 0,
    paused: states[n % 4] === 'paused', history: [],
    consumer: { instance: '127.0.0.1:18081', age_ms: 500, lag: (n * 37) % 100000, rate: 0, row_rate: 0, paused: false,
      unhealthy: states[n % 4] === 'unhealthy', reasons: [], rows_applied: n * 10, rows_failed: 0, recent_errors: [],
      throttle: states[n % 4] === 'throttled' ? { throttled: true, reason: 'replication lag' } : null },
  })),
};
const fleet = {
  now_ms: Date.now(), proxy: '127.0.0.1:18080', shards,
  kafka: { brokers: [{ id: 1, host: '127.0.0.1', port: 9092 }], topics: [] },
  members: [{ role: 'proxy', instance: '127.0.0.1:18080', age_ms: 100, alive: true, agrees: true, fingerprint: '0' }],
  servers: [{ name: 'mysql-a', first_shard: 0, last_shard: shards / 2 - 1 }, { name: 'mysql-b', first_shard: shards / 2, last_shard: shards - 1 }],
};
const shardsJson = JSON.stringify(body);

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
const times = [];
for (let run = 0; run < 5; run++) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.route('**/*', (route) => {
    const u = new URL(route.request().url());
    if (u.pathname.startsWith('/ui/')) {
      const file = path.join(ui, u.pathname.slice(4) || 'index.html');
      return route.fulfill({ body: fs.readFileSync(file), contentType: types[path.extname(file)] });
    }
    if (u.pathname === '/v1/shards') return route.fulfill({ body: shardsJson, contentType: 'application/json' });
    if (u.pathname === '/v1/fleet') return route.fulfill({ json: fleet });
    if (u.pathname === '/v1/whoami') return route.fulfill({ json: { client: '(open)', roles: ['admin'], admin: true, open: true } });
    return route.fulfill({ status: 404, json: { error: 'no' } });
  });
  const t0 = Date.now();
  await page.goto('http://bulkwrite.test/ui/');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="shard-cell"]:not([data-state="unknown"])').length === n,
    shards, { timeout: 60000, polling: 20 });
  times.push(Date.now() - t0);
  await page.close();
}
await browser.close();
times.sort((a, b) => a - b);
console.log(`${shards} shards (${(shardsJson.length / 1048576).toFixed(1)} MiB of GET /v1/shards): drawn in ${times[2]} ms (median of 5: ${times.join(', ')} ms)`);
