// Elements built from data, never from HTML strings: a queue or header name is always
// text, so nothing a producer or an operator typed can become markup in the page.

const SVG_NS = 'http://www.w3.org/2000/svg';

function apply(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') {
      el.textContent = String(value);
    } else if (name.startsWith('on') && typeof value === 'function') {
      el.addEventListener(name.slice(2), value);
    } else if (name === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(name, '');
    } else {
      el.setAttribute(name, String(value));
    }
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** An HTML element: `h('a', {href: '#/'}, 'Overview')`. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  apply(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element, as `h` builds HTML ones. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, attrs);
  append(el, children);
  return el;
}

/**
 * Replaces what `parent` holds, keeping keyboard focus on the element with the same id
 * if the new content has one: live refreshes must not throw the operator's focus away.
 */
export function replace(parent, ...children) {
  const focused = document.activeElement;
  const id = focused && parent.contains(focused) ? focused.id : '';
  parent.replaceChildren();
  append(parent, children);
  if (id) document.getElementById(id)?.focus();
}

/** A table that scrolls sideways on a narrow screen; the region is focusable so a
 * keyboard can scroll it too, and named "<label> table" to tell it from its section. */
export function scrolling(label, table) {
  return h('div', { class: 'table-scroll', role: 'region', 'aria-label': `${label} table`, tabindex: '0' }, table);
}

/** Text only a screen reader reads. */
export function hidden(text) {
  return h('span', { class: 'visually-hidden' }, text);
}

/** A `<dl>` from `[term, value]` pairs, skipping pairs whose value is undefined. */
export function definitions(pairs, attrs) {
  return h('dl', { class: 'facts', ...attrs },
    pairs.filter(([, v]) => v !== undefined).map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}
