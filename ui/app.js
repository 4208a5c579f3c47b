// bulkwrite's page for SREs: reads the proxy's JSON API every few seconds and draws the
// fleet, every shard, and the latest jobs. Plain JavaScript, no dependency: the proxy
// serves these files from its own binary (docs/operations.md, "The page").

const POLL_MS = 3000;
const TREND_SAMPLES = 100; // 5 minutes of polls
const STALE_MS = 30000; // a consumer status older than this: unknown

const state = {
  view: 'fleet',
  admin: false,
  me: null, // GET /v1/whoami: {client, roles, admin}
  shards: [], // GET /v1/shards
  servers: [], // GET /v1/fleet
  budgets: new Map(), // server name -> its budget (GET /v1/shards' servers: admins only)
  samples: new Map(), // shard -> [{t, lag, rows}] for trends and rows/s
  selected: null, // shard number shown in the side panel
  jobs: [],
  delayQueue: null, // GET /v1/jobs' delay_queue: the held (scheduled, dependent) jobs as one thing
  jobDetail: new Map(), // job id -> {status, t, done} for progress and ETA
  lastGood: 0,
};

const $ = (id) => document.getElementById(id);

// One API call, with the token the user gave (a clients file asks for one).
async function api(path, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  const token = sessionStorage.getItem('bw-token');
  if (token) headers.Authorization = 'Bearer ' + token;
  const res = await fetch(path, Object.assign({}, opts, { headers }));
  if (res.status === 401) {
    $('token-form').classList.remove('hidden');
    throw new Error('a token is needed (401)');
  }
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || ('HTTP ' + res.status));
  return body;
}

// ---- elements --------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'on') Object.entries(v).forEach(([ev, fn]) => e.addEventListener(ev, fn));
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c !== undefined && c !== null) e.append(c);
  return e;
}

const fmt = {
  n: (x) => (x === undefined || x === null ? '-' : Number(x).toLocaleString('en')),
  rate: (x) => (x === 0 ? 'unlimited' : x === null || x === undefined ? '-' : Number(x).toLocaleString('en') + '/s'),
  time: (ms) => (ms ? new Date(ms).toISOString().replace('.000Z', 'Z') : '-'),
  ms: (x) => (x >= 100 ? Math.round(x) : x >= 1 ? x.toFixed(1) : x.toFixed(2)) + ' ms',
  ago: (ms) => (ms < 1500 ? 'now' : ms < 90000 ? Math.round(ms / 1000) + ' s ago' : Math.round(ms / 60000) + ' min ago'),
};

// ---- shard state ------------------------------------------------------------------

// The state a shard's cell shows, from what its consumer last reported.
function shardState(s) {
  const c = s.consumer;
  if (!c || c.age_ms > STALE_MS) return 'unknown';
  const reasons = c.reasons || [];
  if (c.unhealthy || reasons.some((r) => ['unhealthy', 'stopped', 'server_down', 'gap'].includes(r))) return 'unhealthy';
  if (s.paused || c.paused || reasons.includes('paused') || reasons.includes('throttle')) return 'paused';
  if (c.throttle && c.throttle.throttled) return 'throttled';
  return 'running';
}

// Lag as intensity: no lag is light, 100,000 messages and more is full colour.
function lagAlpha(lag) {
  return (0.35 + 0.65 * Math.min(1, Math.log10(1 + (lag || 0)) / 5)).toFixed(2);
}

function remember(s, now) {
  const c = s.consumer;
  if (!c) return;
  let list = state.samples.get(s.shard);
  if (!list) state.samples.set(s.shard, (list = []));
  list.push({ t: now, lag: c.lag || 0, rows: c.rows_applied || 0, statements: c.statements || 0 });
  if (list.length > TREND_SAMPLES) list.shift();
}

// Rows (or statements) per second over the last two samples (0 across a consumer change).
function rowsPerSecond(shard, what = 'rows') {
  const list = state.samples.get(shard) || [];
  if (list.length < 2) return 0;
  const a = list[list.length - 2], b = list[list.length - 1];
  return b[what] >= a[what] && b.t > a.t ? ((b[what] - a[what]) * 1000) / (b.t - a.t) : 0;
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
  box.append(el('table', {}, el('tr', {}, el('th', {}, 'topic'), el('th', {}, 'partitions × replicas'), el('th', {}, 'state')), rows));
}

function renderMembers(fleet) {
  // a member whose settings print differs from the others of its role is marked
  const counts = {};
  for (const m of fleet.members) counts[m.role + m.fingerprint] = (counts[m.role + m.fingerprint] || 0) + 1;
  const rows = fleet.members.map((m) => {
    const odd = !m.agrees || counts[m.role + m.fingerprint] < Math.max(...fleet.members.filter((x) => x.role === m.role).map((x) => counts[x.role + x.fingerprint]));
    return el('tr', { 'data-testid': 'member', 'data-role': m.role },
      el('td', {}, m.role), el('td', {}, m.instance),
      el('td', { class: m.alive ? 'ok' : 'bad' }, m.alive ? 'alive' : 'gone ' + fmt.ago(m.age_ms)),
      el('td', { class: 'mono' + (odd ? ' bad' : ''), title: 'fingerprint of its shared settings: ' + m.fingerprint },
        m.fingerprint.slice(0, 8) + (odd ? ' (differs)' : '')));
  });
  $('members').replaceChildren(el('table', {}, rows));
}

// What needs an SRE now: unhealthy shards, Kafka partitions out of sync, processes gone.
function renderAlerts(fleet) {
  const items = [];
  for (const s of state.shards) {
    const c = s.consumer;
    if (shardState(s) === 'unhealthy')
      items.push(`shard ${s.shard} (${s.server || s.database}): ${(c.reasons || []).join(', ') || 'unhealthy'}`);
  }
  for (const t of (fleet.kafka && fleet.kafka.topics) || [])
    if (t.under_replicated || t.offline) items.push(`${t.name}: ${t.under_replicated} under-replicated, ${t.offline} offline`);
  for (const m of fleet.members) if (!m.alive) items.push(`${m.role} ${m.instance} gone (${fmt.ago(m.age_ms)})`);
  $('alerts').replaceChildren(...(items.length ? items.slice(0, 50).map((t) => el('li', { class: 'bad', 'data-testid': 'alert' }, t))
    : [el('li', { class: 'ok' }, 'none')]));
}

// One block per server: its summary and a cell per shard. Cells are made once and then
// only updated, so 4,096 shards redraw cheaply every poll.
function renderServers() {
  const box = $('servers');
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
        el('h3', {}, sv.name, el('span', { class: 'hint', id: 'sum-' + sv.name })), grid);
      box.append(block);
    }
    let rows = 0, errors = 0, sick = 0, count = 0;
    const byState = {};
    for (const s of state.shards) {
      if (s.shard < sv.first_shard || s.shard > sv.last_shard) continue;
      const st = shardState(s);
      const cell = document.getElementById('cell-' + s.shard);
      cell.className = 'cell s-' + st + (state.selected === s.shard ? ' selected' : '');
      cell.dataset.state = st;
      cell.style.setProperty('--a', st === 'unknown' ? 0.6 : lagAlpha(s.consumer && s.consumer.lag));
      cell.title = `shard ${s.shard}: ${st}, lag ${fmt.n(s.consumer && s.consumer.lag)}`;
      rows += rowsPerSecond(s.shard);
      errors += (s.consumer && s.consumer.recent_errors ? s.consumer.recent_errors.length : 0);
      sick += st === 'unhealthy';
      byState[st] = (byState[st] || 0) + 1;
      count++;
    }
    const states = Object.entries(byState).map(([k, v]) => `${v} ${k}`).join(', ');
    document.getElementById('sum-' + sv.name).textContent =
      `${count} shards (${states}) · ${fmt.n(Math.round(rows))} rows/s · ${errors} recent errors · ${sick ? sick + ' unhealthy' : 'healthy'}` +
      (state.budgets.has(sv.name) ? ' · ' + budgetText(state.budgets.get(sv.name)) : '');
  }
}

// A server's budget in words: "budget 400 stmt/s, no row budget" or "no server budget".
function budgetText(b) {
  if (!b || (!b.rate && !b.row_rate)) return 'no server budget';
  return `budget ${b.rate ? fmt.n(b.rate) + ' stmt/s' : 'no statement budget'}, ${b.row_rate ? fmt.n(b.row_rate) + ' rows/s' : 'no row budget'}`;
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
  renderShard();
  renderServers();
}

function selectShard(n) {
  state.selected = n;
  renderShard();
  renderServers();
}

function trend(shard) {
  const list = state.samples.get(shard) || [];
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('class', 'trend');
  svg.setAttribute('viewBox', '0 0 300 60');
  svg.setAttribute('preserveAspectRatio', 'none');
  if (list.length > 1) {
    const max = Math.max(1, ...list.map((p) => p.lag));
    const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
    line.setAttribute('points', list.map((p, i) => `${(i * 300) / (TREND_SAMPLES - 1)},${58 - (p.lag / max) * 56}`).join(' '));
    svg.append(line);
  }
  return svg;
}

function renderShard() {
  const box = $('shard');
  const s = state.shards.find((x) => x.shard === state.selected);
  if (!s) return box.classList.add('hidden');
  box.classList.remove('hidden');
  const c = s.consumer || {};
  const th = c.throttle;
  const why = [];
  if (s.operator_rate !== null && s.operator_rate !== undefined) why.push(`set by ${s.changed_by || '?'}`);
  if (s.pinned) why.push('pinned');
  if (th && th.throttled) why.push('throttle: ' + th.reason);
  const oldest = c.oldest_unapplied_ms ? Date.now() - c.oldest_unapplied_ms : null;
  const dl = el('dl', {},
    el('dt', {}, 'state'), el('dd', { 'data-testid': 'shard-state' }, shardState(s)),
    el('dt', {}, 'not running because'), el('dd', { 'data-testid': 'shard-reasons' }, (c.reasons || []).join(', ') || '-'),
    el('dt', {}, 'rate'), el('dd', { 'data-testid': 'shard-rate' },
      `configured ${fmt.rate(s.configured_rate)}, effective ${fmt.rate(s.effective_rate)}` + (why.length ? ' (' + why.join('; ') + ')' : '')),
    el('dt', {}, 'row rate'), el('dd', {}, `configured ${fmt.rate(s.configured_row_rate)}, effective ${fmt.rate(s.effective_row_rate)}`),
    el('dt', {}, 'rows/s, statements/s'), el('dd', { 'data-testid': 'shard-throughput' },
      `${fmt.n(Math.round(rowsPerSecond(s.shard)))}, ${fmt.n(Math.round(rowsPerSecond(s.shard, 'statements')))}`),
    el('dt', {}, 'lag'), el('dd', {}, `${fmt.n(c.lag)} messages` + (oldest !== null ? `, oldest ${fmt.ago(oldest)}` : '')),
    el('dt', {}, 'paused'), el('dd', { 'data-testid': 'pause-reason' },
      s.paused ? `yes, by ${s.changed_by || '?'}: ${s.reason || '(no reason)'}` : 'no'),
    el('dt', {}, 'consumer'), el('dd', {}, c.instance ? `${c.instance} (${fmt.ago(c.age_ms)})` : 'none reported'),
    el('dt', {}, 'applied / failed'), el('dd', {}, `${fmt.n(c.rows_applied)} / ${fmt.n(c.rows_failed)} rows`),
    el('dt', {}, 'statement latency'), el('dd', { 'data-testid': 'shard-latency' }, c.statement_p99_ms
      ? `p99 ${fmt.ms(c.statement_p99_ms)}, median ${fmt.ms(c.statement_p50_ms)} (last 128 batches)` : '-'),
    el('dt', {}, 'dead letters'), el('dd', { 'data-testid': 'shard-dead-letters' }, fmt.n(c.dead_letters)),
    s.server && state.budgets.has(s.server) ? el('dt', {}, 'server budget') : null,
    s.server && state.budgets.has(s.server) ? el('dd', { 'data-testid': 'server-budget' }, budgetText(state.budgets.get(s.server)) +
      (state.budgets.get(s.server) ? ` (set by ${state.budgets.get(s.server).changed_by || '?'}: ${state.budgets.get(s.server).reason || 'no reason'})` : '')) : null,
  );
  // the latest batches with refused ops: each job's failures have every op with its reason
  const dead = (c.recent_dead_letters || []).map((d) => el('li', { 'data-testid': 'dead-letter' },
    `${fmt.time(d.at_ms)} ${fmt.n(d.ops)} op${d.ops === 1 ? '' : 's'} of job `,
    el('a', { class: 'link', href: '#job=' + d.job_id, on: { click: (ev) => { ev.preventDefault(); showView('jobs'); showFailures(d.job_id); } } }, d.job_id.slice(0, 12)),
    `: ${d.error_code ? 'MySQL error ' + d.error_code : 'refused'}${d.reason ? ' (' + d.reason + ')' : ''}`));
  const lanes = (c.lanes || []).map((l) => el('tr', {}, el('td', {}, l.lane), el('td', {}, 'weight ' + l.weight),
    el('td', {}, 'lag ' + fmt.n(l.lag)), el('td', {}, fmt.n(l.statements) + ' statements')));
  const errors = (c.recent_errors || []).map((e) => el('li', {}, `${fmt.time(e.at_ms)} ${e.kind}: ${e.message}`));
  const history = (s.history || []).map((h) => el('tr', { 'data-testid': 'history-row' },
    el('td', {}, fmt.time(h.at_ms)), el('td', {}, h.action), el('td', {}, h.by), el('td', {}, h.reason || ''),
    el('td', {}, h.setting || '')));
  box.replaceChildren(...[
    el('h2', { class: 'title' }, `shard ${s.shard} · ${s.database} · ${s.server || ''}`,
      el('button', { class: 'act', type: 'button', 'aria-label': 'close the shard', on: { click: closeShard } }, '×')),
    dl,
    el('h2', {}, 'lag, last minutes'), trend(s.shard),
    lanes.length ? el('div', {}, el('h2', {}, 'lanes'), el('table', {}, lanes)) : null,
    el('h2', {}, 'recent errors'), errors.length ? el('ul', {}, errors) : el('div', { class: 'hint' }, 'none'),
    el('h2', {}, 'recent dead letters'), dead.length ? el('ul', {}, dead) : el('div', { class: 'hint' }, 'none'),
    el('h2', {}, 'changes (audit)'), history.length ? el('table', {}, history) : el('div', { class: 'hint' }, 'none'),
    state.admin ? controlsOf(s) : null].filter(Boolean));
}

// The controls are made once per shard opened, so a poll does not wipe what is being typed.
let controls = { shard: null, node: null };
function controlsOf(s) {
  if (controls.shard !== s.shard || !controls.node) controls = { shard: s.shard, node: shardControls(s) };
  return controls.node;
}

function shardControls(s) {
  const rate = el('input', { type: 'number', min: '0', step: 'any', placeholder: 'stmt/s', 'aria-label': 'rate, statements per second', 'data-testid': 'rate-input' });
  const server = s.server;
  const post = (path, body, what) => confirmThen(what, (reason) =>
    api(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(Object.assign({ reason }, body)) }));
  return el('div', { class: 'controls', 'data-testid': 'shard-controls' },
    rate,
    el('button', { class: 'act', type: 'button', 'data-testid': 'btn-rate', on: { click: () => {
      const v = rate.value === '' ? null : Number(rate.value);
      post(`/v1/shards/${s.shard}/rate`, { rate: v }, `Set shard ${s.shard}'s rate to ${v === null ? 'the configured one' : v + ' statements/s'}`);
    } } }, 'set rate'),
    el('button', { class: 'act', type: 'button', 'data-testid': 'btn-pause', on: { click: () => post(`/v1/shards/${s.shard}/pause`, {}, `Pause shard ${s.shard}`) } }, 'pause'),
    el('button', { class: 'act', type: 'button', 'data-testid': 'btn-resume', on: { click: () => post(`/v1/shards/${s.shard}/resume`, {}, `Resume shard ${s.shard}`) } }, 'resume'),
    server ? el('span', { class: 'hint' }, `server ${server}:`) : null,
    server ? el('button', { class: 'act', type: 'button', 'data-testid': 'btn-rate-server', on: { click: () => {
      const v = rate.value === '' ? null : Number(rate.value);
      post(`/v1/servers/${server}/rate`, { rate: v }, `Set the rate of every shard of server ${server} to ${v === null ? 'the configured one' : v + ' statements/s'}`);
    } } }, 'set rate') : null,
    server ? el('button', { class: 'act', type: 'button', 'data-testid': 'btn-pause-server', on: { click: () => post(`/v1/servers/${server}/pause`, {}, `Pause every shard of server ${server}`) } }, 'pause') : null,
    server ? el('button', { class: 'act', type: 'button', 'data-testid': 'btn-resume-server', on: { click: () => post(`/v1/servers/${server}/resume`, {}, `Resume every shard of server ${server}`) } }, 'resume') : null,
    server ? budgetControls(server, post) : null);
}

// The whole server's budget: statements/s and rows/s shared by its shards (empty: none).
function budgetControls(server, post) {
  const b = state.budgets.get(server);
  const rate = el('input', { type: 'number', min: '0', step: 'any', placeholder: 'stmt/s', 'aria-label': 'server budget, statements per second',
    'data-testid': 'budget-rate-input', value: b && b.rate ? b.rate : null });
  const rows = el('input', { type: 'number', min: '0', step: 'any', placeholder: 'rows/s', 'aria-label': 'server budget, rows per second',
    'data-testid': 'budget-rows-input', value: b && b.row_rate ? b.row_rate : null });
  const num = (input) => (input.value === '' ? null : Number(input.value));
  return el('div', { class: 'controls' }, el('span', { class: 'hint' }, `budget of ${server}:`), rate, rows,
    el('button', { class: 'act', type: 'button', 'data-testid': 'btn-budget', on: { click: () => {
      const body = { rate: num(rate), row_rate: num(rows) };
      const words = body.rate === null && body.row_rate === null ? 'no budget'
        : `${body.rate === null ? 'no statement budget' : body.rate + ' statements/s'} and ${body.row_rate === null ? 'no row budget' : body.row_rate + ' rows/s'}`;
      post(`/v1/servers/${server}/budget`, body, `Give server ${server} ${words}, shared by its shards`);
    } } }, 'set budget'));
}

// Every change asks for a reason and a confirmation, then the page reads again at once.
function confirmThen(what, action) {
  const dialog = $('confirm');
  $('confirm-what').textContent = what + '?';
  $('reason').value = '';
  dialog.returnValue = '';
  dialog.onclose = async () => {
    if (dialog.returnValue !== 'ok') return;
    try {
      await action($('reason').value);
      await poll();
    } catch (e) {
      showStale('the change was not made: ' + e.message);
    }
  };
  dialog.showModal();
}

// ---- jobs view --------------------------------------------------------------------

async function loadJobs() {
  const list = await api('/v1/jobs?limit=50');
  state.jobs = list.jobs;
  state.delayQueue = list.delay_queue || null;
  // details (what the shards did) for the first 20 not yet finished
  const now = Date.now();
  await Promise.all(state.jobs.slice(0, 20).map(async (j) => {
    const prev = state.jobDetail.get(j.job_id);
    if (prev && prev.status.finished) return;
    try {
      const st = await api('/v1/jobs/' + j.job_id);
      const done = st.applied + st.failed + (st.cancelled || 0);
      state.jobDetail.set(j.job_id, { status: st, t: now, done, prev: prev ? { t: prev.t, done: prev.done } : null });
    } catch (e) { /* shown as unknown */ }
  }));
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

function renderJobs() {
  renderDelayQueue();
  const rows = state.jobs.map((j) => {
    const d = state.jobDetail.get(j.job_id);
    const st = d && d.status;
    const done = d ? d.done : 0;
    const pct = st && st.submitted ? Math.floor((done * 100) / st.submitted) : 0;
    let eta = '-';
    if (st && !st.finished && d.prev && d.t > d.prev.t && done > d.prev.done)
      eta = Math.round(((st.submitted - done) * (d.t - d.prev.t)) / (done - d.prev.done) / 1000) + ' s';
    if (st && st.finished) eta = 'done';
    const schedule = [j.not_before_ms ? 'not before ' + fmt.time(j.not_before_ms) : null,
      j.after ? 'after ' + j.after.map((a) => a.slice(0, 8)).join(', ') : null, st && st.waiting ? st.waiting : null]
      .filter(Boolean).join('; ');
    const waits = st && !st.finished ? jobWaits(st) : null;
    const shards = el('span', {}, ...j.shards.slice(0, 12).map((n) => el('span', { class: 'link', on: { click: () => { showView('fleet'); selectShard(n); } } }, n + ' ')),
      j.shards.length > 12 ? `+${j.shards.length - 12}` : '');
    return el('tr', { 'data-testid': 'job-row', 'data-job': j.job_id },
      el('td', { title: j.job_id }, (j.job || j.request_id || j.job_id.slice(0, 12)) + (j.cancelled ? ' (cancelled)' : '')),
      el('td', {}, j.client || '(open)'),
      el('td', {}, fmt.time(j.created_at_ms)),
      el('td', {}, el('span', { class: 'bar' + (st && st.failed ? ' failed' : '') },
        progressFill(pct)), ' ', el('span', { 'data-testid': 'job-progress', 'data-percent': st ? pct : '' }, st ? `${pct}% of ${fmt.n(st.submitted)}` : '…')),
      el('td', {}, eta),
      el('td', {}, st && st.failed ? el('span', { class: 'link', on: { click: () => showFailures(j.job_id) } }, fmt.n(st.failed)) : '0'),
      el('td', {}, schedule || (waits ? '' : '-'), waits),
      el('td', {}, shards),
      el('td', {}, mayCancel(j) && !j.cancelled && !(st && st.finished) ? el('button', { class: 'act danger', type: 'button', 'data-testid': 'btn-cancel-job',
        on: { click: () => confirmThen(`Cancel job ${j.job || j.job_id}`, (reason) => api(`/v1/jobs/${j.job_id}?reason=${encodeURIComponent(reason)}`, { method: 'DELETE' })) } }, 'cancel') : ''));
  });
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
  box.replaceChildren(el('h2', {}, 'failures of ' + id), el('table', {}, rows),
    page.next ? el('span', { class: 'link', on: { click: () => showFailures(id, page.next) } }, 'next page') : el('span', { class: 'hint' }, 'last page'));
}

// ---- the loop ---------------------------------------------------------------------

function showStale(msg) {
  const b = $('stale');
  b.textContent = msg;
  b.classList.remove('hidden');
  b.classList.add('error');
}

function showView(view) {
  state.view = view;
  for (const t of document.querySelectorAll('.tab')) t.classList.toggle('active', t.dataset.view === view);
  $('view-fleet').classList.toggle('hidden', view !== 'fleet');
  $('view-jobs').classList.toggle('hidden', view !== 'jobs');
  if (view === 'jobs') poll();
}

let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  try {
    const [fleet, shards] = await Promise.all([api('/v1/fleet'), api('/v1/shards')]);
    const now = Date.now();
    state.servers = fleet.servers;
    state.shards = shards.shards;
    state.budgets = new Map((shards.servers || []).map((v) => [v.name, v.budget]));
    for (const s of state.shards) remember(s, now);
    renderKafka(fleet);
    renderMembers(fleet);
    renderAlerts(fleet);
    renderServers();
    if (state.selected !== null) renderShard();
    if (state.view === 'jobs') {
      await loadJobs();
      renderJobs();
    }
    state.lastGood = now;
    $('stale').classList.add('hidden');
    $('updated').textContent = 'updated ' + new Date(now).toLocaleTimeString();
  } catch (e) {
    const since = state.lastGood ? ' since ' + new Date(state.lastGood).toLocaleTimeString() : '';
    showStale((e instanceof TypeError ? 'proxy unreachable' : e.message) + ': the data shown is stale' + since);
  } finally {
    polling = false;
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
  whoami().then(poll);
  setInterval(poll, POLL_MS);
}

start();
