// The sked dashboard: a hash-routed single page over the JSON API. Every
// 2 s the current page polls; a section is redrawn only when its data
// changed, so open details and typing survive the updates.

import { answered, api, ApiError } from "./api.js";
import { lineChart } from "./charts.js";
import { h, section, problemBox, jobHash, READ_ONLY } from "./dom.js";
import { fmtSeconds, fmtZoned, tickTimes, LOCAL_ZONE } from "./fmt.js";
import { listPage, STATES } from "./jobs.js";
import { jobPage } from "./job.js";
import { workersPage } from "./workers.js";

const POLL_MS = 2000;

// ---- pages ---------------------------------------------------------------

// countsBar shows the jobs per state, each linking to its list; its
// refresh returns the stats it read.
function countsBar() {
  const box = h("div.counts#counts");
  const draw = section(box);
  return {
    el: box,
    async refresh() {
      const st = await api("GET", "stats");
      draw(st, (st) => STATES.map((s) => h("a.count.state-" + s, { href: "#/jobs?state=" + s, "data-state": s },
        h("span.n", String(st.states[s] ?? 0)), h("span.label", s))));
      return st;
    },
  };
}

// dueTypesTable says how far behind each job type is (dueByType of
// GET /stats), the longest wait first: the mixed figure above it counts
// types no worker serves too, and would hide how late the served ones are.
function dueTypesTable(st) {
  const rows = Object.entries(st.dueByType || {}).sort(([a, x], [b, y]) =>
    y.oldestReadyAgeSeconds - x.oldestReadyAgeSeconds || a.localeCompare(b));
  if (!rows.length) return [];
  return h("table.jobs.due-types",
    h("thead", h("tr", h("th", "Type"), h("th", "Due within a minute"), h("th", "Oldest due waiting"),
      h("th", { title: "jobs of the type a worker holds now; none means no worker is taking them" }, "Running"))),
    h("tbody", rows.map(([type, d]) => h("tr", { "data-type": type },
      h("td.mono", h("a", { href: "#/jobs?" + new URLSearchParams({ state: "ready", type }) }, type)),
      h("td", String(d.dueNextMinute)),
      h("td", d.oldestReadyAgeSeconds > 0 ? fmtSeconds(d.oldestReadyAgeSeconds) : "not yet due"),
      h("td", String(st.runningByType?.[type] ?? 0))))));
}

function overviewPage() {
  const counts = countsBar();
  const charts = h("div.charts#charts");
  const queue = h("p.muted#queue");
  const dueTypes = h("div#due-types");
  const drawCharts = section(charts);
  const drawQueue = section(queue);
  const drawDueTypes = section(dueTypes);
  return {
    title: "Overview",
    el: h("div", h("h1", "Overview"), counts.el, queue, dueTypes, h("h2", "Last hour"), charts),
    async refresh() {
      const [st, series] = await Promise.all([counts.refresh(), api("GET", "stats/series")]);
      drawQueue({ due: st.dueNextMinute, age: st.oldestReadyAgeSeconds, missed: st.missedSlots,
        failing: st.failingSchedules ?? 0, quiet: st.quietSchedules ?? 0 }, (q) => [
        `${q.due} due within a minute · ${q.age > 0 ? "oldest due ready job waiting " + fmtSeconds(q.age) : "no due job waiting"} · ${q.missed} missed slot${q.missed === 1 ? "" : "s"} · `,
        h("a#schedule-health", { href: "#/jobs", class: q.failing + q.quiet > 0 ? "bad" : null,
          title: "failing: the last firing gave up; quiet: no success within expectSuccessWithin (the Jobs page flags them)" },
          `${q.failing} failing, ${q.quiet} quiet schedules`)]);
      drawDueTypes({ dueByType: st.dueByType, runningByType: st.runningByType }, dueTypesTable);
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

const ZONES = (() => {
  try { return Intl.supportedValuesOf("timeZone"); } catch { return ["UTC", "Europe/London", "Europe/Berlin", "America/New_York"]; }
})();

function newJobPage() {
  const check = h("div#schedule-check.check", { "aria-live": "polite" });
  const result = h("div#create-result");
  const f = {
    name: h("input#f-name", { name: "name", autocomplete: "off", placeholder: "nightly-backup" }),
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
  const once = h("fieldset.once", { hidden: true }, h("label", `Run at (your time, ${LOCAL_ZONE}; empty: now) `, f.runAt));
  // The default attempts are the type's: http retries for most of a day.
  const attemptsHint = () => { f.maxAttempts.placeholder = f.type.value.trim() === "http" ? "25" : "5"; };
  f.type.addEventListener("input", attemptsHint);
  attemptsHint();
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
      const res = await api("POST", "schedules/check", { schedule, timezone: f.timezone.value.trim() });
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
    if (f.name.value.trim()) body.name = f.name.value.trim();
    try {
      body.payload = f.payload.value.trim() ? JSON.parse(f.payload.value) : {};
    } catch (err) {
      result.replaceChildren(h("div.error.problem", h("strong", "Payload"), " is not valid JSON: " + err.message));
      return;
    }
    if (f.kind.value === "schedule") {
      body.schedule = f.schedule.value.trim();
      if (f.timezone.value.trim()) body.timezone = f.timezone.value.trim();
    } else if (f.runAt.value) {
      body.runAt = new Date(f.runAt.value).toISOString();
    } // else now by the server's clock (a test clock, the database's), not this browser's
    if (f.maxAttempts.value) body.maxAttempts = Number(f.maxAttempts.value);
    if (f.timeout.value.trim()) body.timeout = f.timeout.value.trim();
    try {
      const job = await api("POST", "jobs", body);
      location.hash = jobHash(job.jobId);
    } catch (err) {
      result.replaceChildren(problemBox(err));
    }
  }

  return {
    title: "New job",
    el: h("div", h("h1", "New job"),
      h("p.read-only-note", READ_ONLY),
      h("form.create.write#create-form", { onsubmit: submit },
        h("div.row", h("label", "Name (optional) ", f.name), h("label", "Type ", f.type)),
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

// route shows the page of the hash. Each page is {title, el, refresh,
// stop?}: refresh is polled while it is shown, stop ends what it runs on
// its own.
// decodes reports whether s is a well-formed URI component.
function decodes(s) {
  try { decodeURIComponent(s); return true; } catch { return false; }
}

function route() {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?"); // "#/jobs/x?y" -> jobs/x, y
  const params = new URLSearchParams(query || "");
  let m, nav;
  current?.stop?.();
  if (path === "") { current = overviewPage(); nav = "overview"; }
  else if (path === "jobs") { current = listPage(params); nav = "jobs"; }
  else if (path === "dead") { current = listPage(params, { dead: true }); nav = "dead"; }
  else if (path === "new") { current = newJobPage(); nav = "new"; }
  else if (path === "workers") { current = workersPage(); nav = "workers"; }
  else if ((m = path.match(/^jobs\/([^/]+)$/)) && decodes(m[1])) { current = jobPage(decodeURIComponent(m[1])); nav = "jobs"; }
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
    if (answered()) {
      live.className = "live";
      live.textContent = "live";
      live.title = "updates every 2 s";
    }
  } catch (err) {
    live.className = "live down";
    live.textContent = "offline";
    live.title = String(err.message || err);
  }
  tickTimes();
  if (page === current) timer = setTimeout(poll, POLL_MS);
}

document.getElementById("zone").textContent = "times in " + LOCAL_ZONE;
setInterval(tickTimes, 1000);

window.addEventListener("hashchange", route);
route();
