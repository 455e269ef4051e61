// The workers view: who holds jobs now and who claimed lately, from GET /workers.

import { api } from "./api.js";
import { h, section, jobLink } from "./dom.js";
import { timeEl } from "./fmt.js";

// The pool inside sked serve leases as serve:<host>/<pid>; every other
// lease owner is a remote worker (sked work, or a program of its own).
const isServePool = (id) => id.startsWith("serve:");

function leaseCell(until, at) {
  if (!until) return h("span.muted", "—");
  const lapsed = Date.parse(until) < Date.parse(at);
  return h("span", { class: lapsed ? "err" : null }, lapsed ? "lapsed " : "", timeEl(until));
}

// lastSeenCell is when a worker was last seen claiming, and whether it
// said it stopped or seems gone without a word (silent).
function lastSeenCell(w) {
  if (w.stoppedAt) return h("span.muted", "stopped ", timeEl(w.stoppedAt));
  if (w.silent) {
    return h("span.err", { title: "holds no job and has not claimed for minutes: killed, cut off from the server, or stopped without saying so" },
      timeEl(w.lastSeenAt), " · silent");
  }
  return timeEl(w.lastSeenAt);
}

// typesText is what a worker claims: its types, any type ([]), or unknown
// (absent: the store has no record of its claims).
function typesText(types) {
  if (!types) return h("span.muted", "?");
  return types.length ? types.join(", ") : "any";
}

function workersTable(res) {
  if (!res.workers.length) return h("p.muted.empty", "No worker holds a job now or claimed in the last hour.");
  return h("table.jobs.workers",
    h("thead", h("tr", h("th", "Worker"), h("th", "Kind"), h("th", "Types"), h("th", "Last seen"), h("th", { title: "when the newest of the runs it holds now began; none when it holds none" }, "Newest run began"),
      h("th", { title: "each heartbeat moves the lease on" }, "Lease until"), h("th", "Running"))),
    h("tbody", res.workers.map((w) => h("tr", { "data-worker": w.workerId },
      h("td.mono", w.workerId),
      h("td", isServePool(w.workerId) ? "in sked serve" : "remote"),
      h("td.types", typesText(w.types)),
      h("td", lastSeenCell(w)),
      h("td", w.lastClaimAt ? timeEl(w.lastClaimAt) : w.running.length ? "—" : h("span.muted", "none running")),
      h("td", leaseCell(w.leaseUntil, res.at)),
      h("td", h("ul.running", w.running.map(({ job, run }) => h("li", { "data-job": job.jobId },
        jobLink(job), h("span.muted", ` · ${job.type} · attempt ${job.attempt}/${job.maxAttempts}`),
        run ? [" · started ", timeEl(run.startedAt)] : null, " · lease ", leaseCell(job.leaseUntil, res.at)))))))));
}

export function workersPage() {
  const list = h("div#workers");
  const draw = section(list);
  return {
    title: "Workers",
    el: h("div", h("h1", "Workers"),
      h("p.muted.note", "The workers holding jobs now, and those seen claiming in the last hour. ",
        "A worker with a free slot claims every second or so, recorded at most once a minute: last seen is its last ",
        "recorded claim. Newest run began is when the newest of the runs it holds began, and its lease end moves on with each ",
        "heartbeat. A worker that stops heartbeating loses its jobs when the lease lapses. One that holds nothing and has not ",
        "claimed for minutes, without saying it stopped, is marked silent: killed, or cut off from the server."),
      list),
    async refresh() {
      const res = await api("GET", "workers");
      draw(res, (r) => [workersTable(r),
        r.truncated ? h("p.muted", "More jobs are running than the 500 read; some workers may be missing.") : null]);
    },
  };
}
