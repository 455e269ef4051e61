// The sked dashboard: a hash-routed single page over the JSON API. Every
// 2 s the current page polls; a section is redrawn only when its data
// changed, so open details and typing survive the updates.

import { api, ApiError } from "./api.js";
import { lineChart } from "./charts.js";

const STATES = ["ready", "running", "paused", "done", "dead", "cancelled"];
const POLL_MS = 2000;

// h builds an element: h("a.cls#id", {href}, child, …). Text is always set
// as text, never parsed as HTML.
function h(spec, attrs, ...children) {
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
    else if (k in e && typeof v !== "string") e[k] = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c != null && c !== false) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// section keeps the last data drawn into a box and redraws only on change.
function section(box) {
  let last;
  return (data, draw) => {
    const key = JSON.stringify(data);
    if (key === last) return;
    last = key;
    box.replaceChildren(...[draw(data)].flat());
  };
}

const pad = (n, w = 2) => String(n).padStart(w, "0");
function fmtTime(s) {
  if (!s) return "—";
  const d = new Date(s);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
function fmtDuration(ms) {
  if (ms == null || isNaN(ms)) return "—";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}
function fmtSeconds(v) {
  return v >= 1 ? fmtDuration(v * 1000) : v > 0 ? (v * 1000).toFixed(v < 0.01 ? 1 : 0) + " ms" : "0";
}
// fmtZoned shows an RFC 3339 time as written, in its own offset.
function fmtZoned(s) {
  const m = s.match(/^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$/);
  return m ? `${m[1]} ${m[2]} ${m[3] === "Z" ? "UTC" : m[3]}` : s;
}

function problemBox(err) {
  if (!(err instanceof ApiError)) return h("p.error", String(err && err.message || err));
  const p = err.problem;
  return h("div.error.problem", { role: "alert" },
    h("strong", `${err.status} ${p.title || ""}`.trim()), " ", p.detail || err.message,
    p.field ? h("span.field", ` (field: ${p.field})`) : null);
}

const stateBadge = (s) => h("span.badge.state-" + s, s);
const jobLink = (j) => h("a.mono", { href: "#/jobs/" + encodeURIComponent(j.jobId) }, j.jobId);

// ---- pages ---------------------------------------------------------------

// countsBar shows the jobs per state, each linking to its list.
function countsBar() {
  const box = h("div.counts#counts");
  const draw = section(box);
  return {
    el: box,
    async refresh() {
      const st = await api("GET", "/stats");
      draw(st, (st) => STATES.map((s) => h("a.count.state-" + s, { href: "#/jobs?state=" + s, "data-state": s },
        h("span.n", String(st.states[s] ?? 0)), h("span.label", s))));
    },
  };
}

function overviewPage() {
  const counts = countsBar();
  const charts = h("div.charts#charts");
  const queue = h("p.muted#queue");
  const drawCharts = section(charts);
  const drawQueue = section(queue);
  return {
    title: "Overview",
    el: h("div", h("h1", "Overview"), counts.el, queue, h("h2", "Last hour"), charts),
    async refresh() {
      const [, series, st] = await Promise.all([counts.refresh(), api("GET", "/stats/series"), api("GET", "/stats")]);
      drawQueue({ due: st.dueNextMinute, age: st.oldestReadyAgeSeconds, missed: st.missedSlots }, (q) => [
        `${q.due} due within a minute · oldest due ready job waiting ${fmtSeconds(q.age)} · ${q.missed} missed slots`]);
      drawCharts(series, drawSeries);
    },
  };
}

function drawSeries(series) {
  const to = series.samples.length ? Date.parse(series.samples.at(-1).at) : Date.now();
  const from = to - series.windowSeconds * 1000;
  const minutes = series.minutes.map((m) => ({ ...m, t: Date.parse(m.at) + 30000 }));
  const card = (title, note, chart) => h("figure.card", h("figcaption", h("strong", title), " ", h("span.muted", note)), chart);
  return [
    card("Throughput", "runs finished per minute", lineChart({
      from, to, format: (v) => String(Math.round(v * 10) / 10),
      series: [{ name: "finished", cls: "s1", points: minutes.map((m) => [m.t, m.finished]) }],
    })),
    card("Start lateness", "p50 (blue) and p95 (orange) per minute", lineChart({
      from, to, format: fmtSeconds,
      series: [
        { name: "p50", cls: "s1", points: minutes.map((m) => [m.t, m.latenessP50Seconds]) },
        { name: "p95", cls: "s2", points: minutes.map((m) => [m.t, m.latenessP95Seconds]) },
      ],
    })),
    card("Oldest ready job", "age of the oldest due job waiting", lineChart({
      from, to, format: fmtSeconds,
      series: [{ name: "age", cls: "s3", points: series.samples.map((p) => [Date.parse(p.at), p.oldestReadyAgeSeconds]) }],
    })),
  ];
}

function jobsTable(jobs, extra) {
  if (!jobs.length) return h("p.muted.empty", "No jobs.");
  return h("table.jobs",
    h("thead", h("tr", h("th", "job"), h("th", "type"), h("th", "state"), h("th", "schedule"),
      h("th", "next run"), h("th", "attempt"), h("th", "last error"), extra ? h("th", "") : null)),
    h("tbody", jobs.map((j) => h("tr", { "data-job": j.jobId },
      h("td", jobLink(j)), h("td", j.type), h("td", stateBadge(j.state)),
      h("td.mono", j.schedule ? `${j.schedule} (${j.timezone})` : "one-off"),
      h("td", fmtTime(j.nextRunAt)), h("td", `${j.attempt}/${j.maxAttempts}`),
      h("td.err", j.lastError || ""), extra ? h("td", extra(j)) : null))));
}

// listPage lists jobs by state and type with cursor paging.
function listPage(params, { dead = false } = {}) {
  const state = dead ? "dead" : params.get("state") || "";
  const type = params.get("type") || "";
  const cursors = [""]; // cursors[i] starts page i
  let page = 0, next = "";
  const counts = countsBar();
  const list = h("div#job-list");
  const msg = h("div#action-msg");
  const pager = h("div.pager");
  const drawList = section(list);

  const go = () => {
    const q = new URLSearchParams();
    if (stateSel.value) q.set("state", stateSel.value);
    if (typeIn.value.trim()) q.set("type", typeIn.value.trim());
    location.hash = "#/jobs" + (q.size ? "?" + q : "");
  };
  const stateSel = h("select#filter-state", { onchange: go },
    h("option", { value: "" }, "any state"), STATES.map((s) => h("option", { value: s, selected: s === state }, s)));
  const typeIn = h("input#filter-type", { placeholder: "type", value: type, onchange: go });

  async function retry(j, btn) {
    btn.disabled = true;
    try {
      await api("POST", `/jobs/${encodeURIComponent(j.jobId)}/retry`);
      msg.replaceChildren(h("p.ok", `Job ${j.jobId} is ready again.`));
    } catch (err) {
      msg.replaceChildren(problemBox(err));
    }
    await view.refresh();
  }
  const prevBtn = h("button", { onclick: () => { page--; view.refresh(); } }, "← newer");
  const nextBtn = h("button", { onclick: () => { cursors[page + 1] = next; page++; view.refresh(); } }, "older →");
  pager.append(prevBtn, " ", nextBtn);

  const view = {
    title: dead ? "Dead letters" : "Jobs",
    el: h("div",
      h("h1", dead ? "Dead letters" : "Jobs"),
      dead ? h("p.muted", "Jobs whose attempts are spent. Retry puts one back to ready, due now, with its attempts reset.")
        : [counts.el, h("form.filters", { onsubmit: (e) => { e.preventDefault(); go(); } },
          h("label", "State ", stateSel), h("label", "Type ", typeIn))],
      msg, list, pager),
    async refresh() {
      const q = new URLSearchParams({ limit: "25" });
      if (state) q.set("state", state);
      if (type) q.set("type", type);
      if (cursors[page]) q.set("cursor", cursors[page]);
      const [res] = await Promise.all([api("GET", "/jobs?" + q), dead ? null : counts.refresh()]);
      next = res.nextCursor || "";
      prevBtn.disabled = page === 0;
      nextBtn.disabled = !next;
      drawList(res.jobs, (jobs) => jobsTable(jobs, dead ? (j) => {
        const b = h("button.retry", { onclick: () => retry(j, b) }, "Retry");
        return b;
      } : null));
    },
  };
  return view;
}

const OUTCOME_DONE = new Set(["succeeded"]);
function runItem(r, open) {
  const ms = r.startedAt && r.finishedAt ? Date.parse(r.finishedAt) - Date.parse(r.startedAt)
    : r.startedAt && r.outcome === "running" ? Date.now() - Date.parse(r.startedAt) : null;
  const body = [];
  if (r.error) body.push(h("p.err", r.error));
  if (r.reason) body.push(h("p.muted", "missed: " + r.reason));
  const out = r.output ? h("details.output", { "data-run": r.runId, open: open.has(r.runId) },
    h("summary", "output tail"), h("pre", r.output)) : null;
  return h("li.run.outcome-" + r.outcome, { "data-run": r.runId, "data-outcome": r.outcome },
    h("span.dot"),
    h("div.run-main",
      h("div.run-head",
        h("span.badge.outcome-" + r.outcome, r.outcome + (r.gaveUp ? " · gave up" : "")),
        h("span", " attempt " + r.attempt),
        h("span.muted", " · " + fmtTime(r.startedAt || r.slot)),
        h("span", " · " + (r.outcome === "running" ? "running for " : "") + fmtDuration(ms)),
        r.workerId ? h("span.muted.mono", " · " + r.workerId) : null,
        r.slot ? h("span.muted", " · slot " + fmtTime(r.slot)) : null),
      body, out));
}

function jobPage(id) {
  const path = "/jobs/" + encodeURIComponent(id);
  const head = h("div#job-head");
  const fields = h("div#job-fields");
  const preview = h("div#job-preview");
  const runs = h("ol.timeline#runs");
  const buttons = h("div.actions#job-actions");
  const msg = h("div#action-msg", { "aria-live": "polite" });
  const drawHead = section(head), drawFields = section(fields), drawPreview = section(preview);
  const drawButtons = section(buttons), drawRuns = section(runs);
  const openOutputs = new Set();
  runs.addEventListener("toggle", (e) => {
    const id = Number(e.target.dataset.run);
    if (e.target.open) openOutputs.add(id); else openOutputs.delete(id);
  }, true);

  async function act(label, method, suffix, okText) {
    msg.replaceChildren(h("p.muted", label + "…"));
    try {
      await api(method, path + suffix);
      msg.replaceChildren(h("p.ok", okText));
    } catch (err) {
      msg.replaceChildren(problemBox(err));
    }
    await view.refresh();
  }
  const actions = {
    cancel: () => act("Cancelling", "DELETE", "", "Job cancelled."),
    pause: () => act("Pausing", "POST", "/pause", "Job paused."),
    resume: () => act("Resuming", "POST", "/resume", "Job resumed."),
    retry: () => act("Retrying", "POST", "/retry", "Job is ready again."),
    "cancel-run": () => act("Asking the run to stop", "POST", "/cancel-run", "The running handler was asked to stop."),
  };

  const view = {
    title: "Job " + id,
    el: h("div", head, buttons, msg, h("div.cols", fields, h("div", h("h2", "Next fire times"), preview)),
      h("h2", "Runs"), runs),
    async refresh() {
      let job;
      try {
        job = await api("GET", path);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) {
          drawHead(404, () => [h("h1", "Job " + id), problemBox(err)]);
          return;
        }
        throw err;
      }
      const [rs, fires] = await Promise.all([api("GET", path + "/runs?limit=50"), api("GET", path + "/preview?n=5")]);
      drawHead([job.jobId, job.state], () => h("h1", "Job ", h("span.mono", job.jobId), " ", stateBadge(job.state)));
      const can = {
        cancel: ["ready", "paused", "dead", "running"].includes(job.state),
        pause: job.state === "ready",
        resume: job.state === "paused",
        retry: job.state === "dead",
        "cancel-run": job.state === "running",
      };
      drawButtons(can, () => Object.entries(can).filter(([, ok]) => ok).map(([name]) =>
        h("button.act-" + name + (name === "cancel" ? ".danger" : ""), { "data-action": name, onclick: actions[name] },
          { cancel: "Cancel job", pause: "Pause", resume: "Resume", retry: "Retry", "cancel-run": "Cancel run" }[name])));
      drawFields(job, (j) => h("dl.fields", [
        ["type", h("span.mono", j.type)],
        ["schedule", j.schedule ? h("span.mono#job-schedule", j.schedule) : "one-off"],
        ["timezone", j.timezone || "UTC"],
        ["next run", fmtTime(j.nextRunAt)],
        ["slot", fmtTime(j.slot)],
        ["attempt", `${j.attempt} of ${j.maxAttempts}`],
        ["timeout", j.timeout], ["backoff", j.backoff],
        j.jitter ? ["jitter", j.jitter] : null,
        j.schedule ? ["overlap · misfire", `${j.overlap} · ${j.misfire}`] : null,
        j.schedule ? ["missed slots", String(j.missedSlots)] : null,
        j.leaseOwner ? ["lease", `${j.leaseOwner} until ${fmtTime(j.leaseUntil)} (generation ${j.leaseGeneration})`] : null,
        j.cancelRequested ? ["cancel", "requested"] : null,
        j.idempotencyKey ? ["idempotency key", j.idempotencyKey] : null,
        j.lastError ? ["last error", h("span.err", j.lastError)] : null,
        ["created", fmtTime(j.createdAt)], ["updated", fmtTime(j.updatedAt)],
        ["payload", h("pre.payload", JSON.stringify(j.payload, null, 2))],
      ].filter(Boolean).flatMap(([k, v]) => [h("dt", k), h("dd", v)])));
      drawPreview(fires, (f) => f.length ? h("ol.fires", f.map((x) => h("li",
        h("span.mono", fmtZoned(x.at)), x.at.endsWith("Z") ? null : h("span.muted", " · " + fmtZoned(x.utc)))))
        : h("p.muted", "None: the job will not fire again."));
      drawRuns(rs, (rs) => rs.length ? rs.map((r) => runItem(r, openOutputs)) : h("li.muted.empty", "No runs yet."));
    },
  };
  return view;
}

const ZONES = (() => {
  try { return Intl.supportedValuesOf("timeZone"); } catch { return ["UTC", "Europe/London", "Europe/Berlin", "America/New_York"]; }
})();

function newJobPage() {
  const check = h("div#schedule-check.check", { "aria-live": "polite" });
  const result = h("div#create-result");
  const f = {
    type: h("input#f-type", { name: "type", list: "types", required: true, value: "http" }),
    payload: h("textarea#f-payload", { name: "payload", rows: 6, spellcheck: "false" },
      '{"url": "https://example.com/hook", "body": {"hello": "world"}}'),
    kind: h("select#f-kind", { name: "kind" }, h("option", { value: "schedule" }, "recurring (schedule)"),
      h("option", { value: "once" }, "one-off (run at)")),
    schedule: h("input#f-schedule.mono", { name: "schedule", placeholder: "*/5 * * * *  ·  @hourly  ·  @every 90s", autocomplete: "off" }),
    timezone: h("input#f-timezone", { name: "timezone", list: "zones", value: "UTC", autocomplete: "off" }),
    runAt: h("input#f-runat", { name: "runAt", type: "datetime-local", step: 1 }),
    maxAttempts: h("input#f-maxattempts", { name: "maxAttempts", type: "number", min: 1, placeholder: "5" }),
    timeout: h("input#f-timeout", { name: "timeout", placeholder: "1h" }),
  };
  const recurring = h("fieldset.recurring", h("label", "Schedule ", f.schedule), check, h("label", "Timezone ", f.timezone));
  const once = h("fieldset.once", { hidden: true }, h("label", "Run at (this browser's time; empty: now) ", f.runAt));
  f.kind.addEventListener("change", () => {
    recurring.hidden = f.kind.value !== "schedule";
    once.hidden = !recurring.hidden;
  });

  let timer, seq = 0;
  async function runCheck() {
    const my = ++seq;
    const schedule = f.schedule.value.trim();
    if (!schedule) { check.replaceChildren(); check.className = "check"; return; }
    try {
      const res = await api("POST", "/schedules/check", { schedule, timezone: f.timezone.value.trim() });
      if (my !== seq) return;
      check.className = "check valid";
      check.replaceChildren(h("span", "✓ valid · next: "), h("ol.fires", res.next.map((t) => h("li.mono", fmtZoned(t)))));
    } catch (err) {
      if (my !== seq) return;
      check.className = "check invalid";
      check.replaceChildren(err instanceof ApiError ? h("span", "✗ " + (err.problem.detail || err.message)) : problemBox(err));
    }
  }
  const debounced = () => { clearTimeout(timer); timer = setTimeout(runCheck, 300); };
  f.schedule.addEventListener("input", debounced);
  f.timezone.addEventListener("input", debounced);

  async function submit(e) {
    e.preventDefault();
    const body = { type: f.type.value.trim() };
    try {
      body.payload = f.payload.value.trim() ? JSON.parse(f.payload.value) : {};
    } catch (err) {
      result.replaceChildren(h("div.error.problem", h("strong", "Payload"), " is not valid JSON: " + err.message));
      return;
    }
    if (f.kind.value === "schedule") {
      body.schedule = f.schedule.value.trim();
      if (f.timezone.value.trim()) body.timezone = f.timezone.value.trim();
    } else {
      body.runAt = (f.runAt.value ? new Date(f.runAt.value) : new Date()).toISOString();
    }
    if (f.maxAttempts.value) body.maxAttempts = Number(f.maxAttempts.value);
    if (f.timeout.value.trim()) body.timeout = f.timeout.value.trim();
    try {
      const job = await api("POST", "/jobs", body);
      location.hash = "#/jobs/" + encodeURIComponent(job.jobId);
    } catch (err) {
      result.replaceChildren(problemBox(err));
    }
  }

  return {
    title: "New job",
    el: h("div", h("h1", "New job"),
      h("form.create#create-form", { onsubmit: submit },
        h("label", "Type ", f.type),
        h("label", "Payload (JSON) ", f.payload),
        h("label", "When ", f.kind), recurring, once,
        h("div.row", h("label", "Max attempts ", f.maxAttempts), h("label", "Timeout ", f.timeout)),
        h("button.primary#create-submit", { type: "submit" }, "Create job"),
        result),
      h("datalist#types", ["http", "exec"].map((t) => h("option", { value: t }))),
      h("datalist#zones", ZONES.map((z) => h("option", { value: z })))),
    async refresh() {},
  };
}

// ---- routing and polling -------------------------------------------------

let current = null, timer = null;

function route() {
  const [path, query] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(query || "");
  let m, nav;
  if (path === "/" || path === "") { current = overviewPage(); nav = "overview"; }
  else if (path === "/jobs") { current = listPage(params); nav = "jobs"; }
  else if (path === "/dead") { current = listPage(params, { dead: true }); nav = "dead"; }
  else if (path === "/new") { current = newJobPage(); nav = "new"; }
  else if ((m = path.match(/^\/jobs\/([^/]+)$/))) { current = jobPage(decodeURIComponent(m[1])); nav = "jobs"; }
  else { current = { title: "Not found", el: h("p.error", "No such page: " + path), async refresh() {} }; }
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.nav === nav);
  document.title = current.title + " · sked";
  document.getElementById("view").replaceChildren(current.el);
  poll();
}

async function poll() {
  clearTimeout(timer);
  const page = current;
  const live = document.getElementById("live");
  try {
    await page.refresh();
    live.className = "live";
    live.textContent = "live";
  } catch (err) {
    live.className = "live down";
    live.textContent = "offline";
    live.title = String(err.message || err);
  }
  if (page === current) timer = setTimeout(poll, POLL_MS);
}

window.addEventListener("hashchange", route);
route();
