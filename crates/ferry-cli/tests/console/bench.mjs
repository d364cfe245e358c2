// The web console under load: fills a fresh `ferry serve` with many queues and a deep
// dead-letter queue, then times the console's reads through the HTTP API and the page in
// Debian's Chromium. Run by scripts/bench/console.sh (see docs/benchmarks.md, "Console").
//
// Environment: FERRY_URL (the HTTP listener) and FERRY_TOKEN (a token that may do
// everything). Arguments: --queues N (queues on the server in all, dead-letter queues
// included; default 1000), --dead-letters N (default 100000), --runs N (timings per figure,
// default 5).

import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';

import { VIEWPORT, api, consoleUrl, launch, required, route, signIn } from './browser.mjs';

// A failed call is the whole answer: said in one line, without a stack.
process.on('uncaughtException', (e) => {
  console.error(`console bench: ${e.message}`);
  process.exit(1);
});

const { values } = parseArgs({
  options: {
    'queues': { type: 'string', default: '1000' },
    'dead-letters': { type: 'string', default: '100000' },
    'runs': { type: 'string', default: '5' },
  },
});
function positive(name) {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`console bench: --${name} takes a whole number above 0, not ${values[name]}`);
    process.exit(2);
  }
  return n;
}
const QUEUES = positive('queues');
const LETTERS = positive('dead-letters');
const RUNS = positive('runs');
if (QUEUES < 2 || QUEUES % 2 !== 0) {
  console.error('console bench: --queues counts each queue and its dead-letter queue: an even number of 2 or more');
  process.exit(2);
}
const base = required('FERRY_URL').replace(/\/+$/, '');
const token = required('FERRY_TOKEN');
const call = (method, path, body) => api(base, token, method, path, body);
const enc = encodeURIComponent;

// The server takes at most 1,000 messages a publish and hands out at most 1,000 a receive.
const BATCH = 1000;
// Calls in flight while filling: enough to keep the server's cores busy.
const PARALLEL = 32;
// Ready messages in each ordinary queue, so the overview's rows have ages and depths.
const READY_EACH = 10;
const DEAD = 'bench-dead';
const DLQ = `${DEAD}.dlq`;

async function inParallel(items, work) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++];
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
}

const say = (text) => console.log(`console bench: ${text}`);

// ---- Fill.

// The counts below are the bench's own only on a server that holds nothing else.
const before = await call('GET', '/v1/queues');
if (before.names.length > 0) {
  console.error(`console bench: the server already has ${before.names.length} queues: start it on an empty data directory`);
  process.exit(2);
}

// Each ordinary queue comes with its dead-letter queue (`<name>.dlq`): QUEUES / 2 pairs, the
// last of them the one whose dead-letter queue fills.
const started = performance.now();
const names = Array.from({ length: QUEUES / 2 - 1 }, (_, i) => `bench-${String(i).padStart(4, '0')}`);
await inParallel(names, async (name) => {
  await call('POST', '/v1/queues', { name });
  const messages = Array.from({ length: READY_EACH }, (_, i) => ({
    payload: JSON.stringify({ queue: name, n: i }),
    headers: { tenant: i % 2 ? 'acme' : 'globex' },
  }));
  await call('POST', `/v1/queues/${enc(name)}/messages`, { messages });
});
// Dead letters the way a consumer makes them: each message received and rejected, many
// rejects in flight at once.
await call('POST', '/v1/queues', { name: DEAD });
const batches = Array.from({ length: Math.ceil(LETTERS / BATCH) }, (_, b) => b);
await inParallel(batches, async (b) => {
  const size = Math.min(BATCH, LETTERS - b * BATCH);
  const messages = Array.from({ length: size }, (_, i) => ({
    payload: JSON.stringify({ order: b * BATCH + i, total: '12.50', currency: 'EUR' }),
    key: `customer-${(b * BATCH + i) % 977}`,
    headers: { 'content-type': 'application/json', tenant: i % 3 ? 'acme' : 'globex' },
  }));
  await call('POST', `/v1/queues/${DEAD}/messages`, { messages });
});
const REASONS = ['schema mismatch', 'unknown customer', 'payment declined'];
// A delivery's token is a u64 that a JavaScript number may not hold exactly: read as text.
async function receive() {
  const response = await fetch(`${base}/v1/queues/${DEAD}/receive`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ consumer: 'bench-worker', max: BATCH, lease_ms: 600000, wait_ms: 1000 }),
  });
  const text = await response.text();
  if (!response.ok) {
    throw new Error(`receive answered ${response.status}: ${text.slice(0, 300)}`);
  }
  const leases = [...text.matchAll(/"seq":(\d+),"token":(\d+)/g)].map((m) => [m[1], m[2]]);
  const count = JSON.parse(text).deliveries.length;
  if (leases.length !== count) {
    throw new Error(`read ${leases.length} tokens from ${count} deliveries: the answer's shape changed`);
  }
  return leases;
}
let rejected = 0;
while (rejected < LETTERS) {
  const leases = await receive();
  if (leases.length === 0) {
    throw new Error(`${DEAD} handed out ${rejected} of ${LETTERS} messages, then none in 1 s`);
  }
  await inParallel(leases, async ([seq, lease]) => {
    const reason = REASONS[Number(seq) % REASONS.length];
    const response = await fetch(`${base}/v1/queues/${DEAD}/messages/${seq}/reject`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: `{"token":${lease},"reason":${JSON.stringify(reason)}}`,
    });
    if (!response.ok) {
      throw new Error(`reject of ${seq} answered ${response.status}: ${await response.text()}`);
    }
  });
  rejected += leases.length;
}
const depth = async (name) => {
  const { stats } = await call('GET', `/v1/queues/${enc(name)}`);
  return stats.ready + stats.in_flight + stats.delayed + stats.parked;
};
// A reject answers once its letter is stored, so they are all there: said, not assumed.
if ((await depth(DLQ)) !== LETTERS) {
  throw new Error(`${DLQ} holds ${await depth(DLQ)} letters after ${LETTERS} rejects`);
}
const fillSeconds = (performance.now() - started) / 1000;
const overview = await call('GET', '/v1/console/overview');
say(`filled in ${fillSeconds.toFixed(1)} s: ${overview.queues.total} queues, ${LETTERS} dead letters in ${DLQ}`);

// ---- Measure.

const rows = [];
function summary(what, times) {
  const sorted = [...times].sort((a, b) => a - b);
  rows.push([what, sorted[Math.floor(sorted.length / 2)], sorted[0], sorted[sorted.length - 1]]);
}
async function timed(what, once) {
  const times = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await once();
    times.push(performance.now() - t0);
  }
  summary(what, times);
}

// Every queue on the (fresh) server, to know how many rows each page must have.
const all = [...names, DEAD].flatMap((name) => [name, `${name}.dlq`]);
async function overviewPage(query, expected) {
  const o = await call('GET', `/v1/console/overview?${query}`);
  if (o.queues.rows.length !== expected) {
    throw new Error(`overview?${query} has ${o.queues.rows.length} queue rows, not ${expected}`);
  }
}
const FILTER = 'bench-00';
const matching = all.filter((name) => name.includes(FILTER)).length;
await timed('GET /v1/console/overview (first page)', () =>
  overviewPage('limit=50', Math.min(50, all.length)));
await timed(`GET /v1/console/overview?name=${FILTER} (filtered: ${matching} match)`, () =>
  overviewPage(`name=${FILTER}&limit=50`, Math.min(50, matching)));
const lastOffset = Math.max(0, all.length - 50);
await timed(`GET /v1/console/overview?queue_offset=${lastOffset} (last page)`, () =>
  overviewPage(`queue_offset=${lastOffset}&limit=50`, all.length - lastOffset));

const dlqPath = `/v1/queues/${enc(DLQ)}/dead-letters?max=50`;
const first = await call('GET', dlqPath);
if (first.letters.length === 0) throw new Error(`${DLQ} answered an empty first page`);
const firstSeq = first.letters[0].seq;
await timed('GET dead-letters?max=50 (first page)', async () => {
  await call('GET', dlqPath);
});
// The page 90% of the way in, as paging on from the first page would reach it.
const deepAfter = firstSeq + Math.floor(LETTERS * 0.9);
await timed(`GET dead-letters?max=50&after_seq=${deepAfter} (90% in)`, async () => {
  const page = await call('GET', `${dlqPath}&after_seq=${deepAfter}`);
  if (page.letters.length === 0) throw new Error('the deep page is empty');
});
const PAGED = 20;
await timed(`${PAGED} pages of 50 in a row, each after the last's next_after_seq`, async () => {
  let after = null;
  for (let i = 0; i < PAGED; i++) {
    const page = await call('GET', after === null ? dlqPath : `${dlqPath}&after_seq=${after}`);
    after = page.next_after_seq;
  }
});

// The browser: a full load of the page at a route (from about:blank, the tab signed in),
// until the table is drawn.
const browser = await launch();
const page = await (await browser.newContext({ viewport: VIEWPORT })).newPage();
page.setDefaultTimeout(60000);
await signIn(page, base, token, { timeout: 60000 });
async function drawn(what, hash, selector) {
  await timed(what, async () => {
    await page.goto('about:blank');
    await page.goto(consoleUrl(base, hash), { waitUntil: 'commit' });
    await page.locator(selector).first().waitFor();
  });
}
await drawn('browser: load to the overview table drawn', '#/', '[data-testid="queues-table"] tr[data-queue]');
await drawn(
  `browser: load to the dead-letters table drawn (${LETTERS} letters)`,
  route('queues', DLQ, 'dead-letters'),
  '[data-testid="dead-letters-table"] tr[data-seq]',
);
await browser.close();

const ms = (t) => `${t.toFixed(1)} ms`;
console.log(`\n| what (${RUNS} runs) | median | min | max |\n|---|---:|---:|---:|`);
for (const [what, median, min, max] of rows) {
  console.log(`| ${what} | ${ms(median)} | ${ms(min)} | ${ms(max)} |`);
}
