// The live picture of the fleet the views render from.
//
// Snapshots come from polling the API (every POLL_MS, and soon after any server
// event); throughput and failure-rate samples are derived client-side from the
// monotonic queue counters of successive snapshots.

import { api, seg } from "./api.js";

const POLL_MS = 2000;
/** Samples kept per type (POLL_MS apart: about three minutes). */
export const MAX_SAMPLES = 90;

/** The queue stats of an /automations row, whatever it nests them under. */
export function queueOf(row) {
  if (!row) return null;
  return row.queue || row.depths || null;
}

/**
 * Rates between two counter snapshots.
 *
 * @param {{t: number, completed: number, failed: number, dead: number}} a - older
 * @param {{t: number, completed: number, failed: number, dead: number}} b - newer
 * @returns {{t: number, perSecond: number, failureRate: number|null}}
 */
export function rateBetween(a, b) {
  const dt = Math.max(1e-3, b.t - a.t);
  const done = Math.max(0, b.completed - a.completed);
  const bad = Math.max(0, b.failed - a.failed) + Math.max(0, b.dead - a.dead);
  return { t: b.t, perSecond: done / dt, failureRate: done + bad ? bad / (done + bad) : null };
}

class Store extends EventTarget {
  constructor() {
    super();
    this.automations = [];
    this.workers = [];
    this.catalog = {};
    this.counters = new Map(); // type -> last counter snapshot
    this.series = new Map(); // type -> [{t, perSecond, failureRate}]
    this.status = "offline";
    this.error = null;
    this.timer = null;
    this.soon = null;
    this.running = false;
    this.rounds = 0;
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.refresh();
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
    clearTimeout(this.soon);
  }

  /** Refresh shortly (coalesces bursts of events into one round of requests). */
  refreshSoon(delayMs = 250) {
    if (!this.running || this.soon) return;
    this.soon = setTimeout(() => {
      this.soon = null;
      this.refresh();
    }, delayMs);
  }

  async refresh() {
    clearTimeout(this.timer);
    const mine = ++this.rounds;
    let answer = null;
    let error = null;
    try {
      answer = await Promise.all([api("/automations"), api("/workers")]);
    } catch (err) {
      error = err;
    }
    // Rounds can overlap (a poll and an event-triggered refresh): only the
    // latest renders and schedules the next poll.
    if (mine !== this.rounds) return;
    if (answer) {
      const [automations, workers] = answer;
      this.automations = Array.isArray(automations) ? automations : Object.values(automations || {});
      this.workers = workers || [];
      this.sample();
    }
    this.error = error;
    this.emit("update");
    if (this.running) this.timer = setTimeout(() => this.refresh(), POLL_MS);
  }

  sample() {
    const t = Date.now() / 1000;
    for (const row of this.automations) {
      const c = (queueOf(row) || {}).counters;
      const prev = this.counters.get(row.type);
      // Two snapshots closer than a second (a poll right after a depths event)
      // would give noisy rates: keep the older one.
      if (prev && t - prev.t < 1) continue;
      if (!c) continue;
      const now = { t, completed: c.completed || 0, failed: c.failed || 0, dead: c.dead || 0 };
      this.counters.set(row.type, now);
      if (!prev) continue;
      const series = this.series.get(row.type) || [];
      series.push(rateBetween(prev, now));
      while (series.length > MAX_SAMPLES) series.shift();
      this.series.set(row.type, series);
    }
  }

  async loadCatalog() {
    this.catalog = (await api("/catalog")) || {};
    return this.catalog;
  }

  async entry(type) {
    if (!this.catalog[type]) this.catalog[type] = await api(`/catalog/${seg(type)}`);
    return this.catalog[type];
  }

  workersOf(type) {
    return this.workers.filter((w) => w.type === type);
  }

  setStatus(status) {
    this.status = status;
    this.emit("status");
  }

  emit(name, detail) {
    this.dispatchEvent(new CustomEvent(name, { detail }));
  }

  /**
   * Route one server event (fleet/master/sse.py): queue depths update the
   * snapshot in place; emits are passed on to the stream tails; worker, config
   * and control events refresh the snapshot soon.
   */
  onServerEvent(ev) {
    const data = ev.data && typeof ev.data === "object" ? ev.data : {};
    if (ev.event === "depths") {
      for (const row of this.automations) {
        if (data[row.type]) row.queue = data[row.type];
      }
      this.sample();
      this.emit("update");
      return;
    }
    if (ev.event === "hello") {
      // The server subscribed just now: whatever was emitted before (while the
      // page loaded, or while the stream was down) never comes as an event, so
      // views re-read what they show from live events.
      this.emit("resync");
      this.refreshSoon(0);
      return;
    }
    if (ev.event === "emit") this.emit("emit", { type: data.type, entry: data.data });
    this.emit("server-event", { event: ev.event, type: data.type, data: data.data });
    this.refreshSoon();
  }
}

export const store = new Store();
