// KernelFoundry run page: the run-wide panels, and the page's start.
"use strict";

function bar(share) {
  const b = el("span", { class: "bar" });
  b.style.width = `${Math.max(0, Math.min(1, share)) * 100}%`;
  return el("span", { class: "bar-box" }, b);
}

function renderRun() {
  const r = state.run;
  if (!r) return;
  const s = r.status;
  const parts = [el("h2", {}, "The run")];
  parts.push(kv([["judged per minute", num(r.judged_per_min) ? r.judged_per_min.toFixed(2) : "—"],
    ["sessions", String(s.sessions)], ["first · last evaluation", `${when(s.first_t)} · ${when(s.last_t)}`],
    ["GPUs", s.gpus === null || s.gpus === undefined ? "—" : String(s.gpus)]]));
  const ph = r.phases;
  parts.push(el("h3", {}, "Where the judge's time went"));
  parts.push(ph.evaluations
    ? el("div", {}, el("p", {}, `Phases of ${ph.evaluations} evaluations, ${fs(ph.total_s)} in all.`),
      table(["phase", "time", "share", ""], ph.top.map(([name, secs]) =>
        [name, fs(secs), fpct(secs / ph.total_s), bar(secs / ph.total_s)]), "phases"))
    : el("p", { class: "note" }, "No evaluation recorded a per-phase breakdown."));
  parts.push(el("h3", {}, "Evaluators by node and GPU"));
  parts.push(r.evaluators.length
    ? table(["node", "GPUs", "evaluator", "lanes", "evaluations logged", "busy"], r.evaluators.map((e) =>
      [e.host, e.gpus, e.name, e.lanes === null ? "—" : String(e.lanes), String(e.logged), fs(e.busy_s)]), "evaluators")
    : el("p", { class: "note" }, "No evaluators.json yet."));
  const llm = r.llm;
  parts.push(el("h3", {}, "LLM spend"));
  parts.push(llm.calls
    ? el("div", {}, el("p", {}, `${llm.calls} calls, $${llm.cost_usd.toFixed(4)}.`),
      table(["model", "calls", "ok", "prompt tokens", "completion tokens", "cost"], llm.models.map((m) =>
        [m.model, String(m.calls), String(m.ok), String(m.prompt_tokens), String(m.completion_tokens),
          `$${m.cost_usd.toFixed(4)}`]), "llm"))
    : el("p", { class: "note" }, "No LLM calls (the template engine proposed every candidate)."));
  parts.push(el("h3", {}, "Strategies across islands"));
  const islands = [...new Set(r.strategies.flatMap((x) => Object.keys(x.islands)))].sort((a, b) => a - b);
  const cell = (x) => (x ? `${x.correct}/${x.evaluated} correct (${fpct(x.correct / x.evaluated)}), ${x.improved} improved` : "—");
  parts.push(el("p", { class: "note" }, "Per strategy and island: correct of evaluated, and how many set a new best for their task."));
  parts.push(table(["strategy", ...islands.map((i) => `island ${i}`), "all islands"],
    r.strategies.map((x) => [x.strategy, ...islands.map((i) => cell(x.islands[i])), cell(x)]), "strategies"));
  if (r.prompts.length) {
    parts.push(el("h3", {}, "Prompt population"));
    parts.push(table(["prompt", "name", "origin", "active", "selected", "reports", "correct", "improved", "mean reward", "islands"],
      r.prompts.map((p) => [p.prompt_id, p.name || "—", p.origin, p.active ? "yes" : "no", String(p.selected),
        String(p.reports), String(p.correct), String(p.improved), num(p.mean_reward) ? p.mean_reward.toFixed(3) : "—",
        String(p.islands)]), "prompts"));
  }
  document.getElementById("run").replaceChildren(...parts);
}

async function start() {
  if (config.mode === "live") {
    await poll();
  } else {
    const data = JSON.parse(document.getElementById("kf-data").textContent);
    state.details = data.details;
    state.sources = data.sources;
    apply(data.update);
  }
  window.kfView.readyAt = performance.now();
  document.body.dataset.ready = "1";
  if (config.mode === "live") schedule();
}

window.kfView = { state, poll, openKernel, readyAt: null };
start().catch((e) => {
  document.getElementById("status").textContent = `could not load the run: ${e}`;
  document.body.dataset.ready = "error";
});
