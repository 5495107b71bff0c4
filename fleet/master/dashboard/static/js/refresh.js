// How a view keeps what it shows current: one primitive for every view.
//
// The fleet's snapshot (types, workers, depths) streams over SSE (store.js); the
// views built on it redraw on the store's "update". What the snapshot does not
// hold is loaded by a Loader, in one of two ways:
//
// - `poll(load, {everyMs})`: every `everyMs` while the view is open (pools,
//   proxies, runs, one task); nothing while the tab is hidden, once when it shows;
// - `onChange(load, {minMs})`: when a key the view derives from the snapshot
//   changes (a type's task list, its dead letters, groups, schedules), at most
//   once every `minMs`, so a busy type does not reload a panel on every frame.
//
// Either way: one load at a time (a request during a load runs one more load
// after it, never a pile of them); `stop()` (the view is left) aborts the load in
// flight, so its answer never draws into a page that is gone; a load that answers
// STOP ends it (a run or a task that ended does not change any more).

/** What a load answers to end its loader. */
export const STOP = "stop";

/** The least time between two reloads of a panel fed by the snapshot (ms). */
export const PANEL_MIN_MS = 1000;

class Loader {
  /** @param {(signal: AbortSignal) => Promise<any>} load - fetch and draw */
  constructor(load) {
    this.load = load;
    this.timer = null;
    this.inflight = null; // the AbortController of the load in flight
    this.again = false; // a request came during a load
    this.running = true;
    this.last = 0; // when the last load started (ms)
  }

  /** Load as soon as possible (after the one in flight, if any). */
  now() {
    if (!this.running) return;
    if (this.inflight) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.timer = null;
    this.run();
  }

  async run() {
    const ctrl = new AbortController();
    this.inflight = ctrl;
    this.last = Date.now();
    let answer;
    try {
      answer = await this.load(ctrl.signal);
    } catch (err) {
      // An aborted load was stopped on purpose; a failed one drew its own error.
      if (!(err && err.name === "AbortError")) console.debug("load failed", err);
    }
    if (this.inflight === ctrl) this.inflight = null;
    if (!this.running || ctrl.signal.aborted) return;
    if (answer === STOP) {
      this.stop();
      return;
    }
    if (this.again) {
      this.again = false;
      this.later();
      return;
    }
    this.idle();
  }

  /** A request that came during a load: by default, at once. */
  later() {
    this.run();
  }

  /** After a load with nothing asked meanwhile. */
  idle() {}

  /** Stop for good and abort the load in flight. */
  stop() {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = null;
    if (this.inflight) this.inflight.abort();
    this.inflight = null;
    this.again = false;
  }
}

/** Loads every `everyMs` while running (see the module's comment). */
export class Refresher extends Loader {
  constructor(load, { everyMs }) {
    super(load);
    this.everyMs = everyMs;
    this.onVisible = () => {
      if (document.visibilityState === "visible" && !this.timer && !this.inflight) this.now();
    };
    document.addEventListener("visibilitychange", this.onVisible);
    this.now();
  }

  idle() {
    if (document.visibilityState === "hidden") return; // onVisible loads again
    this.timer = setTimeout(() => {
      this.timer = null;
      this.now();
    }, this.everyMs);
  }

  stop() {
    super.stop();
    document.removeEventListener("visibilitychange", this.onVisible);
  }
}

/** Loads when `update(key)` gets a new key, at most once every `minMs`. */
export class OnChange extends Loader {
  constructor(load, { minMs = 0 } = {}) {
    super(load);
    this.minMs = minMs;
    this.key = undefined;
  }

  /** The view's key of what it shows changed (or not): load if it did. */
  update(key) {
    if (key === this.key) return;
    this.key = key;
    this.request();
  }

  /** Load soon: now if the last load is `minMs` old, else when it will be. */
  request() {
    if (!this.running || this.timer) return;
    if (this.inflight) {
      this.again = true;
      return;
    }
    const wait = this.last + this.minMs - Date.now();
    if (wait <= 0) {
      this.run();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      this.now();
    }, wait);
  }

  later() {
    this.request();
  }
}

/** A Refresher, started at once; `stop` it when the view goes. */
export function poll(load, opts) {
  return new Refresher(load, opts);
}

/** An OnChange loader; feed it `update(key)`, `stop` it when the view goes. */
export function onChange(load, opts) {
  return new OnChange(load, opts);
}

/** A view's handle for the app: no store-driven update, stop() on leave. */
export function polledView(loader) {
  return {
    update() {},
    destroy() {
      loader.stop();
    },
  };
}
