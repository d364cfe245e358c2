// Confirmation in a modal <dialog>: focus moves into it, Escape cancels, and the page
// behind cannot be clicked until it closes.

import { h } from './dom.js';

let counter = 0;

/**
 * Asks `question`; resolves true when the operator confirms. With `typeToConfirm`, the
 * confirm button works only once that exact text is typed (the purge's queue name).
 */
export function confirmDialog({ title, question, confirmLabel = 'Confirm', typeToConfirm, danger = false }) {
  counter += 1;
  const titleId = `confirm-title-${counter}`;
  const inputId = `confirm-input-${counter}`;
  return new Promise((resolve) => {
    const input = typeToConfirm !== undefined
      ? h('input', { id: inputId, type: 'text', autocomplete: 'off', spellcheck: 'false', required: true })
      : null;
    const confirm = h('button', { type: 'submit', class: danger ? 'danger' : 'primary', value: 'confirm' }, confirmLabel);
    const cancel = h('button', { type: 'button' }, 'Cancel');
    const form = h('form', null,
      h('h2', { id: titleId }, title),
      h('p', null, question),
      input && h('p', null,
        h('label', { for: inputId }, `Type "${typeToConfirm}" to confirm`),
        input),
      h('p', { class: 'buttons' }, confirm, cancel));
    const dialog = h('dialog', { 'aria-labelledby': titleId, class: 'confirm' }, form);
    if (input) {
      confirm.disabled = true;
      input.addEventListener('input', () => {
        confirm.disabled = input.value !== typeToConfirm;
      });
    }
    let confirmed = false;
    // Closed by hand rather than by `method="dialog"`: the page's policy allows no
    // form submission at all (form-action 'none').
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      if (input && input.value !== typeToConfirm) return;
      confirmed = true;
      dialog.close();
    });
    cancel.addEventListener('click', () => dialog.close());
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(confirmed);
    });
    document.body.append(dialog);
    dialog.showModal();
    (input || cancel).focus();
  });
}
