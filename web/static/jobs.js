// The job lists (all jobs, dead letters): filtered by state and type on the
// server; searched and sorted in the page over the jobs loaded, since the
// API lists newest first only; bulk retry and cancel of a selection.

import { api, ApiError } from "./api.js";
import { h, section, problemBox, stateBadge, jobLink, jobLabel, jobRef, READ_ONLY } from "./dom.js";
import { timeEl } from "./fmt.js";

export const STATES = ["ready", "running", "paused", "done", "dead", "cancelled"];
const PAGE = 200; // jobs loaded per page: what search and sorting see

// nextRun is when a job runs next: the due time of a ready job, else none.
const nextRun = (j) => j.state === "ready" ? j.nextRunAt : null;
const dueMs = (j) => nextRun(j) ? Date.parse(nextRun(j)) : Infinity;

// Sort orders of the list by column; every one falls back to newest first.
const STATE_ORDER = ["running", "ready", "paused", "dead", "done", "cancelled"];
const byText = (f) => (a, b) => (f(a) ?? "\uffff").localeCompare(f(b) ?? "\uffff");
const SORTS = {
  name: byText((j) => j.name),
  type: byText((j) => j.type),
  state: (a, b) => STATE_ORDER.indexOf(a.state) - STATE_ORDER.indexOf(b.state),
  next: (a, b) => dueMs(a) - dueMs(b), // none last (Infinity - Infinity is NaN: kept in order)
};

/** matches says whether job j has q (lower case) in its name, key, id or type. */
const matches = (j, q) => [j.name, j.idempotencyKey, j.jobId, j.type].some((v) => v && v.toLowerCase().includes(q));

/** sortJobs orders jobs (newest first as loaded) by column sort, dir "asc" or "desc". */
function sortJobs(jobs, sort, dir) {
  const cmp = SORTS[sort];
  if (!cmp) return jobs;
  const sign = dir === "desc" ? -1 : 1;
  return jobs.map((j, i) => [j, i]).sort(([a, i], [b, k]) => sign * cmp(a, b) || i - k).map(([j]) => j);
}

/** eachSettled calls fn on every item, four at a time, and returns what each did. */
async function eachSettled(items, fn) {
  const out = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      try { out[i] = { item: items[i], value: await fn(items[i]) }; } catch (err) { out[i] = { item: items[i], err }; }
    }
  };
  await Promise.all([lane(), lane(), lane(), lane()]);
  return out;
}

// BULK names the bulk actions: the request, and the words for the summary.
const BULK = {
  retry: { call: (id) => api("POST", jobRef(id) + "/retry"), done: "ready again", label: "Retry" },
  cancel: { call: (id) => api("DELETE", jobRef(id)), done: "cancelled", label: "Cancel" },
};

function stateCell(j) {
  const flags = [];
  if (j.state === "paused" && j.pauseUntil) flags.push(h("span.flag", "until ", timeEl(j.pauseUntil)));
  if (j.quietSince) flags.push(h("span.flag.bad", "quiet"));
  if (j.failingSince) flags.push(h("span.flag.bad", "failing"));
  const key = j.idempotencyKey || "";
  if (!j.name && (key.startsWith("notify:") || key.startsWith("ping:"))) {
    flags.push(h("span.flag", { title: "a job that delivers a notification or a ping of another job" }, key.startsWith("ping:") ? "ping" : "notification"));
  }
  return [stateBadge(j.state), flags];
}

/**
 * listPage lists jobs. params are the hash's: state, type (server filters),
 * q (search), sort and dir.
 */
export function listPage(params, { dead = false } = {}) {
  const state = dead ? "dead" : params.get("state") || "";
  const type = params.get("type") || "";
  let sort = params.get("sort") || "", dir = params.get("dir") || "asc";
  const cursors = [""]; // cursors[i] starts page i
  let page = 0, next = "", loaded = [], looked = false;
  const selected = new Map(); // jobId -> job, across redraws and pages
  const list = h("div#job-list");
  const msg = h("div#action-msg", { "aria-live": "polite" });
  const drawList = section(list);

  const search = h("input#search", { type: "search", value: params.get("q") || "", placeholder: "name, key, id or type", autocomplete: "off" });
  const found = h("div#search-found");
  const stateSel = h("select#filter-state", { onchange: go },
    h("option", { value: "" }, "any state"), STATES.map((s) => h("option", { value: s, selected: s === state }, s)));
  const typeIn = h("input#filter-type", { placeholder: "exact type", value: type, onchange: go });

  // The hash keeps the view's query, so that a list can be linked; changes
  // of the server filters reload, the rest redraw in place.
  function hashOf() {
    const q = new URLSearchParams();
    if (!dead && stateSel.value) q.set("state", stateSel.value);
    if (!dead && typeIn.value.trim()) q.set("type", typeIn.value.trim());
    if (search.value.trim()) q.set("q", search.value.trim());
    if (sort) { q.set("sort", sort); q.set("dir", dir); }
    return (dead ? "#/dead" : "#/jobs") + (q.size ? "?" + q : "");
  }
  function go() { location.hash = hashOf(); }
  function redraw() {
    history.replaceState(null, "", hashOf());
    draw();
    lookup();
  }

  // An exact id or name not among the jobs loaded is looked up on the server.
  let lookupSeq = 0;
  async function lookup() {
    const my = ++lookupSeq, q = search.value.trim();
    found.replaceChildren();
    if (!q || loaded.some((j) => j.jobId === q || j.name === q)) return;
    try {
      const j = await api("GET", jobRef(q));
      if (my === lookupSeq) found.replaceChildren(h("p", "Beyond the jobs loaded: ", jobLink(j), " ", stateBadge(j.state)));
    } catch (err) {
      if (my === lookupSeq && !(err instanceof ApiError && err.status === 404)) found.replaceChildren(problemBox(err));
    }
  }
  let typing;
  search.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(redraw, 200); });

  // ---- selection and bulk actions ----
  const count = h("span#bulk-count", "none selected");
  const bulkButtons = Object.entries(BULK).map(([kind, b]) =>
    h("button#bulk-" + kind, { type: "button", disabled: true, onclick: () => confirmBulk(kind) }, b.label + " selected…"));
  const confirmBox = h("span#bulk-confirm");
  const summary = h("div#bulk-summary", { role: "status" });
  function selectionChanged() {
    count.textContent = selected.size ? `${selected.size} selected` : "none selected";
    for (const b of bulkButtons) b.disabled = selected.size === 0;
    confirmBox.replaceChildren();
    const all = list.querySelector("#select-all");
    if (all) {
      const boxes = [...list.querySelectorAll("input.select")];
      all.checked = boxes.length > 0 && boxes.every((b) => b.checked);
    }
  }
  function confirmBulk(kind) {
    const n = selected.size;
    confirmBox.replaceChildren(`${BULK[kind].label} ${n} job${n === 1 ? "" : "s"}? `,
      h("button.primary#bulk-go", { type: "button", onclick: () => bulk(kind) }, `Yes, ${BULK[kind].label.toLowerCase()}`), " ",
      h("button", { type: "button", onclick: () => confirmBox.replaceChildren() }, "No"));
    confirmBox.querySelector("#bulk-go").focus();
  }
  async function bulk(kind) {
    const jobs = [...selected.values()];
    confirmBox.replaceChildren();
    summary.replaceChildren(h("p.muted", `${BULK[kind].label}: ${jobs.length} jobs…`));
    const results = await eachSettled(jobs, (j) => BULK[kind].call(j.jobId));
    const ok = results.filter((r) => !r.err), refused = results.filter((r) => r.err);
    selected.clear();
    selectionChanged(); // the bar agrees with the summary at once, not after the refresh
    summary.replaceChildren(
      h("p", { class: refused.length ? "" : "ok" }, `${ok.length} of ${results.length} ${BULK[kind].done}`,
        refused.length ? `; ${refused.length} refused:` : "."),
      refused.length ? h("ul.refused", refused.map((r) => h("li", { "data-job": r.item.jobId },
        jobLink(r.item), " — ", r.err instanceof ApiError ? `${r.err.status}: ${r.err.message}` : String(r.err)))) : "");
    await view.refresh();
  }

  function toggle(j, on) {
    if (on) selected.set(j.jobId, j); else selected.delete(j.jobId);
    selectionChanged();
  }
  function toggleAll(on) {
    for (const box of list.querySelectorAll("input.select")) {
      box.checked = on;
      const j = loaded.find((x) => x.jobId === box.dataset.job);
      if (j) toggle(j, on);
    }
  }

  // ---- the table ----
  function sortHeader(key, label) {
    const active = sort === key;
    return h("th", { "aria-sort": active ? (dir === "asc" ? "ascending" : "descending") : "none" },
      h("button.sort", { type: "button", "data-sort": key, onclick: () => {
        dir = active && dir === "asc" ? "desc" : "asc";
        sort = key;
        redraw();
      } }, label, active ? (dir === "asc" ? " ▲" : " ▼") : ""));
  }
  async function retryOne(j, btn) {
    btn.disabled = true;
    try {
      await api("POST", jobRef(j.jobId) + "/retry");
      msg.replaceChildren(h("p.ok", `Job ${jobLabel(j)} is ready again.`));
    } catch (err) {
      msg.replaceChildren(problemBox(err));
    }
    await view.refresh();
  }
  function table(jobs) {
    if (!jobs.length) return h("p.muted.empty", loaded.length ? "No job loaded matches the search." : "No jobs.");
    return h("table.jobs",
      h("thead", h("tr",
        h("th.pick.write", h("input#select-all", { type: "checkbox", "aria-label": "Select all shown", onchange: (e) => toggleAll(e.target.checked) })),
        sortHeader("name", "Job"), sortHeader("type", "Type"), sortHeader("state", "State"), h("th", "Schedule"),
        sortHeader("next", "Next run"), h("th", "Attempt"), h("th", "Last error"), dead ? h("th.write", h("span.sr", "Actions")) : null)),
      h("tbody", jobs.map((j) => h("tr", { "data-job": j.jobId },
        h("td.pick.write", h("input.select", { type: "checkbox", "data-job": j.jobId, checked: selected.has(j.jobId),
          "aria-label": "Select " + jobLabel(j), onchange: (e) => toggle(j, e.target.checked) })),
        h("td", jobLink(j)), h("td.mono", j.type), h("td", stateCell(j)),
        h("td.mono", j.schedule ? `${j.schedule} · ${j.timezone || "UTC"}` : h("span.muted", "one-off")),
        h("td", timeEl(nextRun(j))), h("td", `${j.attempt}/${j.maxAttempts}`),
        h("td.err", { title: j.lastError || "" }, j.lastError || ""),
        dead ? h("td.write", (() => {
          const b = h("button.retry", { type: "button", onclick: () => retryOne(j, b) }, "Retry");
          return b;
        })()) : null))));
  }
  function draw() {
    const q = search.value.trim().toLowerCase();
    const shown = sortJobs(q ? loaded.filter((j) => matches(j, q)) : loaded, sort, dir);
    drawList({ shown, sort, dir }, () => table(shown));
    selectionChanged();
  }

  const prevBtn = h("button", { type: "button", onclick: () => { page--; view.refresh(); } }, "← newer");
  const nextBtn = h("button", { type: "button", onclick: () => { cursors[page + 1] = next; page++; view.refresh(); } }, "older →");

  const view = {
    title: dead ? "Dead letters" : "Jobs",
    el: h("div",
      h("h1", dead ? "Dead letters" : "Jobs"),
      dead ? h("p.muted", "Jobs whose attempts are spent. Retry puts one back to ready, due now, with its attempts reset.") : null,
      h("form.filters", { onsubmit: (e) => { e.preventDefault(); go(); } },
        h("label.grow", "Search ", search),
        dead ? null : [h("label", "State ", stateSel), h("label", "Type ", typeIn)]),
      h("p.muted.note", `Search and sorting apply to the ${PAGE} newest jobs loaded`,
        dead ? "" : " (state and type filter on the server)", "; an exact id or name is also looked up among all jobs."),
      found,
      h("div.bulk.write", { role: "group", "aria-label": "Bulk actions" }, count, bulkButtons, confirmBox),
      h("p.read-only-note", READ_ONLY),
      summary, msg, list, h("div.pager", prevBtn, nextBtn)),
    async refresh() {
      const q = new URLSearchParams({ limit: String(PAGE) });
      if (state) q.set("state", state);
      if (type) q.set("type", type);
      if (cursors[page]) q.set("cursor", cursors[page]);
      const res = await api("GET", "jobs?" + q);
      const first = !looked;
      looked = true;
      loaded = res.jobs;
      next = res.nextCursor || "";
      prevBtn.disabled = page === 0;
      nextBtn.disabled = !next;
      draw();
      if (first) await lookup();
    },
  };
  return view;
}
