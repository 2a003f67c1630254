// KernelFoundry run page: the kernel panel (source, diff against the parent, verdict,
// timings, roofline, hardware counters, every metric).
"use strict";

async function kernelDetail(evalId) {
  if (state.details) {
    const d = state.details[evalId];
    if (!d) throw new Error(`evaluation ${evalId} is not kept in this report.html (it keeps the kernels ` +
      "the page links to, and their parents; the live page, python -m foundry.view RUN_DIR, serves every one)");
    return Object.assign({}, d, { tokens: d.tokens || state.sources[d.candidate.candidate_id] || [] });
  }
  const response = await fetch(`api/kernel?id=${encodeURIComponent(evalId)}`, { cache: "no-store" });
  if (!response.ok) throw new Error(`kernel ${evalId}: HTTP ${response.status}`);
  return response.json();
}

async function openKernel(evalId) {
  const panel = document.getElementById("kernel");
  panel.hidden = false;
  panel.dataset.evalId = evalId;
  panel.replaceChildren(el("p", {}, "loading…"));
  try {
    const d = await kernelDetail(evalId);
    if (panel.dataset.evalId !== evalId) return;  // another kernel was opened meanwhile
    state.current = d;
    panel.replaceChildren(...kernelPanel(d).filter((part) => part));
    panel.dataset.loaded = evalId;
  } catch (e) {
    panel.replaceChildren(closeButton(), el("p", { class: "error" }, String(e)));
  }
}

function closeButton() {
  return el("button", { type: "button", class: "close", title: "close",
    onclick: () => { const p = document.getElementById("kernel"); p.hidden = true; delete p.dataset.loaded; } }, "×");
}

function sourceView(tokens) {
  const pre = el("pre", { class: "src", id: "kernel-source" });
  for (let i = 0; i < tokens.length; i += 2) {
    pre.append(tokens[i] ? el("span", { class: tokens[i] }, tokens[i + 1]) : document.createTextNode(tokens[i + 1]));
  }
  return pre;
}

function diffView(d) {
  if (!d.diff) return el("p", { class: "note", id: "kernel-diff" }, d.diff_note);
  if (!d.diff.length) return el("p", { class: "note", id: "kernel-diff" }, d.diff_note);
  const cls = { "+": "d-add", "-": "d-del", "@": "d-hunk", h: "d-head", " ": "" };
  return el("pre", { class: "diff", id: "kernel-diff" }, d.diff.map(([k, line]) => el("span", { class: cls[k] }, line + "\n")));
}

function jsonView(value) {
  return el("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

function kernelPanel(d) {
  const c = d.candidate, v = d.verdict, t = d.timing;
  const parents = c.parents.length
    ? [d.parent_eval_id ? openButton(d.parent_eval_id, c.parents[0], "link parent-link") : c.parents[0],
      c.parents.length > 1 ? ` (+ ${c.parents.slice(1).join(", ")})` : ""]
    : "none";
  const verdictText = `${v.correct ? "correct" : "not correct"} (stage: ${v.stage})`;
  const tabs = [["source", "Source"], ["diff", "Diff against its parent"], ["metrics", "All metrics"]];
  const body = { source: () => sourceView(d.tokens), diff: () => diffView(d), metrics: () => jsonView(d.metrics) };
  const holder = el("div", { class: "tab-body" }, body[state.tab]());
  const bar = el("div", { class: "tabs", role: "tablist" }, tabs.map(([key, label]) => el("button", {
    type: "button", role: "tab", class: key === state.tab ? "tab on" : "tab", "data-tab": key,
    onclick: (e) => {
      state.tab = key;
      for (const b of bar.children) b.className = b.dataset.tab === key ? "tab on" : "tab";
      holder.replaceChildren(body[key]());
    },
  }, label)));
  const hw = d.hardware;
  return [closeButton(),
    el("h2", {}, "Kernel ", el("span", { id: "kernel-id" }, c.candidate_id)),
    el("p", { class: "facts" }, `task ${c.task_id} · evaluation ${d.eval_id}`),
    el("p", { id: "kernel-verdict", class: v.correct ? "verdict ok" : "verdict bad" }, verdictText),
    v.error ? el("pre", { class: "error", id: "kernel-error" }, v.error) : null,
    kv([["flags", v.flags.length ? v.flags.join(", ") : "none"],
      ["speedup", `${fx(t.speedup_eager)} vs eager, ${fx(t.speedup_compile)} vs torch.compile`],
      ["runtime", `${fms(t.runtime_ms)} median, spread ${num(t.runtime_spread) ? fpct(t.runtime_spread) : "—"} ((p90 − p10) / median)`],
      ["baselines", `eager ${fms(t.eager_ms)}, torch.compile ${fms(t.compile_ms)}`],
      ["error against the reference", `max abs ${num(v.max_abs_err) ? v.max_abs_err.toExponential(2) : "—"}, ` +
        `max rel ${num(v.max_rel_err) ? v.max_rel_err.toExponential(2) : "—"}`],
      ["backend", c.backend], ["made by", `${c.strategy || "—"} (${c.origin})`],
      ["island · generation", `${c.island} · ${c.generation}`], ["parent", parents],
      ["params", Object.keys(c.params).length ? JSON.stringify(c.params) : "none"],
      ["archive cell", v.descriptor.length ? v.descriptor.join(", ") : "—"],
      ["judged on", `${v.hardware || v.device} by ${d.evaluator || "—"}, ${when(d.recorded_at)}`],
      ["build · judge time", `${fs(t.compile_s)} · ${fs(t.eval_s)}`],
      c.note ? ["note", c.note] : null]),
    d.roofline ? el("div", {}, el("h3", {}, "Roofline"), kv([["position", d.roofline.diagnosis || "—"],
      ["floor", fms(d.roofline.floor_ms)], ["fraction of the floor", fpct(d.roofline.fraction)],
      ["bound", d.roofline.bound || "—"],
      ["achieved", `${d.roofline.achieved_gb_per_s ?? "—"} GB/s, ${d.roofline.achieved_tflops ?? "—"} TFLOP/s`]])) : null,
    hw ? el("div", { id: "kernel-hardware" }, el("h3", {}, "Hardware"), kv([["source", hw.source || "—"],
      ["diagnosis", hw.diagnosis || "—"], hw.note ? ["note", hw.note] : null,
      ...Object.entries(hw.counters).map(([k, val]) => [k, String(val)])])) : null,
    d.kernels ? el("div", {}, el("h3", {}, "Kernels launched (one trial)"), jsonView(d.kernels)) : null,
    bar, holder];
}
