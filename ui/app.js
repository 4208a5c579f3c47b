// bulkwrite's page for SREs: reads the proxy's JSON API every few seconds and draws the
// fleet, every shard (a grid and a table), a shard's last hour, and the latest jobs.
// Plain JavaScript, no dependency: the proxy serves these files from its own binary
// (docs/operations.md, "The page").

const POLL_MS = 3000;
const STALE_MS = 30000; // a consumer status older than this: unknown
const TABLE_PAGE = 20; // the table's rows at first: the top 20 by the chosen column
const JOB_SHARDS_SHOWN = 50; // a job's per-shard lines, those that wait first
// States from the worst: the grid, the table and the legend draw each with its own shape.
const STATES = ['unhealthy', 'paused', 'throttled', 'running', 'unknown'];
// A consumer's reasons that make a shard an alert, the worst first, with their words.
const ALERT_REASONS = ['server_down', 'stopped', 'gap', 'unhealthy', 'unknown'];
const ALERT_WORDS = {
  server_down: 'server down', stopped: 'stopped on an error', gap: 'messages lost before applied (gap)',
  unhealthy: 'unhealthy (consecutive timeouts)', unknown: 'no report from a consumer for 30 s',
};

const state = {
  view: 'fleet',
  admin: false,
  me: null, // GET /v1/whoami: {client, roles, admin}
  shards: [], // GET /v1/shards' shards
  shardsAt: 0, // when the shards' body was read: their ages are as of then
  fleetAt: 0, // when the fleet's was
  full: false, // the proxy answered the full form to ?view=summary (an older one)
  detail: null, // the open shard in full (GET /v1/shards?shard=N): {shard, s, at} or {shard, error}
  rateWindow: null, // GET /v1/shards' rate_window_s: the window of consumer.rows_per_s
  servers: [], // GET /v1/fleet's servers
  serverOf: [], // shard -> its server's name (from the fleet: GET /v1/shards omits it for non-admins)
  budgets: new Map(), // server name -> its budget (GET /v1/shards' servers: admins only)
  selected: null, // shard number shown in the side panel
  openAlerts: new Set(), // alert groups the user opened, kept open across polls
  table: { sort: 'lag', desc: true, server: '', state: '', reason: '', search: '', shown: TABLE_PAGE },
  history: { shard: null, at: 0, box: null }, // the open shard's history, as last read
  jobs: [],
  delayQueue: null, // GET /v1/jobs' delay_queue: the held (scheduled, dependent) jobs as one thing
  jobDetail: new Map(), // job id -> GET /v1/jobs/{id} (unfinished jobs, and finished ones once)
  jobSamples: new Map(), // job id -> [{t, done}] for the ETA
  openJobs: new Set(), // jobs whose per-shard progress is open
  skew: 0, // the proxy's clock less this browser's (GET /v1/fleet's now_ms): ages are the proxy's
  lastGood: 0, // when a poll last succeeded
  failing: null, // {since, message} while polls fail
};

const $ = (id) => document.getElementById(id);

// One API call, with the token the user gave (a clients file asks for one). Returns the
// body's text; `cached` sends the ETag of the body last read there and takes a 304 as that
// body (never a cache-busting query: the browser may answer from its cache too).
async function apiText(path, opts = {}, cached = null) {
  const headers = Object.assign({}, opts.headers || {});
  const token = sessionStorage.getItem('bw-token');
  if (token) headers.Authorization = 'Bearer ' + token;
  if (cached && cached.etag) headers['If-None-Match'] = cached.etag;
  const res = await fetch(path, Object.assign({}, opts, { headers }));
  if (res.status === 401) {
    $('token-form').classList.remove('hidden');
    throw apiError('a token is needed (401)', 401);
  }
  if (res.status === 304 && cached) return cached.text;
  const text = await res.text();
  if (cached) Object.assign(cached, { etag: res.headers.get('ETag'), text, at: Date.now() });
  if (!res.ok) {
    let msg = 'HTTP ' + res.status;
    try { msg = JSON.parse(text).error || msg; } catch (e) { /* not JSON */ }
    throw apiError(msg, res.status);
  }
  return text;
}

function apiError(message, status) {
  const e = new Error(message);
  e.status = status;
  return e;
}

async function api(path, opts) {
  const text = await apiText(path, opts);
  return text ? JSON.parse(text) : {};
}

// A polled GET: its last body and ETag, and when that body was read (`at`: a 304 leaves the
// ages in it as they were then; ETags leave out what moves only with the clock).
const polled = new Map();
async function poll_get(path) {
  if (!polled.has(path)) polled.set(path, { etag: null, text: null, at: 0, parsedText: null, data: null });
  const c = polled.get(path);
  await apiText(path, {}, c);
  const changed = c.parsedText !== c.text;
  if (changed) {
    c.data = JSON.parse(c.text);
    c.parsedText = c.text;
  }
  return { data: c.data, at: c.at, changed };
}

// ---- elements --------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'on') Object.entries(v).forEach(([ev, fn]) => e.addEventListener(ev, fn));
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) e.append(c);
  return e;
}

const SVG = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

const fmt = {
  n: (x) => (x === undefined || x === null ? '-' : Number(x).toLocaleString('en')),
  rate: (x) => (x === 0 ? 'unlimited' : x === null || x === undefined ? '-' : Number(x).toLocaleString('en') + '/s'),
  time: (ms) => (ms ? new Date(ms).toISOString().replace('.000Z', 'Z') : '-'),
  clock: (ms) => new Date(ms).toLocaleTimeString('en-GB'),
  hm: (ms) => new Date(ms).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit' }),
  ms: (x) => (x >= 100 ? Math.round(x) : x >= 1 ? x.toFixed(1) : x.toFixed(2)) + ' ms',
  ago: (ms) => (ms < 1500 ? 'now' : ms < 90000 ? Math.round(ms / 1000) + ' s ago' : Math.round(ms / 60000) + ' min ago'),
  age: (ms) => (ms < 90000 ? Math.round(ms / 1000) + ' s' : ms < 5400000 ? Math.round(ms / 60000) + ' min' : (ms / 3600000).toFixed(1) + ' h'),
  plural: (n, one, many = one + 's') => `${fmt.n(n)} ${n === 1 ? one : many}`,
};

// "rows/s, last 60 s": consumer.rows_per_s is over GET /v1/shards' rate_window_s.
function rowsLabel() {
  return state.rateWindow ? `rows/s, last ${state.rateWindow} s` : 'rows/s';
}

// A shard's applied rows per second, or null when this proxy does not report it.
function rowsPerSecond(s) {
  const v = s.consumer && s.consumer.rows_per_s;
  return typeof v === 'number' ? v : null;
}

// ---- shard state ------------------------------------------------------------------

// The state a shard's cell shows, from what its consumer last reported.
function shardState(s) {
  const c = s.consumer;
  if (!c || statusAge(c) > STALE_MS) return 'unknown';
  const reasons = c.reasons || [];
  if (c.unhealthy || reasons.some((r) => ['unhealthy', 'stopped', 'server_down', 'gap'].includes(r))) return 'unhealthy';
  if (s.paused || c.paused || reasons.includes('paused') || reasons.includes('throttle')) return 'paused';
  if (c.throttled) return 'throttled';
  return 'running';
}

// Why a shard is an alert (a key of ALERT_WORDS), or null when it is none.
function alertReason(s) {
  const c = s.consumer;
  if (!c || statusAge(c) > STALE_MS) return 'unknown';
  const reasons = c.reasons || [];
  return ALERT_REASONS.find((r) => reasons.includes(r)) || (c.unhealthy ? 'unhealthy' : null);
}

// Lag as darkness: no lag is the state's own colour (3:1 or more on white), 100,000
// messages and more is it mixed with 45 % black: lag only ever raises the contrast.
function lagShade(lag) {
  return Math.round(45 * Math.min(1, Math.log10(1 + (lag || 0)) / 5)) + '%';
}

// The proxy's time now: the ages of its timestamps do not depend on this browser's clock.
function proxyNow() {
  return Date.now() + state.skew;
}

// How old a consumer's status is now, and its oldest unapplied message (0: none waits):
// as read, plus the time since the body was read.
function statusAge(c) {
  return (c.age_ms || 0) + (Date.now() - state.shardsAt);
}

function oldestAge(s) {
  const age = s.consumer && s.consumer.oldest_unapplied_age_ms;
  return typeof age === 'number' ? age + (Date.now() - state.shardsAt) : 0;
}

function errorCount(s) {
  return (s.consumer && s.consumer.errors) || 0;
}

// GET /v1/shards?view=summary is what the page polls; an older proxy answers the full form,
// which has what the summary sums up: each consumer gets the summary's members.
function summarize(c, proxyNowAtRead) {
  if (!c) return c;
  if (c.throttled === undefined) c.throttled = !!(c.throttle && c.throttle.throttled);
  if (c.errors === undefined) {
    c.errors = (c.recent_errors || []).length;
    if (c.errors) c.last_error = c.recent_errors[0];
  }
  if (c.oldest_unapplied_age_ms === undefined)
    c.oldest_unapplied_age_ms = c.oldest_unapplied_ms ? Math.max(0, proxyNowAtRead - c.oldest_unapplied_ms) : null;
  return c;
}

function serverOf(s) {
  return s.server || state.serverOf[s.shard] || '';
}

// ---- fleet view -------------------------------------------------------------------

function renderKafka(fleet) {
  const k = fleet.kafka || {};
  const box = $('kafka');
  box.replaceChildren();
  if (k.error) return box.append(el('div', { class: 'bad' }, 'Kafka did not answer: ' + k.error));
  box.append(el('div', {}, `${k.brokers.length} broker(s): ` + k.brokers.map((b) => `${b.id} ${b.host}:${b.port}`).join(', ')));
  const rows = k.topics.map((t) => el('tr', {},
    el('td', {}, t.name), el('td', {}, `${t.partitions} × ${t.replicas}`),
    el('td', { class: t.under_replicated || t.offline ? 'bad' : 'ok' },
      t.offline ? `${t.offline} offline` : t.under_replicated ? `${t.under_replicated} under-replicated` : 'in sync')));
  box.append(el('div', { class: 'scroll' }, el('table', {}, el('tr', {}, el('th', {}, 'topic'), el('th', {}, 'partitions × replicas'), el('th', {}, 'state')), rows)));
}

// A process's age as read, plus the time since (a 304 keeps the ages of the last 200).
function memberAge(m) {
  return m.age_ms + (Date.now() - state.fleetAt);
}

function renderMembers(fleet) {
  // a member whose settings print differs from the others of its role is marked
  const counts = {};
  for (const m of fleet.members) counts[m.role + m.fingerprint] = (counts[m.role + m.fingerprint] || 0) + 1;
  const rows = fleet.members.map((m) => {
    const odd = !m.agrees || counts[m.role + m.fingerprint] < Math.max(...fleet.members.filter((x) => x.role === m.role).map((x) => counts[x.role + x.fingerprint]));
    return el('tr', { 'data-testid': 'member', 'data-role': m.role },
      el('td', {}, m.role), el('td', { class: 'mono' }, m.instance),
      el('td', { class: m.alive ? 'ok' : 'bad' }, m.alive ? 'alive' : 'gone ' + fmt.ago(memberAge(m))),
      el('td', { class: 'mono' + (odd ? ' bad' : ''), title: 'fingerprint of its shared settings: ' + m.fingerprint },
        m.fingerprint.slice(0, 8) + (odd ? ' (differs)' : '')));
  });
  $('members').replaceChildren(el('div', { class: 'scroll' }, el('table', {}, rows)));
}

// What needs an SRE now, grouped: the shards by server and reason with their count ("mysql-f
// down: 512 shards", which opens to its shards), topics out of sync, processes gone.
// Every group is listed: nothing is cut off.
function renderAlerts(fleet) {
  const groups = new Map();
  for (const s of state.shards) {
    const why = alertReason(s);
    if (!why) continue;
    const server = serverOf(s) || '(no server)';
    const key = server + ' ' + why;
    if (!groups.has(key)) groups.set(key, { key, server, why, shards: [] });
    groups.get(key).shards.push(s.shard);
  }
  const ordered = [...groups.values()].sort((a, b) =>
    ALERT_REASONS.indexOf(a.why) - ALERT_REASONS.indexOf(b.why) || b.shards.length - a.shards.length || a.server.localeCompare(b.server));
  const items = ordered.map(alertGroup);
  for (const t of (fleet.kafka && fleet.kafka.topics) || [])
    if (t.under_replicated || t.offline)
      items.push(el('li', { class: 'bad', 'data-testid': 'alert' }, `${t.name}: ${t.under_replicated} under-replicated, ${t.offline} offline`));
  for (const m of fleet.members)
    if (!m.alive) items.push(el('li', { class: 'bad', 'data-testid': 'alert' }, `${m.role} ${m.instance} gone (${fmt.ago(memberAge(m))})`));
  $('alerts').replaceChildren(...(items.length ? items : [el('li', { class: 'ok' }, 'none')]));
}

function alertGroup(g) {
  const count = fmt.plural(g.shards.length, 'shard');
  const words = g.why === 'server_down' ? `${g.server} down: ${count}` : `${g.server}: ${ALERT_WORDS[g.why]}: ${count}`;
  const details = el('details', { 'data-testid': 'alert', 'data-server': g.server, 'data-reason': g.why, 'data-count': g.shards.length,
    class: g.why === 'unknown' ? 'warn' : 'bad', on: { toggle: () => {
      if (details.open) state.openAlerts.add(g.key);
      else state.openAlerts.delete(g.key);
      fillAlert(details, g);
    } } }, el('summary', {}, words));
  if (state.openAlerts.has(g.key)) {
    details.open = true;
    fillAlert(details, g);
  }
  return el('li', {}, details);
}

// An open group's shards, as links (made only when opened: a group may hold thousands).
function fillAlert(details, g) {
  details.querySelector('.alert-shards')?.remove();
  if (!details.open) return;
  const shards = g.shards.map((n) => el('button', { type: 'button', class: 'linkish', 'data-testid': 'alert-shard', 'data-shard': n,
    on: { click: () => selectShard(n) } }, String(n)));
  details.append(el('div', { class: 'alert-shards' },
    el('button', { type: 'button', class: 'act', 'data-testid': 'alert-to-table', on: { click: () => {
      Object.assign(state.table, { server: g.server, state: '', reason: g.why === 'unknown' ? '' : g.why, search: '', shown: TABLE_PAGE });
      if (g.why === 'unknown') state.table.state = 'unknown';
      syncFilters();
      renderTable();
      $('shard-table').scrollIntoView({ block: 'nearest' });
    } } }, 'list them in the table'), ' ', shards));
}

// One block per server: its summary and a cell per shard. Cells are made once and then
// only updated, so 4,096 shards redraw cheaply every poll.
function renderServers() {
  const box = $('servers');
  const byServer = new Map(state.servers.map((sv) => [sv.name, []]));
  for (const s of state.shards) byServer.get(serverOf(s))?.push(s);
  for (const sv of state.servers) {
    let block = document.getElementById('server-' + sv.name);
    if (!block) {
      const grid = el('div', { class: 'grid', tabindex: '0', role: 'grid', 'data-testid': 'grid',
        'aria-label': `shards ${sv.first_shard} to ${sv.last_shard} of ${sv.name}: arrow keys move, Escape closes`,
        on: { keydown: (ev) => gridKey(ev, grid, sv) } });
      for (let n = sv.first_shard; n <= sv.last_shard; n++) {
        grid.append(el('span', { class: 'cell s-unknown', 'data-testid': 'shard-cell', 'data-shard': n, 'data-state': 'unknown',
          id: 'cell-' + n, on: { click: () => selectShard(n) } }));
      }
      block = el('div', { class: 'server', id: 'server-' + sv.name, 'data-testid': 'server', 'data-server': sv.name },
        el('h3', {}, sv.name, el('span', { class: 'down hidden', id: 'down-' + sv.name, 'data-testid': 'server-down' }),
          el('span', { class: 'hint', id: 'sum-' + sv.name })), grid);
      box.append(block);
    }
    let rows = 0, rowsKnown = false, errors = 0, down = 0, reported = 0;
    const byState = {};
    for (const s of byServer.get(sv.name)) {
      const st = shardState(s);
      const cell = document.getElementById('cell-' + s.shard);
      if (!cell) continue;
      const cls = 'cell s-' + st + (state.selected === s.shard ? ' selected' : '');
      if (cell.className !== cls) cell.className = cls;
      cell.dataset.state = st;
      cell.style.setProperty('--lag', st === 'unknown' ? '0%' : lagShade(s.consumer && s.consumer.lag));
      cell.title = `shard ${s.shard} (${s.database}): ${st}, lag ${fmt.n(s.consumer && s.consumer.lag)}`;
      const r = rowsPerSecond(s);
      if (r !== null) { rows += r; rowsKnown = true; }
      errors += errorCount(s);
      if (st !== 'unknown') reported++;
      if (alertReason(s) === 'server_down') down++;
      byState[st] = (byState[st] || 0) + 1;
    }
    const count = byServer.get(sv.name).length;
    const states = STATES.filter((k) => byState[k]).map((k) => `${byState[k]} ${k}`).join(', ');
    // the server's own word: down when every shard that reports finds it down
    const downNote = $('down-' + sv.name);
    const isDown = down > 0 && down === reported;
    downNote.textContent = isDown ? 'server down' : down ? `${fmt.plural(down, 'shard')} find the server down` : '';
    downNote.classList.toggle('hidden', !down);
    block.classList.toggle('is-down', isDown);
    $('sum-' + sv.name).textContent =
      `${count} shards (${states}) · ${rowsKnown ? fmt.n(Math.round(rows)) : '-'} ${rowsLabel()} · ${errors} recent errors` +
      (state.budgets.has(sv.name) ? ' · ' + budgetText(state.budgets.get(sv.name)) : '');
  }
}

// A server's budget in words: "budget 400 stmt/s, no row budget" or "no server budget".
function budgetText(b) {
  if (!b || (!b.rate && !b.row_rate)) return 'no server budget';
  return `budget ${b.rate ? fmt.n(b.rate) + ' stmt/s' : 'no statement budget'}, ${b.row_rate ? fmt.n(b.row_rate) + ' rows/s' : 'no row budget'}`;
}

// ---- the shard table ----------------------------------------------------------------

// The table's columns: header, the value sorted by (numbers: largest first at the first
// click), and the cell.
const COLUMNS = [
  { key: 'shard', head: 'shard', value: (s) => s.shard, asc: true, cell: (s) => String(s.shard) },
  { key: 'server', head: 'server', value: (s) => serverOf(s), asc: true, cell: (s) => serverOf(s) || '-' },
  { key: 'state', head: 'state', value: (s) => STATES.length - STATES.indexOf(shardState(s)),
    cell: (s) => stateText(s) },
  { key: 'lag', head: 'lag (msgs)', value: (s) => (s.consumer ? s.consumer.lag || 0 : -1), num: true,
    cell: (s) => fmt.n(s.consumer && s.consumer.lag) },
  { key: 'oldest', head: 'oldest unapplied', value: (s) => oldestAge(s), num: true,
    cell: (s) => (oldestAge(s) ? fmt.age(oldestAge(s)) : '-') },
  { key: 'rows', head: () => rowsLabel(), value: (s) => rowsPerSecond(s) ?? -1, num: true,
    cell: (s) => (rowsPerSecond(s) === null ? '-' : fmt.n(Math.round(rowsPerSecond(s)))) },
  { key: 'rate', head: 'cap, stmt/s', value: (s) => (s.effective_rate === 0 ? Infinity : s.effective_rate ?? -1), num: true,
    cell: (s) => (s.effective_rate === 0 ? 'unlimited' : fmt.n(s.effective_rate)) },
  { key: 'errors', head: 'errors', value: (s) => errorCount(s) * 1e13 + (s.consumer?.last_error?.at_ms || 0), num: true,
    cell: (s) => String(errorCount(s)) },
];

function stateText(s) {
  const st = shardState(s);
  const reasons = (s.consumer && s.consumer.reasons) || [];
  return el('span', {}, el('span', { class: 'cell s-' + st, 'aria-hidden': 'true' }), ' ', st,
    reasons.length ? el('span', { class: 'hint' }, ' ' + reasons.join(', ')) : null);
}

function tableMatches(s) {
  const t = state.table;
  if (t.server && serverOf(s) !== t.server) return false;
  if (t.state && shardState(s) !== t.state) return false;
  if (t.reason) {
    const reasons = (s.consumer && s.consumer.reasons) || [];
    if (t.reason === '(none)' ? reasons.length : !reasons.includes(t.reason)) return false;
  }
  const q = t.search.trim().toLowerCase();
  if (q) {
    if (/^\d+$/.test(q)) return s.shard === Number(q) || (s.database || '').endsWith(q.padStart(5, '0'));
    if (/^\d+\s*-\s*\d+$/.test(q)) {
      const [a, b] = q.split('-').map(Number);
      return s.shard >= a && s.shard <= b;
    }
    return (s.database || '').toLowerCase().includes(q);
  }
  return true;
}

function renderTable() {
  const t = state.table;
  const col = COLUMNS.find((c) => c.key === t.sort) || COLUMNS[3];
  const matching = state.shards.filter(tableMatches);
  const dir = t.desc ? -1 : 1;
  const key = new Map(matching.map((s) => [s, col.value(s)]));
  matching.sort((a, b) => {
    const x = key.get(a), y = key.get(b);
    return dir * (typeof x === 'string' ? x.localeCompare(y) : x - y) || a.shard - b.shard;
  });
  const shown = matching.slice(0, t.shown);
  const head = el('tr', {}, COLUMNS.map((c) => el('th', { 'aria-sort': c.key === t.sort ? (t.desc ? 'descending' : 'ascending') : 'none' },
    el('button', { type: 'button', class: 'sort' + (c.key === t.sort ? ' on' : ''), 'data-testid': 'table-sort', 'data-key': c.key,
      on: { click: () => sortBy(c) } }, typeof c.head === 'function' ? c.head() : c.head,
      c.key === t.sort ? (t.desc ? ' ▼' : ' ▲') : ''))));
  const rows = shown.map((s) => el('tr', { 'data-testid': 'table-row', 'data-shard': s.shard,
    class: state.selected === s.shard ? 'selected' : '', on: { click: () => selectShard(s.shard) } },
  COLUMNS.map((c) => el('td', { class: c.num ? 'num' : '' }, c.cell(s)))));
  $('shard-table').replaceChildren(el('thead', {}, head), el('tbody', {}, rows));
  const order = `by ${typeof col.head === 'function' ? col.head() : col.head}, ${t.desc ? 'largest' : 'smallest'} first`;
  $('table-count').replaceChildren(
    el('span', { 'data-testid': 'table-count', 'data-matching': matching.length },
      `${shown.length < matching.length ? 'top ' + fmt.n(shown.length) + ' of ' : ''}${fmt.plural(matching.length, 'shard')}` +
      `${matching.length < state.shards.length ? ' matching (of ' + fmt.n(state.shards.length) + ')' : ''}, ${order}`),
    shown.length < matching.length ? el('button', { type: 'button', class: 'act', 'data-testid': 'table-more',
      on: { click: () => { t.shown += TABLE_PAGE; renderTable(); } } }, `${TABLE_PAGE} more`) : '');
}

function sortBy(c) {
  const t = state.table;
  if (t.sort === c.key) t.desc = !t.desc;
  else Object.assign(t, { sort: c.key, desc: !c.asc });
  renderTable();
}

// The filters' choices follow the fleet (servers) and the data (reasons seen).
function renderFilters() {
  const fill = (select, values, all) => {
    const want = [''].concat(values);
    const have = [...select.options].map((o) => o.value);
    if (want.join('\n') === have.join('\n')) return;
    select.replaceChildren(...want.map((v) => el('option', { value: v }, v || all)));
  };
  fill($('f-server'), state.servers.map((s) => s.name), 'every server');
  fill($('f-state'), STATES, 'every state');
  const reasons = new Set();
  for (const s of state.shards) for (const r of (s.consumer && s.consumer.reasons) || []) reasons.add(r);
  if (state.table.reason) reasons.add(state.table.reason);
  fill($('f-reason'), [...reasons].sort().concat('(none)'), 'any reason');
  syncFilters();
}

function syncFilters() {
  $('f-server').value = state.table.server;
  $('f-state').value = state.table.state;
  $('f-reason').value = state.table.reason;
  if ($('f-search').value !== state.table.search) $('f-search').value = state.table.search;
}

function wireFilters() {
  const on = (id, key, ev = 'change') => $(id).addEventListener(ev, () => {
    state.table[key] = $(id).value;
    state.table.shown = TABLE_PAGE;
    renderTable();
  });
  on('f-server', 'server');
  on('f-state', 'state');
  on('f-reason', 'reason');
  on('f-search', 'search', 'input');
}

// ---- shard view -------------------------------------------------------------------

// The grid from the keyboard: arrows move the open shard within the server, Home and End
// go to its first and last, Escape closes the shard.
function gridKey(ev, grid, sv) {
  const cols = Math.max(1, Math.floor((grid.clientWidth + 1) / 12)); // 11px cells, 1px gap
  const cur = state.selected !== null && state.selected >= sv.first_shard && state.selected <= sv.last_shard ? state.selected : null;
  const step = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: cols, ArrowUp: -cols }[ev.key];
  let n;
  if (step !== undefined) n = cur === null ? sv.first_shard : cur + step;
  else if (ev.key === 'Home') n = sv.first_shard;
  else if (ev.key === 'End') n = sv.last_shard;
  else if (ev.key === 'Enter' || ev.key === ' ') n = cur === null ? sv.first_shard : cur;
  else if (ev.key === 'Escape') n = null;
  else return;
  ev.preventDefault();
  if (n === null) return closeShard();
  selectShard(Math.min(sv.last_shard, Math.max(sv.first_shard, n)));
}

function closeShard() {
  state.selected = null;
  remember();
  renderShard();
  renderServers();
  renderTable();
}

function selectShard(n) {
  if (state.view !== 'fleet') showView('fleet');
  state.selected = n;
  remember();
  loadDetail(n).then(() => { if (state.selected === n) renderShard(); });
  renderShard();
  renderServers();
  renderTable();
  if (window.matchMedia('(max-width: 720px)').matches) $('shard').scrollIntoView({ block: 'start' });
}

// The open shard in full: GET /v1/shards?shard=N (its audit, errors, dead letters, lanes,
// budgets), read again every poll while open (a 304 when nothing changed).
async function loadDetail(n) {
  if (state.full) {
    state.detail = { shard: n, s: state.shards.find((x) => x.shard === n), at: state.shardsAt };
    return;
  }
  const path = `/v1/shards?shard=${n}`;
  for (const p of polled.keys()) if (p.startsWith('/v1/shards?shard=') && p !== path) polled.delete(p);
  try {
    const read = await poll_get(path);
    if (read.changed) {
      for (const s of read.data.shards || []) summarize(s.consumer, read.data.now_ms || read.at + state.skew);
      takeBudgets(read.data);
    }
    state.detail = { shard: n, s: (read.data.shards || []).find((x) => x.shard === n), at: read.at };
  } catch (e) {
    state.detail = { shard: n, error: e.message };
  }
}

// Servers' budgets: in GET /v1/shards (either view, so every poll), for admins.
function takeBudgets(body) {
  if ((body.servers || []).some((v) => 'budget' in v)) state.budgets = new Map(body.servers.map((v) => [v.name, v.budget]));
}

// The view and the open shard live in the address (#shard=12, #jobs): a reload or a link
// opens the same.
function remember() {
  const hash = state.view === 'jobs' ? '#jobs' : state.selected !== null ? '#shard=' + state.selected : '';
  if (location.hash !== hash) history.replaceState(null, '', hash || location.pathname + location.search);
}

// The open shard: in full once GET /v1/shards?shard=N has answered, from the summary until then.
function renderShard() {
  const box = $('shard');
  const d = state.detail && state.detail.shard === state.selected ? state.detail : null;
  const s = (d && d.s) || state.shards.find((x) => x.shard === state.selected);
  if (state.selected === null || !s) return box.classList.add('hidden');
  box.classList.remove('hidden');
  const c = s.consumer || {};
  const th = c.throttle;
  const why = [];
  if (s.operator_rate !== null && s.operator_rate !== undefined) why.push(`set by ${s.changed_by || '?'}`);
  if (s.pinned) why.push('pinned');
  if (th && th.throttled) why.push('throttle: ' + th.reason);
  const oldest = oldestAge(s);
  const rows = rowsPerSecond(s);
  const server = serverOf(s);
  const dl = el('dl', {},
    el('dt', {}, 'state'), el('dd', { 'data-testid': 'shard-state' }, stateText(s)),
    el('dt', {}, 'not running because'), el('dd', { 'data-testid': 'shard-reasons' }, (c.reasons || []).join(', ') || '-'),
    el('dt', {}, 'rate'), el('dd', { 'data-testid': 'shard-rate' },
      `configured ${fmt.rate(s.configured_rate)}, effective ${fmt.rate(s.effective_rate)}` + (why.length ? ' (' + why.join('; ') + ')' : '')),
    el('dt', {}, 'row rate'), el('dd', {}, `configured ${fmt.rate(s.configured_row_rate)}, effective ${fmt.rate(s.effective_row_rate)}`),
    el('dt', {}, 'applied'), el('dd', { 'data-testid': 'shard-throughput' },
      rows === null ? 'rows/s not reported by this proxy' : `${fmt.n(Math.round(rows))} ${rowsLabel()}`),
    el('dt', {}, 'lag'), el('dd', {}, `${fmt.n(c.lag)} messages` + (oldest ? `, oldest unapplied ${fmt.age(oldest)} old` : '')),
    el('dt', {}, 'paused'), el('dd', { 'data-testid': 'pause-reason' },
      !s.paused ? 'no' : !('changed_by' in s) ? 'yes' /* the summary's: who and why come with the shard's own reply */
        : `yes, by ${s.changed_by || '?'}: ${s.reason || '(no reason)'}`),
    el('dt', {}, 'consumer'), el('dd', {}, c.age_ms === undefined ? 'none reported' : `${c.instance || 'reported'} (${fmt.ago(statusAge(c))})`),
    el('dt', {}, 'applied / failed'), el('dd', {}, `${fmt.n(c.rows_applied)} / ${fmt.n(c.rows_failed)} rows`),
    el('dt', {}, 'statement latency'), el('dd', { 'data-testid': 'shard-latency' }, c.statement_p99_ms
      ? `p99 ${fmt.ms(c.statement_p99_ms)}, median ${fmt.ms(c.statement_p50_ms)} (last 128 batches)` : '-'),
    el('dt', {}, 'dead letters'), el('dd', { 'data-testid': 'shard-dead-letters' }, fmt.n(c.dead_letters)),
    server && state.budgets.has(server) ? el('dt', {}, 'server budget') : null,
    server && state.budgets.has(server) ? el('dd', { 'data-testid': 'server-budget' }, budgetText(state.budgets.get(server)) +
      (state.budgets.get(server) ? ` (set by ${state.budgets.get(server).changed_by || '?'}: ${state.budgets.get(server).reason || 'no reason'})` : '')) : null,
  );
  // the latest batches with refused ops: each job's failures have every op with its reason
  const dead = (c.recent_dead_letters || []).map((d) => el('li', { 'data-testid': 'dead-letter' },
    `${fmt.time(d.at_ms)} ${fmt.n(d.ops)} op${d.ops === 1 ? '' : 's'} of job `,
    el('a', { class: 'link', href: '#job=' + d.job_id, on: { click: (ev) => { ev.preventDefault(); showView('jobs'); showFailures(d.job_id); } } }, d.job_id.slice(0, 12)),
    `: ${d.error_code ? 'MySQL error ' + d.error_code : 'refused'}${d.reason ? ' (' + d.reason + ')' : ''}`));
  const lanes = (c.lanes || []).map((l) => el('tr', {}, el('td', {}, l.lane), el('td', {}, 'weight ' + l.weight),
    el('td', {}, 'lag ' + fmt.n(l.lag)), el('td', {}, fmt.n(l.statements) + ' statements')));
  const errors = (c.recent_errors || []).map((e) => el('li', {}, `${fmt.time(e.at_ms)} ${e.kind}: ${e.message}`));
  const audit = (s.history || []).map((h) => el('tr', { 'data-testid': 'history-row' },
    el('td', {}, fmt.time(h.at_ms)), el('td', {}, h.action), el('td', {}, h.by), el('td', {}, h.reason || ''),
    el('td', {}, h.setting || '')));
  box.replaceChildren(...[
    el('h2', { class: 'title' }, `shard ${s.shard} · ${s.database}${server ? ' · ' + server : ''}`,
      el('button', { class: 'act', type: 'button', 'aria-label': 'close the shard', on: { click: closeShard } }, '×')),
    dl,
    historyOf(s.shard),
    lanes.length ? el('div', {}, el('h2', {}, 'lanes'), el('table', {}, lanes)) : null,
    el('h2', {}, 'recent errors'), errors.length ? el('ul', {}, errors) : el('div', { class: 'hint' }, 'none'),
    el('h2', {}, 'recent dead letters'), dead.length ? el('ul', {}, dead) : el('div', { class: 'hint' }, 'none'),
    el('h2', {}, 'changes (audit)'), audit.length ? el('div', { class: 'scroll' }, el('table', {}, audit)) : el('div', { class: 'hint' }, 'none'),
    state.admin ? controlsOf(s) : null].filter(Boolean));
}

// ---- a shard's history (GET /v1/shards/{n}/history: the platform's, not this tab's) -----

// The history box is made once per shard opened and read again every step (10 s), so a
// poll neither wipes nor refetches it.
function historyOf(n) {
  const h = state.history;
  if (h.shard !== n || !h.box) {
    Object.assign(state.history, { shard: n, at: 0, step: 10000,
      box: el('div', { class: 'history', 'data-testid': 'history' }, el('h2', {}, 'last hour'), el('div', { class: 'hint' }, 'reading…')) });
  }
  if (Date.now() - state.history.at >= state.history.step) loadHistory(n);
  return state.history.box;
}

async function loadHistory(n) {
  const h = state.history;
  h.at = Date.now();
  let data;
  const path = `/v1/shards/${n}/history`;
  for (const p of polled.keys()) if (p.endsWith('/history') && p !== path) polled.delete(p);
  try {
    data = (await poll_get(path)).data;
  } catch (e) {
    if (h.shard !== n) return;
    // an older proxy has no such endpoint (404, or 405 where only POSTs live under the shard):
    // asked again a minute later, not every step
    const absent = e.status === 404 || e.status === 405;
    if (absent) h.step = 60000;
    h.box.replaceChildren(el('h2', {}, 'last hour'), el('div', { class: 'hint', 'data-testid': 'history-missing' },
      absent ? `This proxy keeps no history of the shard (GET /v1/shards/${n}/history: ${e.status}; an older proxy).`
        : 'history not read: ' + e.message));
    return;
  }
  if (h.shard !== n) return;
  h.step = Math.max(5000, (data.step_s || 10) * 1000);
  drawHistory(h.box, data);
}

const EVENT_MARK = { pause: 'P', resume: 'R', rate: 'r', alert: '!', alert_resolved: '✓' };
const EVENT_WORDS = { pause: 'paused', resume: 'resumed', rate: 'rate changed', alert: 'alert', alert_resolved: 'alert resolved' };

function drawHistory(box, data) {
  const points = data.points || [];
  const events = data.events || [];
  const to = points.length ? Math.max(points[points.length - 1].at_ms, proxyNow() - 1000) : proxyNow();
  const from = to - (data.window_s || 3600) * 1000;
  const step = (data.step_s || 10) * 1000;
  const last = points[points.length - 1];
  const window = Math.round((data.window_s || 3600) / 60);
  const caption = (key, unit, digits) => {
    const vals = points.map((p) => p[key]).filter((v) => typeof v === 'number');
    if (!vals.length) return 'no data';
    const now = last && typeof last[key] === 'number' ? last[key] : null;
    const round = (v) => fmt.n(digits ? Math.round(v) : v);
    return `now ${now === null ? '-' : round(now)} ${unit} · max ${round(Math.max(...vals))} · mean ${round(vals.reduce((a, b) => a + b, 0) / vals.length)}`;
  };
  const eventRows = events.slice().reverse().map((e) => el('tr', { 'data-testid': 'history-event', 'data-kind': e.kind },
    el('td', {}, fmt.clock(e.at_ms)), el('td', {}, el('span', { class: 'mark mark-' + e.kind }, EVENT_MARK[e.kind] || '•'), ' ',
      EVENT_WORDS[e.kind] || e.kind), el('td', {}, e.by || ''), el('td', {}, e.detail || '')));
  // a point's oldest_unapplied_ms is an age (GET /v1/shards' is a time)
  const oldest = last && last.oldest_unapplied_ms ? `, oldest unapplied ${fmt.age(last.oldest_unapplied_ms)} old` : '';
  box.replaceChildren(
    el('h2', {}, `last ${window} min`, el('span', { class: 'hint' }, ` (every ${data.step_s || 10} s, kept by the platform)`)),
    el('div', { class: 'chart-caption' }, 'lag, messages: ', el('span', { 'data-testid': 'history-value', 'data-series': 'lag' }, caption('lag', 'msgs', true) + oldest)),
    chart(points, 'lag', from, to, step, events),
    el('div', { class: 'chart-caption' }, `applied, rows/s over each ${data.step_s || 10} s: `, el('span', { 'data-testid': 'history-value', 'data-series': 'rows' }, caption('rows_per_s', 'rows/s', true))),
    chart(points, 'rows_per_s', from, to, step, events),
    el('div', { class: 'hint' }, 'shaded: paused · P pause, R resume, r rate change, ! alert, ✓ alert resolved'),
    eventRows.length ? el('div', { class: 'scroll' }, el('table', { class: 'events' }, eventRows)) : el('div', { class: 'hint' }, 'no pause, rate change or alert in the window'));
}

// A line over time with both axes, its values, shaded pauses and a marker per event.
function chart(points, key, from, to, step, events) {
  const W = 400, H = 120, L = 46, R = 8, T = 12, B = 18;
  const vals = points.map((p) => p[key]).filter((v) => typeof v === 'number');
  const top = niceMax(Math.max(1, ...vals));
  const x = (t) => L + ((t - from) / (to - from)) * (W - L - R);
  const y = (v) => T + (1 - v / top) * (H - T - B);
  const svg = svgEl('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'data-testid': 'history-chart', 'data-series': key,
    'aria-label': `${key} over the last ${Math.round((to - from) / 60000)} minutes, at most ${top}` });
  // paused stretches, shaded
  for (let i = 0; i < points.length; i++) {
    if (!points[i].paused) continue;
    let j = i;
    while (j + 1 < points.length && points[j + 1].paused) j++;
    svg.append(svgEl('rect', { class: 'paused', x: x(points[i].at_ms), y: T, width: Math.max(1, x(points[j].at_ms + step) - x(points[i].at_ms)), height: H - T - B }));
    i = j;
  }
  // axes: three values up the left, a time every quarter of the window along the bottom
  for (const v of [0, top / 2, top]) {
    svg.append(svgEl('line', { class: 'gridline', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(svgEl('text', { class: 'axis', x: L - 4, y: y(v) + 3, 'text-anchor': 'end' }, shortNumber(v)));
  }
  for (let i = 0; i <= 4; i++) {
    const t = from + ((to - from) * i) / 4;
    svg.append(svgEl('text', { class: 'axis', x: x(t), y: H - 4, 'text-anchor': i === 0 ? 'start' : i === 4 ? 'end' : 'middle' }, fmt.hm(t)));
  }
  svg.append(svgEl('line', { class: 'axisline', x1: L, x2: L, y1: T, y2: H - B }));
  svg.append(svgEl('line', { class: 'axisline', x1: L, x2: W - R, y1: H - B, y2: H - B }));
  // the line, broken where a point is missing (no consumer reported)
  let run = [];
  let lines = 0;
  const flush = () => {
    if (run.length) svg.append(svgEl('polyline', { class: 'series', 'data-testid': 'history-line', points: run.join(' ') }));
    if (run.length === 1) { // a lone point (a fresh proxy, a consumer back): a dot, a line of one draws nothing
      const [cx, cy] = run[0].split(',');
      svg.append(svgEl('circle', { class: 'dot', cx, cy, r: 2 }));
    }
    lines += run.length;
    run = [];
  };
  let prev = null;
  for (const p of points) {
    if (typeof p[key] !== 'number' || p.at_ms < from) { flush(); prev = null; continue; }
    if (prev !== null && p.at_ms - prev > 2.5 * step) flush();
    run.push(`${x(p.at_ms).toFixed(1)},${y(p[key]).toFixed(1)}`);
    prev = p.at_ms;
  }
  flush();
  svg.dataset.points = lines;
  for (const e of events) {
    if (e.at_ms < from || e.at_ms > to + step) continue;
    const ex = Math.min(W - R, x(e.at_ms));
    svg.append(svgEl('g', { class: 'event ev-' + e.kind, 'data-testid': 'history-marker', 'data-kind': e.kind },
      svgEl('title', {}, `${fmt.clock(e.at_ms)} ${EVENT_WORDS[e.kind] || e.kind}${e.by ? ' by ' + e.by : ''}${e.detail ? ': ' + e.detail : ''}`),
      svgEl('line', { x1: ex, x2: ex, y1: T, y2: H - B }),
      svgEl('text', { x: ex, y: T - 2, 'text-anchor': 'middle' }, EVENT_MARK[e.kind] || '•')));
  }
  return svg;
}

function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v);
}

function shortNumber(v) {
  return v >= 1e6 ? +(v / 1e6).toFixed(1) + 'M' : v >= 1e4 ? +(v / 1e3).toFixed(1) + 'k' : String(+v.toFixed(1));
}

// ---- controls ----------------------------------------------------------------------

// The controls are made once per shard opened, so a poll does not wipe what is being typed.
let controls = { shard: null, node: null };
function controlsOf(s) {
  if (controls.shard !== s.shard || !controls.node) controls = { shard: s.shard, node: makeControls(s) };
  return controls.node;
}

const num = (input) => (input.value === '' ? null : Number(input.value));
const post = (path, body) => api(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

// The shard's controls, then its server's, apart: each its own inputs, and a server's
// confirmation says how many shards it touches.
function makeControls(s) {
  const n = s.shard;
  const rate = el('input', { type: 'number', min: '0', step: 'any', placeholder: 'stmt/s', 'aria-label': `shard ${n}'s rate, statements per second`, 'data-testid': 'rate-input' });
  const rateWords = (v) => (v === null ? 'the configured one' : v + ' statements/s');
  const shardBox = el('fieldset', { class: 'controls', 'data-testid': 'shard-controls' }, el('legend', {}, `shard ${n}`),
    el('label', {}, 'rate ', rate),
    el('button', { class: 'act', type: 'button', 'data-testid': 'btn-rate', on: { click: () => {
      const v = num(rate);
      confirmThen(`Set shard ${n}'s rate to ${rateWords(v)}`, `shard ${n}'s rate is now ${rateWords(v)}`,
        (reason) => post(`/v1/shards/${n}/rate`, { rate: v, reason }));
    } } }, 'set rate'),
    el('button', { class: 'act', type: 'button', 'data-testid': 'btn-pause', on: { click: () => confirmThen(`Pause shard ${n}`, `shard ${n} paused`,
      (reason) => post(`/v1/shards/${n}/pause`, { reason })) } }, 'pause shard'),
    el('button', { class: 'act', type: 'button', 'data-testid': 'btn-resume', on: { click: () => confirmThen(`Resume shard ${n}`, `shard ${n} resumed`,
      (reason) => post(`/v1/shards/${n}/resume`, { reason })) } }, 'resume shard'));
  const server = serverOf(s);
  if (!server) return el('div', {}, shardBox);
  const sv = state.servers.find((v) => v.name === server);
  const count = sv ? sv.last_shard - sv.first_shard + 1 : state.shards.filter((x) => serverOf(x) === server).length;
  const shards = fmt.plural(count, 'shard');
  const srate = el('input', { type: 'number', min: '0', step: 'any', placeholder: 'stmt/s', 'aria-label': `rate of every shard of ${server}, statements per second`, 'data-testid': 'server-rate-input' });
  const b = state.budgets.get(server);
  const brate = el('input', { type: 'number', min: '0', step: 'any', placeholder: 'stmt/s', 'aria-label': 'server budget, statements per second',
    'data-testid': 'budget-rate-input', value: b && b.rate ? b.rate : null });
  const brows = el('input', { type: 'number', min: '0', step: 'any', placeholder: 'rows/s', 'aria-label': 'server budget, rows per second',
    'data-testid': 'budget-rows-input', value: b && b.row_rate ? b.row_rate : null });
  const serverBox = el('fieldset', { class: 'controls server-controls', 'data-testid': 'server-controls' },
    el('legend', {}, `server ${server} (all its ${shards})`),
    el('div', { class: 'row' }, el('label', {}, 'rate of each shard ', srate),
      el('button', { class: 'act', type: 'button', 'data-testid': 'btn-rate-server', on: { click: () => {
        const v = num(srate);
        confirmThen(`Set the rate of every shard of server ${server} (${shards}) to ${rateWords(v)}`,
          `the ${shards} of ${server} now run at ${rateWords(v)}`, (reason) => post(`/v1/servers/${server}/rate`, { rate: v, reason }));
      } } }, `set rate of ${shards}`)),
    el('div', { class: 'row' },
      el('button', { class: 'act', type: 'button', 'data-testid': 'btn-pause-server', on: { click: () => confirmThen(
        `Pause every shard of server ${server} (${shards})`, `the ${shards} of ${server} paused`, (reason) => post(`/v1/servers/${server}/pause`, { reason })) } },
      `pause ${shards}`),
      el('button', { class: 'act', type: 'button', 'data-testid': 'btn-resume-server', on: { click: () => confirmThen(
        `Resume every shard of server ${server} (${shards})`, `the ${shards} of ${server} resumed`, (reason) => post(`/v1/servers/${server}/resume`, { reason })) } },
      `resume ${shards}`)),
    el('div', { class: 'row' }, el('label', {}, 'budget ', brate), el('label', {}, ' ', brows),
      el('button', { class: 'act', type: 'button', 'data-testid': 'btn-budget', on: { click: () => {
        const body = { rate: num(brate), row_rate: num(brows) };
        const words = body.rate === null && body.row_rate === null ? 'no budget'
          : `${body.rate === null ? 'no statement budget' : body.rate + ' statements/s'} and ${body.row_rate === null ? 'no row budget' : body.row_rate + ' rows/s'}`;
        confirmThen(`Give server ${server} ${words}, shared by its ${shards}`, `server ${server} has ${words}`,
          (reason) => post(`/v1/servers/${server}/budget`, Object.assign({ reason }, body)));
      } } }, 'set budget')));
  return el('div', {}, shardBox, serverBox);
}

// Every change asks for a reason and a confirmation, then the page reads again at once. A
// success is confirmed; a failure stays on the page until dismissed.
function confirmThen(what, done, action) {
  const dialog = $('confirm');
  $('confirm-what').textContent = what + '?';
  $('reason').value = '';
  dialog.returnValue = '';
  dialog.onclose = async () => {
    if (dialog.returnValue !== 'ok') return;
    const reason = $('reason').value;
    try {
      await action(reason);
    } catch (e) {
      notify('error', `${what}: not done: ${e.message}`);
      return;
    }
    notify('ok', `Done: ${done} (reason: ${reason}).`);
    await poll();
  };
  dialog.showModal();
}

function notify(kind, text) {
  const note = el('div', { class: 'notice ' + kind, role: kind === 'error' ? 'alert' : 'status', 'data-testid': 'notice', 'data-kind': kind },
    el('span', {}, text),
    el('button', { type: 'button', class: 'act', 'aria-label': 'dismiss', 'data-testid': 'notice-dismiss', on: { click: () => note.remove() } }, 'dismiss'));
  $('notices').append(note);
  if (kind === 'ok') setTimeout(() => note.remove(), 15000);
}

// ---- jobs view --------------------------------------------------------------------

// The list's own numbers (GET /v1/jobs carries each job's counts, or `unknown`); an older
// proxy's list has none, and the job's status is read instead. A job not finished is
// read in full too, for its shards and why they wait.
function numbersOf(j) {
  if (j.unknown) return { unknown: j.unknown };
  if (typeof j.applied === 'number') return j;
  const d = state.jobDetail.get(j.job_id);
  return d || null;
}

async function loadJobs() {
  const list = (await poll_get('/v1/jobs?limit=50')).data;
  state.jobs = list.jobs;
  state.delayQueue = list.delay_queue || null;
  const now = Date.now();
  const want = state.jobs.filter((j) => {
    const known = numbersOf(j);
    return !(known && known.finished) || (state.openJobs.has(j.job_id) && !(state.jobDetail.get(j.job_id) || {}).shards);
  });
  let next = 0;
  const worker = async () => {
    while (next < want.length) {
      const j = want[next++];
      try {
        state.jobDetail.set(j.job_id, await api('/v1/jobs/' + j.job_id));
      } catch (e) {
        state.jobDetail.set(j.job_id, { unknown: e.message, failedRead: true });
      }
    }
  };
  await Promise.all([1, 2, 3, 4].map(worker)); // a few at a time
  for (const j of state.jobs) {
    const n = numbersOf(j);
    if (!n || n.unknown) continue;
    const list = state.jobSamples.get(j.job_id) || [];
    list.push({ t: now, done: doneOf(n) });
    while (list.length > 1 && now - list[0].t > 120000) list.shift();
    state.jobSamples.set(j.job_id, list);
  }
  const listed = new Set(state.jobs.map((j) => j.job_id));
  for (const id of state.jobDetail.keys()) if (!listed.has(id)) state.jobDetail.delete(id);
  for (const id of state.jobSamples.keys()) if (!listed.has(id)) state.jobSamples.delete(id);
}

// A job's (or a job's shard's) ops carried out: applied, failed or skipped by a cancel. The
// list says `cancelled_ops` (its `cancelled` is whether the job was cancelled); a status
// says `cancelled`, a count.
function cancelledOps(n) {
  return typeof n.cancelled_ops === 'number' ? n.cancelled_ops : typeof n.cancelled === 'number' ? n.cancelled : 0;
}

function doneOf(n) {
  return (n.applied || 0) + (n.failed || 0) + cancelledOps(n);
}

// The delay queue in one line: however many timers are held, they are one thing here.
function renderDelayQueue() {
  const q = state.delayQueue;
  if (!q || !q.held_jobs) {
    $('delay-queue').replaceChildren('Delay queue: no job held (scheduled or waiting for another).');
    return;
  }
  const next = q.next_due_ms ? `; the next due ${fmt.time(q.next_due_ms)}` : '';
  const due = q.due_now ? `; ${fmt.n(q.due_now)} due now` : '';
  const who = q.clients.slice(0, 5).map((c) => `${c.client || '(open)'} ${fmt.n(c.held_jobs)}`).join(', ');
  $('delay-queue').replaceChildren(el('span', { 'data-testid': 'delay-queue-held', 'data-held': q.held_jobs },
    `Delay queue: ${fmt.n(q.held_jobs)} jobs held (${fmt.n(q.held_ops)} ops)${due}${next}`), who ? ` — ${who}` : '');
}

function eta(j, n) {
  if (n.finished) return 'done';
  const list = state.jobSamples.get(j.job_id) || [];
  if (list.length < 2) return '-';
  const a = list[0], b = list[list.length - 1];
  if (b.t - a.t < 5000 || b.done <= a.done) return '-';
  return fmt.age(((n.submitted - b.done) * (b.t - a.t)) / (b.done - a.done));
}

function renderJobs() {
  renderDelayQueue();
  const rows = [];
  for (const j of state.jobs) {
    const n = numbersOf(j);
    const detail = state.jobDetail.get(j.job_id);
    const unknown = !n ? 'not read yet' : n.unknown || null;
    const done = n && !unknown ? doneOf(n) : 0;
    const pct = n && !unknown && n.submitted ? Math.floor((done * 100) / n.submitted) : n && !unknown ? 100 : 0;
    const finished = !!(n && n.finished);
    const schedule = [j.not_before_ms ? 'not before ' + fmt.time(j.not_before_ms) : null,
      j.after ? 'after ' + j.after.map((a) => a.slice(0, 8)).join(', ') : null,
      j.job && n && n.sealed === false ? 'its last part (not sealed)' : null,
      detail && detail.waiting ? detail.waiting : null].filter(Boolean).join('; ');
    const waits = !finished && detail && detail.shards ? jobWaits(detail) : null;
    const progress = unknown
      ? el('span', { class: 'warn', 'data-testid': 'job-progress', 'data-percent': '', title: unknown }, 'unknown: ' + unknown)
      : el('span', {}, el('span', { class: 'bar' + (n.failed ? ' failed' : '') }, progressFill(pct)), ' ',
        el('span', { 'data-testid': 'job-progress', 'data-percent': pct }, `${pct}% of ${fmt.n(n.submitted)}`),
        el('div', { class: 'hint', 'data-testid': 'job-numbers' }, `${fmt.n(n.applied)} applied · ${fmt.n(n.failed)} failed · ` +
          `${fmt.n(n.pending)} pending` + (cancelledOps(n) ? ` · ${fmt.n(cancelledOps(n))} cancelled` : '') + (n.lost ? ` · ${fmt.n(n.lost)} lost` : '')));
    const open = state.openJobs.has(j.job_id);
    const shardList = el('span', {}, ...j.shards.slice(0, 8).map((s) => el('button', { type: 'button', class: 'linkish', on: { click: () => selectShard(s) } }, String(s))),
      j.shards.length > 8 ? ` +${j.shards.length - 8}` : '',
      el('button', { type: 'button', class: 'act small', 'data-testid': 'job-expand', 'aria-expanded': open ? 'true' : 'false',
        on: { click: () => { if (open) state.openJobs.delete(j.job_id); else state.openJobs.add(j.job_id); renderJobs(); if (!open && !detail) poll(); } } },
      open ? 'hide shards' : 'per shard'));
    rows.push(el('tr', { 'data-testid': 'job-row', 'data-job': j.job_id, 'data-finished': finished ? 'true' : 'false' },
      el('td', { title: j.job_id }, (j.job || j.request_id || j.job_id.slice(0, 12)) + (j.cancelled ? ' (cancelled)' : '')),
      el('td', {}, j.client || '(open)'),
      el('td', {}, fmt.time(j.created_at_ms)),
      el('td', {}, progress),
      el('td', {}, unknown ? '-' : eta(j, n)),
      el('td', {}, n && !unknown && n.failed ? el('button', { type: 'button', class: 'linkish', on: { click: () => showFailures(j.job_id) } }, fmt.n(n.failed)) : unknown ? '-' : '0'),
      el('td', {}, schedule || (waits ? '' : '-'), waits),
      el('td', {}, shardList),
      el('td', {}, mayCancel(j) && !j.cancelled && !finished ? el('button', { class: 'act danger', type: 'button', 'data-testid': 'btn-cancel-job',
        on: { click: () => confirmThen(`Cancel job ${j.job || j.job_id}`, `job ${j.job || j.job_id} cancelled`,
          (reason) => api(`/v1/jobs/${j.job_id}?reason=${encodeURIComponent(reason)}`, { method: 'DELETE' })) } }, 'cancel') : '')));
    if (open) rows.push(el('tr', { class: 'job-shards' }, el('td', { colspan: 9 }, jobShards(detail))));
  }
  $('jobs').replaceChildren(...rows);
}

// Why the job's shards hold its ops back (GET /v1/jobs/{id}'s shards[].waits): a line per
// shard, the first few; a whole server paused is many shards with one reason.
function jobWaits(st) {
  const waiting = st.shards.filter((s) => s.waits);
  if (!waiting.length) return null;
  const shown = waiting.slice(0, 4).map((s) => el('div', { class: 'wait wait-' + s.waits.kind, 'data-testid': 'job-wait',
    'data-shard': s.shard, 'data-kind': s.waits.kind }, s.waits.detail));
  return el('div', {}, shown, waiting.length > 4 ? el('div', { class: 'hint' }, `+${waiting.length - 4} shards more`) : null);
}

// A job's progress on each shard: those that wait first, then the most pending.
function jobShards(st) {
  if (!st || !st.shards) return el('div', { class: 'hint' }, st && st.unknown ? 'unknown: ' + st.unknown : 'reading the job…');
  const order = st.shards.slice().sort((a, b) => (!!b.waits - !!a.waits) || (b.pending || 0) - (a.pending || 0) || a.shard - b.shard);
  const rows = order.slice(0, JOB_SHARDS_SHOWN).map((s) => {
    const done = doneOf(s);
    const pct = s.submitted ? Math.floor((done * 100) / s.submitted) : 100;
    return el('tr', { 'data-testid': 'job-shard', 'data-shard': s.shard, 'data-kind': s.waits ? s.waits.kind : '' },
      el('td', {}, el('button', { type: 'button', class: 'linkish', on: { click: () => selectShard(s.shard) } }, 'shard ' + s.shard)),
      el('td', {}, el('span', { class: 'bar small' + (s.failed ? ' failed' : '') }, progressFill(pct)), ` ${pct}%`),
      el('td', { class: 'num' }, `${fmt.n(done)} of ${fmt.n(s.submitted)}`),
      el('td', { class: 'num' }, `${fmt.n(s.pending)} pending`),
      el('td', {}, s.waits ? el('span', { class: 'wait wait-' + s.waits.kind }, `${s.waits.kind}: ${s.waits.detail}`)
        : s.error ? el('span', { class: 'bad' }, s.error) : s.pending ? 'applying at its rate' : 'done'));
  });
  return el('div', { class: 'scroll' }, el('table', { class: 'sub' }, rows),
    order.length > JOB_SHARDS_SHOWN ? el('div', { class: 'hint' }, `+${order.length - JOB_SHARDS_SHOWN} shards more, all done or applying`) : null);
}

// The job's owner (with the submit role) or an admin may cancel it, as DELETE /v1/jobs/{id} checks.
function mayCancel(j) {
  const me = state.me;
  return !!me && (me.admin || (me.roles.includes('submit') && (j.client || '(open)') === me.client));
}

function progressFill(pct) {
  const fill = el('span');
  fill.style.width = pct + '%';
  return fill;
}

// A job's failures, a page at a time (the cursor of GET /v1/jobs/{id}/failures).
async function showFailures(id, after) {
  const box = $('failures');
  box.classList.remove('hidden');
  const page = await api(`/v1/jobs/${id}/failures?limit=20` + (after ? '&after=' + encodeURIComponent(after) : ''));
  const rows = page.failures.map((f) => el('tr', {}, el('td', {}, 'shard ' + f.shard), el('td', {}, 'op ' + f.op_index),
    el('td', {}, f.id), el('td', {}, String(f.error_code)), el('td', {}, f.reason)));
  box.replaceChildren(el('h2', {}, 'failures of ' + id), el('div', { class: 'scroll' }, el('table', {}, rows)),
    page.next ? el('span', { class: 'link', on: { click: () => showFailures(id, page.next) } }, 'next page') : el('span', { class: 'hint' }, 'last page'));
}

// ---- the loop ---------------------------------------------------------------------

// While polls fail the page greys what it shows and says how old it is, every second.
function renderStale() {
  const f = state.failing;
  document.body.classList.toggle('stale', !!f);
  $('stale').classList.toggle('hidden', !f);
  if (!f) return;
  const now = Date.now();
  const from = state.lastGood ? `from ${fmt.clock(state.lastGood)}, ${fmt.age(now - state.lastGood)} old` : 'none read yet';
  $('stale').textContent = `${f.message}: no answer for ${fmt.age(now - f.since)}. The data shown is stale (${from}) and greyed.`;
}

function showView(view) {
  state.view = view;
  for (const t of document.querySelectorAll('.tab')) t.classList.toggle('active', t.dataset.view === view);
  $('view-fleet').classList.toggle('hidden', view !== 'fleet');
  $('view-jobs').classList.toggle('hidden', view !== 'jobs');
  $('shard').classList.toggle('hidden', view !== 'fleet' || state.selected === null);
  remember();
  if (view === 'jobs') poll();
}

let polling = false;
async function poll() {
  // a hidden tab does not poll: it reads again the moment it is shown
  if (polling || document.visibilityState === 'hidden') return;
  polling = true;
  try {
    const [fleetRead, shardsRead] = await Promise.all([poll_get('/v1/fleet'), poll_get('/v1/shards?view=summary')]);
    const fleet = fleetRead.data;
    const now = Date.now();
    state.fleetAt = fleetRead.at;
    if (fleet.now_ms) state.skew = fleet.now_ms - fleetRead.at;
    if (shardsRead.changed) {
      const body = shardsRead.data;
      const readAt = body.now_ms || shardsRead.at + state.skew;
      for (const s of body.shards) summarize(s.consumer, readAt);
      state.shards = body.shards;
      state.full = body.view !== 'summary'; // an older proxy: the full form, every shard's detail in it
      state.rateWindow = body.rate_window_s || null;
      takeBudgets(body);
    }
    state.shardsAt = shardsRead.at;
    if (state.selected !== null) await loadDetail(state.selected);
    state.servers = fleet.servers;
    state.serverOf = [];
    for (const sv of fleet.servers) for (let n = sv.first_shard; n <= sv.last_shard; n++) state.serverOf[n] = sv.name;
    renderKafka(fleet);
    renderMembers(fleet);
    renderAlerts(fleet);
    renderServers();
    renderFilters();
    renderTable();
    if (state.selected !== null) renderShard();
    if (state.view === 'jobs') {
      await loadJobs();
      renderJobs();
    }
    state.lastGood = now;
    state.failing = null;
    $('updated').textContent = 'updated ' + fmt.clock(now);
  } catch (e) {
    const message = e instanceof TypeError ? 'proxy unreachable' : e.message;
    state.failing = { since: state.failing ? state.failing.since : Date.now(), message };
  } finally {
    polling = false;
    renderStale();
  }
}

async function whoami() {
  try {
    const me = await api('/v1/whoami');
    state.admin = me.admin;
    state.me = me;
    $('who').textContent = me.client + (me.admin ? ' (admin)' : ' (' + me.roles.join(', ') + ')');
  } catch (e) { /* the token form is shown */ }
}

function start() {
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && state.selected !== null && !$('confirm').open) closeShard();
  });
  for (const t of document.querySelectorAll('.tab')) t.addEventListener('click', () => showView(t.dataset.view));
  $('token-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem('bw-token', $('token').value);
    $('token-form').classList.add('hidden');
    await whoami();
    await poll();
  });
  wireFilters();
  const fromAddress = () => {
    const m = /^#shard=(\d+)$/.exec(location.hash);
    if (m) selectShard(Number(m[1]));
    else if (location.hash === '#jobs') showView('jobs');
  };
  fromAddress();
  window.addEventListener('hashchange', fromAddress);
  document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'visible') poll(); });
  whoami().then(poll);
  setInterval(poll, POLL_MS);
  setInterval(() => { if (state.failing) renderStale(); }, 1000);
}

start();
