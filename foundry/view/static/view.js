// KernelFoundry run page. Every text that comes from the run (a candidate's source, an
// error, a task id) goes into the document as a text node (`el` below); nothing here
// parses run data as markup.
"use strict";

const config = JSON.parse(document.getElementById("kf-config").textContent);
const state = {
  name: "", total: 0, columns: [], col: {}, rows: [], tasks: {}, order: [], means: {}, run: null,
  points: {}, details: null, sources: null, current: null, tab: "source", polls: 0, lastPoll: null,
};

function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined) continue;
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return node;
}

const num = (v) => typeof v === "number" && isFinite(v);
const fx = (v) => (num(v) ? `${v.toFixed(2)}x` : "—");
const fms = (v) => (num(v) ? `${+v.toPrecision(4)} ms` : "—");
const fs = (v) => (num(v) ? (v >= 10 ? `${v.toFixed(1)} s` : `${+v.toPrecision(3)} s`) : "—");
const fpct = (v) => (num(v) ? `${Math.round(100 * v)}%` : "—");
const when = (t) => (num(t) ? new Date(t * 1000).toLocaleString() : "—");

function table(head, rows, cls) {
  return el("table", { class: cls || "" }, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c))))));
}

function kv(pairs) {
  return el("table", { class: "kv" }, el("tbody", {},
    pairs.filter((p) => p).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))));
}

function openButton(evalId, label, cls) {
  return el("button", { type: "button", class: cls || "link", "data-eval-id": evalId,
    onclick: () => openKernel(evalId) }, label);
}

// -- updates -------------------------------------------------------------------------

function apply(update) {
  if (update.reset) { state.rows = []; state.points = {}; state.tasks = {}; }
  state.columns = update.columns;
  state.col = Object.fromEntries(update.columns.map((c, i) => [c, i]));
  const c = state.col;
  for (const row of update.rows) {
    state.rows.push(row);
    (state.points[row[c.task_id]] = state.points[row[c.task_id]] || []).push(
      [row[c.n], row[c.t], row[c.best_eager], row[c.best_compile]]);
  }
  for (const t of update.tasks) state.tasks[t.task_id] = t;
  Object.assign(state, { name: update.name, recent: update.recent, total: update.total, order: update.task_order,
    means: update.means, run: update.run });
  render(update.reset ? null : new Set(update.tasks.map((t) => t.task_id)));
}

async function poll() {
  const response = await fetch(`api/update?since=${state.rows.length}`, { cache: "no-store" });
  if (!response.ok) throw new Error(`update: HTTP ${response.status}`);
  apply(await response.json());
  state.polls += 1;
  state.lastPoll = new Date();
  renderStatus();
}

function schedule() {
  setTimeout(() => poll().catch((e) => { state.error = String(e); renderStatus(); }).finally(schedule),
    1000 * config.poll_s);
}

// -- rendering -----------------------------------------------------------------------

function render(touched) {
  document.getElementById("run-name").textContent = state.name;
  renderStatus();
  renderSummary();
  const box = document.getElementById("tasks");
  if (touched === null) box.replaceChildren(el("h2", {}, "Tasks"), ...state.order.map(taskSection));
  else for (const id of touched) {
    const old = box.querySelector(`section[data-task-index="${state.order.indexOf(id)}"]`);
    if (old) old.replaceWith(taskSection(id)); else box.append(taskSection(id));
  }
  renderRecent();
  renderRun();
  document.body.dataset.total = String(state.total);
}

function renderStatus() {
  const s = state.run ? state.run.status : {};
  const parts = [`${state.total} evaluations, ${state.order.length} tasks`,
    s.backend ? `backend ${s.backend}${s.profile ? `, ${s.profile} sizes` : ""}` : null,
    s.hardware && s.hardware.length ? s.hardware.join(", ") : null,
    s.running ? "run in progress" : s.stop_reason ? `stopped: ${s.stop_reason}` : null];
  if (config.mode === "live") {
    parts.push(state.lastPoll ? `page updated ${state.lastPoll.toLocaleTimeString()}, every ${config.poll_s} s`
      : `updates every ${config.poll_s} s`);
    if (state.error) parts.push(`last update failed: ${state.error}`);
  } else parts.push(`written ${config.written}`);
  document.getElementById("status").textContent = parts.filter((p) => p).join(" · ");
}

function renderSummary() {
  const rows = state.order.map((id, i) => {
    const t = state.tasks[id], s = t ? t.summary : {};
    return [el("a", { href: `#task-${i}` }, id), fx(s.best_speedup_eager), fx(s.best_speedup_compile),
      s.best_strategy || "—", `${s.correct || 0}/${s.evaluations || 0}`, `$${(s.llm_cost_usd || 0).toFixed(4)}`];
  });
  const m = state.means || {};
  document.getElementById("summary").replaceChildren(el("h2", {}, "Summary"),
    table(["task", "best vs eager", "best vs torch.compile", "won by", "correct", "LLM cost"], rows, "summary"),
    el("p", {}, `Geometric mean over the tasks (a task without a correct kernel counted at eager's time): ` +
      `${fx(m.vs_eager)} vs eager (${m.vs_eager_tasks || 0} tasks), ${fx(m.vs_compile)} vs torch.compile ` +
      `(${m.vs_compile_tasks || 0} tasks).`));
}

function taskSection(id) {
  const index = state.order.indexOf(id);
  const t = state.tasks[id] || { summary: {}, archive: {}, lineage: [], lineage_end: "no evaluation yet" };
  const s = t.summary;
  const pts = state.points[id] || [];
  const t0 = state.run && state.run.status.first_t;
  const overN = [{ name: "vs eager", cls: "s-eager", points: pts.map((p) => [p[0], p[2]]) },
    { name: "vs torch.compile", cls: "s-compile", points: pts.map((p) => [p[0], p[3]]) }];
  const timed = pts.filter((p) => num(p[1]) && num(t0));
  const overT = [{ name: "vs eager", cls: "s-eager", points: timed.map((p) => [(p[1] - t0) / 60, p[2]]) },
    { name: "vs torch.compile", cls: "s-compile", points: timed.map((p) => [(p[1] - t0) / 60, p[3]]) }];
  const facts = [`best ${fx(s.best_speedup_eager)} vs eager, ${fx(s.best_speedup_compile)} vs torch.compile`,
    `best runtime ${fms(s.best_runtime_ms)} (eager ${fms(s.eager_ms)}, torch.compile ${fms(s.compile_ms)})`,
    `${s.correct || 0} of ${s.evaluations || 0} correct`, s.best_strategy ? `won by ${s.best_strategy}` : null];
  return el("section", { class: "task", id: `task-${index}`, "data-task-index": index, "data-task-id": id },
    el("h3", {}, id), el("p", { class: "facts" }, facts.filter((f) => f).join(" · ")),
    s.roofline ? el("p", { class: "facts" }, `roofline: ${s.roofline.diagnosis || fpct(s.roofline.fraction)}`) : null,
    s.hardware ? el("p", { class: "facts" }, `hardware: ${s.hardware.diagnosis || "—"}`) : null,
    el("div", { class: "charts" },
      stepChart(overN, { title: "best speedup over evaluations", xLabel: "evaluations of the task" }),
      stepChart(overT, { title: "best speedup over time", xLabel: "minutes since the run's first evaluation" })),
    el("div", { class: "archives" }, Object.entries(t.archive).map(([island, cells]) => archiveGrid(island, cells, t))),
    Object.keys(t.archive).length ? el("p", { class: "note" }, "Archive cells: each island's best evaluation per " +
      "memory × compute level (over the parallelism axis), its speedup vs eager; blue to yellow: slower to faster " +
      "among the task's correct kernels; ✗: not correct. Click a cell for its kernel.") : null,
    lineage(t));
}

function cellColour(cell, lo, hi) {
  if (!cell.correct) return ["#d9d4cf", "#333"];
  const f = hi > lo ? (cell.fitness - lo) / (hi - lo) : 1;
  return [`hsl(${Math.round(250 - 190 * f)}, 65%, ${Math.round(32 + 22 * f)}%)`, "#fff"];
}

function archiveGrid(island, cells, task) {
  const fits = Object.values(task.archive).flat().filter((c) => c.correct).map((c) => c.fitness);
  const lo = Math.min(...fits), hi = Math.max(...fits);
  const at = {};
  for (const c of cells) at[`${c.memory},${c.compute}`] = c;
  const rows = [];
  for (let compute = 3; compute >= 0; compute--) {
    const tds = [el("th", {}, `c${compute}`)];
    for (let memory = 0; memory < 4; memory++) {
      const c = at[`${memory},${compute}`];
      if (!c) { tds.push(el("td", { class: "empty" })); continue; }
      const [bg, fg] = cellColour(c, lo, hi);
      const b = openButton(c.eval_id, c.correct ? fx(c.speedup_eager) : "✗", "cell");
      b.title = `memory ${memory}, compute ${compute}, parallelism ${c.parallelism}: fitness ${c.fitness.toFixed(2)}` +
        (c.correct ? `, ${fx(c.speedup_eager)} vs eager` : ", not correct");
      b.style.background = bg; b.style.color = fg;
      tds.push(el("td", {}, b));
    }
    rows.push(el("tr", {}, tds));
  }
  rows.push(el("tr", {}, el("th", {}), [0, 1, 2, 3].map((m) => el("th", {}, `m${m}`))));
  return el("figure", { class: "archive", "data-island": island },
    el("figcaption", {}, `island ${island}: memory (m) × compute (c)`), el("table", { class: "grid" }, el("tbody", {}, rows)));
}

function lineage(t) {
  const steps = t.lineage.map((s, i) => el("li", {},
    openButton(s.eval_id, s.candidate_id, "link lineage-link"),
    ` ${i === 0 ? "best kernel · " : ""}${s.strategy} · island ${s.island} gen ${s.generation} · ${s.stage}` +
    (s.correct ? ` · ${fx(s.speedup_eager)} vs eager` : "") +
    (s.other_parents.length ? ` · also from ${s.other_parents.join(", ")}` : "")));
  return el("div", { class: "lineage" }, el("h4", {}, "Lineage of the best kernel"),
    steps.length ? el("ol", {}, steps) : null, el("p", { class: "note" }, t.lineage_end));
}

function renderRecent() {
  const c = state.col;
  const rows = state.rows.slice(-state.recent).reverse().map((r) => [String(r[c.seq]), r[c.task_id], String(r[c.island]),
    r[c.strategy], r[c.stage], fx(r[c.speedup_eager]), openButton(r[c.eval_id], r[c.candidate_id])]);
  document.getElementById("recent").replaceChildren(el("h2", {}, "Latest evaluations"),
    table(["#", "task", "island", "strategy", "verdict", "vs eager", "kernel"], rows, "recent"));
}
