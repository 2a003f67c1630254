"""Build the chat messages for one proposal (modes translate / optimize / repair).

The system message carries the evolved prompt sections, the backend's rules and the
candidate format; the user message carries the task (its source, its own instructions,
the sizes of this run), the hardware, the parent with its results, descriptor levels and
a hint, profiler metrics and tuning timings, the repair error, the inspirations and the
reply format. All wording lives in files under `prompts/` (see `templates`).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from foundry.hardware import NCU_METRICS, baseline_line, kernel_times
from foundry.llm import templates as T
from foundry.llm.accounting import redact
from foundry.types import Candidate, EvalResult, ProposalRequest, Stage

SECTION_NAMES = ("philosophy", "strategies", "pitfalls", "analysis")
DEFAULT_VARIANT = "balanced"
MAX_BLOCK_CHARS = 4000
MAX_ERROR_CHARS = 3000
# the figures of a result's metrics["roofline"] (foundry.tasks.roofline.Roofline.position) a prompt shows
ROOFLINE_FIGURES = ("fraction", "bound", "floor_ms", "achieved_gb_per_s", "peak_gb_per_s", "achieved_tflops",
                    "peak_tflops")


def default_sections() -> dict[str, str]:
    return dict(T.sections(f"variants/{DEFAULT_VARIANT}.md"))


def summarize_result(result: EvalResult | None) -> str:
    """One line: how a candidate fared ("correct, 1.84x vs eager, ...")."""
    if result is None:
        return "not evaluated"
    if result.correct:
        parts = ["correct"]
        if result.speedup_eager is not None:
            parts.append(f"{result.speedup_eager:.2f}x vs eager")
        if result.speedup_compile is not None:
            parts.append(f"{result.speedup_compile:.2f}x vs torch.compile")
        if result.runtime_ms is not None:
            parts.append(f"{result.runtime_ms:.4g} ms")
        return ", ".join(parts)
    stage = Stage.parse(result.stage).label
    flags = f", guards: {', '.join(result.flags)}" if result.flags else ""
    return f"failed at stage {stage}{flags}"


def _clip(text: str, limit: int) -> str:
    text = str(text)
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n... [{len(text) - limit} characters cut] ...\n" + text[-half:]


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True, default=str)
    return str(v)


def _lines(mapping: Mapping, limit: int = MAX_BLOCK_CHARS) -> str:
    return _clip("\n".join(f"- {k}: {_value(v)}" for k, v in mapping.items()), limit)


def _descriptor_levels(cell: tuple) -> str:
    axes = list(T.keyed("descriptor_levels.md").items())
    if len(cell) != len(axes):
        return f"Descriptor cell: {tuple(cell)}"
    out = []
    for (axis, names), level in zip(axes, cell):
        levels = [n.strip() for n in names.split("|")]
        try:
            name = levels[int(level)]
        except (ValueError, IndexError, TypeError):
            name = "?"
        out.append(f"- {axis}: level {level} of {len(levels) - 1} ({name})")
    return "\n".join(out)


def _tuning_lines(tuning: Any) -> str:
    """The parent's tuning records (metrics["tuning"]), one setting per line: the correct
    ones fastest first with their time, then the failed ones with where they failed."""
    if not isinstance(tuning, (list, tuple)):
        return f"- {_value(tuning)}"
    timed, failed, other = [], [], []
    for rec in tuning:
        if not isinstance(rec, Mapping) or not isinstance(rec.get("params"), Mapping):
            other.append(f"- {_value(rec)}")
            continue
        ms = rec.get("runtime_ms")
        setting = json.dumps(dict(rec["params"]), sort_keys=True)
        if rec.get("correct", True) and isinstance(ms, (int, float)):
            timed.append((float(ms), f"- {setting}: {float(ms):.4g} ms"))
        else:
            try:
                where = Stage.parse(rec.get("stage")).label
            except (KeyError, ValueError):  # a stage missing, None or out of the ladder
                where = "?"
            error = " ".join(str(rec.get("error") or "").split())[:160]
            failed.append(f"- {setting}: failed ({where}){': ' + error if error else ''}")
    lines = [line for _, line in sorted(timed)] + failed + other
    return _clip("\n".join(lines), MAX_BLOCK_CHARS)


def _split_metrics(metrics: Mapping) -> tuple[dict, Any]:
    """(what the hardware said about the parent's kernels, its tuning records). Only the
    kernel's own figures go into a prompt: its position against the roofline floor (the
    diagnosis first), the elite's hardware profile (its diagnosis and source), the kernels
    the device profiler saw run, the baselines against the same floor, and profiler counters (foundry.hardware.NCU_METRICS,
    `ncu_*`), not the judge's bookkeeping (phases, lanes,
    transfers, memory caps)."""
    profile, counters, tuning = {}, {}, None
    for k, v in metrics.items():
        key = str(k)
        if key == "tuning":  # the records; tuning_status and tuning_parts_s are bookkeeping
            tuning = v
        elif key == "roofline" and isinstance(v, Mapping):
            if v.get("diagnosis"):
                profile["diagnosis"] = v["diagnosis"]
            profile.update({f"roofline_{f}": v[f] for f in ROOFLINE_FIGURES if f in v})
        elif key == "hardware" and isinstance(v, Mapping):
            if v.get("diagnosis"):
                profile["hardware_diagnosis"] = v["diagnosis"]
            if v.get("source"):
                profile["hardware_source"] = v["source"]
        elif key in NCU_METRICS or key.startswith("ncu_"):
            counters[key] = v
        elif key == "kernels" and isinstance(v, Mapping):
            profile.update(_kernel_lines(v))
    profile.update(_baseline_lines(metrics))
    return {**profile, **counters}, tuning


def _baseline_lines(metrics: Mapping) -> dict:
    """Where eager and torch.compile sit against the same floor, with their kernels."""
    roofline = metrics.get("roofline") if isinstance(metrics.get("roofline"), Mapping) else {}
    kernels = metrics.get("baseline_kernels") if isinstance(metrics.get("baseline_kernels"), Mapping) else {}
    out = {}
    for which, label in (("eager", "baseline_eager"), ("compile", "baseline_torch_compile")):
        line = baseline_line(kernels.get(which), fraction=roofline.get(f"{which}_fraction"))
        if line:
            out[label] = line
    return out


def _kernel_lines(kernels: Mapping) -> dict:
    """The device profiler's kernels of one forward (metrics["kernels"]), slowest first."""
    times = kernel_times(kernels)
    out = {"kernels_launched": f"{sum(int(t[2]) for t in times)} launches of {len(times)} kernels"}
    if isinstance(kernels.get("own_time_fraction"), (int, float)):
        out["kernels_own_time"] = f"{100 * float(kernels['own_time_fraction']):.0f}% of device time in the candidate's own kernels"
    for i, (name, us, count) in enumerate(times[:6], 1):
        out[f"kernel_{i}"] = f"{name}: {float(us):.1f} us over {int(count)} launch(es)"
    return out


def _task_block(request: ProposalRequest) -> str:
    task = request.task
    sizes = ""
    if task.size_overrides:
        sizes = T.block("sizes", overrides=_value(task.size_overrides))
    if task.variants:
        sizes += "\n" + T.block("variants", variants=_value(list(task.variants)))
    level = f"level {task.level}" if task.level else "level unknown"
    return T.block("task", task_id=task.task_id, level=level, source=task.source.rstrip(),
                   sizes=sizes)


def _parent_block(parent: Candidate | None, result: EvalResult | None) -> str:
    if parent is None or not parent.source:
        return ""
    summary = summarize_result(result)
    if parent.params:
        summary += f"; tuned PARAMS = {_value(parent.params)}"
    return T.block("parent", summary=summary, source=parent.source.rstrip())


def _descriptor_block(result: EvalResult | None, hint: str) -> str:
    cell = tuple(result.descriptor) if result is not None else ()
    if not cell and not hint:
        return ""
    levels = _descriptor_levels(cell) if cell else ""
    return T.block("descriptor", levels=levels, hint=T.block("hint", hint=hint) if hint else "")


def _inspirations_block(items: Iterable) -> str:
    rendered = []
    for i, item in enumerate(items, 1):
        cand, result = (item if isinstance(item, (tuple, list)) else (item, None))
        if not getattr(cand, "source", ""):
            continue
        rendered.append(T.block("inspiration", index=i, summary=summarize_result(result),
                                source=_clip(cand.source.rstrip(), 3 * MAX_BLOCK_CHARS)))
    return T.block("inspirations", items="\n\n".join(rendered)) if rendered else ""


def _error_block(result: EvalResult | None) -> str:
    if result is None:
        return ""
    flags = f" Guards that fired: {', '.join(result.flags)}." if result.flags else ""
    error = result.error.strip() or "(no error text was recorded)"
    return T.block("error", stage=Stage.parse(result.stage).label, flags=flags,
                   error=_clip(error, MAX_ERROR_CHARS))


def _sections_text(sections: Mapping[str, str]) -> str:
    return "\n\n".join(f"## {name.replace('_', ' ').capitalize()}\n\n{text.strip()}"
                       for name, text in sections.items() if str(text).strip())


def build_messages(request: ProposalRequest, *, reply_format: str = "auto",
                   secrets: Iterable[str] = ()) -> list[dict]:
    """The [system, user] messages for `request` (see the module docstring)."""
    if request.mode not in ("translate", "optimize", "repair"):
        raise ValueError(f"unknown proposal mode {request.mode!r} (translate, optimize, repair)")
    sections = dict(request.prompt_sections) or default_sections()
    system = T.render(T.read("system.md"), {
        "backend": request.backend,
        "sections": _sections_text(sections),
        "backend_rules": T.read(f"backends/{request.backend}.md"),
        "candidate_format": T.read("candidate_format.md"),
    })
    parent, result = request.parent, request.parent_result
    has_parent = parent is not None and bool(parent.source)
    profile, tuning = _split_metrics(result.metrics if result is not None else {})
    if not has_parent or reply_format == "full":
        reply = T.block("reply_full")
    else:
        reply = T.block("reply_diff" if reply_format == "diff" else "reply_any")
    values = {
        "backend": request.backend,
        "task": _task_block(request),
        "instructions": T.block("instructions", instructions=request.task.instructions.strip())
        if request.task.instructions.strip() else "",
        "hardware": T.block("hardware", lines=_lines(request.hardware)) if request.hardware else "",
        "parent": _parent_block(parent, result),
        "descriptor": _descriptor_block(result, request.descriptor_hint),
        "metrics": T.block("metrics", lines=_lines(profile)) if profile else "",
        "tuning": T.block("tuning", lines=_tuning_lines(tuning)) if tuning else "",
        "error": _error_block(result) if request.mode == "repair" else "",
        "inspirations": _inspirations_block(request.inspirations),
        "reply_format": reply,
    }
    mode = request.mode if (request.mode == "translate" or has_parent) else "translate"
    user = T.render(T.read(f"{mode}.md"), values)
    secrets = tuple(secrets)
    return [{"role": "system", "content": redact(system, secrets)},
            {"role": "user", "content": redact(user, secrets)}]
