// The live picture of the fleet the views render from.
//
// While the master's event stream is live, the picture comes from its frames
// (fleet/master/routes/events.py): `types` (the rows of /automations without their
// counts), `depths` of every batch type and `workers` (every worker's view) on
// each tick, pushed `worker` state changes and `emit`s in between. Only while
// the stream is down (connecting, offline, or refused to this token: polling)
// does the store poll /automations and /workers, every POLL_MS; when the stream
// is back it refreshes once and stops polling. Throughput and failure-rate
// samples are derived client-side from the monotonic queue counters of
// successive snapshots.

import { api, seg } from "./api.js";

const POLL_MS = 2000;
/** Samples kept per type (POLL_MS apart: about three minutes). */
export const MAX_SAMPLES = 90;

/** The queue stats of an /automations row, whatever it nests them under. */
export function queueOf(row) {
  if (!row) return null;
  return row.queue || row.depths || null;
}

/** `{total, up, lagging}` of one type's workers, counted as the master counts them. */
export function workerCounts(workers, type) {
  const mine = workers.filter((w) => w.type === type);
  return {
    total: mine.length,
    up: mine.filter((w) => w.up).length,
    lagging: mine.filter((w) => w.lagging).length,
  };
}

/**
 * A worker view after a pushed `worker` event: the worker just wrote `state`
 * (so it is up, unless it stopped: the master shows a stopped worker as DOWN).
 */
export function withReportedState(view, state) {
  const stopped = state === "STOPPED";
  const gen = view.gen || {};
  return {
    ...view,
    reported_state: state,
    state: stopped ? "DOWN" : state,
    up: !stopped,
    lagging: !stopped && (gen.applied || 0) < (gen.desired || 0),
    last_seen: Date.now() / 1000,
    seen_ago: 0,
  };
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

export class Store extends EventTarget {
  constructor() {
    super();
    this.automations = [];
    this.workers = [];
    this.depths = new Map(); // type -> the last depths the stream sent
    this.catalog = {};
    this.counters = new Map(); // type -> last counter snapshot
    this.series = new Map(); // type -> [{t, perSecond, failureRate}]
    this.status = "offline";
    this.error = null;
    this.timer = null;
    this.soon = null;
    this.running = false;
    this.rounds = 0;
    this.frames = 0; // snapshot frames applied (a poll answer older than one is dropped)
    this.updating = false;
  }

  /** True while the event stream is live: its frames keep the picture current. */
  get live() {
    return this.status === "live";
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.refresh();
  }

  stop() {
    this.running = false;
    this.status = "offline"; // the next start() polls until its own stream is live
    clearTimeout(this.timer);
    clearTimeout(this.soon);
    this.timer = null;
    this.soon = null;
  }

  /** Refresh shortly (coalesces bursts of requests into one round). */
  refreshSoon(delayMs = 250) {
    if (!this.running || this.soon) return;
    this.soon = setTimeout(() => {
      this.soon = null;
      this.refresh();
    }, delayMs);
  }

  async refresh() {
    clearTimeout(this.timer);
    this.timer = null;
    const mine = ++this.rounds;
    const frames = this.frames;
    let answer = null;
    let error = null;
    try {
      answer = await Promise.all([api("/automations"), api("/workers")]);
    } catch (err) {
      error = err;
    }
    // Rounds can overlap (a poll and a refresh after an action): only the
    // latest renders and schedules the next poll.
    if (mine !== this.rounds) return;
    // Frames that came in meanwhile are at least as new as this answer.
    if (answer && frames === this.frames) {
      const [automations, workers] = answer;
      this.automations = Array.isArray(automations) ? automations : Object.values(automations || {});
      this.workers = workers || [];
      for (const row of this.automations) {
        if (queueOf(row)) this.depths.set(row.type, queueOf(row));
      }
      this.sample();
    }
    this.error = error;
    this.emit("update");
    this.schedule();
  }

  /** Poll again in POLL_MS, unless the event stream is live. */
  schedule() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.running && !this.live) this.timer = setTimeout(() => this.refresh(), POLL_MS);
  }

  sample() {
    const t = Date.now() / 1000;
    for (const row of this.automations) {
      const c = (queueOf(row) || {}).counters;
      const prev = this.counters.get(row.type);
      // Two snapshots closer than a second (a refresh right after a depths
      // frame) would give noisy rates: keep the older one.
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

  /**
   * The event stream's status ("live", "connecting", "offline", "polling").
   * Coming live: one refresh (what changed while it was down), then frames
   * only. Going down: poll until it is live again.
   */
  setStatus(status) {
    const was = this.status;
    this.status = status;
    if (this.running && status !== was) {
      if (status === "live") {
        clearTimeout(this.timer);
        this.timer = null;
        this.refreshSoon(0);
      } else if (was === "live") {
        this.refreshSoon(0);
      }
    }
    this.emit("status");
  }

  emit(name, detail) {
    this.dispatchEvent(new CustomEvent(name, { detail }));
  }

  /** One "update" for a burst of frames (those of one tick come together). */
  changed() {
    if (this.updating) return;
    this.updating = true;
    queueMicrotask(() => {
      this.updating = false;
      this.emit("update");
    });
  }

  /** A `types` frame: the rows of /automations, without worker counts and depths. */
  applyTypes(rows) {
    const old = new Map(this.automations.map((r) => [r.type, r]));
    const types = new Set(rows.map((r) => r.type));
    for (const t of [...this.depths.keys()]) if (!types.has(t)) this.depths.delete(t);
    this.automations = rows.map((r) => ({
      ...r,
      workers: workerCounts(this.workers, r.type),
      queue: r.has_queue ? this.depths.get(r.type) || queueOf(old.get(r.type)) || null : null,
    }));
  }

  /** A `depths` frame: type -> queue depths (batch types only). */
  applyDepths(depths) {
    for (const [type, d] of Object.entries(depths)) this.depths.set(type, d);
    for (const row of this.automations) {
      if (depths[row.type]) row.queue = depths[row.type];
    }
    this.sample();
  }

  /** A `workers` frame: every worker's view (what /workers answers). */
  applyWorkers(workers) {
    this.workers = workers;
    for (const row of this.automations) row.workers = workerCounts(workers, row.type);
  }

  /** A pushed `worker` event: one worker reported a new state. */
  applyWorkerState(type, change) {
    if (!change || typeof change.state !== "string") return;
    this.workers = this.workers.map((w) =>
      w.type === type && w.worker_id === change.worker_id ? withReportedState(w, change.state) : w,
    );
    for (const row of this.automations) {
      if (row.type === type) row.workers = workerCounts(this.workers, type);
    }
  }

  /**
   * Route one server event (fleet/master/routes/events.py). Snapshot frames (types,
   * depths, workers) and pushed worker states update the picture in place;
   * emits are passed on to the stream tails; nothing here asks the API.
   */
  onServerEvent(ev) {
    const data = ev.data && typeof ev.data === "object" ? ev.data : {};
    switch (ev.event) {
      case "types":
      case "depths":
      case "workers":
        if (ev.event === "types") this.applyTypes(Array.isArray(data) ? data : []);
        else if (ev.event === "depths") this.applyDepths(Array.isArray(data) ? {} : data);
        else this.applyWorkers(Array.isArray(data) ? data : []);
        this.frames += 1;
        this.error = null;
        this.changed();
        return;
      case "hello":
        // The server subscribed just now: whatever was emitted before (while
        // the page loaded, or while the stream was down) never comes as an
        // event, so views re-read what they show from live events.
        this.emit("resync");
        return;
      case "worker":
        this.applyWorkerState(data.type, data.data);
        this.changed();
        break;
      case "emit":
        this.emit("emit", { type: data.type, entry: data.data });
        break;
      case "identity":
        // An identity was blocked, retired or revived ({pool, id, event, reason,
        // cooling_until}): the identities views reload what they show.
        this.emit("identity", data);
        return;
      case "tier":
        // A domain of a type moved to another proxy tier ({type, domain, tier,
        // tier_index, change, kind, vendor}): the type's domains panel re-reads.
        this.emit("tier", data);
        return;
      default:
        break;
    }
    this.emit("server-event", { event: ev.event, type: data.type, data: data.data });
  }
}

export const store = new Store();
