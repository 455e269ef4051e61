// Small SVG line charts, drawn without a library.

const NS = "http://www.w3.org/2000/svg";
// The left pad holds the y axis's longest label, such as "23h 59m".
const W = 480, H = 160, PAD = { l: 56, r: 10, t: 10, b: 22 };

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function clock(ms) {
  const d = new Date(ms);
  return String(d.getHours()).padStart(2, "0") + ":" + String(d.getMinutes()).padStart(2, "0");
}

/**
 * lineChart draws series ([{name, cls, points: [[timeMs, value|null]]}])
 * over [from, to] as an SVG element; format renders a y value.
 */
export function lineChart({ series, from, to, format }) {
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img" });
  const values = series.flatMap((s) => s.points.map((p) => p[1])).filter((v) => v != null);
  const ymax = niceMax(Math.max(0, ...values));
  const x = (t) => PAD.l + ((t - from) / Math.max(1, to - from)) * (W - PAD.l - PAD.r);
  const y = (v) => H - PAD.b - (v / ymax) * (H - PAD.t - PAD.b);

  for (const f of [0, 0.5, 1]) {
    const v = ymax * f;
    svg.append(el("line", { x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(el("text", { x: PAD.l - 4, y: y(v) + 4, class: "axis", "text-anchor": "end" }, format(v)));
  }
  for (const f of [0, 0.5, 1]) {
    const t = from + (to - from) * f;
    const anchor = f === 0 ? "start" : f === 1 ? "end" : "middle";
    svg.append(el("text", { x: x(t), y: H - 6, class: "axis", "text-anchor": anchor }, clock(t)));
  }
  for (const s of series) {
    // Break the line where a value is missing.
    let d = "", pen = false;
    for (const [t, v] of s.points) {
      if (v == null) { pen = false; continue; }
      d += (pen ? "L" : "M") + x(t).toFixed(1) + " " + y(v).toFixed(1) + " ";
      pen = true;
    }
    if (d) svg.append(el("path", { d, class: "line " + s.cls }));
    for (const [t, v] of s.points) {
      if (v != null) svg.append(el("circle", { cx: x(t), cy: y(v), r: 1.8, class: "dot " + s.cls }));
    }
  }
  if (values.length === 0) {
    svg.append(el("text", { x: W / 2, y: H / 2, class: "empty", "text-anchor": "middle" }, "no data yet"));
  }
  return svg;
}
