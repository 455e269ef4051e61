// A job's page: what it is and how it is doing, the controls that fit its
// state, an edit form that sends a JSON merge patch of what changed, its
// timeline (changes, give-ups, recoveries), its runs, and the output tail of
// a run while it runs.

import { api, ApiError } from "./api.js";
import { h, section, problemBox, stateBadge, jobLabel, jobRef, jobHash, READ_ONLY } from "./dom.js";
import { timeEl, fmtDuration, fmtZoned, LOCAL_ZONE } from "./fmt.js";

const LIVE_MS = 1000; // how often the output tail of a running run is read

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * mergeDiff is the JSON merge patch (RFC 7386) that turns a into b, or
 * undefined when they are the same: objects member by member (a member
 * gone is null), anything else whole. As in every merge patch, a null
 * inside b's objects reads as "remove".
 */
export function mergeDiff(a, b) {
  if (isObject(a) && isObject(b)) {
    const d = {};
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const v = k in b ? mergeDiff(a[k], b[k]) : a[k] == null ? undefined : null;
      if (v !== undefined) d[k] = v;
    }
    return Object.keys(d).length ? d : undefined;
  }
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null) ? undefined : b ?? null;
}

// The fields of the edit form: the definition a PATCH changes (type and
// idempotency key cannot change). kind is text, number, json or the
// options of a select; recurring marks the fields of schedules only.
const EDIT_FIELDS = [
  { field: "name", label: "Name", kind: "text", hint: "letters, digits, - _ . ; empty: no name" },
  { field: "schedule", label: "Schedule", kind: "text", recurring: true, mono: true },
  { field: "timezone", label: "Timezone", kind: "text", recurring: true, hint: "IANA name; empty: UTC" },
  { field: "payload", label: "Payload (JSON)", kind: "json" },
  { field: "maxAttempts", label: "Max attempts", kind: "number", hint: "empty: the server's default" },
  { field: "timeout", label: "Timeout", kind: "text", hint: "e.g. 30s, 5m; empty: default" },
  { field: "backoff", label: "Backoff", kind: "text", hint: "first retry delay, doubling" },
  { field: "jitter", label: "Jitter", kind: "text", hint: "spread of start times; empty: none" },
  { field: "overlap", label: "Overlap", kind: ["", "skip", "queue_one"], recurring: true },
  { field: "misfire", label: "Misfire", kind: ["", "run_once", "skip", "run_all"], recurring: true },
  { field: "expectSuccessWithin", label: "Expect success within", kind: "text", recurring: true, hint: "dead-man's switch; empty: off" },
  { field: "notify", label: "Notify (JSON)", kind: "json", hint: '{"on": ["gave_up", "recovered", "quiet"], "sinks": [...], "ping": "…"}; empty: the server\'s' },
];

/** definitionOf is the part of job j the edit form shows, absent fields null. */
function definitionOf(j, fields) {
  return Object.fromEntries(fields.map((f) => [f.field, j[f.field] ?? null]));
}

/** FieldError is bad input the page found in a form field itself. */
class FieldError extends Error {
  constructor(field, message) { super(message); this.field = field; }
}

/** editForm builds the form for job j; save sends its patch. */
function editForm(j, save) {
  const fields = EDIT_FIELDS.filter((f) => !f.recurring || j.schedule);
  const before = definitionOf(j, fields);
  const inputs = {}, errors = {};
  const rows = fields.map((f) => {
    const v = before[f.field];
    const id = "edit-" + f.field;
    let input;
    if (Array.isArray(f.kind)) {
      input = h("select#" + id, f.kind.map((o) => h("option", { value: o, selected: (v ?? "") === o }, o || "(default)")));
    } else if (f.kind === "json") {
      input = h("textarea#" + id, { rows: f.field === "payload" ? 6 : 3, spellcheck: "false" },
        v == null ? "" : JSON.stringify(v, null, 2));
    } else {
      input = h("input#" + id, { type: f.kind === "number" ? "number" : "text", value: v ?? "", autocomplete: "off",
        min: f.kind === "number" ? 1 : null, class: f.mono ? "mono" : null });
    }
    errors[f.field] = h("p.field-error#err-" + f.field, { "aria-live": "polite", hidden: true });
    input.setAttribute("aria-describedby", "err-" + f.field);
    inputs[f.field] = input;
    return h("div.field", { class: f.kind === "json" ? "wide" : null },
      h("label", { for: id }, f.label), input, f.hint ? h("small.muted", f.hint) : null, errors[f.field]);
  });

  function read() {
    const after = {};
    for (const f of fields) {
      const raw = inputs[f.field].value.trim();
      if (f.kind === "json") {
        try { after[f.field] = raw ? JSON.parse(raw) : f.field === "payload" ? {} : null; } catch (err) {
          throw new FieldError(f.field, "not valid JSON: " + err.message);
        }
      } else if (f.kind === "number") {
        after[f.field] = raw === "" ? null : Number(raw);
      } else {
        after[f.field] = raw || null;
      }
    }
    return after;
  }
  function showError(field, text) {
    errors[field].textContent = text;
    errors[field].hidden = false;
    inputs[field].setAttribute("aria-invalid", "true");
    inputs[field].focus();
  }
  const result = h("div#edit-result", { "aria-live": "polite" });
  async function submit(e) {
    e.preventDefault();
    result.replaceChildren();
    for (const f of fields) {
      errors[f.field].hidden = true;
      inputs[f.field].removeAttribute("aria-invalid");
    }
    let patch;
    try {
      patch = mergeDiff(before, read());
    } catch (err) {
      if (err instanceof FieldError) return showError(err.field, err.message);
      throw err;
    }
    if (!patch) {
      result.replaceChildren(h("p.muted", "Nothing changed."));
      return;
    }
    try {
      await save(patch);
    } catch (err) {
      // The API names the field at fault: notify.sinks[0] is notify's.
      const field = err instanceof ApiError && (err.problem.field || "").split(/[.[]/)[0];
      if (field && inputs[field]) showError(field, err.message);
      else result.replaceChildren(problemBox(err));
    }
  }
  return h("form.edit#edit-form", { onsubmit: submit, novalidate: true },
    h("p.muted", `Type ${j.type}`, j.idempotencyKey ? ` and idempotency key ${j.idempotencyKey}` : "",
      " cannot change. Only the fields you change are sent (a JSON merge patch); a running run finishes as it began."),
    h("div.edit-grid", rows),
    h("div.actions", h("button.primary#edit-save", { type: "submit" }, "Save changes")), result);
}

const short = (v) => {
  const s = v == null ? "—" : typeof v === "string" ? v : JSON.stringify(v);
  return s.length > 120 ? s.slice(0, 119) + "…" : s;
};

// eventLabels names the kinds of a job's timeline.
const eventLabels = {
  changed: "Changed", gave_up: "Gave up", recovered: "Recovered", paused: "Paused", resumed: "Resumed",
  cancelled: "Cancelled", retried: "Retried", cancel_requested: "Asked to stop its run", triggered: "Triggered",
  skipped: "Skipped", backfilled: "Backfilled", quiet: "Went quiet",
};

// dotted puts " · " between the parts given, leaving out the missing ones.
const dotted = (parts) => parts.filter(Boolean).flatMap((p, i) => i ? [h("span.muted", " · "), p] : [p]);

function eventItem(e) {
  const d = e.detail || {};
  const body = e.kind === "changed"
    ? h("ul.changes", Object.entries(d).map(([f, c]) => h("li", { "data-field": f }, h("span.mono", f), ": ",
      h("span.from", short(c.from)), " → ", h("span.to", short(c.to)))))
    : [dotted([d.slot ? h("span.muted", "slot ", timeEl(d.slot)) : null, d.attempt ? h("span", `attempt ${d.attempt}`) : null,
      d.until ? h("span.muted", "until ", timeEl(d.until)) : null, d.reason ? h("span", d.reason) : null,
      d.jobsCreated ? h("span", `${d.jobsCreated} jobs for `, timeEl(d.rangeFrom), " – ", timeEl(d.rangeTo)) : null,
      d.generation && !d.attempt ? h("span.muted", `run of generation ${d.generation}`) : null,
      e.kind === "quiet" ? h("span", `no success within ${d.expectSuccessWithin}; last `,
        d.lastSuccessAt ? timeEl(d.lastSuccessAt) : "none yet") : null]),
      d.error ? h("p.err", d.error) : null];
  return h("li.event.kind-" + e.kind, { "data-kind": e.kind, "data-event": e.eventId },
    h("div.event-head", h("strong", e.kind === "paused" && d.to === "running" ? "Pauses when its run ends" : eventLabels[e.kind] || e.kind),
      " ", timeEl(e.at), e.actor ? h("span.muted.actor", " by " + e.actor) : null),
    body);
}

// KEPT_OUTPUT is how much of a run's output is kept: its last 4 KiB.
const KEPT_OUTPUT = 4096;

// cutMark is the line before an output that may have been cut to what a
// run keeps.
function cutMark(output) {
  return new TextEncoder().encode(output).length >= KEPT_OUTPUT - 3 ? "… (a run keeps the last 4 KiB of its output)\n" : "";
}

function runItem(r, open) {
  const ms = r.startedAt && r.finishedAt ? Date.parse(r.finishedAt) - Date.parse(r.startedAt) : null;
  const out = r.output ? h("details.output", { "data-run": r.runId, open: open.has(r.runId) },
    h("summary", "output tail"), h("pre", cutMark(r.output) + r.output)) : null;
  return h("li.run.outcome-" + r.outcome, { "data-run": r.runId, "data-outcome": r.outcome },
    h("span.dot"),
    h("div.run-main",
      h("div.run-head",
        h("span.badge.outcome-" + r.outcome, r.outcome + (r.gaveUp ? " · gave up" : "")),
        h("span", " attempt " + r.attempt), " · ", timeEl(r.startedAt || r.slot),
        ms == null ? null : h("span", " · took " + fmtDuration(ms)),
        r.workerId ? h("span.muted.mono", " · " + r.workerId) : null,
        r.slot ? h("span.muted", " · slot ", timeEl(r.slot)) : null),
      r.error ? h("p.err", r.error) : null,
      // What the execution said once its lease had been taken back (a
      // worker frozen past it): the run ended lease_expired all the same.
      r.lateOutcome ? h("p.late", "reported " + r.lateOutcome + " late ", timeEl(r.lateFinishedAt),
        r.lateError ? ": " + r.lateError : "") : null,
      r.reason ? h("p.muted", (r.outcome === "missed" ? "missed: " : "reason: ") + r.reason) : null,
      out));
}

/**
 * liveTail follows one run while it runs: it reads the job's runs every
 * LIVE_MS, shows the run's output tail, and stops when the run has ended.
 */
function liveTail(runsPath) { // runsPath() is the path of the job's runs
  const head = h("p.live-head");
  const pre = h("pre#live-tail", { tabindex: 0 });
  const box = h("section#live-output.card", { hidden: true }, h("h2", "Output of the running run"), head, pre);
  let runId = null, timer = null;

  function render(r) {
    const running = r.outcome === "running";
    box.dataset.live = running ? "on" : "ended";
    box.firstChild.textContent = running ? "Output of the running run" : "Output of the last run";
    head.replaceChildren(...[`Run ${r.runId} · attempt ${r.attempt}`, r.workerId ? ` · worker ${r.workerId}` : "",
      running ? [" · started ", timeEl(r.startedAt), " · read every second while it runs"]
        : [" · ended ", h("span.badge.outcome-" + r.outcome, r.outcome), " ", timeEl(r.finishedAt)]].flat());
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = r.output ? cutMark(r.output) + r.output
      : running ? "Nothing yet: the worker reports a run's output as it ends." : "(no output)";
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }
  async function poll() {
    try {
      const r = (await api("GET", runsPath() + "?limit=20")).find((x) => x.runId === runId);
      if (timer === null) return; // stopped meanwhile
      if (r) render(r);
      if (r && r.outcome !== "running") { timer = null; return; }
    } catch { /* the page's own poll shows the server is down */ }
    if (timer !== null) timer = setTimeout(poll, LIVE_MS);
  }
  const stop = () => { clearTimeout(timer); timer = null; };
  return {
    el: box,
    follow(r) {
      if (r.runId === runId) return;
      stop();
      runId = r.runId;
      box.hidden = false;
      render(r);
      timer = setTimeout(poll, LIVE_MS);
    },
    stop,
  };
}

function statusFacts(j) {
  const zone = j.timezone || "UTC";
  return [
    j.state === "ready" ? ["next run", "job-next", j.nextRunAt ? timeEl(j.nextRunAt, zone) : "—"] : null,
    j.schedule || j.lastSuccessAt ? ["last success", "job-last-success", j.lastSuccessAt ? timeEl(j.lastSuccessAt) : "none yet"] : null,
    j.state === "paused" || j.pauseRequested ? [j.pauseRequested ? "pauses when this run ends" : "paused", "job-paused",
      [j.pauseReason ? h("q", j.pauseReason) : h("span.muted", "no reason given"),
        " · ", j.pauseUntil ? ["resumes ", timeEl(j.pauseUntil, zone)] : "until resumed by hand"]] : null,
    j.quietSince ? ["quiet since", "job-quiet", [timeEl(j.quietSince), ` (no success within ${j.expectSuccessWithin})`]] : null,
    j.failingSince ? ["failing since", "job-failing", timeEl(j.failingSince)] : null,
  ].filter(Boolean).map(([k, id, v]) => h("div.fact#" + id, { class: /quiet|failing/.test(k) ? "bad" : null },
    h("span.k", k), h("span.v", v)));
}

// The controls, each shown when the job's state allows it; each is a POST
// to the job's path and /action unless it says otherwise.
const BUTTONS = [
  { action: "trigger", label: "Run now", when: (j) => j.state === "ready" },
  { action: "skip", label: "Skip next slot", when: (j) => j.state === "ready" && j.schedule },
  { action: "resume", label: "Resume", when: (j) => j.state === "paused" || j.pauseRequested },
  { action: "retry", label: "Retry", when: (j) => j.state === "dead" },
  { action: "cancel-run", label: "Cancel run", when: (j) => j.state === "running" },
  { action: "cancel", label: "Cancel job", when: (j) => ["ready", "paused", "dead", "running"].includes(j.state), danger: true,
    method: "DELETE", suffix: "" },
];
const OK_TEXT = {
  trigger: "It runs now.", skip: "The next slot was skipped.", resume: "Job resumed.", retry: "Job is ready again.",
  "cancel-run": "The running handler was asked to stop.", cancel: "Job cancelled.",
  pause: (j) => j.pauseRequested ? "The job pauses when this run ends." : "Job paused.",
};

// localInput is a datetime-local input; its value is this browser's time.
const localInput = (id) => h("input#" + id, { type: "datetime-local", step: 1 });
const isoOf = (input) => input.value ? new Date(input.value).toISOString() : "";

export function jobPage(ref) {
  let path = jobRef(ref); // by id once the job is read: a rename keeps it
  const head = h("div#job-head"), status = h("div.facts#job-status"), fields = h("div#job-fields");
  const preview = h("div#job-preview"), runs = h("ol.timeline#runs"), events = h("ol.events#events");
  const buttons = h("div.actions.write#job-actions");
  const msg = h("div#action-msg", { "aria-live": "polite" });
  const edit = h("details.edit.write#edit-job", h("summary", "Edit definition…"));
  const drawHead = section(head), drawStatus = section(status), drawFields = section(fields), drawPreview = section(preview);
  const drawButtons = section(buttons), drawRuns = section(runs), drawEvents = section(events);
  const openOutputs = new Set();
  runs.addEventListener("toggle", (e) => {
    const id = Number(e.target.dataset.run);
    if (e.target.open) openOutputs.add(id); else openOutputs.delete(id);
  }, true);
  const tail = liveTail(() => path + "/runs");
  let job = null;

  async function act(action, method, suffix, body, okText = OK_TEXT[action]) {
    msg.replaceChildren(h("p.muted", "Working…"));
    try {
      const res = await api(method, path + suffix, body);
      msg.replaceChildren(h("p.ok", typeof okText === "function" ? okText(res) : okText));
    } catch (err) {
      msg.replaceChildren(problemBox(err));
    }
    await view.refresh();
  }

  // confirmAct asks before a control that cannot be undone.
  function confirmAct(b) {
    msg.replaceChildren(h("p", `${b.label}? It cannot be undone: a cancelled job is neither retried nor edited. `,
      h("button.danger", { type: "button", "data-action": b.action + "-confirm",
        onclick: () => act(b.action, b.method || "POST", b.suffix ?? "/" + b.action) }, "Yes, " + b.label.toLowerCase()),
      " ", h("button", { type: "button", onclick: () => msg.replaceChildren() }, "No")));
    msg.querySelector("button").focus();
  }

  edit.addEventListener("toggle", () => {
    if (!edit.open || !job) return;
    edit.replaceChildren(edit.firstChild, editForm(job, async (patch) => {
      const changed = await api("PATCH", path, patch);
      edit.open = false;
      msg.replaceChildren(h("p.ok", "Saved: " + Object.keys(patch).join(", ") + " changed."));
      // The page's address by id from now on: the name may have changed.
      if (changed.jobId !== ref) history.replaceState(null, "", jobHash(changed.jobId));
      await view.refresh();
    }));
  });

  function controls(j) {
    const out = BUTTONS.filter((b) => b.when(j)).map((b) => h("button", {
      type: "button", class: "act-" + b.action + (b.danger ? " danger" : ""), "data-action": b.action,
      onclick: () => b.danger ? confirmAct(b) : act(b.action, b.method || "POST", b.suffix ?? "/" + b.action),
    }, b.label));
    if (j.state === "ready" || j.state === "running" && j.schedule && !j.pauseRequested) {
      const reason = h("input#pause-reason", { maxlength: 500, autocomplete: "off" }), until = localInput("pause-until");
      out.push(h("details.act-form#pause-form", h("summary", "Pause…"),
        h("form", { onsubmit: (e) => {
          e.preventDefault();
          act("pause", "POST", "/pause", { reason: reason.value.trim(), until: isoOf(until) });
        } },
        h("label", "Reason ", reason), h("label", `Until (your time, ${LOCAL_ZONE}; empty: until resumed) `, until),
        h("button.primary", { type: "submit", "data-action": "pause" }, "Pause"))));
    }
    if (j.schedule && j.state !== "cancelled") {
      const from = localInput("backfill-from"), to = localInput("backfill-to");
      out.push(h("details.act-form#backfill-form", h("summary", "Backfill…"),
        h("form", { onsubmit: (e) => {
          e.preventDefault();
          act("backfill", "POST", "/backfill", { from: isoOf(from), to: isoOf(to) },
            (b) => `Backfill: ${b.slots} slot${b.slots === 1 ? "" : "s"} in the range, ${b.created} new job${b.created === 1 ? "" : "s"}.`);
        } },
        h("p.muted", "One run of each slot that passed in the range, as one-off jobs; repeating it creates nothing new."),
        h("label", `From (your time, ${LOCAL_ZONE}) `, from), h("label", "To ", to),
        h("button.primary", { type: "submit", "data-action": "backfill" }, "Backfill"))));
    }
    return out;
  }

  function definition(j) {
    return h("dl.fields", [
      ["type", h("span.mono", j.type)],
      ["schedule", j.schedule ? h("span.mono#job-schedule", j.schedule) : "one-off"],
      j.schedule ? ["timezone", j.timezone || "UTC"] : null,
      ["slot", j.slot ? timeEl(j.slot, j.timezone || "UTC") : "—"],
      ["attempt", `${j.attempt} of ${j.maxAttempts}`],
      ["timeout", j.timeout], ["backoff", j.backoff],
      j.jitter ? ["jitter", j.jitter] : null,
      j.schedule ? ["overlap · misfire", `${j.overlap} · ${j.misfire}`] : null,
      j.expectSuccessWithin ? ["expect success within", j.expectSuccessWithin] : null,
      j.watchFrom ? ["window from", timeEl(j.watchFrom)] : null,
      j.expectSuccessWithin && j.state === "paused" ? ["window", "none while paused: a whole window starts at its resume"] : null,
      j.schedule ? ["missed slots", String(j.missedSlots)] : null,
      j.rescheduledAt ? ["schedule changed", ["during this run, at ", timeEl(j.rescheduledAt), "; its next slot counts from then"]] : null,
      j.leaseOwner ? ["lease", [h("span.mono", j.leaseOwner), " until ", timeEl(j.leaseUntil), ` (generation ${j.leaseGeneration})`]] : null,
      j.cancelRequested ? ["cancel", "requested"] : null,
      j.idempotencyKey ? ["idempotency key", h("span.mono", j.idempotencyKey)] : null,
      j.notify ? ["notify", h("span.mono", JSON.stringify(j.notify))] : null,
      j.lastError ? ["last error", h("span.err", j.lastError)] : null,
      ["created", timeEl(j.createdAt)], ["updated", timeEl(j.updatedAt)],
      ["payload", h("pre.payload", JSON.stringify(j.payload, null, 2))],
    ].filter(Boolean).flatMap(([k, v]) => [h("dt", k), h("dd", v)]));
  }

  const view = {
    title: "Job " + ref,
    el: h("div.job-page", head, status, buttons, h("p.read-only-note", READ_ONLY), msg,
      h("div.job-grid",
        h("div.col", h("h2", "Definition"), fields, edit, h("h2", "Next fire times"), preview),
        h("div.col", tail.el, h("h2", "Timeline"), events, h("h2", "Runs"), runs))),
    stop: tail.stop,
    async refresh() {
      try {
        job = await api("GET", path);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) {
          drawHead(404, () => [h("h1", "Job " + ref), problemBox(err)]);
          return;
        }
        throw err;
      }
      path = jobRef(job.jobId);
      document.title = jobLabel(job) + " · sked";
      const [rs, evs, fires] = await Promise.all([
        api("GET", path + "/runs?limit=50"), api("GET", path + "/events?limit=50"), api("GET", path + "/preview?n=5")]);
      drawHead([job.jobId, job.name, job.state, job.parentId], () => [
        h("h1", job.name ? h("span#job-name", job.name) : "Job", " ", stateBadge(job.state)),
        h("p.sub", h("span.mono#job-id", job.jobId), " · ", h("span.mono", job.type),
          job.parentId ? [" · backfill of ", h("a", { href: jobHash(job.parentId) }, job.parentId)] : null)]);
      drawStatus(job, statusFacts);
      drawButtons([job.state, !!job.schedule, !!job.pauseRequested], () => controls(job));
      drawFields(job, definition);
      // A cancelled job is not edited (the API answers 409): no form for it.
      edit.hidden = job.state === "cancelled";
      if (edit.hidden) edit.open = false;
      drawPreview(fires, (f) => f.length ? h("ol.fires", f.map((x) => h("li",
        h("span.mono", fmtZoned(x.at)), x.at.endsWith("Z") ? null : h("span.muted", " · " + fmtZoned(x.utc)),
        x.note ? h("span.muted", " · " + x.note) : null)))
        : h("p.muted", job.state === "running" ? "None planned while it runs." : "None: the job will not fire again."));
      // Pings of start and success are runs, shown below.
      const timeline = evs.filter((e) => e.kind !== "started" && e.kind !== "succeeded");
      drawEvents(timeline, (t) => t.length ? t.map(eventItem) : h("li.muted.empty", "No changes, controls, give-ups or recoveries yet."));
      drawRuns(rs, (rs) => rs.length ? rs.map((r) => runItem(r, openOutputs)) : h("li.muted.empty", "No runs yet."));
      const live = job.state === "running" && rs.find((r) => r.outcome === "running" && r.generation === job.leaseGeneration);
      if (live) tail.follow(live);
    },
  };
  return view;
}
