// The durable dashboard: plain JavaScript over the JSON API (no build
// step). Every text from the API goes into the page as text nodes, never
// as HTML.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const main = document.getElementById("main");
const live = document.getElementById("live");
let timer = null; // the live refresh of the current view
// What each run status means, as the API says it (GET statuses): the
// statuses in the order the filters and tables show them, each with
// settled, in_flight, active, unsuccessful and the actions it allows, and
// the groups the status filter takes (in_flight, ...). The dashboard lists
// no status of its own: it decides from these meanings.
let runStatuses = { statuses: [], groups: [] };
let statusesLoaded = false;

// loadStatuses reads the statuses once (again after a failure, such as a
// request before signing in).
async function loadStatuses() {
  if (statusesLoaded) return;
  runStatuses = await api("statuses");
  statusesLoaded = true;
}

// meaningOf is what status means; an unknown status means nothing (no
// action, not in flight).
function meaningOf(status) {
  return runStatuses.statuses.find((m) => m.status === status) ||
    { status, settled: false, in_flight: false, active: false, unsuccessful: false, actions: [] };
}

// statusClass names the colour of a status by its meaning, so that a new
// status needs no style of its own: in flight (moving on, or idle),
// settled, or settled without completing.
function statusClass(status) {
  const m = meaningOf(status);
  if (m.in_flight) return m.active ? "in-flight" : "in-flight idle";
  if (m.unsuccessful) return "unsuccessful";
  return m.settled ? "settled" : "";
}

// el builds an element: attributes, then children (strings become text).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") { if (v) e.className = v; }
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined) continue;
    e.append(typeof k === "string" || typeof k === "number" ? document.createTextNode(String(k)) : k);
  }
  return e;
}

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(typeof k === "string" ? document.createTextNode(k) : k);
  return e;
}

// api calls the JSON API with the token of this tab, if any.
async function api(path, opts) {
  opts = opts || {};
  const headers = {};
  const token = sessionStorage.getItem("durable-token");
  if (token) headers["Authorization"] = "Bearer " + token;
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch("api/v1/" + path, {
    method: opts.method || "GET", headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  const data = await resp.json();
  if (resp.status === 401) {
    showLogin();
    throw new Error("sign in first");
  }
  if (!resp.ok) throw new Error(data.detail || data.title || ("HTTP " + resp.status));
  return data;
}

function showLogin() {
  const form = document.getElementById("login");
  form.hidden = false;
  main.hidden = true;
}

document.getElementById("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("durable-token", document.getElementById("token").value);
  document.getElementById("login").hidden = true;
  main.hidden = false;
  route();
});

function fmtTime(s) {
  if (!s) return "";
  return new Date(s).toLocaleString();
}

function badge(status) {
  return el("span", { class: "badge " + statusClass(status), "data-status": status }, status);
}

function showError(err) {
  main.replaceChildren(el("p", { class: "error", role: "alert" }, String(err.message || err)));
}

// confirmAction asks in a modal dialog; extra is an optional element (an
// option of the action). validate, if given, is called on confirming: a
// message it returns is shown in the dialog, which stays open. It resolves
// true when confirmed.
function confirmAction(text, extra, validate) {
  const dlg = document.getElementById("confirm");
  const form = dlg.querySelector("form");
  const problem = document.getElementById("confirm-problem");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-extra").replaceChildren(...(extra ? [extra] : []));
  const clear = () => {
    problem.textContent = "";
    problem.hidden = true;
  };
  clear();
  if (extra) extra.addEventListener("input", clear); // a new value, checked anew
  const check = (ev) => {
    if (!validate || !ev.submitter || ev.submitter.value !== "ok") return;
    const msg = validate();
    if (!msg) return;
    ev.preventDefault();
    problem.textContent = msg;
    problem.hidden = false;
  };
  form.addEventListener("submit", check);
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => {
      form.removeEventListener("submit", check);
      resolve(dlg.returnValue === "ok");
    }, { once: true });
    dlg.returnValue = "";
    dlg.showModal();
  });
}

// setLive refreshes the current view with fn every ms while "live" is
// checked and the tab is visible; a refresh still loading (stats on a big
// schema take seconds) is not doubled.
function setLive(fn, ms) {
  clearInterval(timer);
  timer = null;
  if (!fn) return;
  let busy = false;
  timer = setInterval(async () => {
    // Not under an open dialog: what it asks about stays on the page.
    if (busy || !live.checked || document.hidden || document.getElementById("confirm").open) return;
    busy = true;
    try { await fn(); } finally { busy = false; }
  }, ms);
}

// ---- runs list --------------------------------------------------------------

// fmtDuration says how long ms milliseconds are, in readable units.
function fmtDuration(ms) {
  if (ms < 1) return "< 1 ms";
  ms = Math.round(ms);
  if (ms < 1000) return ms + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + " s";
  const pad = (n) => String(Math.floor(n)).padStart(2, "0");
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${pad((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

// duration is a run's time from its creation to its end, or to now while
// it runs.
function duration(run) {
  const t0 = new Date(run.created_at).getTime();
  const t1 = run.finished_at ? new Date(run.finished_at).getTime() : Date.now();
  return el("span", { class: "duration" + (run.finished_at ? "" : " running"),
    title: run.finished_at ? `from ${fmtTime(run.created_at)} to ${fmtTime(run.finished_at)}` : `running since ${fmtTime(run.created_at)}` },
  fmtDuration(t1 - t0));
}

function shortID(id) {
  return id.slice(0, 8) + "…";
}

// shortVersion shortens a version for tables: a fingerprint (12 hex
// digits) or a short hand-set version as it is, a longer one cut.
function shortVersion(v) {
  if (!v) return "—";
  return v.length > 12 ? v.slice(0, 11) + "…" : v;
}

// versionTag shows a version, whole in its title.
function versionTag(v, attrs) {
  return el("code", { class: "version", title: v ? "version " + v : "started before versions", ...(attrs || {}) }, shortVersion(v));
}

// when says how far off a due time is; its title has the time.
function when(due) {
  const ms = new Date(due).getTime() - Date.now();
  return el("span", { class: "when", title: fmtTime(due) }, ms > 0 ? "in " + fmtDuration(ms) : "now due");
}

// waitsOfSteps returns what a running run's steps wait for, as the runs
// list has it (include=waits): the steps waiting for an event, a signal, a
// child run or their items, sleeping, or queued until a retry's backoff or
// a delayed start ends.
function waitsOfSteps(steps) {
  const out = [];
  for (const s of steps) {
    const w = { step: s.name, due_at: s.due_at };
    if (s.state === "WAITING") {
      if (s.kind === "event" && s.signal) Object.assign(w, { for: "signal", signal: s.signal });
      else if (s.kind === "event") Object.assign(w, { for: "event", event_key: s.event_key });
      else if (s.kind === "child") Object.assign(w, { for: "child", child_run_id: s.child_run_id });
      else if (s.kind === "map") Object.assign(w, { for: "items", items: (s.items || []).length,
        items_left: (s.items || []).filter((i) => !["COMPLETED", "FAILED", "SKIPPED", "CANCELLED"].includes(i.state)).length });
      else continue;
    } else if (s.state === "SLEEPING") w.for = "sleep";
    else if (s.state === "QUEUED" && s.due_at) Object.assign(w, { for: s.attempts > 0 ? "retry" : "start", attempts: s.attempts });
    else continue;
    out.push(w);
  }
  return out;
}

// waitText says what a step waits for (a wait of waitsOfSteps or of the
// runs list).
function waitText(w) {
  const timeout = w.due_at ? [" (times out ", when(w.due_at), ")"] : [];
  switch (w.for) {
    case "event": return [`event "${w.event_key}"`, timeout];
    case "signal": return [`signal "${w.signal}"`, timeout];
    case "child": return [w.child_run_id ? ["child run ", el("a", { href: "#/runs/" + w.child_run_id, title: w.child_run_id }, shortID(w.child_run_id))] : "its child run", timeout];
    case "items": return [`${w.items_left} of ${w.items} items`, timeout];
    case "sleep": return ["sleep, wakes ", when(w.due_at)];
    case "retry": return [`retry after attempt ${w.attempts}, `, when(w.due_at)];
    case "start": return ["delayed start, ", when(w.due_at)];
  }
  return [w.for];
}

// waitsCell lists a listed run's waits, the first three and a count.
function waitsCell(waits) {
  const shown = (waits || []).slice(0, 3);
  const more = (waits || []).length - shown.length;
  return el("td", { class: "waits" },
    shown.map((w) => el("div", { class: "wait", "data-step": w.step, "data-for": w.for }, el("strong", {}, w.step), ": ", waitText(w))),
    more > 0 ? el("div", { class: "muted" }, `and ${more} more`) : null);
}

async function runsView(params) {
  const option = (value, label) => el("option", { value, selected: (params.get("status") || "") === value }, label);
  const status = el("select", { id: "f-status" }, option("", "any"),
    runStatuses.statuses.map((m) => option(m.status, m.status)),
    el("optgroup", { label: "by meaning" }, runStatuses.groups.map((g) => option(g.name, g.name.replaceAll("_", " ")))));
  const workflow = el("select", { id: "f-workflow" }, el("option", { value: "" }, "any"));
  const version = el("select", { id: "f-version" }, el("option", { value: "" }, "any"));
  if (params.get("version")) version.append(el("option", { value: params.get("version"), selected: true }, params.get("version")));
  const tenant = el("input", { id: "f-tenant", value: params.get("tenant") || "", placeholder: "any", size: 14 });
  // The caller's own keys: the idempotency key (exact) and a JSON value
  // the input contains ({"customer":"c-42"}).
  const key = el("input", { id: "f-key", value: params.get("idempotency_key") || "", placeholder: "any", size: 14 });
  const input = el("input", { id: "f-input", value: params.get("input_contains") || "", placeholder: '{"customer":"c-42"}', size: 22,
    title: "runs whose input contains this JSON value" });
  const parent = params.get("parent") || "";
  // Top-level runs only, by default: a parent's child runs are a click
  // away (its "child runs →" link and its page), and a parent with many
  // children would otherwise fill the list. top_level=false in the address
  // lists every run; a parent's child runs are listed whatever it says.
  const topLevel = el("input", { id: "f-top-level", type: "checkbox", checked: params.get("top_level") !== "false", disabled: !!parent });
  const apply = (withParent) => {
    const q = new URLSearchParams();
    if (status.value) q.set("status", status.value);
    if (workflow.value) q.set("workflow", workflow.value);
    if (version.value) q.set("version", version.value);
    if (tenant.value) q.set("tenant", tenant.value);
    if (!topLevel.checked) q.set("top_level", "false");
    if (key.value) q.set("idempotency_key", key.value);
    if (input.value.trim()) q.set("input_contains", input.value.trim());
    if (withParent && parent) q.set("parent", parent);
    location.hash = "#/?" + q.toString();
  };
  status.addEventListener("change", () => apply(true));
  workflow.addEventListener("change", () => { version.value = ""; apply(true); });
  version.addEventListener("change", () => apply(true));
  tenant.addEventListener("change", () => apply(true));
  topLevel.addEventListener("change", () => apply(true));
  key.addEventListener("change", () => apply(true));
  input.addEventListener("change", () => {
    try {
      if (input.value.trim()) JSON.parse(input.value);
      input.setCustomValidity("");
      apply(true);
    } catch (e) {
      input.setCustomValidity("not JSON: " + e.message);
      input.reportValidity();
    }
  });
  const tbody = el("tbody", { id: "runs" });
  const more = el("button", { id: "more", hidden: true }, "Next 50 runs");
  const heads = ["Run", "Workflow", "Version", "Tenant", "Status", "Waits for", "Failed step", "Duration", "Created"];
  main.replaceChildren(...[
    el("h1", {}, "Runs"),
    el("div", { class: "filters" },
      el("label", {}, "status", status), el("label", {}, "workflow", workflow), el("label", {}, "version", version), el("label", {}, "tenant", tenant),
      el("label", {}, "idempotency key", key), el("label", {}, "input contains", input),
      el("label", { class: "inline", title: "leave out child runs (runs a step of another run started)" }, topLevel, " top-level runs only")),
    parent ? el("p", { class: "chip", id: "f-parent" }, "Child runs of run ", el("a", { href: "#/runs/" + parent }, parent), " ",
      el("button", { type: "button", "aria-label": "show every run, not only the child runs of " + parent, onclick: () => apply(false) }, "✕")) : null,
    el("table", {}, el("thead", {}, el("tr", {}, heads.map((h) => el("th", {}, h)))), tbody),
    more,
  ].filter((k) => k !== null));

  // The workflows, and the versions of the one chosen (of every one when
  // none is), newest first.
  api("workflows").then((d) => {
    for (const w of d.workflows) workflow.append(el("option", { value: w.name, selected: params.get("workflow") === w.name }, w.name));
    const of = new Map(); // version -> the workflows that have it
    for (const w of d.workflows) {
      if (params.get("workflow") && params.get("workflow") !== w.name) continue;
      for (const v of w.versions) of.set(v.version, [...(of.get(v.version) || []), w.name]);
    }
    for (const [v, names] of of) {
      if (v === params.get("version")) continue; // there already
      version.append(el("option", { value: v }, params.get("workflow") ? v : `${v} (${names.join(", ")})`));
    }
  }).catch(() => {});

  const query = new URLSearchParams();
  for (const k of ["status", "workflow", "version", "tenant", "idempotency_key", "input_contains", "parent"]) if (params.get(k)) query.set(k, params.get(k));
  if (!parent && topLevel.checked) query.set("top_level", "true");
  query.set("limit", "50");
  query.set("include", "waits,children");
  let cursor = "";
  const row = (r) => el("tr", { "data-run": r.id },
    el("td", { class: "id" }, el("a", { href: "#/runs/" + r.id }, r.id),
      r.parent_id ? el("div", { class: "family" }, "child of ",
        el("a", { class: "parent", href: "#/runs/" + r.parent_id, title: r.parent_id, "data-parent": r.parent_id }, shortID(r.parent_id)),
        r.parent_step ? ` (${r.parent_step})` : "") : null,
      r.has_children ? el("div", { class: "family" },
        el("a", { class: "children", href: "#/?parent=" + r.id, "aria-label": "the child runs of run " + r.id }, "child runs →")) : null),
    el("td", {}, r.workflow), el("td", { class: "nowrap" }, versionTag(r.version, { "data-version": r.version })), el("td", {}, r.tenant), el("td", {}, badge(r.status),
      r.unserved ? [" ", el("span", { class: "badge unserved", title: `no live worker serves version ${r.version || "(none)"} of workflow ${r.workflow}` }, "unserved")] : null),
    waitsCell(r.waits), el("td", {}, r.failed_step || ""), el("td", { class: "nowrap" }, duration(r)), el("td", { class: "nowrap" }, fmtTime(r.created_at)));
  const load = async (append) => {
    const q = new URLSearchParams(query);
    if (append && cursor) q.set("cursor", cursor);
    const page = await api("runs?" + q.toString());
    const rows = page.runs.map(row);
    if (append) tbody.append(...rows); else tbody.replaceChildren(...rows);
    if (!append || page.next_cursor) cursor = page.next_cursor || "";
    more.hidden = !cursor;
    if (!append && page.runs.length === 0) tbody.replaceChildren(el("tr", {}, el("td", { colspan: heads.length, class: "muted" }, "No runs match.")));
  };
  more.addEventListener("click", () => load(true).catch(showError));
  await load(false);
  setLive(() => { if (tbody.children.length <= 50) load(false).catch(() => {}); }, 3000);
}

// ---- one run ----------------------------------------------------------------

// layouts keeps the layouts of the DAGs drawn, by shape: a run's page is
// drawn again at every refresh, and its shape does not change.
const layouts = new Map();

function layoutOf(steps) {
  const key = JSON.stringify(steps.map((s) => [s.name, s.kind, s.parents || []]));
  let l = layouts.get(key);
  if (!l) {
    if (layouts.size >= 64) layouts.clear();
    l = dagLayout(steps);
    layouts.set(key, l);
  }
  return l;
}

// dagSVG draws a DAG (see dag.js for its layout) as an SVG with an id; a
// click on a step calls onSelect with its name.
function dagSVG(steps, onSelect, id, label) {
  id = id || "dag";
  const { boxes, edges, width, height } = layoutOf(steps);
  const g = svg("svg", { id, class: "dag", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label || "the run's steps" });
  g.append(svg("defs", {}, svg("marker", { id: id + "-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" },
    svg("path", { class: "arrow", d: "M0,0 L8,4 L0,8 z" }))));
  // A retired step (kept only for its record: the run moved to a version
  // that does not run it) is drawn dashed and grey, and so are its edges.
  const retired = new Set(steps.filter((s) => s.retired).map((s) => s.name));
  for (const e of edges) {
    const r = retired.has(e.from) || retired.has(e.to);
    g.append(svg("path", { class: "edge" + (r ? " retired" : ""), d: e.d, "data-from": e.from, "data-to": e.to, "marker-end": `url(#${id}-arrow)` }));
  }
  for (const s of steps) {
    const p = boxes[s.name];
    const label = s.name.length > 22 ? s.name.slice(0, 21) + "…" : s.name;
    let sub = s.state.toLowerCase();
    if (s.retired) sub += " · retired";
    if (s.attempts > 1) sub += ` · ${s.attempts} attempts`;
    if (s.items) sub += ` · ${s.items.length} item${s.items.length === 1 ? "" : "s"}`;
    const title = `${s.name}: ${s.state}${s.error ? " — " + s.error : ""}` +
      (s.retired ? " — retired: kept for its record; the run moved to a version that does not run this step" : "");
    const node = svg("g", { class: "node " + s.state + (s.retired ? " retired" : ""), "data-step": s.name, "data-state": s.state, "data-layer": p.layer,
      "data-retired": s.retired ? "true" : "false", tabindex: "0" },
      svg("title", {}, title),
      svg("rect", { x: p.x, y: p.y, width: p.w, height: p.h }),
      svg("text", { x: p.x + 8, y: p.y + p.h / 2 - 4 }, label),
      svg("text", { x: p.x + 8, y: p.y + p.h / 2 + 12, class: "sub" }, sub));
    node.addEventListener("click", () => onSelect(s.name));
    g.append(node);
  }
  return zoomPanel(g, id, width, height);
}

// zooms keeps the zoom of each drawing, by its id: "fit", or a scale (1 is
// 100%). A page drawn again (a run's, at every refresh) keeps its zoom.
// A drawing not zoomed yet fits: at 100% when it fits the panel, smaller
// when it does not (at 100% it would cut off its last steps).
const zooms = new Map();
const zoomOf = (id) => zooms.get(id) ?? "fit";

// zoomPanel puts a drawing (an SVG of width × height user units) in a
// panel as wide as the page, which scrolls what does not fit, with a zoom
// bar: fit (the whole drawing in the panel, at most 100%: the zoom until
// another is chosen), zoom out, 100%, zoom in. "Fit" refits when the
// window is resized.
function zoomPanel(g, id, width, height) {
  const wrap = el("div", { class: "dag-wrap", id: id + "-wrap" }, g);
  const shown = el("span", { class: "muted zoom-level", id: id + "-zoom" });
  const scaleOf = (z) => {
    if (z !== "fit") return z;
    // The panel's width; its height at most three quarters of the window.
    const w = wrap.clientWidth - 2, h = Math.max(window.innerHeight * 0.75, 200) - 2;
    return w > 0 ? Math.min(1, w / width, h / height) : 1;
  };
  const apply = () => {
    const z = zoomOf(id);
    const k = scaleOf(z);
    g.setAttribute("width", Math.round(width * k));
    g.setAttribute("height", Math.round(height * k));
    g.dataset.zoom = k.toFixed(3);
    shown.textContent = Math.round(k * 100) + "%" + (z === "fit" && k < 1 ? " (fit)" : "");
  };
  const set = (z) => { zooms.set(id, z); apply(); };
  const by = (f) => set(Math.min(4, Math.max(0.05, scaleOf(zoomOf(id)) * f)));
  const button = (cls, text, label, onclick) => el("button", { type: "button", class: "zoom " + cls, id: `${id}-${cls}`, "aria-label": label, title: label, onclick }, text);
  const bar = el("div", { class: "dag-zoom" },
    button("fit", "Fit", "fit the whole drawing in the panel", () => set("fit")),
    button("out", "−", "zoom out", () => by(0.8)),
    button("actual", "100%", "actual size", () => set(1)),
    button("in", "+", "zoom in", () => by(1.25)),
    shown);
  // Laid out, and at every change of the panel's width: a fit refits.
  new ResizeObserver(() => { if (zoomOf(id) === "fit") apply(); }).observe(wrap);
  apply();
  return el("div", { class: "dag-panel" }, bar, wrap);
}

// bars rebuilds, from the event log, each step's attempts (STARTED to its
// outcome) and the time between them that holds no worker: a sleep
// (SLEEPING), a wait for an event, a signal, a child run or a map's items
// (WAITING), a retry's backoff (RETRYING), each until the step's next event.
// An attempt whose worker was lost (LOST) ends there; the step runs again
// under the same attempt number, in a bar of its own.
function bars(events) {
  const out = [];
  const open = {}; // attempts, by step and attempt
  const gap = {}; // the open sleep, wait or backoff, by step
  const ends = ["COMPLETED", "FAILED", "RETRYING", "LOST", "CANCELLED", "WAITING", "SLEEPING", "SKIPPED"];
  const gaps = { SLEEPING: "sleeping", WAITING: "waiting", RETRYING: "backoff" };
  for (const ev of events) {
    const at = new Date(ev.at);
    if (gap[ev.step]) {
      gap[ev.step].end = at;
      delete gap[ev.step];
    }
    const key = ev.step + "#" + ev.attempt;
    if (ev.type === "STARTED") {
      // An attempt still open has no outcome yet: it is drawn as running.
      open[key] = { step: ev.step, attempt: ev.attempt, start: at, end: null, outcome: null };
      out.push(open[key]);
    } else if (open[key] && ends.includes(ev.type)) {
      open[key].end = at;
      open[key].outcome = ev.type === "RETRYING" ? "FAILED" : ev.type;
      delete open[key];
    }
    if (gaps[ev.type]) {
      gap[ev.step] = { step: ev.step, attempt: ev.attempt, start: at, end: null, gap: gaps[ev.type] };
      out.push(gap[ev.step]);
    }
  }
  return out;
}

function timelineSVG(run, events) {
  const all = bars(events);
  const steps = [...new Set(all.map((b) => b.step))];
  const t0 = new Date(run.created_at).getTime();
  const now = Date.now();
  // An open bar ends when the run did, or now.
  const last = run.finished_at ? new Date(run.finished_at).getTime() : now;
  const endOf = (b) => (b.end ? b.end.getTime() : Math.max(last, b.start.getTime()));
  let t1 = last;
  for (const b of all) t1 = Math.max(t1, endOf(b));
  const span = Math.max(t1 - t0, 1);
  const LW = 170, W = 700, RH = 22;
  const height = 24 + steps.length * RH;
  const g = svg("svg", { id: "timeline", width: LW + W + 20, height, role: "img", "aria-label": "attempts, sleeps, waits and backoffs over time" });
  g.append(svg("line", { class: "axis", x1: LW, y1: 16, x2: LW + W, y2: 16 }));
  g.append(svg("text", { class: "label", x: LW, y: 12 }, "0"));
  g.append(svg("text", { class: "label", x: LW + W - 60, y: 12 }, `${((t1 - t0) / 1000).toFixed(2)} s`));
  steps.forEach((name, i) => {
    const y = 22 + i * RH;
    g.append(svg("text", { class: "label", x: 4, y: y + 13 }, name.length > 26 ? name.slice(0, 25) + "…" : name));
    for (const b of all.filter((b) => b.step === name)) {
      const x = LW + ((b.start.getTime() - t0) / span) * W;
      const w = Math.max(2, ((endOf(b) - b.start.getTime()) / span) * W);
      if (b.gap) {
        g.append(svg("rect", { class: "gap " + b.gap, x, y: y + 6, width: w, height: RH - 14, "data-step": name, "data-gap": b.gap },
          svg("title", {}, `${name}: ${b.gap}${b.end ? "" : " (still)"}`)));
        continue;
      }
      g.append(svg("rect", { class: b.outcome || "open", x, y: y + 2, width: w, height: RH - 6, "data-step": name, "data-attempt": b.attempt },
        svg("title", {}, `${name} attempt ${b.attempt}: ${b.outcome ? b.outcome.toLowerCase() : "running"}`)));
    }
  });
  return g;
}

// sendWaited asks, in the confirm dialog, to send the event or the signal
// that step w.step of run waits for, with an optional JSON payload checked
// before sending, and sends it through the API: an event for the run's
// tenant (POST events), a signal to the run (POST runs/{id}/signals). The
// API applies the tenant rules. It resolves to a notice ({ok, text}), or
// null when not confirmed.
async function sendWaited(run, w) {
  const signal = w.for === "signal";
  const payload = el("textarea", { id: "send-payload", rows: 4, cols: 48, spellcheck: "false", placeholder: "null" });
  const what = signal
    ? [el("dt", {}, "signal"), el("dd", {}, w.signal), el("dt", {}, "run"), el("dd", { class: "id" }, run.id)]
    : [el("dt", {}, "event key"), el("dd", {}, w.event_key), el("dt", {}, "tenant"), el("dd", {}, run.tenant)];
  const extra = el("div", { class: "send" },
    el("dl", { class: "meta" }, what),
    signal ? null : el("p", { class: "muted" }, `Every step of tenant ${run.tenant} that waits for this key receives it, in this run or another.`),
    el("label", { for: "send-payload" }, "payload (JSON, optional: empty sends null)"), payload);
  let value;
  const validate = () => {
    const text = payload.value.trim();
    value = undefined;
    if (!text) return null;
    try {
      value = JSON.parse(text);
    } catch (e) {
      return "The payload is not JSON: " + e.message;
    }
    return null;
  };
  const question = signal ? `Send signal "${w.signal}" to run ${run.id}?` : `Send event "${w.event_key}" to tenant ${run.tenant}?`;
  if (!await confirmAction(question, extra, validate)) return null;
  try {
    if (signal) {
      await api(`runs/${encodeURIComponent(run.id)}/signals`, { method: "POST", body: { name: w.signal, payload: value } });
      return { ok: true, text: `Signal "${w.signal}" sent to step ${w.step}.` };
    }
    const d = await api("events", { method: "POST", body: { tenant: run.tenant, key: w.event_key, payload: value } });
    const n = d.delivered;
    return { ok: true, text: `Event "${w.event_key}" sent to tenant ${run.tenant}: ${n === 0 ? "no step waited for it" : `delivered to ${n} waiting step${n === 1 ? "" : "s"}`}.` };
  } catch (e) {
    return { ok: false, text: (signal ? `Signal "${w.signal}" not sent: ` : `Event "${w.event_key}" not sent: `) + e.message };
  }
}

function json(v) {
  return el("pre", {}, v === undefined ? "—" : JSON.stringify(v, null, 2));
}

// value shows an input or an output (b64: one that is not JSON, in
// base64), or the size of one the API left out for its size.
function value(v, omitted, b64) {
  if (omitted) return el("pre", { class: "muted" }, `${omitted} bytes, left out for their size (GET the run with ?full=true)`);
  return b64 ? el("pre", {}, "(not JSON; base64) " + b64) : json(v);
}

// unservedBanner says that no live worker serves the version of run, and
// what to do: start a worker of that version, or move the run to another
// version (wf, the run's workflow as GET workflows/{name} has it, if known,
// names the one to suggest).
function unservedBanner(run, wf) {
  // The version this server starts, else the newest other one whose DAG
  // is known.
  const other = wf ? wf.versions.find((v) => v.newest && v.version !== run.version) ||
    wf.versions.find((v) => v.version !== run.version && v.steps) : null;
  const to = other ? other.version : "";
  const cmd = `durable runs upgrade --workflow ${run.workflow} --from ${run.version || "VERSION"} --to ${to || "VERSION"} --dry-run`;
  return el("div", { class: "warning", id: "unserved", role: "alert", "data-version": run.version },
    el("p", {}, "No live worker serves version ", el("code", {}, run.version || "(none)"), " of workflow ", el("strong", {}, run.workflow),
      ": this run's queued steps wait until a worker of that version starts, or until the run moves to another version",
      other && other.newest ? [" (this server starts version ", el("code", {}, to), ")"] : null, ". See ", el("a", { href: "#/workflows" }, "Workflows"), " and ",
      el("a", { href: "#/workers" }, "Workers"), "."),
    el("p", {}, "To move it, try: ", el("code", { class: "cmd", id: "upgrade-cmd" }, cmd), " (then without --dry-run)."));
}

async function runView(id) {
  let selected = null;
  let wf = null; // the run's workflow, read once when the run is unserved
  let notice = null; // what the last action did, or why it was refused
  const act = async (fn) => {
    notice = await fn();
    render().catch(showError);
  };
  const render = async () => {
    const [run, ev] = await Promise.all([api("runs/" + encodeURIComponent(id)), api("runs/" + encodeURIComponent(id) + "/events")]);
    if (run.unserved && !wf) wf = await api("workflows/" + encodeURIComponent(run.workflow)).catch(() => null);
    const actions = el("div", { class: "actions" });
    const meaning = meaningOf(run.status);
    const fn = run.kind === "function"; // its calls are drawn instead of its DAG (calls.js)
    if (meaning.actions.includes("cancel")) {
      actions.append(el("button", { class: "danger", id: "cancel", onclick: async () => {
        const reason = el("input", { id: "cancel-reason", placeholder: "reason (optional)", size: 30 });
        if (!await confirmAction("Cancel this run? Its waiting steps never run.", reason)) return;
        act(async () => {
          try { await api(`runs/${id}/cancel`, { method: "POST", body: { reason: reason.value } }); } catch (e) { return { ok: false, text: "Not cancelled: " + e.message }; }
          return null;
        });
      } }, "Cancel…"));
    }
    if (meaning.actions.includes("replay")) {
      actions.append(el("button", { class: "primary", id: "replay", onclick: async () => {
        const from = el("select", { id: "replay-from" }, el("option", { value: "" }, meaning.unsuccessful ? "the failed and cancelled steps" : "choose a step"),
          fn ? [...new Set(run.calls.map((c) => c.name))].map((n) => el("option", { value: n }, "from call " + n))
            : run.steps.filter((s) => s.kind !== "on_failure").map((s) => el("option", { value: s.name }, "from " + s.name)));
        if (!await confirmAction("Replay this run?", from)) return;
        act(async () => {
          try { await api(`runs/${id}/replay`, { method: "POST", body: { from_step: from.value } }); } catch (e) { return { ok: false, text: "Not replayed: " + e.message }; }
          return null;
        });
      } }, "Replay…"));
    }
    // What the run in flight waits for; an event or a signal can be sent
    // from here.
    const waits = !meaning.in_flight ? [] : fn ? waitsOfCalls(run.calls) : waitsOfSteps(run.steps);
    const waitList = waits.length ? el("ul", { id: "waits" }, waits.map((w) => el("li", { "data-step": w.step, "data-for": w.for },
      el("strong", {}, w.step), ": ", waitText(w),
      w.for === "event" || w.for === "signal" ? [" ", el("button", { type: "button", class: "send primary", "data-step": w.step,
        "aria-label": w.for === "event" ? `Send the event "${w.event_key}" that step ${w.step} waits for` : `Send the signal "${w.signal}" that step ${w.step} waits for`,
        onclick: () => act(() => sendWaited(run, w)) }, w.for === "event" ? "Send event…" : "Send signal…")] : null))) : null;
    const hasChildren = run.steps.some((s) => s.child_run_id);
    const detail = el("div", { id: "step-detail" });
    const showStep = (name) => {
      selected = name;
      for (const n of document.querySelectorAll("#dag .node")) n.classList.toggle("selected", n.dataset.step === name);
      const s = run.steps.find((x) => x.name === name);
      if (!s) { detail.replaceChildren(); return; }
      detail.replaceChildren(el("div", {}, el("h2", {}, "Step " + s.name),
        el("dl", { class: "meta" },
          el("dt", {}, "state"), el("dd", {}, s.state), el("dt", {}, "kind"), el("dd", {}, s.kind),
          el("dt", {}, "parents"), el("dd", {}, s.parents.join(", ") || "—"), el("dt", {}, "attempts"), el("dd", {}, s.attempts),
          el("dt", {}, "started"), el("dd", {}, fmtTime(s.started_at)), el("dt", {}, "finished"), el("dd", {}, fmtTime(s.finished_at)),
          s.retired ? [el("dt", {}, "retired"), el("dd", {}, "kept for its record: the run moved to a version that does not run this step")] : null,
          s.event_key ? [el("dt", {}, "waits for event"), el("dd", {}, s.event_key)] : null,
          s.signal ? [el("dt", {}, "waits for signal"), el("dd", {}, s.signal)] : null,
          s.child_run_id ? [el("dt", {}, "child run"), el("dd", {}, el("a", { href: "#/runs/" + s.child_run_id }, s.child_run_id))] : null),
        s.error ? el("pre", { class: "error" }, s.error) : null,
        el("div", {}, "output"), value(s.output, s.output_omitted, s.output_base64),
        s.items ? el("div", { class: "muted" }, `${s.items.length} items: ` + s.items.map((i) => i.state).join(", ")) : null));
    };
    const calls = fn ? callsSection(run, ev.events, selected, (key) => { selected = key; }) : null;
    // replaceChildren would show a null (the banner's absence) as text.
    main.replaceChildren(...[
      el("h1", {}, "Run ", el("span", { class: "id" }, run.id), " ", badge(run.status)),
      run.unserved ? unservedBanner(run, wf) : null,
      el("dl", { class: "meta" },
        el("dt", {}, "workflow"), el("dd", {}, run.workflow),
        el("dt", {}, "version"), el("dd", { id: "run-version" }, run.version
          ? el("a", { href: "#/?" + new URLSearchParams({ workflow: run.workflow, version: run.version }).toString(), title: "the runs of this version" }, el("code", {}, run.version))
          : "— (started before versions)"),
        el("dt", {}, "tenant"), el("dd", {}, run.tenant),
        el("dt", {}, "created"), el("dd", {}, fmtTime(run.created_at)), el("dt", {}, "finished"), el("dd", {}, fmtTime(run.finished_at) || "—"),
        run.idempotency_key ? [el("dt", {}, "idempotency key"), el("dd", {}, run.idempotency_key)] : null,
        run.parent ? [el("dt", {}, "parent run"), el("dd", {}, el("a", { href: "#/runs/" + run.parent.run_id }, run.parent.run_id))] : null,
        hasChildren ? [el("dt", {}, "child runs"), el("dd", {}, el("a", { id: "child-runs", href: "#/?parent=" + run.id }, "list them"))] : null,
        run.error ? [el("dt", {}, "error"), el("dd", { class: "error", id: "run-error" }, (run.error.step ? run.error.step + ": " : "") + run.error.message)] : null),
      actions,
      notice ? el("p", { id: "action-notice", class: notice.ok ? "notice" : "notice error", role: notice.ok ? "status" : "alert" }, notice.text) : null,
      waitList ? el("h2", {}, "Waiting") : null, waitList,
      fn ? calls : [el("h2", {}, "Steps"), dagSVG(run.steps, showStep), detail],
      el("h2", {}, "Attempts"), timelineSVG(run, ev.events),
      el("h2", {}, "Input"), value(run.input, run.input_omitted, run.input_base64),
      el("h2", {}, "Events"),
      el("table", { id: "events" }, el("thead", {}, el("tr", {}, ["At", "Step", "Event", "Attempt", "Detail"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ev.events.map((e) => el("tr", {}, el("td", {}, fmtTime(e.at)), el("td", {}, e.step), el("td", {}, e.type),
          el("td", {}, e.attempt), el("td", {}, e.detail || (e.due_at ? "until " + fmtTime(e.due_at) : "")))))),
    ].flat().filter((k) => k !== null));
    if (fn) calls.select();
    else showStep(selected || (run.steps.find((s) => s.state === "FAILED") || {}).name);
    setLive(run.finished_at ? null : () => render().catch(() => {}), 1500);
  };
  await render();
}

// ---- workflows --------------------------------------------------------------

// workflowsView lists every workflow the store and the workers know, each
// with its versions (runs in flight, ready steps, workers, UNSERVED), and
// draws the DAG of the version picked (the one this server starts, or the
// newest known, at first).
async function workflowsView() {
  const d = await api("workflows");
  const sections = d.workflows.map((w, i) => {
    const dagId = "dag-" + i;
    const holder = el("div", { class: "dag-holder" });
    const caption = el("p", { class: "muted dag-caption" });
    const buttons = [];
    const draw = (v) => {
      for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.version === v.version));
      caption.replaceChildren("The DAG of version ", el("code", {}, v.version), v.newest ? " (the one this server starts)" : "", ":");
      holder.replaceChildren(dagSVG((v.steps || []).map((s) => ({ ...s, state: "PENDING", attempts: 0 })), () => {}, dagId,
        `the steps of version ${v.version} of workflow ${w.name}`));
      holder.querySelector("svg").dataset.version = v.version;
    };
    const rows = w.versions.map((v) => {
      const b = el("button", { type: "button", class: "draw", "data-version": v.version, "aria-pressed": "false", disabled: !v.steps,
        title: v.steps ? null : "its DAG is not known here: only a live worker lists it",
        "aria-label": `draw the DAG of version ${v.version} of workflow ${w.name}`, onclick: () => draw(v) }, "Draw");
      buttons.push(b);
      const runs = "#/?" + new URLSearchParams({ workflow: w.name, version: v.version, status: "in_flight" }).toString();
      return el("tr", { "data-version": v.version, "data-unserved": String(v.unserved), class: v.unserved ? "unserved" : "" },
        el("td", {}, versionTag(v.version), v.newest ? [" ", el("span", { class: "badge newest", title: "the version this server starts" }, "newest")] : null,
          v.unserved ? [" ", el("span", { class: "badge unserved", title: "runs in flight that no live worker serves or accepts: they wait" }, "UNSERVED")] : null),
        el("td", {}, v.registered ? "yes" : "no"),
        el("td", { class: "num", "data-col": "in_flight" }, v.in_flight ? el("a", { href: runs, title: "its runs in flight" }, String(v.in_flight)) : "0"),
        el("td", { class: "num", "data-col": "ready" }, String(v.ready)),
        el("td", { class: "workers" }, v.workers.length ? v.workers.join(", ") : "—",
          v.accepted_by.length ? el("div", { class: "muted" }, "accepted by " + v.accepted_by.join(", ")) : null),
        el("td", {}, v.recorded_at ? fmtTime(v.recorded_at) : "—"),
        el("td", {}, b));
    });
    const section = el("section", { "data-workflow": w.name, "data-registered": String(w.registered), "data-kind": w.kind },
      el("h2", {}, w.name, w.child_only ? " (child workflow)" : "",
        w.kind === "function" ? [" ", el("span", { class: "badge function", title: "a durable function: its one step is its body; its runs' pages draw their calls" }, "function")] : null,
        w.registered ? null : [" ", el("span", { class: "badge", title: "this server knows it only from its runs and workers: it cannot start it" }, "not registered here")],
        w.unserved ? [" ", el("span", { class: "badge unserved" }, "UNSERVED")] : null),
      el("table", { class: "versions" },
        el("caption", { class: "muted" }, `Versions of ${w.name}, newest first`),
        el("thead", {}, el("tr", {}, ["Version", "Registered here", "In flight", "Ready", "Workers", "First run", "DAG"]
          .map((h) => el("th", { class: ["In flight", "Ready"].includes(h) ? "num" : null, scope: "col" }, h)))),
        el("tbody", {}, rows)),
      caption, holder);
    const first = w.versions.find((v) => v.version === w.version && v.steps) || w.versions.find((v) => v.steps);
    if (first) draw(first);
    else draw({ version: w.version || "", steps: w.steps, newest: false });
    return section;
  });
  main.replaceChildren(el("h1", {}, "Workflows"),
    el("p", { class: "muted" }, "Every workflow this server registers, the store has runs of, or a live worker serves."),
    ...(sections.length ? sections : [el("p", { class: "muted" }, "No workflows.")]));
  setLive(null);
}

// ---- workers ----------------------------------------------------------------

function yes(b) { return b ? "yes" : "no"; }

// ago says how long ago an RFC 3339 time was.
function ago(s) {
  const d = Math.max(0, (Date.now() - new Date(s).getTime()) / 1000);
  if (d < 60) return d.toFixed(0) + "s ago";
  if (d < 3600) return (d / 60).toFixed(0) + "m ago";
  return (d / 3600).toFixed(1) + "h ago";
}

async function workersView(params) {
  const all = el("input", { type: "checkbox", id: "f-all", checked: params.get("all") === "true" });
  all.addEventListener("change", () => { location.hash = all.checked ? "#/workers?all=true" : "#/workers"; });
  const tbody = el("tbody", { id: "workers" });
  const warnings = el("div", { id: "unserved-flows" });
  main.replaceChildren(
    el("h1", {}, "Workers"),
    el("div", { class: "filters" }, el("label", { class: "inline" }, all, " also the workers that are not live")),
    warnings,
    el("table", {}, el("thead", {}, el("tr", {}, ["ID", "Host", "Build", "Started", "Last seen", "Serves", "Concurrency", "In flight", "Leader", "Live"]
      .map((h) => el("th", { class: ["Concurrency", "In flight"].includes(h) ? "num" : null }, h)))), tbody));
  const load = async () => {
    const d = await api("workers" + (all.checked ? "?all=true" : ""));
    warnings.replaceChildren(...d.unserved.map((u) => el("p", { class: "warning", role: "alert", "data-workflow": u.workflow, "data-version": u.version },
      u.version ? ["Version ", el("code", {}, u.version), " of workflow "] : "Workflow ", el("strong", {}, u.workflow),
      ` has ${u.ready} queued step${u.ready === 1 ? "" : "s"}, but no live worker serves it: start a worker of that version, or move its runs to another one (see `,
      el("a", { href: "#/workflows" }, "Workflows"), ").")));
    const rows = d.workers.map((w) => el("tr", { "data-worker": w.id, "data-live": String(w.live), "data-leader": String(w.leader), class: w.live ? "" : "dead" },
      el("td", { class: "id" }, w.id), el("td", {}, w.host || "—"), el("td", {}, w.version || "—"),
      el("td", {}, fmtTime(w.started_at)), el("td", { title: fmtTime(w.last_seen) }, ago(w.last_seen)),
      el("td", { class: "served" }, (w.versions.length ? w.versions : w.workflows).join(", ") || "—",
        w.accepts.length ? el("div", { class: "muted" }, "accepts " + w.accepts.join(", ")) : null),
      el("td", { class: "num" }, w.concurrency), el("td", { class: "num" }, w.in_flight),
      el("td", { class: "leader" }, yes(w.leader)), el("td", { class: "live" }, yes(w.live))));
    tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 10, class: "muted" }, all.checked ? "No workers." : "No live workers."))]));
  };
  await load();
  setLive(() => load().catch(() => {}), 3000);
}

// ---- queues -----------------------------------------------------------------

async function queuesView() {
  const queues = el("tbody", { id: "queues" });
  const qfoot = el("tfoot", {});
  const runs = el("tbody", { id: "run-counts" });
  const rfoot = el("tfoot", {});
  const windowNote = el("span", {});
  main.replaceChildren(
    el("h1", {}, "Queues"),
    el("p", { class: "muted" }, "Steps by workflow, version and tenant: ready (queued, due), waiting (for a timer, an event, a signal or a child run), running."),
    el("table", {}, el("thead", {}, el("tr", {}, ["Workflow", "Version", "Tenant", "Ready", "Waiting", "Running", "Oldest ready"].map((h) => el("th", { class: ["Ready", "Waiting", "Running"].includes(h) ? "num" : null }, h)))), queues, qfoot),
    el("h2", {}, "Runs ", windowNote),
    el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Workflow"), el("th", {}, "Tenant"), runStatuses.statuses.map((m) => el("th", { class: "num", "data-status": m.status }, m.status.toLowerCase())))), runs, rfoot));
  const cell = (name, n) => el("td", { class: "num", "data-col": name, "data-count": String(n) }, String(n));
  const load = async () => {
    const d = await api("stats");
    windowNote.textContent = `(not settled, or settled in the last ${d.window})`;
    const tot = { ready: 0, waiting: 0, running: 0 };
    queues.replaceChildren(...d.queues.map((q) => {
      tot.ready += q.ready; tot.waiting += q.waiting; tot.running += q.running;
      return el("tr", { "data-workflow": q.workflow, "data-version": q.version, "data-tenant": q.tenant }, el("td", {}, q.workflow),
        el("td", {}, versionTag(q.version)), el("td", {}, q.tenant),
        cell("ready", q.ready), cell("waiting", q.waiting), cell("running", q.running), el("td", {}, q.oldest_ready ? ago(q.oldest_ready) : "—"));
    }));
    if (!d.queues.length) queues.replaceChildren(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No queued, waiting or running steps.")));
    qfoot.replaceChildren(el("tr", { id: "queue-totals" }, el("th", {}, "Total"), el("th", {}), el("th", {}), cell("ready", tot.ready), cell("waiting", tot.waiting), cell("running", tot.running), el("th", {})));
    const byKey = new Map();
    for (const c of d.runs) {
      const k = JSON.stringify([c.workflow, c.tenant]);
      if (!byKey.has(k)) byKey.set(k, { workflow: c.workflow, tenant: c.tenant });
      byKey.get(k)[c.status] = (byKey.get(k)[c.status] || 0) + c.count;
    }
    const rtot = {};
    runs.replaceChildren(...[...byKey.values()].map((r) => el("tr", { "data-workflow": r.workflow, "data-tenant": r.tenant },
      el("td", {}, r.workflow), el("td", {}, r.tenant), runStatuses.statuses.map(({ status: s }) => { rtot[s] = (rtot[s] || 0) + (r[s] || 0); return cell(s, r[s] || 0); }))));
    if (!byKey.size) runs.replaceChildren(el("tr", {}, el("td", { colspan: 2 + runStatuses.statuses.length, class: "muted" }, "No runs.")));
    rfoot.replaceChildren(el("tr", {}, el("th", {}, "Total"), el("th", {}), runStatuses.statuses.map(({ status: s }) => cell(s, rtot[s] || 0))));
  };
  await load();
  setLive(() => load().catch(() => {}), 3000);
}

// ---- storage ----------------------------------------------------------------

// bytes writes a size in units of 1024, as "durable stats --storage" does.
function bytes(n) {
  let v = n, u = "B";
  for (const next of ["kB", "MB", "GB", "TB"]) {
    if (v < 1024) break;
    v /= 1024; u = next;
  }
  return (u === "B" || v >= 10 ? v.toFixed(0) : v.toFixed(1)) + " " + u;
}

// storageView shows the storage of the store's tables (GET
// /api/v1/storage): one catalog query, refreshed every 30s while live.
async function storageView() {
  const tbody = el("tbody", { id: "storage" });
  const verdicts = el("div", { id: "storage-verdicts" });
  const note = el("p", { class: "muted" });
  const heads = ["Table", "Live rows", "Dead rows", "Dead", "Total", "Data", "Indexes", "Vacuumed", "Autovacuum"];
  main.replaceChildren(
    el("h1", {}, "Storage"),
    el("p", { class: "muted" }, "durable's tables: rows, dead rows (row versions vacuum has not reclaimed yet) and size on disk. " +
      "A table needs attention at 10,000 dead rows or more, when they are over 20% of its rows or autovacuum is off."),
    verdicts,
    el("table", {}, el("thead", {}, el("tr", {}, heads.map((h) => el("th", { class: ["Table", "Vacuumed", "Autovacuum"].includes(h) ? null : "num" }, h)))), tbody),
    note);
  const num = (name, n, text) => el("td", { class: "num", "data-col": name, "data-count": String(n) }, text);
  const load = async () => {
    const d = await api("storage");
    verdicts.replaceChildren(
      ...d.warnings.map((w) => el("div", { class: "warning server" }, w)),
      ...d.tables.filter((t) => t.attention).map((t) => el("div", { class: "warning", "data-table": t.name }, el("strong", {}, t.name), ": " + t.attention)));
    tbody.replaceChildren(...d.tables.map((t) => {
      const last = [t.last_vacuum, t.last_autovacuum].filter(Boolean).reduce((a, b) => (a && Date.parse(a) > Date.parse(b) ? a : b), null);
      return el("tr", { "data-table": t.name, "data-attention": String(!!t.attention) },
        el("td", {}, t.partition_of ? `${t.name} (of ${t.partition_of})` : t.name),
        num("live", t.live_rows, t.live_rows.toLocaleString("en")), num("dead", t.dead_rows, t.dead_rows.toLocaleString("en")),
        num("dead-fraction", t.dead_fraction, (100 * t.dead_fraction).toFixed(0) + "%"),
        num("total", t.total_bytes, bytes(t.total_bytes)), num("data", t.table_bytes, bytes(t.table_bytes)), num("indexes", t.index_bytes, bytes(t.index_bytes)),
        el("td", {}, last ? ago(last) : "never"), el("td", {}, t.autovacuum ? "on" : "off"));
    }));
    note.textContent = `Server: autovacuum ${d.autovacuum ? "on" : "off"}, track_counts ${d.track_counts ? "on" : "off"}. Read ${fmtTime(d.at)}.`;
  };
  await load();
  setLive(() => load().catch(() => {}), 30000);
}

// ---- routing ----------------------------------------------------------------

async function route() {
  setLive(null);
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  try {
    await loadStatuses();
    const m = path.match(/^\/runs\/([0-9a-fA-F-]{36})$/);
    if (m) await runView(m[1]);
    else if (path === "/workflows") await workflowsView();
    else if (path === "/workers") await workersView(new URLSearchParams(query || ""));
    else if (path === "/queues") await queuesView();
    else if (path === "/storage") await storageView();
    else await runsView(new URLSearchParams(query || ""));
  } catch (err) {
    showError(err);
  }
}

window.addEventListener("hashchange", route);
route();
