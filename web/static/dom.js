// Building the page: elements, sections that redraw on change, and the
// pieces every page shows (problems, state badges, a job's name and id).

import { ApiError } from "./api.js";

// h builds an element: h("a.cls#id", {href}, child, …); a class attribute
// adds to the classes of the spec. Text is always set as text, never
// parsed as HTML.
export function h(spec, attrs, ...children) {
  const [, tag, rest] = spec.match(/^([a-z0-9]+)(.*)$/);
  const e = document.createElement(tag);
  for (const m of rest.matchAll(/([.#])([\w-]+)/g)) {
    if (m[1] === ".") e.classList.add(m[2]); else e.id = m[2];
  }
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.classList.add(...String(v).split(/\s+/).filter(Boolean));
    else if (k in e && typeof v !== "string") e[k] = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c != null && c !== false) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// section keeps the last data drawn into a box and redraws only on change.
export function section(box) {
  let last;
  return (data, draw) => {
    const key = JSON.stringify(data);
    if (key === last) return;
    last = key;
    box.replaceChildren(...[draw(data)].flat(Infinity).filter((c) => c != null && c !== false));
  };
}

/** problemBox shows an error; an API problem with its status and field. */
export function problemBox(err) {
  if (!(err instanceof ApiError)) return h("p.error", String(err && err.message || err));
  const p = err.problem;
  return h("div.error.problem", { role: "alert" },
    h("strong", `${err.status} ${p.title || ""}`.trim()), " ", p.detail || err.message,
    p.field ? h("span.field", ` (field: ${p.field})`) : null);
}

// READ_ONLY says, where a read token leaves changes out (see api.js), why.
export const READ_ONLY = "This token may only read: changes need a token from the server's SKED_TOKEN.";

export const stateBadge = (s) => h("span.badge.state-" + s, s);

/** jobRef is the path of a job's API resource, relative to the page. */
export const jobRef = (id) => "jobs/" + encodeURIComponent(id);

/** jobHash is the route of a job's page. */
export const jobHash = (id) => "#/" + jobRef(id);

/** jobLabel is what a job is called for people: its name, else its id. */
export const jobLabel = (j) => j.name || j.jobId;

/**
 * jobLink links to a job's page, its name first and its id beside it in
 * small type (the id alone when it has no name).
 */
export function jobLink(j) {
  const a = h("a.job-link", { href: jobHash(j.jobId) },
    j.name ? h("span.job-name", j.name) : h("span.mono", j.jobId));
  return j.name ? h("span.job", a, h("span.job-id.mono", j.jobId)) : h("span.job", a);
}
