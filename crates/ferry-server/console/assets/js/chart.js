// Sparklines and line charts drawn by hand in inline SVG. A chart library would be
// larger than the charts it draws here (a few polylines, two axes and a legend), would
// need vendoring or a build step, and would bring its own styles into a page whose
// policy allows only its own scripts and styles.

import { h, s } from './dom.js';

/** The series colours, each with at least 3:1 contrast on white (WCAG non-text). */
const COLOURS = ['#1f5fbf', '#b3261e', '#1b7a3a', '#8a4fbf'];

function points(values, width, height, max, pad) {
  const n = values.length;
  return values
    .map((v, i) => {
      const x = n === 1 ? width / 2 : pad + (i * (width - 2 * pad)) / (n - 1);
      const y = height - pad - ((v ?? 0) / (max || 1)) * (height - 2 * pad);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    })
    .join(' ');
}

/** A small line over `values` (oldest first), named by `label` for screen readers. */
export function sparkline(values, { label, colour = COLOURS[0], width = 80, height = 20 } = {}) {
  const svg = s('svg', {
    class: 'sparkline', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': label,
  });
  const data = (values || []).filter((v) => typeof v === 'number');
  if (data.length === 0) return svg;
  const max = Math.max(...data);
  svg.append(s('polyline', {
    points: points(data, width, height, max, 2), fill: 'none', stroke: colour, 'stroke-width': 1.5,
  }));
  return svg;
}

/**
 * A line chart of `series` ([{name, values: [[atMs, value|null]]}]) over time: y from 0 to
 * the largest value, x from the first sample to the last, a legend naming each line.
 * `format` writes a y value; `floor` is the least top of the y axis, so a flat or tiny series
 * (an age of 0 ms, a rate of 0.001/s) does not get grid labels that round to one value.
 * The chart's name and latest values go in its aria-label.
 */
export function lineChart(series, { title, format = String, floor = 1, width = 560, height = 180 }) {
  const left = 64;
  const right = 12;
  const top = 10;
  const bottom = 28;
  const all = series.flatMap((line) => line.values.filter(([, v]) => typeof v === 'number'));
  const latest = series
    .map((line) => {
      const last = [...line.values].reverse().find(([, v]) => typeof v === 'number');
      return last ? `${line.name} ${format(last[1])}` : null;
    })
    .filter(Boolean)
    .join(', ');
  const svg = s('svg', {
    class: 'chart', viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': `${title}: ${latest || 'no samples yet'}`,
    preserveAspectRatio: 'xMinYMin meet',
  });
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  if (all.length === 0) {
    svg.append(s('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'chart-empty' }, 'No samples yet'));
    return figure(svg, title, series);
  }
  const t0 = Math.min(...all.map(([t]) => t));
  const t1 = Math.max(...all.map(([t]) => t));
  const max = Math.max(floor, ...all.map(([, v]) => v));
  const x = (t) => left + (t1 === t0 ? plotW / 2 : ((t - t0) / (t1 - t0)) * plotW);
  const y = (v) => top + plotH - (v / max) * plotH;
  // Three horizontal grid lines with their values, and the time span below.
  for (const fraction of [0, 0.5, 1]) {
    const v = max * fraction;
    svg.append(
      s('line', { x1: left, x2: width - right, y1: y(v), y2: y(v), class: 'grid' }),
      s('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, format(v)),
    );
  }
  const clock = (t) => new Date(t).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  svg.append(
    s('text', { x: left, y: height - 8, class: 'axis' }, clock(t0)),
    s('text', { x: width - right, y: height - 8, 'text-anchor': 'end', class: 'axis' }, clock(t1)),
  );
  series.forEach((line, i) => {
    // A gap (null) ends one polyline and starts the next, instead of drawing through it.
    let run = [];
    const flush = () => {
      if (run.length) {
        svg.append(s('polyline', {
          points: run.join(' '), fill: 'none', stroke: COLOURS[i % COLOURS.length], 'stroke-width': 2,
        }));
      }
      run = [];
    };
    for (const [t, v] of line.values) {
      if (typeof v === 'number') run.push(`${x(t).toFixed(1)},${y(v).toFixed(1)}`);
      else flush();
    }
    flush();
  });
  return figure(svg, title, series);
}

function figure(svg, title, series) {
  const legend = h('ul', { class: 'legend' },
    series.map((line, i) => h('li', null,
      h('span', { class: `swatch swatch-${i % COLOURS.length}`, 'aria-hidden': 'true' }), line.name)));
  return h('figure', { class: 'chart-figure' }, h('figcaption', null, title), svg, legend);
}
