// The app's client: performs an interaction the way a mobile app does and measures its
// interaction response time (IRT). Served from the app's shell origin (docs/apps.md).
//
// On the input event (a click, or Enter in the search box) the app sends the
// interaction's root requests; every other request is sent only once all its parents'
// responses have arrived and been parsed, and its URL is taken from a parent's parsed
// JSON (`links`), as an app learns what to fetch from the API. JSON results are rendered
// into the DOM, images decoded and inserted. When the last request is handled the app
// waits for the frame that shows the end screen: requestAnimationFrame runs just before
// that frame is painted, and a message posted from it runs right after the paint.
// IRT = painted - event.timeStamp (both on the performance.now() clock).
"use strict";
(() => {
  const state = { dag: null, results: {}, waiters: {}, running: null };
  window.__dch = state;
  performance.setResourceTimingBufferSize(10000);

  function words(item) {
    return String(item.title || item.id || "").slice(0, 80);
  }

  function render(screen, node, body) {
    const sec = document.createElement("section");
    const h = document.createElement("h2");
    h.textContent = node.id;
    sec.appendChild(h);
    const ul = document.createElement("ul");
    for (const item of (body.items || []).slice(0, 8)) {
      const li = document.createElement("li");
      li.textContent = words(item);
      ul.appendChild(li);
    }
    sec.appendChild(ul);
    screen.appendChild(sec);
  }

  function fetchJson(url) {
    return fetch(url, { cache: "no-store", credentials: "omit", mode: "cors" }).then((r) => {
      if (!r.ok) throw new Error(`HTTP ${r.status} for ${url}`);
      return r.json();
    });
  }

  function fetchImage(url, grid) {
    const img = new Image();
    img.alt = "";
    img.src = url;
    // decode() resolves once the bytes are loaded and decoded into pixels.
    return img.decode().then(
      () => {
        grid.appendChild(img);
        return img;
      },
      () => {
        throw new Error(`image failed to load or decode: ${url}`);
      },
    );
  }

  function afterPaint() {
    return new Promise((resolve) => {
      requestAnimationFrame(() => {
        const ch = new MessageChannel();
        ch.port1.onmessage = () => resolve(performance.now());
        ch.port2.postMessage(0);
      });
    });
  }

  function run(name, t0, trigger, tHandler) {
    const inter = state.dag.interactions[name];
    if (!inter) throw new Error(`no interaction ${name}`);
    const screen = document.getElementById("screen");
    screen.replaceChildren();
    const grid = document.createElement("div");
    grid.className = "grid";
    screen.appendChild(grid);
    const nodes = inter.nodes;
    const byId = Object.fromEntries(nodes.map((n) => [n.id, n]));
    const children = Object.fromEntries(nodes.map((n) => [n.id, []]));
    for (const n of nodes) for (const p of n.parents) children[p].push(n.id);
    const links = {}; // child id -> URL, from parsed parent responses
    const rec = {};
    const done = new Set();
    let remaining = nodes.length;
    return new Promise((resolve, reject) => {
      const start = (n) => {
        const url = n.url || links[n.id];
        if (!url) {
          reject(new Error(`no parent response of ${n.id} named its URL`));
          return;
        }
        const r = (rec[n.id] = { id: n.id, url, kind: n.kind, parents: n.parents });
        r.sent = performance.now();
        const p =
          n.kind === "json"
            ? fetchJson(url).then((body) => {
                r.parsed = performance.now();
                Object.assign(links, body.links || {});
                render(screen, n, body);
              })
            : fetchImage(url, grid);
        p.then(() => {
          r.done = performance.now();
          done.add(n.id);
          remaining -= 1;
          for (const c of children[n.id]) {
            if (byId[c].parents.every((q) => done.has(q))) start(byId[c]);
          }
          if (remaining === 0) {
            const handled = performance.now();
            afterPaint().then((painted) => resolve({ handled, painted }));
          }
        }, reject);
      };
      for (const n of nodes) if (n.parents.length === 0) start(n);
    }).then(
      ({ handled, painted }) => finish(name, trigger, t0, rec, { handled, painted, tHandler }),
      (err) =>
        finish(name, trigger, t0, rec, { tHandler, error: String(err && err.message ? err.message : err) }),
    );
  }

  function finish(name, trigger, t0, rec, out) {
    const urls = new Set(Object.values(rec).map((r) => r.url));
    const timing = performance
      .getEntriesByType("resource")
      .filter((e) => urls.has(e.name))
      .map((e) => ({
        url: e.name,
        initiator: e.initiatorType,
        start: e.startTime,
        fetch_start: e.fetchStart,
        dns_start: e.domainLookupStart,
        dns_end: e.domainLookupEnd,
        connect_start: e.connectStart,
        tls_start: e.secureConnectionStart,
        connect_end: e.connectEnd,
        request_start: e.requestStart,
        response_start: e.responseStart,
        response_end: e.responseEnd,
        protocol: e.nextHopProtocol,
        transfer_size: e.transferSize,
        body_size: e.encodedBodySize,
        status: e.responseStatus,
      }));
    const res = {
      interaction: name,
      trigger,
      t_input: t0,
      t_handler: out.tHandler ?? null,
      t_handled: out.handled ?? null,
      t_painted: out.painted ?? null,
      irt_ms: out.painted != null ? out.painted - t0 : null,
      error: out.error || "",
      requests: Object.values(rec),
      timing,
    };
    state.results[name] = res;
    state.running = null;
    for (const w of state.waiters[name] || []) w(res);
    delete state.waiters[name];
    return res;
  }

  // Called by the driver after it has dispatched the input event.
  state.wait = (name) =>
    state.results[name]
      ? Promise.resolve(state.results[name])
      : new Promise((resolve) => (state.waiters[name] = [...(state.waiters[name] || []), resolve]));

  function trigger(name, ev, how) {
    if (state.running || !state.dag) return;
    state.running = name;
    delete state.results[name];
    // ev.timeStamp: when the input happened; now: when the app's handler got it.
    run(name, ev.timeStamp, how, performance.now());
  }

  state.ready = fetch("/dag.json", { cache: "no-store" })
    .then((r) => r.json())
    .then((dag) => {
      state.dag = dag;
      document.getElementById("btn-launch").addEventListener("click", (ev) => trigger("launch", ev, "click"));
      document.getElementById("btn-item").addEventListener("click", (ev) => trigger("item", ev, "click"));
      document.getElementById("q").addEventListener("keydown", (ev) => {
        if (ev.key === "Enter") trigger("search", ev, "key");
      });
      return true;
    });
})();
