// One topic: partitions and offsets, retention and compaction, its subscriptions with
// their filters, its consumer groups (members, assignments, lag) with offset reset, and
// the last hour from the server's history.

import * as api from '../api.js';
import * as live from '../live.js';
import { h, definitions, replace, scrolling } from '../dom.js';
import { ago, bytes, count, duration, rate } from '../format.js';
import { lineChart } from '../chart.js';
import { confirmDialog } from '../confirm.js';
import { href } from '../router.js';
import { errorBox, loading, outcome } from './common.js';

/** `head` names the columns; a name ending in '#' is a number column, aligned right as its
 *  cells are. */
function table(caption, head, rows, empty) {
  const column = (c) => (c.endsWith('#')
    ? h('th', { scope: 'col', class: 'num' }, c.slice(0, -1))
    : h('th', { scope: 'col' }, c));
  return scrolling(caption, h('table', { class: 'data' },
    h('caption', { class: 'visually-hidden' }, caption),
    h('thead', null, h('tr', null, head.map(column))),
    h('tbody', null, rows.length ? rows : h('tr', null, h('td', { colspan: head.length }, empty)))));
}

function partitions(info, nowMs) {
  return table('Partitions', ['Partition#', 'Start offset#', 'End offset#', 'Records#', 'Bytes#', 'Oldest record'],
    info.partitions.map((p) => h('tr', { 'data-partition': p.partition },
      h('th', { scope: 'row', class: 'num' }, String(p.partition)),
      h('td', { class: 'num' }, count(p.start_offset)),
      h('td', { class: 'num' }, count(p.end_offset)),
      h('td', { class: 'num' }, count(p.end_offset - p.start_offset)),
      h('td', { class: 'num' }, bytes(p.bytes)),
      h('td', null, ago(p.oldest_published_at_ms, nowMs)))),
    'No partitions.');
}

function retention(spec) {
  const r = spec.retention || {};
  const c = spec.compaction;
  return definitions([
    ['Partitions', String(spec.partitions ?? '–')],
    ['Keep records for', r.unbounded_age ? 'ever (no age limit)' : r.max_age_ms != null ? duration(r.max_age_ms) : 'default'],
    ['Keep at most', r.max_bytes != null ? `${bytes(r.max_bytes)} a partition` : 'no size limit'],
    ['Retention overrides subscriptions', r.overrides_subscriptions ? 'yes' : 'no'],
    ['Compaction', c ? [
      'on',
      c.tombstone_retention_ms != null ? `, tombstones kept ${duration(c.tombstone_retention_ms)}` : '',
      c.min_lag_ms != null ? `, records compacted after ${duration(c.min_lag_ms)}` : '',
    ].join('') : 'off'],
    ['Keyless placement', spec.keyless ?? 'default'],
    ['Durability', spec.durability ?? 'default'],
  ]);
}

function subscriptions(rows) {
  return table('Subscriptions', ['Subscription', 'Filter', 'Start', 'Ready#', 'In flight#', 'Not yet considered#'],
    rows.map(({ name, info, error }) => h('tr', { 'data-subscription': name },
      h('th', { scope: 'row' }, h('a', { href: href.queue(name) }, name)),
      error
        ? h('td', { colspan: 5 }, errorBox(`Could not read ${name}`, error))
        : [
          h('td', null, info.spec.filter ? h('code', null, info.spec.filter) : 'everything'),
          h('td', null, info.spec.start ?? 'default'),
          h('td', { class: 'num' }, count(info.queue.stats.ready)),
          h('td', { class: 'num' }, count(info.queue.stats.in_flight)),
          h('td', { class: 'num' }, count(info.not_yet_considered)),
        ])),
    'No subscriptions.');
}

function resetForm(topic, group, partitionIds, report, onDone) {
  const id = (n) => `reset-${group}-${n}`;
  const partition = h('select', { id: id('partition') },
    h('option', { value: '' }, 'Every partition'),
    partitionIds.map((p) => h('option', { value: String(p) }, `Partition ${p}`)));
  const choices = ['earliest', 'latest', 'timestamp'].map((to) => h('input', {
    type: 'radio', name: id('to'), id: id(to), value: to, checked: to === 'earliest',
  }));
  const when = h('input', { type: 'datetime-local', id: id('when'), step: 1 });
  const form = h('form', { class: 'reset', 'aria-label': `Reset the offsets of group ${group}` },
    h('h4', null, 'Reset offsets'),
    h('p', null, h('label', { for: id('partition') }, 'Partition'), partition),
    h('fieldset', null, h('legend', null, 'Move to'),
      h('p', null, choices[0], h('label', { for: id('earliest') }, 'Earliest (replay everything kept)')),
      h('p', null, choices[1], h('label', { for: id('latest') }, 'Latest (skip to the end)')),
      h('p', null, choices[2], h('label', { for: id('timestamp') }, 'The first record at or after a time')),
      h('p', { class: 'indent' }, h('label', { for: id('when') }, 'Time (your local time)'), when)),
    h('p', null, h('button', { type: 'submit' }, 'Reset offsets')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const choice = choices.find((c) => c.checked).value;
    let to = choice;
    if (choice === 'timestamp') {
      const t = when.value ? new Date(when.value).getTime() : NaN;
      if (!Number.isFinite(t)) {
        report(outcome('Choose the time to move to.', false));
        when.focus();
        return;
      }
      to = { timestamp_ms: t };
    }
    const p = partition.value === '' ? null : Number(partition.value);
    const where = p === null ? 'every partition' : `partition ${p}`;
    const target = choice === 'timestamp' ? `the first record at or after ${new Date(to.timestamp_ms).toLocaleString()}` : `the ${choice} offset`;
    const yes = await confirmDialog({
      title: `Reset group ${group}?`,
      question: `Group ${group} on ${topic} moves to ${target} on ${where}. Its members read from there next.`,
      confirmLabel: 'Confirm',
    });
    form.querySelector('button[type=submit]').focus();
    if (!yes) return;
    try {
      await api.post(api.path`/v1/topics/${topic}/groups/${group}/offsets`, { partition: p, to });
      report(outcome(`Group ${group} moved to ${target} on ${where}.`));
      onDone();
    } catch (e) {
      report(errorBox('Could not reset the offsets', e));
    }
  });
  return form;
}

function groupView(topic, info, partitionIds, report, onReset) {
  return h('section', { class: 'group', 'data-group': info.group, 'aria-labelledby': `group-${info.group}` },
    h('h3', { id: `group-${info.group}` }, `Group ${info.group}`, h('span', { class: 'note' }, ` generation ${info.generation}`)),
    table(`Members of ${info.group}`, ['Member', 'Partitions'],
      info.members.map((m) => h('tr', null, h('th', { scope: 'row' }, m.member_id), h('td', null, m.partitions.join(', ') || 'none'))),
      'No members: nobody reads for this group now.'),
    table(`Assignments and lag of ${info.group}`, ['Partition#', 'Owner', 'Committed#', 'End offset#', 'Lag (records)#', 'Lag (time)#'],
      info.partitions.map((p) => h('tr', null,
        h('th', { scope: 'row', class: 'num' }, String(p.partition)),
        h('td', null, p.owner ?? 'unassigned'),
        h('td', { class: 'num' }, p.committed == null ? 'none' : count(p.committed)),
        h('td', { class: 'num' }, count(p.end_offset)),
        h('td', { class: 'num', 'data-col': 'lag_records' }, count(p.lag_records)),
        h('td', { class: 'num', 'data-col': 'lag_ms' }, duration(p.lag_ms)))),
      'No partitions.'),
    resetForm(topic, info.group, partitionIds, report, onReset));
}

function charts(history) {
  const samples = history.samples || [];
  const series = (name, field) => ({ name, values: samples.map((x) => [x.at_ms, x[field] ?? null]) });
  return h('div', { class: 'charts' },
    lineChart([series('Records', 'records')], { title: 'Records', format: count }),
    lineChart([series('Publish', 'publish_rate')], { title: 'Publish rate (records per second)', format: rate }),
    lineChart([series('Largest group lag', 'max_group_lag_ms')], { title: 'Largest group lag', format: duration, floor: 1000 }));
}

export function renderTopic({ root, name, signal }) {
  document.title = `${name} · Topic · Ferry console`;
  const problem = h('div');
  const section = (id, title) => h('section', { 'aria-labelledby': id }, h('h2', { id }, title), loading());
  const parts = section('partitions-title', 'Partitions');
  const settings = section('retention-title', 'Retention and compaction');
  const history = section('topic-history-title', 'Last hour');
  const subs = section('subscriptions-title', 'Subscriptions');
  // The groups' list is re-drawn on refresh; what a reset did stays shown above it.
  const resetOutcome = h('div');
  const groupList = h('div', null, loading());
  const groups = h('section', { 'aria-labelledby': 'groups-title' },
    h('h2', { id: 'groups-title' }, 'Consumer groups'), resetOutcome, groupList);
  const report = (node) => replace(resetOutcome, node);
  replace(root,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: href.overview() }, 'Overview'), ' / topic'),
    h('h1', { tabindex: '-1' }, 'Topic ', h('span', { class: 'name' }, name)),
    problem, parts, history, settings, subs, groups);

  async function load() {
    let info;
    try {
      info = await api.get(api.path`/v1/topics/${name}`, { signal });
      replace(problem);
    } catch (e) {
      if (!signal.aborted) replace(problem, errorBox(`Could not read topic ${name}`, e));
      return;
    }
    const now = Date.now();
    replace(parts, h('h2', { id: 'partitions-title' }, 'Partitions'), partitions(info, now));
    replace(settings, h('h2', { id: 'retention-title' }, 'Retention and compaction'), retention(info.spec));

    // Which subscriptions and groups the topic has: the overview's row lists them.
    let row = null;
    try {
      const data = await api.get(`/v1/console/overview${api.query({ name, limit: 500 })}`, { signal });
      row = data.topics.rows.find((r) => r.name === name) || null;
    } catch (e) {
      if (signal.aborted) return;
      replace(subs, h('h2', { id: 'subscriptions-title' }, 'Subscriptions'), errorBox('Could not list the subscriptions', e));
      replace(groupList, errorBox('Could not list the groups', e));
      return;
    }
    const subRows = await Promise.all((row?.subscriptions || []).map(async (sub) => {
      try {
        return { name: sub, info: await api.get(api.path`/v1/subscriptions/${sub}`, { signal }) };
      } catch (error) {
        return { name: sub, error };
      }
    }));
    if (signal.aborted) return;
    replace(subs, h('h2', { id: 'subscriptions-title' }, 'Subscriptions'), subscriptions(subRows));

    const ids = info.partitions.map((p) => p.partition);
    const names = (row?.groups || []).map((g) => g.group);
    const views = await Promise.all(names.map(async (g) => {
      try {
        const group = await api.get(api.path`/v1/topics/${name}/groups/${g}`, { signal });
        return groupView(name, group, ids, report, load);
      } catch (e) {
        return h('section', { 'aria-label': `Group ${g}` }, h('h3', null, `Group ${g}`), errorBox(`Could not read group ${g}`, e));
      }
    }));
    if (signal.aborted) return;
    // Re-drawing a reset form being filled in (or confirmed) would drop what was chosen:
    // the groups wait for the next refresh then.
    if (groupList.querySelector('form.reset:focus-within') || document.querySelector('dialog[open]')) return;
    replace(groupList, views.length ? views : h('p', { class: 'note' }, 'No consumer groups.'));
  }

  async function loadHistory() {
    try {
      const data = await api.get(api.path`/v1/console/topics/${name}/history`, { signal });
      replace(history, h('h2', { id: 'topic-history-title' }, 'Last hour'), charts(data));
    } catch (e) {
      if (!signal.aborted) replace(history, h('h2', { id: 'topic-history-title' }, 'Last hour'), errorBox('Could not read the history', e));
    }
  }

  const refresh = () => {
    load();
    loadHistory();
  };
  live.onChange(refresh, signal);
  refresh();
}
