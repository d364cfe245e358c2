// The filter form the message browser and the dead-letter list share: the API's query
// parameters as labelled fields, ages typed in minutes.

import { h } from '../dom.js';
import { minutesToMs } from '../format.js';

const REASONS = ['max_deliveries', 'rejected', 'expired', 'overflow'];

/**
 * A form of the filters `fields` names (`key`, `reason`, `header`, `age`), calling
 * `onApply(filter)` with the API's parameters, or showing what is wrong.
 */
export function filterForm(prefix, fields, onApply, submitLabel = 'Apply filters') {
  const id = (name) => `${prefix}-${name}`;
  const input = (name, label, attrs = {}) => [
    h('label', { for: id(name) }, label),
    h('input', { id: id(name), name, type: 'text', autocomplete: 'off', ...attrs }),
  ];
  // The alert role is given when there is something to say, so no empty alert waits in the page.
  const problem = h('p', { class: 'error', hidden: true });
  const form = h('form', { class: 'filters', 'aria-label': 'Filters' },
    fields.includes('key') && h('div', null, input('key', 'Key is exactly')),
    fields.includes('reason') && h('div', null,
      h('label', { for: id('reason') }, 'Reason'),
      h('select', { id: id('reason'), name: 'reason' },
        h('option', { value: '' }, 'Any reason'),
        REASONS.map((r) => h('option', { value: r }, r)))),
    fields.includes('header') && [
      h('div', null, input('header_name', 'Header name')),
      h('div', null, input('header_value', 'Header value')),
    ],
    fields.includes('age') && [
      h('div', null, input('older_than', 'Older than (minutes)', { inputmode: 'decimal' })),
      h('div', null, input('newer_than', 'Newer than (minutes)', { inputmode: 'decimal' })),
    ],
    h('div', { class: 'buttons' },
      h('button', { type: 'submit', class: 'primary' }, submitLabel),
      h('button', { type: 'reset' }, 'Clear')),
    problem);

  const value = (name) => form.elements.namedItem(name)?.value.trim() ?? '';
  function read() {
    const filter = {
      key: value('key'),
      reason: value('reason'),
      header_name: value('header_name'),
      header_value: value('header_value'),
      older_than_ms: minutesToMs(value('older_than')),
      newer_than_ms: minutesToMs(value('newer_than')),
    };
    if (Number.isNaN(filter.older_than_ms) || Number.isNaN(filter.newer_than_ms)) {
      throw new Error('Ages are a number of minutes, 0 or more.');
    }
    if (filter.header_value && !filter.header_name) {
      throw new Error('A header value needs the header name it belongs to.');
    }
    for (const k of Object.keys(filter)) if (filter[k] === '' || filter[k] === undefined) delete filter[k];
    return filter;
  }
  function submit(event) {
    event.preventDefault();
    let filter;
    try {
      filter = read();
    } catch (e) {
      problem.textContent = e.message;
      problem.setAttribute('role', 'alert');
      problem.hidden = false;
      return;
    }
    problem.hidden = true;
    onApply(filter);
  }
  form.addEventListener('submit', submit);
  // After the fields clear, the list shows everything again.
  form.addEventListener('reset', () => setTimeout(() => {
    problem.hidden = true;
    onApply({});
  }));
  return form;
}
