// One message opened: its payload, key, headers and, for a dead letter, why it died.
// Headers show as the server sent them: values it redacts arrive masked.

import { h, definitions, scrolling } from './dom.js';
import { ago, key, payload } from './format.js';

/** `level`: the heading level of the message's parts (one below the heading it sits under). */
export function messageView(message, nowMs = Date.now(), level = 4) {
  const heading = (text) => h(`h${level}`, null, text);
  const headerNames = Object.keys(message.headers || {}).sort();
  const headers = headerNames.length === 0
    ? h('p', { class: 'note' }, 'No headers.')
    : scrolling('Headers', h('table', { class: 'data' },
      h('caption', { class: 'visually-hidden' }, 'Headers'),
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Value'))),
      h('tbody', null, headerNames.map((name) => h('tr', null,
        h('th', { scope: 'row' }, name), h('td', null, h('code', null, message.headers[name])))))));
  const letter = message.dead_letter;
  return h('div', { class: 'message' },
    definitions([
      ['Sequence', String(message.seq)],
      ['Id', message.id ?? undefined],
      ['Key', key(message)],
      ['Published', ago(message.published_at_ms, nowMs)],
      ['Priority', message.priority !== undefined ? String(message.priority) : undefined],
      ['Delivery', message.delivery ? String(message.delivery) : undefined],
      ['In flight', message.in_flight === undefined ? undefined : message.in_flight ? 'yes' : 'no'],
    ]),
    letter && h('section', { 'aria-label': 'Why it was dead-lettered' },
      heading('Dead letter'),
      definitions([
        ['Reason', letter.reason],
        ['Attempts', String(letter.deliveries)],
        ['Origin', `${letter.origin_queue} #${letter.origin_seq}`],
        ['Last error', letter.last_error || '–'],
        ['First failure', ago(letter.first_failure_at_ms ?? letter.first_failure_ms, nowMs)],
        ['Last failure', ago(letter.last_failure_at_ms ?? letter.last_failure_ms, nowMs)],
        ['Consumer', letter.consumer || undefined],
      ])),
    heading('Payload'),
    payload(message),
    heading('Headers'),
    headers);
}
