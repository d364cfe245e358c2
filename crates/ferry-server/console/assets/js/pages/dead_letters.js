// A dead-letter queue's letters, a page at a time from the server (never all at once),
// filtered by reason, header and age; redrive of the selected, the filtered or all of
// them as a rate-limited job whose progress the event stream (or polling) reports.

import * as api from '../api.js';
import * as live from '../live.js';
import { h, hidden, replace, scrolling } from '../dom.js';
import { ago, count } from '../format.js';
import { confirmDialog } from '../confirm.js';
import { messageView } from '../message_view.js';
import { href } from '../router.js';
import { errorBox, loading } from './common.js';
import { filterForm } from './filters.js';

const PAGE = 50;
const POLL_MS = 1000;

function describeTarget(target) {
  return target ? `queue ${target}` : 'their origin queues';
}

/** The job's progress as one sentence; a finished job's ends with "done". */
function progressText(job) {
  const target = describeTarget(job.target);
  if (job.state === 'done') return `Moved ${count(job.moved)} of ${count(job.matched)} dead letters to ${target}: done`;
  if (job.state === 'failed') return `Redrive failed after moving ${count(job.moved)} of ${count(job.matched)}: ${job.error || 'no reason given'}`;
  return `Redriving to ${target}: moved ${count(job.moved)} of ${count(job.matched)} so far…`;
}

export function renderDeadLetters({ root, name: dlq, signal }) {
  document.title = `${dlq} · Dead letters · Ferry console`;
  const state = {
    filter: {},
    cursor: undefined, // after_seq of the page shown; undefined: the first page
    previous: [], // cursors of the pages before it
    page: null,
    selected: new Set(),
    job: null,
    shownAt: Date.now(),
  };

  const listing = h('div', null, loading());
  const opened = h('section', { 'aria-labelledby': 'letter-title', hidden: true });
  const selection = h('p', { class: 'note', 'aria-live': 'polite' });
  const progressBar = h('progress', { max: 1, value: 0, hidden: true, 'aria-label': 'Redrive progress' });
  const progress = h('div', { 'data-testid': 'redrive-progress', role: 'status', class: 'progress' });
  const problem = h('div');

  // Redrive options: where to (origin or a named queue) and how fast.
  const queues = h('datalist', { id: 'queue-names' });
  const toOrigin = h('input', { type: 'radio', name: 'target', id: 'target-origin', value: 'origin', checked: true });
  const toQueue = h('input', { type: 'radio', name: 'target', id: 'target-queue', value: 'queue' });
  const targetName = h('input', { type: 'text', id: 'target-name', list: 'queue-names', autocomplete: 'off', disabled: true });
  const rateInput = h('input', { type: 'number', id: 'redrive-rate', min: 0, step: 1, value: 500, inputmode: 'numeric' });
  for (const radio of [toOrigin, toQueue]) {
    radio.addEventListener('change', () => {
      targetName.disabled = !toQueue.checked;
      if (toQueue.checked) targetName.focus();
    });
  }
  const redriveSelected = h('button', { type: 'button', id: 'redrive-selected', disabled: true }, 'Redrive selected');
  const redriveFiltered = h('button', { type: 'button', id: 'redrive-filtered', disabled: true }, 'Redrive filtered');
  const redriveAll = h('button', { type: 'button', id: 'redrive-all', class: 'danger' }, 'Redrive all');

  const filters = filterForm('dl', ['reason', 'header', 'age'], (filter) => {
    state.filter = filter;
    state.cursor = undefined;
    state.previous = [];
    state.selected.clear();
    redriveFiltered.disabled = Object.keys(filter).length === 0;
    load();
  });

  replace(root,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: href.overview() }, 'Overview'), ' / ', h('a', { href: href.queue(dlq) }, dlq), ' / dead letters'),
    h('h1', { tabindex: '-1' }, 'Dead letters in ', h('span', { class: 'name' }, dlq)),
    problem,
    h('section', { 'aria-labelledby': 'filters-title' }, h('h2', { id: 'filters-title' }, 'Filters'), filters),
    h('section', { 'aria-labelledby': 'redrive-title', class: 'redrive' },
      h('h2', { id: 'redrive-title' }, 'Redrive'),
      h('fieldset', null,
        h('legend', null, 'Send them to'),
        h('p', null, toOrigin, h('label', { for: 'target-origin' }, 'Their origin queue (where each came from)')),
        h('p', null, toQueue, h('label', { for: 'target-queue' }, 'Another queue')),
        h('p', { class: 'indent' }, h('label', { for: 'target-name' }, 'Target queue'), targetName, queues)),
      h('p', null,
        h('label', { for: 'redrive-rate' }, 'Rate (messages per second, 0 for no limit)'), rateInput),
      h('p', { class: 'buttons' }, redriveSelected, redriveFiltered, redriveAll),
      progressBar,
      progress),
    // The list after the controls: with a long page, redrive is still at hand.
    h('section', { 'aria-labelledby': 'letters-title' }, h('h2', { id: 'letters-title' }, 'Letters'), selection, listing),
    opened);

  function open(letter) {
    opened.hidden = false;
    replace(opened, h('h2', { id: 'letter-title', tabindex: '-1' }, `Dead letter ${letter.seq}`), messageView(letter, state.shownAt, 3));
    opened.querySelector('h2').focus();
  }

  // A click anywhere on a row opens it too, except on its own controls (checkbox, link,
  // button): the Open button is the keyboard's way.
  function openFromRow(event, letter) {
    if (!event.target.closest('a, button, input, label')) open(letter);
  }

  function updateSelection() {
    const n = state.selected.size;
    selection.textContent = n === 0 ? '' : `${n} selected`;
    redriveSelected.disabled = n === 0;
  }

  function row(letter) {
    const d = letter.dead_letter || {};
    const box = h('input', { type: 'checkbox', id: `select-${letter.seq}`, checked: state.selected.has(letter.seq) });
    box.addEventListener('change', () => {
      if (box.checked) state.selected.add(letter.seq);
      else state.selected.delete(letter.seq);
      updateSelection();
    });
    return h('tr', { 'data-seq': letter.seq, class: 'openable', onclick: (event) => openFromRow(event, letter) },
      h('td', { class: 'select' }, box, h('label', { for: box.id, class: 'visually-hidden' }, `Select message ${letter.seq}`)),
      h('th', { scope: 'row', class: 'num' }, String(letter.seq)),
      h('td', { 'data-col': 'reason' }, d.reason ?? '–'),
      h('td', { 'data-col': 'attempts', class: 'num' }, d.deliveries !== undefined ? String(d.deliveries) : '–'),
      h('td', { 'data-col': 'last_error', class: 'wrap' }, d.last_error || '–'),
      h('td', { 'data-col': 'origin' }, d.origin_queue
        ? [h('a', { href: href.queue(d.origin_queue) }, d.origin_queue), ` #${d.origin_seq}`] : '–'),
      h('td', { 'data-col': 'age' }, ago(letter.published_at_ms, state.shownAt)),
      h('td', null, h('button', { type: 'button', id: `open-${letter.seq}`, onclick: () => open(letter) },
        'Open', hidden(` dead letter ${letter.seq}`))));
  }

  function render() {
    const page = state.page;
    const all = h('input', { type: 'checkbox', id: 'select-page' });
    all.checked = page.letters.length > 0 && page.letters.every((l) => state.selected.has(l.seq));
    all.addEventListener('change', () => {
      for (const l of page.letters) {
        if (all.checked) state.selected.add(l.seq);
        else state.selected.delete(l.seq);
      }
      for (const box of listing.querySelectorAll('tbody input[type=checkbox]')) box.checked = all.checked;
      updateSelection();
    });
    const table = h('table', { class: 'data', 'data-testid': 'dead-letters-table' },
      h('caption', { class: 'visually-hidden' }, `Dead letters in ${dlq}`),
      h('thead', null, h('tr', null,
        h('td', { class: 'select' }, all, h('label', { for: 'select-page', class: 'visually-hidden' }, 'Select every message on this page')),
        ['Seq', 'Reason', 'Attempts', 'Last error', 'Origin', 'Dead-lettered', 'Open'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, page.letters.length
        ? page.letters.map(row)
        : h('tr', null, h('td', { colspan: 8 }, Object.keys(state.filter).length ? 'No dead letter matches these filters.' : 'No dead letters.'))));
    const first = state.cursor === undefined;
    replace(listing,
      scrolling('Dead letters', table),
      (!first || page.more) && h('nav', { class: 'pager', 'aria-label': 'Dead letter pages' },
        h('button', { type: 'button', id: 'letters-previous', disabled: first, onclick: previousPage }, 'Previous'),
        h('button', { type: 'button', id: 'letters-next', disabled: !page.more, onclick: nextPage }, 'Next')));
    updateSelection();
  }

  function nextPage() {
    if (!state.page?.more) return;
    state.previous.push(state.cursor);
    state.cursor = state.page.next_after_seq;
    load();
  }

  function previousPage() {
    if (state.previous.length === 0) return;
    state.cursor = state.previous.pop();
    load();
  }

  async function load() {
    const q = api.query({ ...state.filter, after_seq: state.cursor, max: PAGE });
    try {
      const page = await api.get(api.path`/v1/queues/${dlq}/dead-letters` + q, { signal });
      state.page = page;
      state.shownAt = Date.now();
      replace(problem);
      render();
    } catch (e) {
      if (!signal.aborted) replace(problem, errorBox(`Could not read the dead letters in ${dlq}`, e));
    }
  }

  // Progress: from `redrive` events, and polled as well in case the stream is down.
  let poller = null;
  function show(job) {
    if (!state.job || job.id !== state.job.id) return;
    state.job = job;
    progress.textContent = progressText(job);
    progressBar.hidden = false;
    progressBar.max = Math.max(job.matched, 1);
    progressBar.value = job.state === 'done' ? progressBar.max : job.moved;
    if (job.state !== 'running') {
      clearInterval(poller);
      poller = null;
      state.selected.clear();
      load();
    }
  }

  function track(job) {
    state.job = job;
    show(job);
    clearInterval(poller);
    if (job.state !== 'running') return;
    poller = setInterval(async () => {
      try {
        show(await api.get(api.path`/v1/redrive-jobs/${job.id}`, { signal }));
      } catch (e) {
        if (!signal.aborted) progress.textContent = `Could not read the redrive's progress: ${e.describe ? e.describe() : e.message}`;
      }
    }, POLL_MS);
  }
  signal.addEventListener('abort', () => clearInterval(poller));

  /** The redrive body's target and rate, or an error saying what to fix. */
  function options() {
    const rate = rateInput.value.trim() === '' ? 500 : Number(rateInput.value);
    if (!Number.isInteger(rate) || rate < 0) throw new Error('The rate is a whole number of messages per second, 0 or more.');
    const body = { rate_per_sec: rate };
    if (toQueue.checked) {
      const target = targetName.value.trim();
      if (!target) throw new Error('Name the queue to send them to, or choose their origin queue.');
      body.target = target;
    }
    return body;
  }

  async function start(extra, what) {
    let body;
    try {
      body = { ...options(), ...extra };
    } catch (e) {
      progress.textContent = e.message;
      return;
    }
    progressBar.hidden = true;
    progress.textContent = `Starting to redrive ${what}…`;
    try {
      const job = await api.post(api.path`/v1/queues/${dlq}/redrive-jobs`, body, { signal });
      track(job);
    } catch (e) {
      if (!signal.aborted) progress.textContent = `Could not start the redrive: ${e.describe ? e.describe() : e.message}`;
    }
  }

  redriveSelected.addEventListener('click', () => {
    const seqs = [...state.selected].sort((a, b) => a - b);
    if (seqs.length) start({ seqs }, `${seqs.length} selected dead letters`);
  });
  redriveFiltered.addEventListener('click', () => {
    const filter = state.filter;
    if (Object.keys(filter).length) start({ filter }, 'the filtered dead letters');
  });
  redriveAll.addEventListener('click', async () => {
    let body;
    try {
      body = options();
    } catch (e) {
      progress.textContent = e.message;
      return;
    }
    const yes = await confirmDialog({
      title: 'Redrive every dead letter?',
      question: `Every dead letter in ${dlq} goes to ${describeTarget(body.target)}, `
        + `${body.rate_per_sec === 0 ? 'as fast as it can' : `${body.rate_per_sec} a second`}, whatever the filters say.`,
      confirmLabel: 'Confirm',
    });
    redriveAll.focus();
    if (yes) start({}, 'every dead letter');
  });

  live.on('redrive', show, signal);
  live.on('sample', () => load(), signal);

  (async () => {
    try {
      const { names } = await api.get('/v1/queues', { signal });
      replace(queues, names.map((n) => h('option', { value: n })));
    } catch {
      // The target is typed then; the list only helps.
    }
  })();
  (async () => {
    // A redrive of this queue still running (started before this page was opened).
    try {
      const { jobs } = await api.get('/v1/redrive-jobs', { signal });
      const running = jobs.find((j) => j.dead_letter_queue === dlq && j.state === 'running');
      if (running) track(running);
    } catch {
      // Only the progress of an older job is lost; new ones are tracked as they start.
    }
  })();
  load();
}
