// The run page of a durable function: its calls (GET runs/{id}, "calls"),
// drawn as they happened. A function's run has one step, its body; each
// call the body made (a step, a sleep, a wait for an event or a signal, a
// child run, a patch marker) is a row of a timeline, in the order it was
// made: calls that ran at the same time (steps started with Go) have bars
// that overlap in time, a sleep or a wait is a dashed span, and a step's
// retries show as their backoffs. It uses the helpers of app.js (el, svg,
// when, fmtTime, fmtDuration, bars, value, badge, shortID) when it draws.
"use strict";

// callKey is a call's name in the event log and in failures: "name#n".
function callKey(c) {
  return `${c.name}#${c.number}`;
}

// callOver reports whether a call is over.
function callOver(c) {
  return ["COMPLETED", "FAILED", "CANCELLED", "SKIPPED"].includes(c.state);
}

// waitsOfCalls returns what a function's run in flight waits for, as
// waitsOfSteps does for a DAG's steps: its calls that sleep, wait for an
// event, a signal or a child run, or wait for a step's retry.
function waitsOfCalls(calls) {
  const out = [];
  for (const c of calls || []) {
    const w = { step: callKey(c), due_at: c.due_at };
    if (c.state === "WAITING" && c.kind === "event" && c.signal) Object.assign(w, { for: "signal", signal: c.signal });
    else if (c.state === "WAITING" && c.kind === "event") Object.assign(w, { for: "event", event_key: c.event_key });
    else if (c.state === "WAITING" && c.kind === "child") Object.assign(w, { for: "child", child_run_id: c.child_run_id });
    else if (c.state === "SLEEPING") w.for = "sleep";
    else if (c.state === "PENDING" && c.due_at) Object.assign(w, { for: "retry", attempts: c.attempts });
    else continue;
    out.push(w);
  }
  return out;
}

// callWaitText says what a call waits (or waited) for, as text.
function callWaitText(c) {
  const until = c.due_at ? (c.kind === "sleep" ? " until " : c.kind === "step" ? " at " : ", times out ") + fmtTime(c.due_at) : "";
  switch (c.kind) {
    case "sleep": return until ? "sleep" + until : "";
    case "event": return (c.signal ? `signal "${c.signal}"` : `event "${c.event_key}"`) + until;
    case "child": return c.child_run_id ? "child run " + c.child_run_id : "child run";
    case "step": return c.state === "PENDING" ? "retry" + until : "";
  }
  return "";
}

// micros reads an RFC 3339 time of the API to the microsecond (a Date
// keeps milliseconds only: two steps a few microseconds apart would seem
// to overlap).
function micros(s) {
  const m = /\.(\d+)/.exec(s);
  const frac = m ? (m[1] + "000000").slice(3, 6) : "000";
  return Date.parse(s) * 1000 + Number(frac);
}

// parallelCalls returns the keys of the step calls whose run overlaps in
// time with another step call's (steps started with Go).
function parallelCalls(calls) {
  const span = (c) => [micros(c.started_at), c.finished_at ? micros(c.finished_at) : Infinity];
  const steps = calls.filter((c) => c.kind === "step" && c.started_at);
  const out = new Set();
  for (let i = 0; i < steps.length; i++) {
    for (let j = i + 1; j < steps.length; j++) {
      const [a0, a1] = span(steps[i]), [b0, b1] = span(steps[j]);
      if (a0 < b1 && b0 < a1) {
        out.add(callKey(steps[i]));
        out.add(callKey(steps[j]));
      }
    }
  }
  return out;
}

// callsSVG draws the calls of run as a timeline, one row per call in
// order; events are the run's event log (a step's backoffs).
function callsSVG(run, events, onSelect) {
  const calls = run.calls || [];
  // The axis spans the run's creation to its last call's start or end (or
  // its end): a call still open (a sleep, a wait) runs on to the right
  // edge, so that a long wait does not crush the calls before it.
  const t0 = new Date(run.created_at).getTime();
  let t1 = run.finished_at ? new Date(run.finished_at).getTime() : t0;
  for (const c of calls) {
    for (const t of [c.started_at, c.finished_at]) if (t) t1 = Math.max(t1, new Date(t).getTime());
  }
  const span = Math.max(t1 - t0, 1);
  const LW = 190, W = 620, RW = 200, RH = 22;
  const x = (t) => LW + ((t - t0) / span) * W;
  const gaps = bars(events || []).filter((b) => b.gap === "backoff"); // a sleep or a wait is the call's own bar
  const parallel = parallelCalls(calls);
  const g = svg("svg", { id: "calls", class: "calls", width: LW + W + RW, height: 24 + calls.length * RH, role: "img",
    "aria-label": "the function's calls over time, in the order made" });
  g.append(svg("line", { class: "axis", x1: LW, y1: 16, x2: LW + W, y2: 16 }));
  g.append(svg("text", { class: "label", x: LW, y: 12 }, "0"));
  g.append(svg("text", { class: "label", x: LW + W - 60, y: 12 }, `${((t1 - t0) / 1000).toFixed(2)} s`));
  calls.forEach((c, i) => {
    const key = callKey(c);
    const y = 22 + i * RH;
    const row = svg("g", { class: "call", "data-call": key, "data-number": String(c.number), "data-kind": c.kind,
      "data-state": c.state, "data-parallel": parallel.has(key) ? "true" : "false", tabindex: "0", role: "button",
      "aria-label": `call ${key}: ${c.kind}, ${c.state.toLowerCase()}` });
    row.addEventListener("click", () => onSelect(key));
    row.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") onSelect(key); });
    // The whole row takes clicks, not only its text and bars.
    row.append(svg("rect", { class: "hit", x: 0, y, width: LW + W + RW, height: RH, fill: "transparent" }));
    const label = `${c.number} ${c.name}`;
    row.append(svg("text", { class: "label", x: 4, y: y + 13 }, (parallel.has(key) ? "∥ " : "") + (label.length > 26 ? label.slice(0, 25) + "…" : label)));
    for (const b of gaps.filter((b) => b.step === key)) {
      const x0 = x(b.start.getTime());
      const x1 = x(b.end ? b.end.getTime() : t0 + span);
      row.append(svg("rect", { class: "gap " + b.gap, x: x0, y: y + 6, width: Math.max(2, x1 - x0), height: RH - 14, "data-gap": b.gap },
        svg("title", {}, `${key}: ${b.gap} after attempt ${b.attempt}`)));
    }
    if (c.started_at) {
      const s = new Date(c.started_at).getTime();
      const e = c.finished_at ? new Date(c.finished_at).getTime() : t0 + span;
      const xe = c.finished_at ? x(e) : Math.max(x(s) + 40, LW + W); // open: on past the axis's end
      const waits = c.kind === "sleep" ? "sleeping" : c.kind === "event" || c.kind === "child" ? "waiting" : "";
      const cls = waits ? "gap " + waits : c.state === "PENDING" ? "gap backoff" : callOver(c) ? c.state : "open";
      const what = callWaitText(c);
      row.append(svg("rect", { class: "bar " + cls, x: x(s), y: waits ? y + 6 : y + 2, width: Math.max(2, xe - x(s)), height: waits ? RH - 14 : RH - 6,
        "data-call": key, "data-attempt": String(c.attempts) },
      svg("title", {}, `${key} (${c.kind}): ${c.state.toLowerCase()}` + (c.attempts > 1 ? `, attempt ${c.attempts}` : "") +
        (what ? "; " + what : "") + (c.finished_at ? `, took ${fmtDuration(e - s)}` : ", still open"))));
      let note = c.attempts > 1 ? `×${c.attempts}` : "";
      if (!callOver(c) && what) note = (note ? note + " " : "") + what;
      if (note) row.append(svg("text", { class: "label note", x: xe + 4, y: y + 13 }, note.length > 34 ? note.slice(0, 33) + "…" : note));
    }
    g.append(row);
  });
  return g;
}

// callsTable lists the calls of run, each row selecting its call.
function callsTable(run, onSelect) {
  const head = ["#", "Call", "Kind", "State", "Attempts", "Started", "Took", "Waits for"];
  return el("table", { id: "call-table" },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, (run.calls || []).map((c) => {
      const took = c.started_at && c.finished_at ? fmtDuration(new Date(c.finished_at) - new Date(c.started_at)) : "";
      return el("tr", { "data-call": callKey(c), class: "selectable", onclick: () => onSelect(callKey(c)) },
        el("td", {}, c.number), el("td", {}, el("strong", {}, c.name)), el("td", {}, c.kind), el("td", {}, badge(c.state)),
        el("td", {}, c.attempts), el("td", {}, fmtTime(c.started_at)), el("td", {}, took),
        el("td", {}, c.kind === "child" && c.child_run_id
          ? el("a", { href: "#/runs/" + c.child_run_id, title: c.child_run_id }, "child run " + shortID(c.child_run_id))
          : callWaitText(c)));
    })));
}

// callDetail shows one call.
function callDetail(c) {
  return el("div", {}, el("h2", {}, "Call " + callKey(c)),
    el("dl", { class: "meta" },
      el("dt", {}, "state"), el("dd", {}, c.state), el("dt", {}, "kind"), el("dd", {}, c.kind),
      el("dt", {}, "attempts"), el("dd", {}, c.attempts),
      el("dt", {}, "started"), el("dd", {}, fmtTime(c.started_at)), el("dt", {}, "finished"), el("dd", {}, fmtTime(c.finished_at) || "—"),
      c.due_at ? [el("dt", {}, "due"), el("dd", {}, fmtTime(c.due_at), " (", when(c.due_at), ")")] : null,
      c.event_key ? [el("dt", {}, "waits for event"), el("dd", {}, c.event_key)] : null,
      c.signal ? [el("dt", {}, "waits for signal"), el("dd", {}, c.signal)] : null,
      c.child_run_id ? [el("dt", {}, "child run"), el("dd", {}, el("a", { href: "#/runs/" + c.child_run_id }, c.child_run_id))] : null),
    c.error ? el("pre", { class: "error" }, c.error) : null,
    el("div", {}, "result"), value(c.output, c.output_omitted, c.output_base64));
}

// callsSection is the Calls section of a function's run page: the body's
// state, the timeline, the table and the selected call's detail.
function callsSection(run, events, selected, onSelect) {
  const detail = el("div", { id: "call-detail" });
  const select = (key) => {
    onSelect(key);
    for (const n of document.querySelectorAll("#calls .call, #call-table tr[data-call]")) n.classList.toggle("selected", n.dataset.call === key);
    const c = (run.calls || []).find((x) => callKey(x) === key);
    detail.replaceChildren(...(c ? [callDetail(c)] : []));
  };
  const body = run.steps.find((s) => s.kind === "func") || {};
  const section = el("section", { id: "function-calls" },
    el("h2", {}, "Calls"),
    el("p", { class: "muted", id: "body-state" }, `Body ${body.name || "main"}: ${(body.state || "").toLowerCase()}, ` +
      `${body.attempts || 0} execution${body.attempts === 1 ? "" : "s"}; ${(run.calls || []).length} call${(run.calls || []).length === 1 ? "" : "s"}, ` +
      "in the order made (∥: ran at the same time as another)."),
    (run.calls || []).length ? el("div", { class: "dag-wrap" }, callsSVG(run, events, select)) : el("p", { class: "muted" }, "No calls yet."),
    (run.calls || []).length ? callsTable(run, select) : null,
    detail);
  // app.js selects a call once the section is in the page: the one
  // selected before, else the first that failed.
  const failed = (run.calls || []).find((c) => c.state === "FAILED");
  section.select = () => select(selected || (failed ? callKey(failed) : null));
  return section;
}
