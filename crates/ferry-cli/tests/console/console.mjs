// The web console of `ferry serve` (`/ui`) in a real browser: Debian's Chromium driven by
// Playwright, against a running server that holds a queue with ready messages and one dead
// letter in its dead-letter queue (crates/ferry-cli/tests/console.rs sets that up).
//
// Environment: FERRY_URL (the HTTP listener, `http://host:port`), FERRY_TOKEN (a token that
// may read, dead-letter and redrive everything), FERRY_QUEUE (the queue), FERRY_DLQ (its
// dead-letter queue), FERRY_TOPIC (optional: a topic for the topic page; by default the
// first the server lists) and FERRY_CONSOLE_SCREENSHOTS (optional: a directory that gets a
// 1280x800 PNG of each page).
//
// Each check prints `ok - NAME` or `not ok - NAME: WHY`; the exit status is non-zero when
// any failed. The selectors are the console's contract (data-testid, data-queue, data-col,
// roles and labels), never its layout.

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import AxeBuilder from '@axe-core/playwright';

import { VIEWPORT, api, consoleUrl, count, go, launch, required, route, signIn } from './browser.mjs';

// How long the page may take to show what a check waits for. The server samples every
// 200 ms in the test, so anything live shows well within it.
const WAIT_MS = 15000;
// A redrive job moves at 500 letters a second by default; the fixture has one.
const REDRIVE_MS = 30000;
// The whole run: a hung browser must not hang the test that runs this.
const RUN_MS = 240000;

let base, token, queue, dlq;
try {
  base = required('FERRY_URL').replace(/\/+$/, '');
  token = required('FERRY_TOKEN');
  queue = required('FERRY_QUEUE');
  dlq = required('FERRY_DLQ');
} catch (e) {
  console.log(`not ok - environment: ${e.message}`);
  process.exit(2);
}
const shots = process.env.FERRY_CONSOLE_SCREENSHOTS || null;
if (shots) {
  mkdirSync(shots, { recursive: true });
}
setTimeout(() => {
  console.log(`not ok - the checks finish within ${RUN_MS / 1000} s`);
  process.exit(1);
}, RUN_MS).unref();

const enc = encodeURIComponent;
const results = [];

// Runs one named check and prints its result; the check's error message is the why.
async function check(name, body) {
  try {
    await body();
    results.push(true);
    console.log(`ok - ${name}`);
    return true;
  } catch (e) {
    results.push(false);
    // Playwright colours its call log for a terminal.
    const text = String(e?.message ?? e).replace(/\x1b\[[0-9;]*m/g, '');
    const [first, ...rest] = text.split('\n').filter((l) => l.trim() !== '');
    console.log(`not ok - ${name}: ${first}`);
    // Playwright's call log says what it waited for; the first lines are enough.
    for (const line of rest.slice(0, 6)) {
      console.log(`  # ${line.trim()}`);
    }
    return false;
  }
}

function notRun(name, why) {
  results.push(false);
  console.log(`not ok - ${name}: not run, ${why}`);
}

// Polls `probe` (which returns `{ok, seen}`) until it is ok; an error with what was seen
// last when `ms` pass first.
async function until(what, ms, probe) {
  const deadline = Date.now() + ms;
  for (;;) {
    let seen;
    try {
      const r = await probe();
      if (r.ok) {
        return r;
      }
      seen = r.seen;
    } catch (e) {
      seen = e.message.split('\n')[0];
    }
    if (Date.now() > deadline) {
      throw new Error(`${what} within ${ms} ms; last seen: ${seen}`);
    }
    await sleep(100);
  }
}

// A CSS attribute selector's value, quoted.
const quoted = (value) => JSON.stringify(String(value));

async function shot(page, name) {
  if (shots) {
    await page.screenshot({ path: path.join(shots, `${name}.png`) });
  }
}

// Every message the pages log as an error, and every uncaught exception, for the last check.
// The only errors expected are the login probe's refusals: the page asks for the overview
// without a token, or with a wrong one, and Chromium logs each 401/403 answer as an error.
const browserErrors = [];
function watch(page, label) {
  page.on('console', (m) => {
    if (m.type() !== 'error') {
      return;
    }
    const url = m.location()?.url ?? '';
    const refusal = /status of 40[13]\b/.test(m.text()) && url !== '' &&
      new URL(url).pathname === '/v1/console/overview';
    if (!refusal) {
      browserErrors.push(`${label}: ${m.text()}${url ? ` (${url})` : ''}`);
    }
  });
  page.on('pageerror', (e) => browserErrors.push(`${label}: uncaught ${e.message.split('\n')[0]}`));
}

// No serious or critical accessibility violation on what `page` shows now.
async function accessible(page) {
  const report = await new AxeBuilder({ page }).analyze();
  const bad = report.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  if (bad.length > 0) {
    const lines = bad.map((v) => {
      const where = v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ');
      return `${v.id} (${v.impact}, ${v.nodes.length} elements): ${v.help} at ${where}`;
    });
    throw new Error(`axe found ${bad.length} serious or critical violations:\n${lines.join('\n')}`);
  }
}

// The tracked messages of a queue, as `dlq_depth` counts them.
function depth(stats) {
  return stats.ready + stats.in_flight + stats.delayed + stats.parked;
}

const describe = (name) => api(base, token, 'GET', `/v1/queues/${enc(name)}`);
const queueRow = (page) => page.locator(`[data-testid="queues-table"] tr[data-queue=${quoted(queue)}]`);
const cell = (row, column) => row.locator(`td[data-col=${quoted(column)}]`);

// ---- The page is served.

const served = await check('the console is served at /ui without a token', async () => {
  const redirect = await fetch(`${base}/ui`, { redirect: 'manual' });
  assert.ok(
    [301, 302, 303, 307, 308].includes(redirect.status),
    `GET /ui answered ${redirect.status}, not a redirect to /ui/`,
  );
  const location = new URL(redirect.headers.get('location') ?? '', `${base}/ui`);
  assert.equal(location.pathname, '/ui/', 'GET /ui redirects to /ui/');
  const index = await fetch(`${base}/ui/`);
  assert.equal(index.status, 200, `GET /ui/ answered ${index.status}`);
  assert.match(index.headers.get('content-type') ?? '', /^text\/html/, 'GET /ui/ is HTML');
  assert.match(index.headers.get('cache-control') ?? '', /no-cache/, 'GET /ui/ is sent with cache-control: no-cache');
  const html = await index.text();
  const assets = [...html.matchAll(/(?:src|href)="([^"]*assets\/[^"]*)"/g)].map((m) => new URL(m[1], `${base}/ui/`));
  assert.ok(assets.length > 0, 'index.html loads assets from /ui/assets/');
  for (const asset of assets) {
    const r = await fetch(asset);
    assert.equal(r.status, 200, `GET ${asset.pathname} answered ${r.status}`);
    assert.ok(r.headers.get('content-type'), `GET ${asset.pathname} has a content type`);
    assert.match(r.headers.get('cache-control') ?? '', /no-cache/, `GET ${asset.pathname} is sent with cache-control: no-cache`);
  }
});

// Started only for a page that is there: without one, every browser check would only wait
// out its timeout.
let browser = null;
let context = null;
if (served) {
  try {
    browser = await launch();
  } catch (e) {
    console.log(`not ok - Chromium starts: ${e.message.split('\n')[0]}`);
    process.exit(1);
  }
  context = await browser.newContext({ viewport: VIEWPORT });
  context.setDefaultTimeout(WAIT_MS);
}

// A tab signed in once, on first use; later uses get the same tab, or the same error.
function tab(label) {
  let opened;
  return () =>
    (opened ??= (async () => {
      const page = await context.newPage();
      watch(page, label);
      try {
        await signIn(page, base, token, { timeout: WAIT_MS });
      } catch (e) {
        throw new Error(`signing in: ${e.message}`);
      }
      // Gone if the page ever reloads: the live checks look for it.
      await page.evaluate(() => {
        window.ferryCheckMark = true;
      });
      return page;
    })());
}
// The overview stays open on `#/` to see the redrive arrive live; the other pages are
// visited in a second tab.
const overview = tab('overview');
const tour = tab('pages');

const stillLoaded = async (page, label) =>
  assert.equal(await page.evaluate(() => window.ferryCheckMark === true), true, `the ${label} reloaded`);

// Each page of the console, drawn: what a check waits for before reading or auditing it.
const pages = {
  'overview': async (page) => {
    await go(page, '#/');
    await queueRow(page).waitFor();
  },
  'queue': async (page) => {
    await go(page, route('queues', queue));
    await page.getByRole('heading', { name: queue }).first().waitFor();
    await page.getByText('Publish test message').first().waitFor();
  },
  'dead letters': async (page) => {
    await go(page, route('queues', dlq, 'dead-letters'));
    await page.locator('[data-testid="dead-letters-table"] tr[data-seq]').first().waitFor();
  },
  'topic': async (page, topic) => {
    await go(page, route('topics', topic));
    await page.getByRole('heading', { name: topic }).first().waitFor();
  },
  'topology': async (page, topic) => {
    await go(page, '#/topology');
    await page.getByRole('heading', { name: /topology/i }).first().waitFor();
    await page.getByText(topic).filter({ visible: true }).first().waitFor();
    await page.getByText(queue).filter({ visible: true }).first().waitFor();
  },
};

// The topic the topic page shows: FERRY_TOPIC, or the first the server lists.
async function theTopic() {
  if (process.env.FERRY_TOPIC) {
    return process.env.FERRY_TOPIC;
  }
  const { names } = await api(base, token, 'GET', '/v1/topics');
  if (!names || names.length === 0) {
    throw new Error('the server has no topic to show: create one, or set FERRY_TOPIC');
  }
  return names[0];
}

// The check that `name` draws in the tab `open` gives, with no serious or critical
// accessibility violation; its screenshot is `shotName`.png.
function audit(name, open, shotName) {
  return [`no serious or critical accessibility violation on the ${name} page`, async () => {
    const page = await open();
    try {
      await pages[name](page, name === 'topic' || name === 'topology' ? await theTopic() : undefined);
    } catch (e) {
      throw new Error(`the ${name} page did not draw: ${e.message}`);
    }
    await shot(page, shotName);
    await accessible(page);
  }];
}

const browserChecks = [
  ['a wrong token is refused', async () => {
    const page = await context.newPage();
    watch(page, 'login');
    await page.goto(consoleUrl(base), { waitUntil: 'domcontentloaded' });
    const form = page.locator('form#login');
    await form.waitFor();
    const input = page.getByLabel('API token');
    assert.equal(await input.getAttribute('id'), 'token', 'the "API token" label is for input#token');
    assert.equal(await input.getAttribute('type'), 'password', 'the token input is a password field');
    await shot(page, 'login');
    const wrong = `${token}-not-this-one`;
    await input.fill(wrong);
    await form.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: /refused/i }).first().waitFor();
    assert.ok(await form.isVisible(), 'the login form stays after a refused token');
    const kept = await page.evaluate(
      (t) => Object.keys(sessionStorage).some((k) => sessionStorage.getItem(k) === t),
      wrong,
    );
    assert.equal(kept, false, 'a refused token is not kept in sessionStorage');
    await page.close();
  }],

  ['the overview lists the queue with its depth and its dead letter', async () => {
    const page = await overview();
    await pages.overview(page);
    const row = queueRow(page);
    const [stats, dlqStats] = await Promise.all([describe(queue), describe(dlq)]);
    const dlqDepth = depth(dlqStats.stats);
    assert.ok(dlqDepth >= 1, `${dlq} holds no dead letter: these checks need one`);
    await until('the row shows the server\'s ready count and dead-letter depth', WAIT_MS, async () => {
      const ready = count(await cell(row, 'ready').innerText());
      const dead = count(await cell(row, 'dlq_depth').innerText());
      return {
        ok: ready === stats.stats.ready && dead === dlqDepth,
        seen: `ready ${ready} (server: ${stats.stats.ready}), dlq_depth ${dead} (server: ${dlqDepth})`,
      };
    });
    for (const column of ['in_flight', 'delayed', 'oldest_age', 'rates']) {
      assert.equal(await cell(row, column).count(), 1, `the row has a ${column} cell`);
    }
    assert.ok(await cell(row, 'rates').locator('svg').count() > 0, 'the rates cell draws a sparkline');
    assert.notEqual(await row.getAttribute('data-alert'), null, 'a queue with dead letters is marked data-alert');
    const link = row.getByRole('link', { name: queue, exact: true });
    const href = (await link.getAttribute('href')) ?? '';
    assert.ok(href.endsWith(route('queues', queue)), `the name links to the queue page, not ${JSON.stringify(href)}`);
    const topic = await theTopic();
    await page.locator(`[data-testid="topics-table"] tr[data-topic=${quoted(topic)}]`).waitFor();
  }],

  audit('overview', overview, 'overview'),

  ['the dead-letters page shows the dead letter with its reason', async () => {
    const page = await tour();
    await pages['dead letters'](page);
    const { letters, more } = await api(base, token, 'GET', `/v1/queues/${enc(dlq)}/dead-letters?max=50`);
    assert.ok(letters.length >= 1, `${dlq} holds no dead letter`);
    const table = page.getByTestId('dead-letters-table');
    for (const letter of letters) {
      const row = table.locator(`tr[data-seq=${quoted(letter.seq)}]`);
      await row.waitFor();
      const info = letter.dead_letter;
      const reason = await cell(row, 'reason').innerText();
      assert.ok(reason.includes(info.reason), `letter ${letter.seq}'s reason shows ${JSON.stringify(reason)}, not ${info.reason}`);
      if (info.last_error) {
        const error = await cell(row, 'last_error').innerText();
        assert.ok(error.includes(info.last_error), `letter ${letter.seq}'s last error shows ${JSON.stringify(error)}`);
      }
      const origin = await cell(row, 'origin').innerText();
      assert.ok(origin.includes(info.origin_queue), `letter ${letter.seq}'s origin shows ${JSON.stringify(origin)}`);
      assert.equal(count(await cell(row, 'attempts').innerText()), info.deliveries, `letter ${letter.seq}'s attempts`);
      assert.equal(await cell(row, 'age').count(), 1, `letter ${letter.seq} has an age cell`);
      const box = page.getByLabel(`Select message ${letter.seq}`, { exact: true });
      assert.equal(await box.getAttribute('type'), 'checkbox', `"Select message ${letter.seq}" is a checkbox`);
    }
    if (!more) {
      assert.equal(await table.locator('tr[data-seq]').count(), letters.length, 'one row per dead letter');
    }
  }],

  audit('dead letters', tour, 'dead-letters'),
  audit('queue', tour, 'queue'),
  audit('topic', tour, 'topic'),
  audit('topology', tour, 'topology'),

  ['"Redrive all" empties the dead letters and the overview shows the queue refilled, live', async () => {
    const [page, live] = await Promise.all([tour(), overview()]);
    await pages['dead letters'](page);
    await pages.overview(live);
    const before = count(await cell(queueRow(live), 'ready').innerText());
    const { letters } = await api(base, token, 'GET', `/v1/queues/${enc(dlq)}/dead-letters?max=50`);
    let asked = false;
    const accept = (dialog) => {
      asked = true;
      dialog.accept().catch(() => {});
    };
    page.on('dialog', accept);
    await page.getByRole('button', { name: 'Redrive all' }).click();
    // A confirmation: the browser's own (accepted above) or one the page draws.
    const drawn = page.getByRole('dialog').or(page.getByRole('alertdialog'));
    await until('a confirmation is asked before redriving', 5000, async () => ({
      ok: asked || (await drawn.first().isVisible()),
      seen: 'no dialog',
    }));
    if (!asked) {
      await drawn.first().getByRole('button', { name: /redrive|confirm|yes|^ok$/i }).first().click();
    }
    page.off('dialog', accept);
    const progress = page.getByTestId('redrive-progress');
    assert.equal(await progress.getAttribute('role'), 'status', 'the progress is a role=status region');
    await until('the progress says done', REDRIVE_MS, async () => {
      const text = await progress.innerText();
      return { ok: /\bdone\b/.test(text), seen: JSON.stringify(text) };
    });
    await until('the dead-letters table empties', WAIT_MS, async () => {
      const rows = await page.locator('[data-testid="dead-letters-table"] tr[data-seq]').count();
      return { ok: rows === 0, seen: `${rows} rows` };
    });
    const after = (await describe(queue)).stats.ready;
    assert.ok(after >= before + letters.length, `the server's ready count went from ${before} to ${after}`);
    await until('the overview shows the ready count rise', WAIT_MS, async () => {
      const ready = count(await cell(queueRow(live), 'ready').innerText());
      return { ok: ready === after, seen: `ready ${ready} (before: ${before}, server: ${after})` };
    });
    await stillLoaded(page, 'dead-letters page');
    await stillLoaded(live, 'overview');
  }],
];

browserChecks.push(['"Sign out" forgets the token', async () => {
  const page = await context.newPage();
  watch(page, 'sign-out');
  await signIn(page, base, token, { timeout: WAIT_MS });
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.locator('form#login').waitFor();
  const kept = await page.evaluate(
    (t) => Object.keys(sessionStorage).some((k) => sessionStorage.getItem(k) === t),
    token,
  );
  assert.equal(kept, false, 'the token is still in sessionStorage');
  // Nothing else remembers it either: a reload asks again.
  await page.reload();
  await page.locator('form#login').waitFor();
  await page.close();
}]);
browserChecks.push(['the browser logged no error', async () => {
  assert.equal(browserErrors.length, 0, `${browserErrors.length} errors:\n${browserErrors.join('\n')}`);
}]);
for (const [name, body] of browserChecks) {
  if (served) {
    await check(name, body);
  } else {
    notRun(name, 'the console is not served at /ui (see above)');
  }
}

await browser?.close();
const passed = results.filter(Boolean).length;
console.log(`console: ${passed} passed, ${results.length - passed} failed`);
process.exit(passed === results.length ? 0 : 1);
