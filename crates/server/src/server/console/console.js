// telestore console: polls /api/v1/status every second and draws it; the
// device panel reads /api/v1/query. No framework, no outside fetches.
"use strict";

const TOKEN_KEY = "telestore-token";
const POLL_MS = 1000;
const DEVICE_REFRESH_MS = 5000;
const $ = (id) => document.getElementById(id);

let refreshes = 0;
let device = null; // {table, name, field, windowMs}
let deviceTimer = null;

function hashParams() {
  const h = new URLSearchParams(location.hash.replace(/^#/, ""));
  const token = h.get("token");
  if (token) {
    localStorage.setItem(TOKEN_KEY, token);
  }
  return h;
}

function headers() {
  const t = localStorage.getItem(TOKEN_KEY);
  return t ? { Authorization: "Token " + t } : {};
}

// A DOM element: el("td", {class: "num"}, "12") — text goes in as text.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "style") e.style.cssText = v; else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === "object" ? c : String(c));
  }
  return e;
}

function svgEl(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

function num(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(2) + " M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + " k";
  return Math.round(n).toString();
}

function when(ms) {
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

async function api(path) {
  const r = await fetch(path, { headers: headers(), cache: "no-store" });
  if (r.status === 401 || r.status === 403) {
    const body = await r.json().catch(() => ({}));
    showAuth(body.message || r.statusText);
    throw new Error("auth");
  }
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    throw new Error(body.message || r.status + " " + r.statusText);
  }
  return r.json();
}

function showAuth(reason) {
  $("auth").hidden = false;
  $("auth-reason").textContent = "This daemon wants a token (a read-only one is enough): " + reason;
}

$("auth").addEventListener("submit", (ev) => {
  ev.preventDefault();
  localStorage.setItem(TOKEN_KEY, $("auth-token").value.trim());
  $("auth").hidden = true;
});

// A polyline of `ys` (oldest first) filling `svg`'s view box. The y axis
// starts at 0 when `zero` (rates), else it spans the data (a latitude
// would otherwise draw flat). With `xs` (times) and `span` ([from, to])
// a point sits at its time, else at its index.
function drawLine(svg, ys, height, { zero = true, xs = null, span = null } = {}) {
  svg.replaceChildren();
  const lo = ys.reduce((a, y) => Math.min(a, y), Infinity);
  const hi = ys.reduce((a, y) => Math.max(a, y), -Infinity);
  let min = zero ? Math.min(0, lo) : lo;
  let max = zero ? Math.max(1e-9, hi) : hi;
  if (!ys.length) { min = 0; max = 1; }
  // A flat series draws across the middle.
  const [bottom, top] = max > min ? [min, max] : [min - 0.5, max + 0.5];
  const w = 600;
  const pts = ys.map((y, i) => {
    let x = ys.length > 1 ? (i * w) / (ys.length - 1) : 0;
    if (xs && span && span[1] > span[0]) x = ((xs[i] - span[0]) * w) / (span[1] - span[0]);
    const yy = height - ((y - bottom) / (top - bottom)) * (height - 8) - 4;
    return x.toFixed(1) + "," + yy.toFixed(1);
  });
  svg.append(svgEl("polyline", { points: pts.join(" ") }));
  return { min, max };
}

function renderIngest(s) {
  $("ingest-rate").textContent = num(s.ingest.rows_per_second);
  const ys = s.ingest.history.map((h) => h.rows_per_second);
  const chart = $("ingest-chart");
  const { max } = drawLine(chart, ys, 120);
  chart.dataset.samples = ys.length;
  chart.dataset.last = ys.length ? ys[ys.length - 1] : 0;
  $("ingest-span").textContent = "last " + ys.length + " s";
  $("ingest-max").textContent = "max " + num(max) + " rows/s";
}

function renderStats(s) {
  const rows = [
    ["rows written", num(s.ingest.rows_total)],
    ["memstores", bytes(s.memstores.bytes) + " / " + bytes(s.memstores.limit_bytes)],
    ["flush queue", s.memstores.flush_queue + " memstores"],
    ["WAL segments", s.wal.segments],
    ["compactions", s.compactions.running + " running, " + s.compactions.queued + " queued"],
    ["compaction debt", bytes(s.compactions.debt_bytes)],
    ["write stalls / busy / slowed", s.writes.stalled_total + " / " + s.writes.busy_total + " / " + s.writes.slowed_total],
    ["block cache", bytes(s.block_cache.bytes) + " / " + bytes(s.block_cache.capacity_bytes)],
    ["block cache hit rate", (100 * s.block_cache.hit_ratio).toFixed(1) + " %"],
    ["latest-row cache", s.latest_cache.devices + " devices, " + s.latest_cache.hits + " hits"],
    ["TCP connections", s.connections.tcp_open + " open (" + s.connections.tcp_total + " since start)"],
    ["TCP rows / frames", num(s.connections.tcp_rows) + " / " + num(s.connections.tcp_frames)],
    ["HTTP line-protocol rows", num(s.connections.http_rows) + " (" + s.connections.http_write_requests + " requests, " + s.connections.http_write_rejected + " refused)"],
    ["I/O backend", s.io],
  ];
  $("stats").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function renderTable(t) {
  const load = (r) => r.write_rate + r.read_rate;
  const maxRate = Math.max(1e-9, ...t.regions.map((r) => Math.max(r.write_rate, r.read_rate)));
  const maxMem = Math.max(1, ...t.regions.map((r) => r.memstore_bytes));
  const map = el("div", { class: "hashmap", "aria-label": "regions over the hash space" });
  const totalLoad = t.regions.reduce((a, r) => a + load(r), 0);
  for (const r of t.regions) {
    const width = Math.max(0.2, 100 * (r.end_fraction - r.start_fraction));
    const shade = totalLoad > 0 ? 0.25 + 0.75 * Math.min(1, (load(r) / totalLoad) * t.regions.length / 2) : 0.25;
    map.append(el("div", {
      class: "region" + (r.hot ? " hot" : ""),
      "data-region": r.id,
      style: `width:${width}%;opacity:${shade.toFixed(2)}`,
      title: `region ${r.id} [${r.start} .. ${r.end || "end"}): ${num(r.write_rate)} writes/s, ${num(r.read_rate)} reads/s` + (r.hot ? " — HOT" : ""),
    }));
  }
  const head = el("tr", {}, ...["region", "", "writes / reads per s", "memstore", "files (runs)", "size", "debt", "compaction"].map((h) => el("th", {}, h)));
  const body = t.regions
    .slice()
    .sort((a, b) => load(b) - load(a))
    .map((r) => el("tr", { class: "region-row" + (r.hot ? " hot" : ""), "data-region": r.id },
      el("td", {}, r.id),
      el("td", {}, r.hot ? el("span", { class: "hot-flag" }, "HOT") : ""),
      el("td", { class: "barcell", title: `${num(r.write_rate)} writes/s, ${num(r.read_rate)} reads/s` },
        el("div", { class: "bar write", style: `width:${(100 * r.write_rate / maxRate).toFixed(1)}%` }),
        el("div", { class: "bar read", style: `width:${(100 * r.read_rate / maxRate).toFixed(1)}%` })),
      el("td", { class: "barcell", title: bytes(r.memstore_bytes) },
        el("div", { class: "bar mem", style: `width:${(100 * r.memstore_bytes / maxMem).toFixed(1)}%` })),
      el("td", { class: "num" }, `${r.files} (${r.runs})`),
      el("td", { class: "num" }, bytes(r.size_bytes)),
      el("td", { class: "num" }, bytes(r.compaction_debt_bytes)),
      el("td", {}, r.compaction_running ? "running" : r.compaction_queued ? "queued" : "")));
  const hot = t.regions.filter((r) => r.hot).length;
  return el("div", { class: "table", "data-table": t.name },
    el("h3", {}, t.name + " ", el("small", {}, `${t.regions.length} regions` + (hot ? `, ${hot} hot` : ""))),
    map,
    el("table", { class: "regions" }, el("thead", {}, head), el("tbody", {}, ...body)));
}

function renderTables(s) {
  $("tables").replaceChildren(...s.tables.map(renderTable));
  const sel = $("device-table");
  const chosen = sel.value || (device && device.table);
  const names = s.tables.map((t) => t.name);
  if (sel.options.length !== names.length || names.some((n, i) => sel.options[i].value !== n)) {
    sel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
    if (chosen && names.includes(chosen)) sel.value = chosen;
    fillFields(s);
  }
}

function fillFields(s) {
  const t = s.tables.find((t) => t.name === $("device-table").value);
  const sel = $("device-field");
  const chosen = sel.value || (device && device.field);
  sel.replaceChildren(...(t ? t.fields : []).map((f) => el("option", { value: f }, f)));
  if (chosen && t && t.fields.includes(chosen)) sel.value = chosen;
}

let lastStatus = null;
$("device-table").addEventListener("change", () => lastStatus && fillFields(lastStatus));

function render(s) {
  lastStatus = s;
  const h = $("health");
  h.textContent = s.health === "ok" ? "healthy" : s.health;
  h.className = "pill " + (s.health === "ok" ? "ok" : "bad");
  $("summary").textContent = `${s.tables.length} tables, up ${Math.round(s.uptime_seconds)} s`;
  renderIngest(s);
  renderStats(s);
  renderTables(s);
  refreshes++;
  $("updated").dataset.refreshes = refreshes;
  $("updated").textContent = "updated " + new Date(s.time_ms).toLocaleTimeString();
}

async function poll() {
  try {
    render(await api("/api/v1/status"));
  } catch (e) {
    if (e.message !== "auth") {
      $("health").textContent = "unreachable: " + e.message;
      $("health").className = "pill bad";
    }
  }
  setTimeout(poll, POLL_MS);
}

function query(params) {
  const q = new URLSearchParams({ ...params, format: "json" });
  return api("/api/v1/query?" + q.toString());
}

function tsOf(row) {
  return typeof row.ts === "number" ? row.ts : Date.parse(row.ts);
}

async function showDevice() {
  if (!device) return;
  const err = $("device-error");
  try {
    const latest = await query({ kind: "latest", table: device.table, device: device.name });
    if (!latest.length) throw new Error(`device ${device.name} has no readings in ${device.table}`);
    const row = latest[0];
    const cells = Object.entries(row).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", { "data-field": k }, v)));
    $("device-latest").replaceChildren(...cells);
    const to = tsOf(row);
    const from = to - device.windowMs;
    const points = await query({
      kind: "range", table: device.table, device: device.name,
      from: from + "ms", to: (to + 1) + "ms", fields: device.field, order: "asc",
    });
    const ys = points.map((p) => Number(p[device.field]));
    const xs = points.map(tsOf);
    const chart = $("device-chart");
    const { min, max } = drawLine(chart, ys, 160, { zero: false, xs, span: [from, to] });
    chart.dataset.points = ys.length;
    $("device-from").textContent = when(from);
    $("device-to").textContent = when(to);
    $("device-range").textContent = `${device.field}: ${min.toPrecision(6)} … ${max.toPrecision(6)} (${ys.length} readings)`;
    err.hidden = true;
  } catch (e) {
    if (e.message === "auth") return;
    err.textContent = e.message;
    err.hidden = false;
  }
}

// Search as the user types: registered names containing the text.
let searchTimer = null;
$("device-input").addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(async () => {
    const text = $("device-input").value.trim();
    if (!text || /^\d+$/.test(text)) return;
    try {
      const found = await api("/api/v1/devices?" + new URLSearchParams({ match: text, limit: "20" }));
      $("device-list").replaceChildren(...found.map((d) => el("option", { value: d.name },
        Object.entries(d.tags).map(([k, v]) => k + "=" + v).join(" "))));
    } catch (e) {
      // The search is a convenience: the form still takes names and ids.
    }
  }, 200);
});

$("device-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const name = $("device-input").value.trim();
  if (!name) return;
  device = {
    table: $("device-table").value,
    name,
    field: $("device-field").value,
    windowMs: Number($("device-window").value),
  };
  clearInterval(deviceTimer);
  showDevice();
  deviceTimer = setInterval(showDevice, DEVICE_REFRESH_MS);
});

// #device=truck-7&table=readings&field=velocity&window=3600000 opens the
// device panel on that device (bookmarks, and the browser test).
async function start() {
  const h = hashParams();
  await poll();
  if (h.get("device")) {
    if (h.get("table")) $("device-table").value = h.get("table");
    if (lastStatus) fillFields(lastStatus);
    if (h.get("field")) $("device-field").value = h.get("field");
    if (h.get("window")) $("device-window").value = h.get("window");
    $("device-input").value = h.get("device");
    $("device-form").requestSubmit();
  }
}

start();
