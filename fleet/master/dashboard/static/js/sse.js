// Server-sent events over fetch().
//
// EventSource cannot send an Authorization header, and the token must never go
// into a URL, so the stream is read with fetch() and a ReadableStream reader and
// parsed here (the text/event-stream format of the HTML standard).

import { API, getToken, signalUnauthorized } from "./api.js";

/** Incremental text/event-stream parser: feed() text, get complete events back. */
export class SSEParser {
  constructor() {
    this.buffer = "";
    this.reset();
    this.lastId = "";
    this.retry = null;
  }

  reset() {
    this.event = "";
    this.data = [];
  }

  /**
   * @param {string} chunk - decoded text, any split
   * @returns {{event: string, data: string, id: string}[]}
   */
  feed(chunk) {
    this.buffer += chunk;
    const out = [];
    let match;
    const lineEnd = /\r\n|\r|\n/;
    // A trailing lone "\r" may be the first half of "\r\n": wait for more text.
    while ((match = lineEnd.exec(this.buffer)) !== null) {
      if (match[0] === "\r" && match.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const ev = this.line(line);
      if (ev) out.push(ev);
    }
    return out;
  }

  line(line) {
    if (line === "") {
      if (!this.data.length) {
        this.reset();
        return null;
      }
      const ev = { event: this.event || "message", data: this.data.join("\n"), id: this.lastId };
      this.reset();
      return ev;
    }
    if (line.startsWith(":")) return null; // a comment (keep-alive ping)
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.lastId = value;
    else if (field === "retry" && /^\d+$/.test(value)) this.retry = Number(value);
    return null;
  }
}

/**
 * Keep a connection to the master's event stream open, reconnecting on loss.
 *
 * @param {(ev: {event: string, data: any, id: string}) => void} onEvent - data is
 *   the JSON-decoded payload when it parses, else the raw text
 * @param {(status: "live"|"connecting"|"offline") => void} onStatus
 * @returns {() => void} stop
 */
export function connectEvents(onEvent, onStatus) {
  let stopped = false;
  let controller = null;
  let retryMs = 2000;

  async function once() {
    controller = new AbortController();
    const headers = { Accept: "text/event-stream", Authorization: `Bearer ${getToken()}` };
    onStatus("connecting");
    const res = await fetch(`${API}/events`, { headers, signal: controller.signal, cache: "no-store" });
    if (res.status === 401) {
      stopped = true;
      signalUnauthorized("Your token was refused; sign in again.");
      return;
    }
    if (res.status === 403) {
      // A token scoped to some types may not follow the fleet-wide stream:
      // the views still refresh by polling.
      stopped = true;
      onStatus("polling");
      return;
    }
    if (!res.ok || !res.body) throw new Error(`events: HTTP ${res.status}`);
    const parser = new SSEParser();
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let live = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const ev of parser.feed(value)) {
        if (!live) {
          // Headers come before the server subscribed; its first event
          // ("hello") comes after, so only now is nothing missed.
          live = true;
          onStatus("live");
        }
        let data = ev.data;
        try {
          data = JSON.parse(ev.data);
        } catch {
          // not JSON: hand the text on as it is
        }
        onEvent({ event: ev.event, data, id: ev.id });
      }
      if (parser.retry) retryMs = parser.retry;
    }
  }

  (async () => {
    while (!stopped) {
      try {
        await once();
      } catch (err) {
        if (stopped) break;
        console.warn("event stream lost", err);
      }
      if (stopped) break;
      onStatus("offline");
      await new Promise((resolve) => setTimeout(resolve, retryMs));
    }
  })();

  return () => {
    stopped = true;
    if (controller) controller.abort();
  };
}
