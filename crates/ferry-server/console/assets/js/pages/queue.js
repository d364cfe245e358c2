// One queue: its spec and counters, charts of the last hour from the server's history,
// a browser over its messages that takes nothing, a test publish, and purge.

import * as api from '../api.js';
import * as live from '../live.js';
import { h, definitions, replace, scrolling } from '../dom.js';
import { age, ago, bytes, count, duration, key, rate } from '../format.js';
import { lineChart } from '../chart.js';
import { confirmDialog } from '../confirm.js';
import { messageView } from '../message_view.js';
import { href } from '../router.js';
import { errorBox, loading, outcome } from './common.js';
import { filterForm } from './filters.js';

const PAGE = 25;

/** The queue its dead letters go to, from the spec: derived, named, or none. */
function deadLetterQueue(name, spec) {
  const d = spec?.dead_letter;
  if (d === 'disabled') return null;
  if (d && typeof d === 'object' && d.queue) return d.queue;
  if (d === 'derived') return `${name}.dlq`;
  return undefined;
}

function specFacts(spec) {
  const limit = spec.length_limit;
  const dl = spec.dead_letter;
  return definitions([
    ['Ordering', spec.ordering ?? 'default'],
    ['Lease', spec.lease_ms != null ? duration(spec.lease_ms) : 'default'],
    ['Max deliveries', spec.retry?.max_deliveries != null ? String(spec.retry.max_deliveries) : 'default'],
    ['Dead letters', dl == null ? 'default' : typeof dl === 'object' ? `to ${dl.queue}` : dl],
    ['Default TTL', spec.default_ttl_ms != null ? duration(spec.default_ttl_ms) : 'none'],
    ['Dedup window', spec.dedup_window_ms != null ? duration(spec.dedup_window_ms) : 'default'],
    ['Length limit', limit && (limit.max_messages != null || limit.max_bytes != null)
      ? [limit.max_messages != null ? `${count(limit.max_messages)} messages` : null,
        limit.max_bytes != null ? bytes(limit.max_bytes) : null,
        limit.overflow].filter(Boolean).join(', ')
      : 'none'],
    ['Durability', spec.durability ?? 'default'],
  ]);
}

function statsFacts(stats, nowMs) {
  return definitions([
    ['Ready', count(stats.ready)],
    ['In flight', count(stats.in_flight)],
    ['Delayed', count(stats.delayed)],
    ['Parked', count(stats.parked)],
    ['Bytes', bytes(stats.bytes)],
    ['Oldest ready', age(stats.oldest_ready_age_ms, nowMs)],
    ['Published', count(stats.published)],
    ['Acked', count(stats.acked)],
    ['Nacked', count(stats.nacked)],
    ['Dead-lettered', count(stats.dead_lettered)],
    ['Redriven', count(stats.redriven)],
    ['Dropped', count(stats.dropped)],
  ], { class: 'facts stats' });
}

function charts(history) {
  const samples = history.samples || [];
  const series = (name, field) => ({ name, values: samples.map((x) => [x.at_ms, x[field] ?? null]) });
  return h('div', { class: 'charts' },
    lineChart([series('Ready', 'ready'), series('In flight', 'in_flight'), series('Delayed', 'delayed'), series('Dead letters', 'dlq_depth')],
      { title: 'Depth (messages)', format: count }),
    lineChart([series('Oldest ready', 'oldest_ready_age_ms')], { title: 'Oldest ready message age', format: duration, floor: 1000 }),
    lineChart([series('Publish', 'publish_rate'), series('Ack', 'ack_rate')], { title: 'Rates (messages per second)', format: rate }));
}

function browser(name, signal) {
  const results = h('div', { 'aria-live': 'polite' });
  const opened = h('section', { 'aria-labelledby': 'opened-title', hidden: true });
  let filter = null;
  let rows = [];
  let next = null;
  let more = false;
  let shownAt = 0;

  function open(message) {
    opened.hidden = false;
    replace(opened, h('h3', { id: 'opened-title', tabindex: '-1' }, `Message ${message.seq}`), messageView(message, shownAt));
    opened.querySelector('h3').focus();
  }

  function render() {
    const table = h('table', { class: 'data', 'data-testid': 'messages-table' },
      h('caption', { class: 'visually-hidden' }, `Messages in ${name}`),
      h('thead', null, h('tr', null,
        ['Seq', 'Key', 'Published', 'In flight', 'Headers', 'Payload', 'Open'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, rows.length === 0
        ? h('tr', null, h('td', { colspan: 7 }, 'No message matches.'))
        : rows.map((m) => h('tr', {
          'data-seq': m.seq,
          class: 'openable',
          // The Open button is the keyboard's way; a click on the row is a shortcut.
          onclick: (event) => { if (!event.target.closest('a, button, input, label')) open(m); },
        },
          h('td', { class: 'num' }, String(m.seq)),
          h('td', null, key(m)),
          h('td', null, ago(m.published_at_ms, shownAt)),
          h('td', null, m.in_flight ? 'yes' : 'no'),
          h('td', { class: 'num' }, String(Object.keys(m.headers || {}).length)),
          h('td', { class: 'preview' }, m.payload !== undefined ? m.payload.slice(0, 80) : '(binary)'),
          h('td', null, h('button', { type: 'button', id: `open-${m.seq}`, onclick: () => open(m) }, 'Open', h('span', { class: 'visually-hidden' }, ` message ${m.seq}`)))))));
    replace(results,
      scrolling('Messages', table),
      more && h('p', null, h('button', { type: 'button', id: 'browse-more', onclick: () => fetchPage(false) }, 'Load more')));
  }

  async function fetchPage(first) {
    const q = api.query({ ...filter, after_seq: first ? undefined : next, max: PAGE });
    try {
      const page = await api.get(api.path`/v1/queues/${name}/messages` + q, { signal });
      shownAt = Date.now();
      rows = first ? page.messages : rows.concat(page.messages);
      next = page.next_after_seq;
      more = page.more;
      render();
    } catch (e) {
      if (!signal.aborted) replace(results, errorBox('Could not browse the messages', e));
    }
  }

  const form = filterForm('browse', ['key', 'header', 'age'], (f) => {
    filter = f;
    fetchPage(true);
  }, 'Browse');
  return {
    start: () => {
      filter = {};
      fetchPage(true);
    },
    section: h('section', { 'aria-labelledby': 'browse-title' },
      h('h2', { id: 'browse-title' }, 'Messages'),
      h('p', { class: 'note' }, 'Browsing takes nothing: messages stay where they are.'),
      form, results, opened),
    // A live refresh re-reads the first page only while nothing more was loaded, so
    // paging on does not jump back.
    refresh: () => {
      if (filter !== null && rows.length <= PAGE) fetchPage(true);
    },
  };
}

function publisher(name, onPublished) {
  const result = h('div');
  const form = h('form', { class: 'stack', 'aria-labelledby': 'publish-title' },
    h('h2', { id: 'publish-title' }, 'Test message'),
    h('label', { for: 'publish-payload' }, 'Payload'),
    h('textarea', { id: 'publish-payload', name: 'payload', rows: 4, required: true }),
    h('label', { for: 'publish-key' }, 'Key (optional)'),
    h('input', { id: 'publish-key', name: 'key', type: 'text', autocomplete: 'off' }),
    h('label', { for: 'publish-headers' }, 'Headers (optional, one "name: value" a line)'),
    h('textarea', { id: 'publish-headers', name: 'headers', rows: 2 }),
    h('p', null, h('button', { type: 'submit', class: 'primary' }, 'Publish test message')),
    result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const headers = {};
    for (const line of form.elements.namedItem('headers').value.split('\n')) {
      if (!line.trim()) continue;
      const colon = line.indexOf(':');
      if (colon <= 0) {
        replace(result, outcome(`"${line.trim()}" is not "name: value".`, false));
        return;
      }
      headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
    }
    const message = { payload: form.elements.namedItem('payload').value, headers };
    const k = form.elements.namedItem('key').value;
    if (k) message.key = k;
    try {
      const r = await api.post(api.path`/v1/queues/${name}/messages`, { messages: [message] });
      replace(result, outcome(`Published message ${r.ids?.[0] ?? ''}.`));
      onPublished();
    } catch (e) {
      replace(result, errorBox('Could not publish', e));
    }
  });
  return form;
}

function purger(name, onPurged) {
  const result = h('div');
  const button = h('button', { type: 'button', class: 'danger' }, 'Purge');
  button.addEventListener('click', async () => {
    const yes = await confirmDialog({
      title: `Purge ${name}?`,
      question: `Every message waiting in ${name} is deleted for good. Messages in flight are not taken back.`,
      typeToConfirm: name,
      confirmLabel: 'Confirm',
      danger: true,
    });
    button.focus();
    if (!yes) return;
    try {
      const r = await api.post(api.path`/v1/queues/${name}/purge`, { confirm: name });
      replace(result, outcome(`Purged ${count(r.purged)} messages.`));
      onPurged();
    } catch (e) {
      replace(result, errorBox('Could not purge', e));
    }
  });
  return h('section', { 'aria-labelledby': 'purge-title' },
    h('h2', { id: 'purge-title' }, 'Purge'),
    h('p', null, 'Delete every message waiting in this queue. You will be asked to type its name.'),
    button, result);
}

export function renderQueue({ root, name, signal }) {
  document.title = `${name} · Queue · Ferry console`;
  const links = h('p', { class: 'links' });
  const problem = h('div');
  const stats = h('section', { 'aria-labelledby': 'stats-title', 'aria-live': 'polite' }, h('h2', { id: 'stats-title' }, 'Now'), loading());
  const spec = h('section', { 'aria-labelledby': 'spec-title' }, h('h2', { id: 'spec-title' }, 'Spec'), loading());
  const history = h('section', { 'aria-labelledby': 'history-title' }, h('h2', { id: 'history-title' }, 'Last hour'), loading());
  const browse = browser(name, signal);
  replace(root,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: href.overview() }, 'Overview'), ' / queue'),
    h('h1', { tabindex: '-1' }, 'Queue ', h('span', { class: 'name' }, name)),
    links, problem, stats, history, spec, browse.section,
    publisher(name, () => refresh()), purger(name, () => refresh()));

  async function loadDescription() {
    try {
      const info = await api.get(api.path`/v1/queues/${name}`, { signal });
      replace(problem);
      replace(stats, h('h2', { id: 'stats-title' }, 'Now'), statsFacts(info.stats, Date.now()));
      replace(spec, h('h2', { id: 'spec-title' }, 'Spec'), specFacts(info.spec),
        h('details', null, h('summary', null, 'Spec as JSON'), h('pre', null, JSON.stringify(info.spec, null, 2))));
      return info;
    } catch (e) {
      if (!signal.aborted) {
        replace(problem, errorBox(`Could not read queue ${name}`, e));
        replace(stats, h('h2', { id: 'stats-title' }, 'Now'), h('p', { class: 'note' }, 'Unavailable.'));
      }
      return null;
    }
  }

  async function loadHistory() {
    try {
      const data = await api.get(api.path`/v1/console/queues/${name}/history`, { signal });
      replace(history, h('h2', { id: 'history-title' }, 'Last hour'), charts(data));
    } catch (e) {
      if (!signal.aborted) replace(history, h('h2', { id: 'history-title' }, 'Last hour'), errorBox('Could not read the history', e));
    }
  }

  /** Where this queue's dead letters are, and whether it is itself a dead-letter queue:
   * the overview row knows both; the spec alone knows only a named or derived target. */
  async function loadLinks(info) {
    let row = null;
    try {
      const data = await api.get(`/v1/console/overview${api.query({ name, limit: 500 })}`, { signal });
      row = data.queues.rows.find((r) => r.name === name) || null;
    } catch {
      // The spec still tells where dead letters go.
    }
    const dlq = row ? row.dead_letter_queue : deadLetterQueue(name, info?.spec);
    replace(links,
      row?.is_dead_letter_queue && h('a', { href: href.deadLetters(name) }, 'Dead letters in this queue'),
      !row?.is_dead_letter_queue && dlq && h('a', { href: href.deadLetters(dlq) }, `Dead letters (${dlq})`),
      !row && !dlq && h('a', { href: href.deadLetters(name) }, 'Read this queue as a dead-letter queue'));
  }

  function refresh() {
    loadDescription();
    loadHistory();
    browse.refresh();
  }

  loadDescription().then(loadLinks);
  loadHistory();
  browse.start();
  live.onChange(refresh, signal);
}
