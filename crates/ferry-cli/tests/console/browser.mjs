// Debian's Chromium driven by Playwright, and the console's sign-in, for the checks
// (console.mjs) and the benchmark (bench.mjs).

import { chromium } from 'playwright-core';

// Debian's package, installed by scripts/console-packages.sh. Playwright's own browser
// builds are never used: they are downloaded from outside the package registries.
export const CHROMIUM = '/usr/bin/chromium';

// No sandbox (the tests run as root, which Chromium's sandbox refuses), no GPU, and nothing
// that reaches out to the network by itself: the machine has none, and a browser waiting
// on it would make timings and logs noisy.
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const VIEWPORT = { width: 1280, height: 800 };

export function launch() {
  return chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
}

// `name` from the environment, or a clear error saying it is needed.
export function required(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set`);
  }
  return value;
}

// The console's URL for `hash` (a route such as `#/queues/orders`) on the server at `base`.
export function consoleUrl(base, hash = '#/') {
  return `${base.replace(/\/+$/, '')}/ui/${hash}`;
}

// A hash route with each name URI-encoded, as the page's own links are.
export function route(...parts) {
  return '#/' + parts.map((part, i) => (i % 2 === 1 ? encodeURIComponent(part) : part)).join('/');
}

// Opens the console's overview in `page` and signs in with `token` through its login form;
// returns once the form is gone (hidden or removed) and the overview's queue table shows,
// or throws with what the page shows.
export async function signIn(page, base, token, { timeout = 15000 } = {}) {
  await page.goto(consoleUrl(base), { waitUntil: 'domcontentloaded' });
  const form = page.locator('form#login');
  await form.waitFor({ state: 'visible', timeout });
  await page.getByLabel('API token').fill(token);
  await form.getByRole('button', { name: 'Sign in' }).click();
  try {
    await form.waitFor({ state: 'hidden', timeout });
  } catch {
    const alert = await page.getByRole('alert').allInnerTexts().catch(() => []);
    throw new Error(`the login form stayed after signing in; alerts: ${JSON.stringify(alert)}`);
  }
  await page.getByTestId('queues-table').waitFor({ timeout });
}

// Moves `page` to another route of the single-page console without reloading it.
export async function go(page, hash) {
  await page.evaluate((h) => {
    window.location.hash = h;
  }, hash);
}

// The whole count a table cell begins with ("1024", "1,024", "1 024"), thousand separators
// dropped; words after it (a description for screen readers, "dead letters in orders.dlq")
// are left. An error quoting the cell when it begins with anything else, or with a rounded
// figure ("1.2k").
export function count(text) {
  const match = /^\s*(\d{1,3}(?:[,\u00a0\u202f ]?\d{3})*)(?![\d.,kKmMgG])/.exec(text);
  if (!match) {
    throw new Error(`the cell shows no whole count: ${JSON.stringify(text)}`);
  }
  return Number(match[1].replace(/\D/g, ''));
}

// One call to the server's HTTP API with the token; the parsed JSON, or an error with the
// status and body.
export async function api(base, token, method, path, body) {
  const response = await fetch(`${base.replace(/\/+$/, '')}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) {
    throw new Error(`${method} ${path} answered ${response.status}: ${text.slice(0, 300)}`);
  }
  return text === '' ? null : JSON.parse(text);
}
