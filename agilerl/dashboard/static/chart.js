// A small SVG line chart: nice axis ticks, gaps for missing values, a legend that hides and
// shows series, and a hover read-out of every series at the nearest x.

import {el, svg, fmt, tick} from "./dom.js";

const MARGIN = {left: 64, right: 14, top: 10, bottom: 36};

function niceStep(span, count) {
  const raw = span / Math.max(count, 1);
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const scaled = raw / power;
  return (scaled <= 1 ? 1 : scaled <= 2 ? 2 : scaled <= 5 ? 5 : 10) * power;
}

function ticks(low, high, count) {
  const step = niceStep(high - low, count);
  const out = [];
  out.step = step;
  for (let v = Math.ceil(low / step) * step; v <= high + step * 1e-9; v += step) {
    out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  }
  return out;
}

function extent(values, pad) {
  let low = Infinity, high = -Infinity;
  for (const v of values) {
    if (v < low) low = v;
    if (v > high) high = v;
  }
  if (low === Infinity) return [0, 1];
  if (low === high) {  // a constant: centre it, on a scale of its own size
    const half = Math.abs(low) * 0.1 || 1;
    return [low - half, high + half];
  }
  const margin = (high - low) * pad;
  return [low - margin, high + margin];
}

function pathOf(points, sx, sy) {
  let d = "", pen = false;
  for (const [x, y] of points) {
    if (y === null || y === undefined || x === null || x === undefined) { pen = false; continue; }
    d += `${pen ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
    pen = true;
  }
  return d;
}

/**
 * A chart in `container`. Call update(series) with
 * [{key, name, points: [[x, y|null], ...], colour, width, faint}] whenever data changes.
 */
export class LineChart {
  constructor(container, {xLabel = "", yLabel = "", height = 260, legend = true} = {}) {
    this.xLabel = xLabel;
    this.yLabel = yLabel;
    this.height = height;
    this.hidden = new Set();
    this.series = [];
    this.root = el("div", {class: "chart"});
    this.plot = el("div", {class: "plot"});
    this.tip = el("div", {class: "tip", hidden: true});
    this.legend = legend ? el("div", {class: "legend"}) : null;
    this.root.append(this.plot, this.tip);
    if (this.legend) this.root.append(this.legend);
    container.append(this.root);
  }

  update(series) {
    this.series = series;
    this.draw();
  }

  draw() {
    const width = Math.max(this.plot.clientWidth || 640, 240), height = this.height;
    const shown = this.series.filter((s) => !this.hidden.has(s.key));
    const xs = [], ys = [];
    for (const s of shown) {
      for (const [x, y] of s.points) {
        if (x !== null && y !== null && y !== undefined) { xs.push(x); ys.push(y); }
      }
    }
    const [x0, x1] = extent(xs, 0);
    const [y0, y1] = extent(ys, 0.05);
    const sx = (x) => MARGIN.left + ((x - x0) / (x1 - x0)) * (width - MARGIN.left - MARGIN.right);
    const sy = (y) => height - MARGIN.bottom - ((y - y0) / (y1 - y0)) * (height - MARGIN.top - MARGIN.bottom);
    const chart = svg("svg", {viewBox: `0 0 ${width} ${height}`, width, height, class: "svgchart"});
    const axes = svg("g", {class: "axes"});
    const xt = ticks(x0, x1, Math.floor(width / 110)), yt = ticks(y0, y1, Math.floor(height / 50));
    for (const t of xt) {
      axes.append(svg("line", {x1: sx(t), x2: sx(t), y1: MARGIN.top, y2: height - MARGIN.bottom, class: "gridline"}),
        svg("text", {x: sx(t), y: height - MARGIN.bottom + 14, "text-anchor": "middle"}, tick(t, xt.step)));
    }
    for (const t of yt) {
      axes.append(svg("line", {x1: MARGIN.left, x2: width - MARGIN.right, y1: sy(t), y2: sy(t), class: "gridline"}),
        svg("text", {x: MARGIN.left - 6, y: sy(t) + 4, "text-anchor": "end"}, tick(t, yt.step)));
    }
    axes.append(svg("text", {x: (width + MARGIN.left) / 2, y: height - 4, "text-anchor": "middle", class: "label"}, this.xLabel));
    axes.append(svg("text", {x: 12, y: MARGIN.top + (height - MARGIN.bottom) / 2, class: "label",
      transform: `rotate(-90 12 ${MARGIN.top + (height - MARGIN.bottom) / 2})`, "text-anchor": "middle"}, this.yLabel));
    chart.append(axes);
    const lines = svg("g", {class: "lines"});
    // faint series first, so that the summary lines are drawn on top of them
    for (const s of [...shown.filter((s) => s.faint), ...shown.filter((s) => !s.faint)]) {
      lines.append(svg("path", {d: pathOf(s.points, sx, sy), stroke: s.colour, "stroke-width": s.width || 1.5,
        class: s.faint ? "series faint" : "series", "data-series": s.key,
        "data-points": s.points.filter((p) => p[1] !== null && p[1] !== undefined).length}));
    }
    chart.append(lines);
    const cursor = svg("line", {class: "cursor", y1: MARGIN.top, y2: height - MARGIN.bottom, visibility: "hidden"});
    chart.append(cursor);
    chart.addEventListener("mousemove", (event) => this.hover(event, chart, cursor, sx, x0, x1, width));
    chart.addEventListener("mouseleave", () => { this.tip.hidden = true; cursor.setAttribute("visibility", "hidden"); });
    this.plot.replaceChildren(chart);
    if (!xs.length) this.plot.append(el("p", {class: "empty"}, "no data yet"));
    this.drawLegend();
  }

  hover(event, chart, cursor, sx, x0, x1, width) {
    const box = chart.getBoundingClientRect();
    const px = ((event.clientX - box.left) / box.width) * width;
    const x = x0 + ((px - MARGIN.left) / (width - MARGIN.left - MARGIN.right)) * (x1 - x0);
    let nearest = null;
    for (const s of this.series) {
      for (const [px2] of s.points) {
        if (px2 !== null && (nearest === null || Math.abs(px2 - x) < Math.abs(nearest - x))) nearest = px2;
      }
    }
    if (nearest === null) return;
    cursor.setAttribute("x1", sx(nearest));
    cursor.setAttribute("x2", sx(nearest));
    cursor.setAttribute("visibility", "visible");
    const rows = [];
    for (const s of this.series) {
      if (this.hidden.has(s.key)) continue;
      const point = s.points.find((p) => p[0] === nearest);
      if (point && point[1] !== null && point[1] !== undefined) rows.push([s, point[1]]);
    }
    rows.sort((a, b) => b[1] - a[1]);
    this.tip.replaceChildren(el("div", {class: "tiphead"}, `${this.xLabel} ${fmt(nearest, 6)}`),
      ...rows.slice(0, 20).map(([s, y]) => el("div", {},
        el("span", {class: "swatch", "data-colour": s.colour}), `${s.name}: ${fmt(y, 4)}`)));
    for (const swatch of this.tip.querySelectorAll(".swatch")) swatch.style.background = swatch.dataset.colour;
    this.tip.hidden = false;
    const left = Math.min(event.clientX - box.left + 14, box.width - 200);
    this.tip.style.left = `${Math.max(left, 0)}px`;
    this.tip.style.top = "8px";
  }

  drawLegend() {
    if (!this.legend) return;
    const items = this.series.filter((s) => !s.faint || this.series.length <= 24).map((s) => {
      const swatch = el("span", {class: "swatch"});
      swatch.style.background = s.colour;
      const item = el("button", {type: "button", class: this.hidden.has(s.key) ? "item off" : "item",
        title: "show or hide", onclick: () => {
          if (this.hidden.has(s.key)) this.hidden.delete(s.key); else this.hidden.add(s.key);
          this.draw();
        }}, swatch, s.name);
      return item;
    });
    this.legend.replaceChildren(...items);
  }
}
