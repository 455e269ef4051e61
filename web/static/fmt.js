// Times and durations for people: relative ("in 5 min", "3 h ago") with
// the absolute time and its timezone named.

import { h } from "./dom.js";

/** LOCAL_ZONE is this browser's timezone, in which times are shown. */
export const LOCAL_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

const formats = new Map(); // zone -> Intl.DateTimeFormat
function partsIn(d, zone) {
  let f = formats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "longOffset",
    });
    formats.set(zone, f);
  }
  return Object.fromEntries(f.formatToParts(d).map((p) => [p.type, p.value]));
}

/**
 * absTime is the instant s (RFC 3339) as wall-clock time in zone (by
 * default this browser's), the zone named with its offset:
 * "2026-05-01 09:00:00 Europe/Berlin (GMT+02:00)".
 */
export function absTime(s, zone = LOCAL_ZONE) {
  if (!s) return "—";
  let p;
  try { p = partsIn(new Date(s), zone); } catch { p = partsIn(new Date(s), "UTC"); zone = "UTC"; }
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${zone} (${p.timeZoneName})`;
}

/** relTime is s (RFC 3339) relative to now: "in 5 min", "3 h ago", "now". */
export function relTime(s, now = Date.now()) {
  const secs = Math.round((Date.parse(s) - now) / 1000);
  const a = Math.abs(secs);
  if (a < 1) return "now";
  const v = a < 60 ? a + " s" : a < 3600 ? Math.round(a / 60) + " min"
    : a < 172800 ? Math.round(a / 3600) + " h" : Math.round(a / 86400) + " d";
  return secs > 0 ? "in " + v : v + " ago";
}

/**
 * timeEl shows s relative to now, kept current by tickTimes, with the
 * absolute time in this browser's zone on hover; with zone, the absolute
 * time in that zone (a job's) also beside it.
 */
export function timeEl(s, zone) {
  if (!s) return h("span.muted", "—");
  const t = h("time.rel", { datetime: s, title: absTime(s) }, relTime(s));
  return zone ? h("span.when", t, h("span.abs.muted", " · " + absTime(s, zone))) : t;
}

/** tickTimes brings every relative time on the page up to now. */
export function tickTimes() {
  const now = Date.now();
  for (const t of document.querySelectorAll("time.rel")) {
    const text = relTime(t.dateTime, now);
    if (t.textContent !== text) t.textContent = text;
  }
}

export function fmtDuration(ms) {
  if (ms == null || isNaN(ms)) return "—";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function fmtSeconds(v) {
  return v >= 1 ? fmtDuration(v * 1000) : v > 0 ? (v * 1000).toFixed(v < 0.01 ? 1 : 0) + " ms" : "0";
}

/** fmtZoned shows an RFC 3339 time as written, in its own offset. */
export function fmtZoned(s) {
  const m = s.match(/^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$/);
  return m ? `${m[1]} ${m[2]} ${m[3] === "Z" ? "UTC" : m[3]}` : s;
}
