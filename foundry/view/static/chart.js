// KernelFoundry run page: step charts drawn as SVG (no chart library needed).
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...kids) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const kid of kids) node.append(typeof kid === "string" ? document.createTextNode(kid) : kid);
  return node;
}

function niceTicks(lo, hi, count) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

function tickLabel(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e4 || a < 1e-2)) return v.toExponential(1);
  return String(+v.toPrecision(3));
}

// series: [{name, cls, points: [[x, y], ...]}] (y null: nothing yet); drawn as steps
// ("best so far" holds until the next point); a dashed line at y = 1 (eager's time).
function stepChart(series, opts) {
  const w = opts.width || 380, h = opts.height || 190;
  const pad = { l: 46, r: 12, t: 34, b: 34 };
  const root = svg("svg", { viewBox: `0 0 ${w} ${h}`, width: w, height: h, class: "chart", role: "img" });
  root.append(svg("title", {}, opts.title));
  root.append(svg("text", { x: pad.l, y: 14, class: "chart-title" }, opts.title));
  const xs = [], ys = [1];
  for (const s of series) for (const [x, y] of s.points) { xs.push(x); if (y !== null) ys.push(y); }
  if (xs.length === 0) {
    root.append(svg("text", { x: w / 2, y: h / 2, class: "chart-empty", "text-anchor": "middle" }, "no evaluations yet"));
    return root;
  }
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  if (x1 === x0) x1 = x0 + 1;
  let y0 = Math.min(...ys), y1 = Math.max(...ys);
  const margin = (y1 - y0) * 0.08 || 0.1;
  y0 = Math.max(0, y0 - margin); y1 += margin;
  const sx = (x) => pad.l + ((x - x0) / (x1 - x0)) * (w - pad.l - pad.r);
  const sy = (y) => h - pad.b - ((y - y0) / (y1 - y0)) * (h - pad.t - pad.b);
  const axes = svg("g", { class: "axes" });
  axes.append(svg("line", { x1: pad.l, y1: h - pad.b, x2: w - pad.r, y2: h - pad.b }));
  axes.append(svg("line", { x1: pad.l, y1: pad.t, x2: pad.l, y2: h - pad.b }));
  for (const t of niceTicks(x0, x1, 5)) {
    axes.append(svg("line", { x1: sx(t), y1: h - pad.b, x2: sx(t), y2: h - pad.b + 4 }));
    axes.append(svg("text", { x: sx(t), y: h - pad.b + 15, "text-anchor": "middle" }, tickLabel(t)));
  }
  for (const t of niceTicks(y0, y1, 4)) {
    axes.append(svg("line", { x1: pad.l - 4, y1: sy(t), x2: pad.l, y2: sy(t) }));
    axes.append(svg("text", { x: pad.l - 6, y: sy(t) + 3, "text-anchor": "end" }, tickLabel(t)));
  }
  axes.append(svg("text", { x: (pad.l + w - pad.r) / 2, y: h - 4, "text-anchor": "middle" }, opts.xLabel));
  root.append(axes);
  if (y0 <= 1 && 1 <= y1) {
    root.append(svg("line", { x1: pad.l, y1: sy(1), x2: w - pad.r, y2: sy(1), class: "chart-one" }));
  }
  let legendX = w - pad.r;
  for (const s of [...series].reverse()) {
    let d = "", last = null;
    for (const [x, y] of s.points) {
      if (y === null) continue;
      d += last === null ? `M${sx(x).toFixed(1)},${sy(y).toFixed(1)}` : `H${sx(x).toFixed(1)}V${sy(y).toFixed(1)}`;
      last = x;
    }
    if (last !== null) {
      d += `H${sx(x1).toFixed(1)}`;
      root.append(svg("path", { d, class: `chart-line ${s.cls}` }));
    }
    root.append(svg("text", { x: legendX, y: 28, "text-anchor": "end", class: `chart-legend ${s.cls}` }, s.name));
    legendX -= 14 + 6 * s.name.length;
  }
  return root;
}
