// The overview: every queue and topic the token may see, paged and filtered by the
// server, with depths, ages, rates and alerts. Re-read after each sample.

import * as api from '../api.js';
import * as live from '../live.js';
import { h, replace, scrolling } from '../dom.js';
import { age, count, duration, rate } from '../format.js';
import { sparkline } from '../chart.js';
import { href } from '../router.js';
import { errorBox, loading } from './common.js';

const LIMIT = 50;

const ALERT_TEXT = {
  dead_letters: 'dead letters',
  old_messages: 'old messages',
  group_lag: 'group lag',
};

// Kept while the page is open and when coming back to it, as an operator expects.
const state = { filter: '', queueOffset: 0, topicOffset: 0 };

function alerts(list) {
  if (!list || list.length === 0) return null;
  return h('span', { class: 'alerts' },
    list.map((a) => h('span', { class: 'badge alert' }, h('span', { 'aria-hidden': 'true' }, '⚠ '), ALERT_TEXT[a] || a)));
}

function rates(row, interval) {
  const per = duration(interval);
  return h('td', { 'data-col': 'rates' },
    h('span', { class: 'rate' },
      sparkline(row.publish_history, { label: `Publish rate over the last ${row.publish_history?.length || 0} samples of ${per}` }),
      ` publish ${rate(row.publish_rate)}`),
    row.ack_history !== undefined && h('span', { class: 'rate' },
      sparkline(row.ack_history, { label: `Ack rate over the last ${row.ack_history?.length || 0} samples of ${per}`, colour: '#1b7a3a' }),
      ` ack ${rate(row.ack_rate)}`));
}

function queueRow(q, data) {
  const dlqLink = q.is_dead_letter_queue ? q.name : q.dead_letter_queue;
  return h('tr', { 'data-queue': q.name, 'data-alert': q.alerts?.length ? q.alerts.join(' ') : null },
    h('th', { scope: 'row' },
      h('a', { href: href.queue(q.name), id: `queue-link-${q.name}` }, q.name),
      q.is_dead_letter_queue && h('span', { class: 'badge' }, 'DLQ'),
      alerts(q.alerts)),
    h('td', { 'data-col': 'ready', class: 'num' }, count(q.ready)),
    h('td', { 'data-col': 'in_flight', class: 'num' }, count(q.in_flight)),
    h('td', { 'data-col': 'delayed', class: 'num' }, count(q.delayed)),
    h('td', { 'data-col': 'dlq_depth', class: 'num' },
      dlqLink && q.dlq_depth > 0
        // Named in full for a screen reader; the cell's text stays the number alone.
        ? h('a', { href: href.deadLetters(dlqLink), id: `dlq-link-${q.name}`, 'aria-label': `${count(q.dlq_depth)} dead letters in ${dlqLink}` }, count(q.dlq_depth))
        : count(q.dlq_depth)),
    h('td', { 'data-col': 'oldest_age', class: 'num' }, age(q.oldest_ready_age_ms, data.now_ms)),
    rates(q, data.sample_interval_ms));
}

function topicRow(t, data) {
  return h('tr', { 'data-topic': t.name, 'data-alert': t.alerts?.length ? t.alerts.join(' ') : null },
    h('th', { scope: 'row' }, h('a', { href: href.topic(t.name), id: `topic-link-${t.name}` }, t.name), alerts(t.alerts)),
    h('td', { 'data-col': 'partitions', class: 'num' }, count(t.partitions)),
    h('td', { 'data-col': 'records', class: 'num' }, count(t.records)),
    h('td', { 'data-col': 'rates' },
      sparkline(t.publish_history, { label: `Publish rate over the last ${t.publish_history?.length || 0} samples of ${duration(data.sample_interval_ms)}` }),
      ` ${rate(t.publish_rate)}`),
    h('td', { 'data-col': 'subscriptions' },
      t.subscriptions?.length
        ? h('ul', { class: 'plain' }, t.subscriptions.map((name) => h('li', null, h('a', { href: href.queue(name) }, name))))
        : '–'),
    h('td', { 'data-col': 'groups' },
      t.groups?.length
        ? h('ul', { class: 'plain' }, t.groups.map((g) => h('li', null,
          `${g.group}: ${count(g.lag_records)} behind, ${duration(g.lag_ms)} (${g.members} ${g.members === 1 ? 'member' : 'members'})`)))
        : '–'));
}

function pager(label, list, key, reload) {
  if (list.total <= LIMIT) return null;
  const first = list.total === 0 ? 0 : list.offset + 1;
  const last = Math.min(list.offset + list.rows.length, list.total);
  const move = (to) => {
    state[key] = Math.max(0, to);
    reload();
  };
  return h('nav', { class: 'pager', 'aria-label': `${label} pages` },
    h('button', { type: 'button', id: `${key}-previous`, disabled: list.offset === 0, onclick: () => move(list.offset - LIMIT) }, 'Previous'),
    h('span', null, `${first}–${last} of ${count(list.total)}`),
    h('button', { type: 'button', id: `${key}-next`, disabled: last >= list.total, onclick: () => move(list.offset + LIMIT) }, 'Next'));
}

function table(testid, caption, head, rows, empty) {
  return h('table', { class: 'data', 'data-testid': testid },
    h('caption', { class: 'visually-hidden' }, caption),
    h('thead', null, h('tr', null, head.map(([text, cls]) => h('th', { scope: 'col', class: cls }, text)))),
    h('tbody', null, rows.length ? rows : h('tr', null, h('td', { colspan: head.length }, empty))));
}

export function renderOverview({ root, signal }) {
  document.title = 'Overview · Ferry console';
  const filter = h('input', { id: 'filter', type: 'search', value: state.filter, autocomplete: 'off' });
  const queues = h('section', { 'aria-labelledby': 'queues-title' }, h('h2', { id: 'queues-title' }, 'Queues'), loading());
  const topics = h('section', { 'aria-labelledby': 'topics-title' }, h('h2', { id: 'topics-title' }, 'Topics'), loading());
  const problem = h('div');
  replace(root,
    h('h1', { tabindex: '-1' }, 'Overview'),
    h('form', { class: 'filter', role: 'search', onsubmit: (e) => e.preventDefault() },
      h('label', { for: 'filter' }, 'Filter by name'), filter),
    problem, queues, topics);

  let inFlight = null;
  async function load() {
    inFlight?.abort();
    inFlight = new AbortController();
    const q = api.query({ name: state.filter, queue_offset: state.queueOffset, topic_offset: state.topicOffset, limit: LIMIT });
    let data;
    try {
      data = await api.get(`/v1/console/overview${q}`, { signal: inFlight.signal });
    } catch (e) {
      if (e.name === 'AbortError' || signal.aborted) return;
      replace(problem, errorBox('Could not load the overview', e));
      return;
    }
    if (signal.aborted) return;
    replace(problem);
    const noMatch = state.filter ? `No queue's name contains "${state.filter}".` : 'No queues yet.';
    replace(queues,
      h('h2', { id: 'queues-title' }, 'Queues ', h('span', { class: 'count' }, `(${count(data.queues.total)})`)),
      scrolling('Queues', table('queues-table', 'Queues: depths, oldest ready message, rates and alerts',
        [['Queue'], ['Ready', 'num'], ['In flight', 'num'], ['Delayed', 'num'], ['Dead letters', 'num'], ['Oldest ready', 'num'], ['Rates']],
        data.queues.rows.map((row) => queueRow(row, data)), noMatch)),
      pager('Queues', data.queues, 'queueOffset', load));
    replace(topics,
      h('h2', { id: 'topics-title' }, 'Topics ', h('span', { class: 'count' }, `(${count(data.topics.total)})`)),
      scrolling('Topics', table('topics-table', 'Topics: partitions, records, publish rate, subscriptions and groups',
        [['Topic'], ['Partitions', 'num'], ['Records', 'num'], ['Publish rate'], ['Subscriptions'], ['Groups']],
        data.topics.rows.map((row) => topicRow(row, data)),
        state.filter ? `No topic's name contains "${state.filter}".` : 'No topics yet.')),
      pager('Topics', data.topics, 'topicOffset', load));
  }

  let typing = null;
  filter.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      state.filter = filter.value.trim();
      state.queueOffset = 0;
      state.topicOffset = 0;
      load();
    }, 250);
  });
  signal.addEventListener('abort', () => {
    inFlight?.abort();
    clearTimeout(typing);
  });
  live.onChange(load, signal);
  load();
}
