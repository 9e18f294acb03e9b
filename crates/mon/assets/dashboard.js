// The Loligo dashboard: polls /api/dashboard with the token the user
// gave (kept for this browser tab only) and draws what it answers.
// It only reads; every value is written as text, never as markup.
"use strict";

const POLL_MS = 2000;
const HISTORY = 150; // points kept for the charts: 5 minutes at 2 s
const TOKEN_KEY = "loligo-dashboard-token";
const DETAIL_LINES = 5; // detail lines shown per health check

const kept = { t: [], rops: [], wops: [], rbytes: [], wbytes: [], rec: [] };
let timer = null;
let polling = false; // one poll at a time: answers render in order

function $(id) { return document.getElementById(id); }

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
function bytes(n) {
  let v = Number(n) || 0, i = 0;
  while (v >= 1024 && i < UNITS.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(v < 10 ? 1 : 0)) + " " + UNITS[i];
}
function rate(n) { return bytes(n) + "/s"; }
function count(n) {
  const v = Number(n) || 0;
  if (v >= 1e9) return (v / 1e9).toFixed(1) + " G";
  if (v >= 1e6) return (v / 1e6).toFixed(1) + " M";
  if (v >= 1e4) return (v / 1e3).toFixed(1) + " k";
  return v.toFixed(v % 1 === 0 ? 0 : 1);
}
function ms(n) { const v = Number(n) || 0; return v ? v.toFixed(v < 10 ? 2 : 0) : "0"; }
function pct(used, total) { return total > 0 ? (100 * used / total) : 0; }

function healthClass(status) {
  return { HEALTH_OK: "ok", HEALTH_WARN: "warn", HEALTH_ERR: "err" }[status] || "unknown";
}

function setBadge(id, status) {
  const b = $(id);
  b.textContent = status;
  b.className = "badge " + healthClass(status);
}

function bar(percent, cls) {
  const outer = el("div", null, "bar");
  const inner = el("div", null, cls || "");
  inner.style.width = Math.min(100, Math.max(0, percent)).toFixed(1) + "%";
  if (percent >= 85) inner.className += " hot";
  outer.appendChild(inner);
  return outer;
}

// --- Token -------------------------------------------------------------

function tokenFromHash() {
  const m = /(?:^#|&)token=([0-9a-fA-F]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, m[1]);
    dropTokenFromAddress();
  }
}
function dropTokenFromAddress() {
  // Keep the token out of the address bar (and of screenshots).
  window.history.replaceState(null, "", location.pathname + location.search);
}
function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

function showLogin(message) {
  stop();
  $("main").hidden = true;
  $("login").hidden = false;
  $("logout").hidden = true;
  $("login-error").textContent = message || "";
  setBadge("health-badge", "…");
}

function signIn(value) {
  sessionStorage.setItem(TOKEN_KEY, value.trim());
  $("token-input").value = "";
  $("login").hidden = true;
  start();
}

// --- Polling -----------------------------------------------------------

function notice(text) {
  const n = $("notice");
  n.hidden = !text;
  n.textContent = text || "";
}

async function poll() {
  if (polling) return;
  polling = true;
  try {
    await pollOnce();
  } finally {
    polling = false;
  }
}

async function pollOnce() {
  const sent = token();
  let r;
  try {
    r = await fetch("/api/dashboard", {
      headers: { Authorization: "Bearer " + sent },
      cache: "no-store",
    });
  } catch (e) {
    notice("This monitor cannot be reached: " + e.message + ". Retrying.");
    return;
  }
  let body = {};
  try { body = await r.json(); } catch (e) { body = { error: "an answer that is not JSON" }; }
  if (sent !== token()) return; // signed out or in meanwhile: a stale answer
  if (r.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin(body.error || "The token was refused.");
    return;
  }
  if (!r.ok) {
    let text = body.error || ("HTTP " + r.status);
    if (body.standby) {
      text += body.leader === null || body.leader === undefined
        ? "; no leader is known yet. Retrying."
        : "; mon." + body.leader + " leads: open the dashboard `loligo mgr services` names.";
    }
    notice(text);
    return;
  }
  notice("");
  render(body);
}

function start() {
  stop();
  $("main").hidden = false;
  $("logout").hidden = false;
  poll();
  timer = setInterval(poll, POLL_MS);
}
function stop() {
  if (timer !== null) clearInterval(timer);
  timer = null;
}

// --- Rendering ---------------------------------------------------------

function render(v) {
  const s = v.status;
  $("fsid").textContent = "cluster " + s.fsid;
  $("who").textContent = v.user;
  $("served-by").textContent = "mon." + v.mon;
  $("updated").textContent = new Date().toLocaleTimeString();
  renderHealth(s.health);
  renderCluster(s, v.df);
  renderPgs(s.pgs);
  renderRecovery(s);
  record(s);
  drawCharts();
  renderOsds(v.osds);
  renderPools(v.df.pools, v.pool_io || {});
  renderLog(v.log);
}

function renderHealth(h) {
  setBadge("health-badge", h.status);
  setBadge("health-status", h.status);
  const ul = $("health-checks");
  ul.replaceChildren();
  for (const [code, c] of Object.entries(h.checks || {})) {
    const li = el("li", null, "check " + healthClass(c.severity));
    li.appendChild(el("span", code, "code"));
    li.appendChild(el("span", c.summary.message));
    if (c.detail && c.detail.length) {
      const d = el("ul", null, "detail");
      for (const line of c.detail.slice(0, DETAIL_LINES)) d.appendChild(el("li", line.message));
      if (c.detail.length > DETAIL_LINES) {
        d.appendChild(el("li", "… " + (c.detail.length - DETAIL_LINES) + " more (loligo health detail lists all)", "muted"));
      }
      li.appendChild(d);
    }
    ul.appendChild(li);
  }
  if (!ul.children.length) ul.appendChild(el("li", "No health checks raised.", "muted"));
}

function renderCluster(s, df) {
  const m = s.monitors;
  $("mons").textContent = m.members.length + " (quorum " + (m.quorum || []).map((x) => "mon." + x).join(", ") +
    (m.leader === null || m.leader === undefined ? "; no leader" : "; leader mon." + m.leader) + ")";
  const o = s.osdmap;
  $("osd-count").textContent = o.num_osds + " total, " + o.num_up_osds + " up, " + o.num_in_osds + " in" +
    (o.flags && o.flags.length ? " (flags " + o.flags.join(",") + ")" : "");
  $("epoch").textContent = "epoch " + o.epoch;
  $("pool-count").textContent = s.pools;
  $("objects").textContent = count(s.usage.objects) + " (" + bytes(s.usage.stored_bytes) + " stored)";
  const used = df.stats.total_used_raw_bytes, total = df.stats.total_bytes;
  const p = pct(used, total);
  $("raw-bar").style.width = Math.min(100, p).toFixed(1) + "%";
  $("raw-bar").className = p >= 85 ? "hot" : "";
  $("raw-use").textContent = bytes(used) + " of " + bytes(total) + " (" + p.toFixed(1) + "%)";
}

function renderPgs(pgs) {
  $("pg-total").textContent = pgs.total + " PGs";
  const ul = $("pg-states");
  ul.replaceChildren();
  const rows = Object.entries(pgs.by_state || {}).sort((a, b) => b[1] - a[1]);
  for (const [state, n] of rows) {
    const li = el("li", null, state === "active+clean" ? "clean" : "busy");
    li.appendChild(el("span", n, "n"));
    li.appendChild(el("span", state));
    ul.appendChild(li);
  }
}

function scrubbingPgs(pgs) {
  let n = 0;
  for (const [state, c] of Object.entries(pgs.by_state || {})) {
    if (state.split("+").includes("scrubbing")) n += c;
  }
  return n;
}

function renderRecovery(s) {
  const u = s.usage;
  $("degraded").textContent = count(u.degraded_objects) + " objects";
  $("misplaced").textContent = count(u.misplaced_objects) + " objects";
  $("unfound").textContent = count(u.unfound_objects) + " objects in " + u.unfound_pgs + " PGs";
  $("recovery").textContent = rate(s.recovery.bytes_s) + ", " + count(s.recovery.objects_s) + " objects/s";
  $("scrubbing").textContent = scrubbingPgs(s.pgs) + " PGs";
  $("scrub-errors").textContent = u.scrub_errors + " in " + u.inconsistent_pgs + " PGs";
  const ul = $("progress");
  ul.replaceChildren();
  for (const p of s.progress || []) ul.appendChild(el("li", p));
}

function record(s) {
  kept.t.push(Date.now());
  kept.rops.push(s.io.read_ops_s);
  kept.wops.push(s.io.write_ops_s);
  kept.rbytes.push(s.io.read_bytes_s);
  kept.wbytes.push(s.io.write_bytes_s);
  kept.rec.push(s.recovery.bytes_s);
  for (const k of Object.keys(kept)) {
    while (kept[k].length > HISTORY) kept[k].shift();
  }
  $("ops-now").textContent = count(s.io.read_ops_s) + " / " + count(s.io.write_ops_s);
  $("bytes-now").textContent = rate(s.io.read_bytes_s) + " / " + rate(s.io.write_bytes_s);
  $("rec-now").textContent = rate(s.recovery.bytes_s);
}

// A line chart of `series` ([values, class]) over the kept times, in an
// SVG of 480 x 160 user units, with its peak and the time span labelled.
function chart(svg, series, fmt) {
  const W = 480, H = 160, top = 14, bottom = 16;
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const n = kept.t.length;
  let peak = 0;
  for (const [vals] of series) for (const x of vals) peak = Math.max(peak, Number(x) || 0);
  const scale = peak > 0 ? peak * 1.1 : 1;
  for (const frac of [0, 0.5, 1]) {
    const y = top + (H - top - bottom) * frac;
    const g = document.createElementNS(ns, "line");
    g.setAttribute("x1", 0); g.setAttribute("x2", W);
    g.setAttribute("y1", y); g.setAttribute("y2", y);
    g.setAttribute("class", "grid");
    svg.appendChild(g);
  }
  if (n >= 2) {
    const t0 = kept.t[0], span = Math.max(1, kept.t[n - 1] - t0);
    for (const [vals, cls] of series) {
      const pts = vals.map((x, i) => {
        const px = ((kept.t[i] - t0) / span) * W;
        const py = H - bottom - ((Number(x) || 0) / scale) * (H - top - bottom);
        return px.toFixed(1) + "," + py.toFixed(1);
      });
      const line = document.createElementNS(ns, "polyline");
      line.setAttribute("points", pts.join(" "));
      line.setAttribute("class", "series " + cls);
      svg.appendChild(line);
    }
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", 4); label.setAttribute("y", H - 3);
    label.setAttribute("class", "axis");
    label.textContent = "last " + Math.round(span / 1000) + " s";
    svg.appendChild(label);
  }
  const peakLabel = document.createElementNS(ns, "text");
  peakLabel.setAttribute("x", 4); peakLabel.setAttribute("y", 11);
  peakLabel.setAttribute("class", "axis");
  peakLabel.textContent = "peak " + fmt(peak);
  svg.appendChild(peakLabel);
}

function drawCharts() {
  chart($("chart-ops"), [[kept.rops, "read"], [kept.wops, "write"]], (x) => count(x) + "/s");
  chart($("chart-bytes"), [[kept.rbytes, "read"], [kept.wbytes, "write"]], rate);
  chart($("chart-recovery"), [[kept.rec, "recovery"]], rate);
}

function cell(tr, text, cls) { tr.appendChild(el("td", text, cls)); }

function renderOsds(osds) {
  const body = $("osds").tBodies[0];
  body.replaceChildren();
  for (const o of osds) {
    const tr = el("tr");
    tr.dataset.osd = o.id;
    cell(tr, "osd." + o.id);
    cell(tr, o.host || "-");
    const status = (o.up ? "up" : "down") + ", " + (o.in ? "in" : "out");
    cell(tr, status, "status " + (o.up ? (o.in ? "ok" : "warn") : "err"));
    cell(tr, o.reweight.toFixed(2), "num");
    cell(tr, o.numpg, "num");
    const use = el("td");
    use.appendChild(bar(pct(o.bytes_used, o.bytes_total)));
    tr.appendChild(use);
    cell(tr, o.bytes_total ? bytes(o.bytes_used) : "-", "num");
    cell(tr, o.bytes_total ? bytes(o.bytes_total) : "-", "num");
    cell(tr, ms(o.commit_latency_ms), "num");
    cell(tr, ms(o.read_latency_ms), "num");
    cell(tr, ms(o.write_latency_ms), "num");
    cell(tr, o.slow_ops, "num" + (o.slow_ops ? " err" : ""));
    body.appendChild(tr);
  }
}

function renderPools(pools, io) {
  const body = $("pools").tBodies[0];
  body.replaceChildren();
  for (const p of pools) {
    const tr = el("tr");
    cell(tr, p.name);
    cell(tr, p.id, "num");
    cell(tr, p.pgs, "num");
    cell(tr, bytes(p.stats.stored), "num");
    cell(tr, count(p.stats.objects), "num");
    cell(tr, bytes(p.stats.bytes_used), "num");
    const use = el("td");
    use.appendChild(bar(100 * p.stats.percent_used));
    tr.appendChild(use);
    cell(tr, bytes(p.stats.max_avail), "num");
    const r = io[p.id] || {};
    cell(tr, rate(r.read_bytes_s) + ", " + count(r.read_ops_s) + " op/s", "num");
    cell(tr, rate(r.write_bytes_s) + ", " + count(r.write_ops_s) + " op/s", "num");
    body.appendChild(tr);
  }
  if (!pools.length) {
    const tr = el("tr");
    tr.appendChild(el("td", "No pools yet (`loligo pool create NAME`).", "muted"));
    body.appendChild(tr);
  }
}

function renderLog(entries) {
  const ol = $("log");
  ol.replaceChildren();
  for (const e of entries.slice().reverse()) {
    const li = el("li", null, "level-" + String(e.level).toLowerCase());
    li.appendChild(el("time", new Date(e.stamp_ms).toLocaleString()));
    li.appendChild(el("span", e.name, "muted"));
    li.appendChild(el("span", e.message));
    ol.appendChild(li);
  }
  if (!entries.length) ol.appendChild(el("li", "Nothing logged yet.", "muted"));
}

// --- Start ---------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    signIn($("token-input").value);
  });
  $("logout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin("");
  });
  tokenFromHash();
  if (token()) start(); else showLogin("");
});
