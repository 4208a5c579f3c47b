// Keeps N pages of the SRE page open and polling (make bench's proxy-pages case): three on
// the fleet view, one of them with a shard open, the others on the jobs view. Prints
// "pages: N open" once each has drawn its grid, then runs until it is killed.
//
//   NODE_PATH=… BW_UI_URL=http://127.0.0.1:PORT/ui/ BW_PAGES=5 node test/browser/pages.mjs
import { createRequire } from 'module';

const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core'); // NODE_PATH: scripts/install-browser.sh

const url = process.env.BW_UI_URL;
const n = Number(process.env.BW_PAGES || 5);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
for (let i = 0; i < n; i++) {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await page.goto(url);
  await page.waitForSelector('[data-testid="shard-cell"]', { timeout: 30000 });
  if (i === 0) await page.click('[data-testid="shard-cell"][data-shard="0"]');
  if (i >= 3) await page.click('.tab[data-view="jobs"]');
}
console.log(`pages: ${n} open`);
const stop = async () => { await browser.close(); process.exit(0); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
